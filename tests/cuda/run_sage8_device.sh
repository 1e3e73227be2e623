#!/usr/bin/env bash
# --attention sage8 on the GPU machine (docs/fast.md): the CUDA kernels against the CPU twin at small shapes (the
# quantization's codes bit for bit, the attention to tolerance, every sm90 variant and the plain kernel:
# test_backend_ops --op sage8_attention), then at the release shape (S 19540, 56 heads x 128) the error against the
# exact attention on random tensors and on K with channel outliers, the time of the quantization, of the attention
# on the codes and of each sm90 variant (bench_cuda_ops sage8), the 50 attentions of a forward back to back beside
# the exact ones (bench_cuda_ops sustained), and h3 bench's DiT forward with --quant fp8, sage8 vs exact.
# Builds nothing: carry a staged build (tools/dev_stage.sh). The logs go to $OUT (one archive, all.tar.gz: a device
# call returns few files); stdout is a short summary.
# DIT_VARIANTS="16 17": also h3 bench's fast DiT forward with each of these sm90 variants (H3_SAGE8_VARIANT).
# Usage (device): bash tests/cuda/run_sage8_device.sh [DIR, default .dev-main]
set -u
B=${1:-.dev-main}
bash tools/dev_unpack.sh "$B"
O=${OUT:-/tmp/h3_sage8}
mkdir -p "$O/sage8"
L=$O/sage8
export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
pack() { tar -czf "$O/all.tar.gz" -C "$O" sage8; }
timeout 90 "$B/tests/test_backend_ops" --backend cuda --op sage8_attention >"$L/harness.log" 2>&1
echo "== harness (CUDA vs the CPU twin): rc $? $(grep '^RESULT' "$L/harness.log")"
grep -E '^FAIL' "$L/harness.log" | head -5
grep -E 'out vs the twin' "$L/harness.log" | awk '{print $(NF-9), $(NF-8)}' | sort -k2 -g | tail -1 | sed 's/^/  worst out vs twin: /'
pack
timeout 70 "$B/tests/cuda/bench_cuda_ops" sage8 19540 >"$L/bench_sage8.log" 2>&1
echo "== bench_cuda_ops sage8 19540: rc $?"
grep -E '^accuracy|^time' "$L/bench_sage8.log"
grep -E 'variant' "$L/bench_sage8.log" | grep -v 'rel_l2 0.000e+00' | grep 'vs the default' | head -3
pack
timeout 45 "$B/tests/cuda/bench_cuda_ops" sustained 19540 >"$L/sustained.log" 2>&1
echo "== bench_cuda_ops sustained 19540: rc $?"
grep -E '^floor|attention only' "$L/sustained.log" | tail -3
pack
for at in sage8 exact; do
    timeout 60 "$B/h3" bench --backend cuda --what dit --repeats 2 --shapes 544x960x124 --quant fp8 --attention $at \
        >"$L/dit_$at.log" 2>&1
    echo "== h3 bench DiT --quant fp8 --attention $at: rc $?"; grep -E '^DIT' "$L/dit_$at.log" | head -2
    pack
done
for v in ${DIT_VARIANTS:-}; do
    H3_SAGE8_VARIANT=$v timeout 60 "$B/h3" bench --backend cuda --what dit --repeats 2 --shapes 544x960x124 --quant fp8 \
        --attention sage8 >"$L/dit_sage8_v$v.log" 2>&1
    echo "== h3 bench DiT --quant fp8 --attention sage8, H3_SAGE8_VARIANT=$v: rc $?"; grep -E '^DIT' "$L/dit_sage8_v$v.log" | head -2
    pack
done
