#!/usr/bin/env bash
# Runs the CUDA parity tests and micro-benchmarks on the GPU machine. Builds nothing: build first
# (here) with `make CUDA=1 MEDIA=0 BUILD=build-cuda cuda-tests` and carry build-cuda.
# Logs go to $OUT (or ./cuda-logs). Usage: tests/cuda/run_device.sh [build dir]
set -u
cd "$(dirname "$0")/../.."
build=${1:-build-cuda}
bash tools/dev_unpack.sh "$build" # tools/dev_stage.sh's bundle
out=${OUT:-cuda-logs}
mkdir -p "$out"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv; } >"$out/gpu.txt" 2>&1
cat "$out/gpu.txt"
rc=0
echo "== test_backend_ops (every op: CUDA vs the CPU twin; docs/testing.md)"
"$build/tests/test_backend_ops" >"$out/test_backend_ops.log" 2>&1 || rc=1
grep -E '^FAIL|^RESULT|h3:' "$out/test_backend_ops.log"
if [ $rc -ne 0 ] && command -v compute-sanitizer >/dev/null; then
    echo "== test failed: compute-sanitizer memcheck (log: sanitizer.log)"
    timeout 300 compute-sanitizer --tool memcheck "$build/tests/test_backend_ops" --backend cuda >"$out/sanitizer.log" 2>&1
    grep -E 'ERROR SUMMARY|Invalid|at 0x|by thread' "$out/sanitizer.log" | head -30
fi
echo "== test_flash_sm90 (wgmma flash attention vs CPU twin and own kernel)"
"$build/tests/cuda/test_flash_sm90" >"$out/test_flash_sm90.log" 2>&1 || rc=1
grep -E 'FAIL|RESULT' "$out/test_flash_sm90.log"
"$build/tests/cuda/test_flash_sm90" bench >"$out/bench_flash_sm90.log" 2>&1 || rc=1
cat "$out/bench_flash_sm90.log"
for t in test_cuda_upload; do
    echo "== $t"
    "$build/tests/cuda/$t" >"$out/$t.log" 2>&1 || rc=1
    grep -E 'FAIL|RESULT|h3:|GB/s' "$out/$t.log"
done
echo "== per-op timings (test_backend_ops --perf --backend cuda)"
"$build/tests/test_backend_ops" --perf --backend cuda >"$out/perf.log" 2>&1 || rc=1
grep -E '^\[cuda\] perf|^FAIL' "$out/perf.log"
echo "== bench_cuda_ops sustained (a forward's GEMMs and attentions back to back)"
"$build/tests/cuda/bench_cuda_ops" sustained >"$out/bench_cuda_ops.log" 2>&1 || rc=1
cat "$out/bench_cuda_ops.log"
echo "== dit_block_cuda parity (one full-width block, CUDA vs CPU)"
"$build/tests/cuda/dit_block_cuda" parity 300 >"$out/dit_block_parity.log" 2>&1 || rc=1
cat "$out/dit_block_parity.log"
echo "== dit_block_cuda bench"
"$build/tests/cuda/dit_block_cuda" bench >"$out/dit_block_bench.log" 2>&1 || rc=1
cat "$out/dit_block_bench.log"
if [ -n "${BN_SWEEP:-}" ]; then
    for bn in 32 64; do
        echo "== flash attention, H3_FLASH_BN=$bn"
        H3_FLASH_BN=$bn "$build/tests/test_backend_ops" --perf --backend cuda --op cuda_flash_attention_bf16 2>&1 |
            tee -a "$out/perf.log" | grep perf
    done
fi
if [ -n "${TORCH_BASELINE:-}" ] && python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    echo "== same-machine PyTorch baseline"
    python3 tools/reference/cuda_baseline.py 2>&1 | tee "$out/torch_baseline.log"
fi
echo "== test logs"
cat "$out/test_backend_ops.log"
exit $rc
