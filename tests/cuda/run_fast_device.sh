#!/usr/bin/env bash
# One device call for the bf16 fast path: every op's parity (test_backend_ops), one
# full-width DiT block CUDA vs CPU, the tiny random forward, h3 bench (DiT), then the tiny end to end.
# Usage (device): bash tests/cuda/run_fast_device.sh [build dir, default .dev-main] [what: all|dit|vae]
set -u
B=${1:-.dev-main}
bash tools/dev_unpack.sh "$B" # tools/dev_stage.sh's bundle
WHAT=${2:-all}
OUTD=${OUT:-/tmp/h3_fast}
mkdir -p "$OUTD"
export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
run() { # name, command...
    local name=$1; shift
    local t0=$(date +%s%N)
    "$@" >"$OUTD/$name.log" 2>&1
    local rc=$?
    local ms=$((($(date +%s%N) - t0) / 1000000))
    echo "== $name: rc $rc, $ms ms"
    grep -E 'FAIL|RESULT|h3:|cuda backend' "$OUTD/$name.log" | head -20
}
if [ "$WHAT" = all ] || [ "$WHAT" = dit ]; then
    run test_backend_ops "$B/tests/test_backend_ops"
    run dit_block_parity "$B/tests/cuda/dit_block_cuda" parity 300
    run test_cuda_bench "$B/tests/cuda/test_cuda_bench"
    run bench_dit "$B/h3" bench --backend cuda --what dit --repeats 2
    cat "$OUTD/bench_dit.log"
    H3_CUDA_OPTIME=1 run bench_dit_optime "$B/h3" bench --backend cuda --what dit --repeats 1 --shapes 544x960x124
    grep -E '^DIT|calls|op time' "$OUTD/bench_dit_optime.log"
fi
if [ "$WHAT" = all ] || [ "$WHAT" = vae ]; then
    run bench_vae "$B/h3" bench --backend cuda --what vae --precision bf16 --vae-repeats 1
    cat "$OUTD/bench_vae.log"
fi
if [ "$WHAT" = all ]; then
    OUT="$OUTD/e2e" bash tests/cuda/run_e2e_device.sh "$B" >"$OUTD/e2e_run.log" 2>&1
    tail -5 "$OUTD/e2e_run.log"
fi
