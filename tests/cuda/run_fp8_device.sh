#!/usr/bin/env bash
# --quant fp8 on the GPU machine: the torch reference fixture (tools/reference/gen_fp8.py, torch._scaled_mm needs
# the GPU; written to $OUT and into tests/fixtures/fp8/ of this checkout when missing there), the CUDA-vs-CPU and
# CUDA-vs-torch parity of the FP8 ops (test_backend_ops --op fp8_*) with the GEMM rates at the DiT's shapes (--perf),
# and h3 bench's DiT forward in bf16 and with --quant fp8. Builds nothing: carry a staged build (tools/dev_stage.sh).
# Usage (device): bash tests/cuda/run_fp8_device.sh [DIR, default .dev-main]
set -u
B=${1:-.dev-main}
bash tools/dev_unpack.sh "$B" # tools/dev_stage.sh's bundle
O=${OUT:-/tmp/h3_fp8}
mkdir -p "$O"
export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
F=tests/fixtures/fp8/linear.safetensors
if [ ! -f "$F" ]; then
    mkdir -p tests/fixtures/fp8
    python3 tools/reference/gen_fp8.py "$O/linear.safetensors" && cp "$O/linear.safetensors" "$F"
fi
for op in fp8_quant_rows fp8_matmul fp8_fixture; do
    "$B/tests/test_backend_ops" --op $op >"$O/$op.log" 2>&1
    echo "== $op: rc $? $(grep '^RESULT' "$O/$op.log")"; grep -E '^FAIL|rel_l2' "$O/$op.log" | head
    "$B/tests/test_backend_ops" --perf --backend cuda --op $op 2>&1 | grep -E '^\[cuda\] perf'
done
for q in none fp8; do
    H3_CUDA_OPTIME=1 "$B/h3" bench --backend cuda --what dit --repeats 2 --shapes 544x960x124 --quant $q >"$O/dit_$q.log" 2>&1
    echo "== DiT --quant $q: rc $?"; grep -E '^DIT|quantized|calls|op time' "$O/dit_$q.log"
done
