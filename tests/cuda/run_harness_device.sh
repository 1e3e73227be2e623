#!/usr/bin/env bash
# The backend-ops harness on the GPU machine (docs/testing.md): tests/test_backend_ops's CPU pass and CUDA pass
# (one line per case, then RESULT <passed> <failed>); with "perf", the CUDA --perf timings. Builds nothing: build
# here with `make CUDA=1 MEDIA=0 BUILD=build-cuda cuda-tests` (and `bash tools/dev_stage.sh build-cuda .dev-main`
# for a small carry), then carry the build dir. Logs under $OUT (or ./harness-logs).
# Usage (device): bash tests/cuda/run_harness_device.sh [build dir, default build-cuda] [perf]
set -u
cd "$(dirname "$0")/../.."
B=${1:-build-cuda}
bash tools/dev_unpack.sh "$B" # tools/dev_stage.sh's bundle
export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
out=${OUT:-harness-logs}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader 2>&1 | head -2
rc=0
bin=$B/tests/test_backend_ops
[ -x "$bin" ] || { echo "run_harness_device: $bin is missing (build it with make CUDA=1 MEDIA=0 cuda-tests)"; exit 2; }
echo "== test_backend_ops (CPU pass, then CUDA pass vs the CPU twin)"
"$bin" >"$out/test_backend_ops.log" 2>&1 || rc=1
grep -E '^\[(cpu|cuda)\] .*: (ok|FAIL) \(|^FAIL|^note|^== backend|^RESULT' "$out/test_backend_ops.log"
grep -q '^== backend cuda ' "$out/test_backend_ops.log" || { echo "run_harness_device: no CUDA pass ran"; rc=1; }
if [ "${2:-}" = perf ]; then
    echo "== test_backend_ops --perf --backend cuda"
    "$bin" --perf --backend cuda >"$out/test_backend_ops_perf.log" 2>&1 || rc=1
    grep -E '^\[cuda\] perf|^FAIL|^RESULT' "$out/test_backend_ops_perf.log"
fi
exit $rc
