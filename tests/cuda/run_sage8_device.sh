#!/usr/bin/env bash
# --attention sage8 on the GPU machine (docs/fast.md): the CUDA kernels against the CPU twin at small shapes (the
# quantization's codes bit for bit, the attention to tolerance, every sm90 variant and the plain kernel:
# test_backend_ops --op sage8_attention), then at the release shape (S 19540, 56 heads x 128) the error against the
# exact attention on random tensors and on K with channel outliers, the time of the quantization, of the attention
# on the codes and of each sm90 variant (bench_cuda_ops sage8), and the 50 attentions of a forward back to back
# beside the exact ones (bench_cuda_ops sustained), and h3 bench's DiT forward with --quant fp8, sage8 vs exact. Builds nothing: carry a staged build (tools/dev_stage.sh).
# Usage (device): bash tests/cuda/run_sage8_device.sh [DIR, default .dev-main]
set -u
B=${1:-.dev-main}
bash tools/dev_unpack.sh "$B"
O=${OUT:-/tmp/h3_sage8}
mkdir -p "$O"
export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader 2>/dev/null | head -1
timeout 90 "$B/tests/test_backend_ops" --backend cuda --op sage8_attention >"$O/harness.log" 2>&1
echo "== harness (CUDA vs the CPU twin): rc $? $(grep '^RESULT' "$O/harness.log")"
grep -E '^FAIL|rel_l2|: ok|FAILED' "$O/harness.log" | grep -v 'bit for bit.*0 of' | head -40
timeout 80 "$B/tests/cuda/bench_cuda_ops" sage8 19540 >"$O/bench_sage8.log" 2>&1
echo "== bench_cuda_ops sage8 19540: rc $?"
cat "$O/bench_sage8.log" | head -60
timeout 60 "$B/tests/cuda/bench_cuda_ops" sustained 19540 >"$O/sustained.log" 2>&1
echo "== bench_cuda_ops sustained 19540: rc $?"
cat "$O/sustained.log"
# the whole DiT forward at the release shape (random weights), --quant fp8, exact vs sage8 attention
for at in sage8 exact; do
    timeout 75 "$B/h3" bench --backend cuda --what dit --repeats 2 --shapes 544x960x124 --quant fp8 --attention $at \
        >"$O/dit_$at.log" 2>&1
    echo "== h3 bench DiT --quant fp8 --attention $at: rc $?"; grep -E '^DIT|^\||forward|attention' "$O/dit_$at.log" | head -12
done
