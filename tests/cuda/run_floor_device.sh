#!/usr/bin/env bash
# Where the time of the quantized DiT forwards goes, for the floors of the speed targets (docs/int8.md, docs/fast.md):
#  1. bench_cuda_ops sustained 19540: one forward's GEMMs and its 50 attentions back to back (exact and sage8);
#  2. h3 bench's DiT forward at 544x960x124 with H3_CUDA_OPTIME=1 (device time per op name) for --quant int8,
#     --quant int8 --attention sage8 and --quant fp8 --attention sage8 (the fast set), the warm-up and one timed forward (the table holds both).
# Usage (device): bash tests/cuda/run_floor_device.sh [staged build, default .dev-main]   (~3 min; logs in $OUT/floor)
set -u
cd "$(dirname "$0")/../.."
B=${1:-.dev-main}
L=${OUT:-/tmp/h3_floor}/floor
mkdir -p "$L"
bash tools/dev_unpack.sh "$B"
BA=$(cd "$B" && pwd)
export LD_LIBRARY_PATH="$BA/lib:$BA${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
T0=$(date +%s)
say() { echo "[+$(($(date +%s) - T0))s] $*"; }
timeout 60 "$BA/tests/cuda/bench_cuda_ops" sustained 19540 >"$L/sustained.log" 2>&1
say "== bench_cuda_ops sustained 19540: rc $?"
cat "$L/sustained.log"
opt() { # name, flags of h3 bench...
    local name=$1; shift
    H3_CUDA_OPTIME=1 timeout 90 "$BA/h3" bench --backend cuda --what dit --shapes 544x960x124 --repeats 1 "$@" \
        >"$L/$name.log" 2>&1
    say "== optime $name ($*): rc $?"
    grep -E '^DIT' "$L/$name.log"
    # the op table: the 25 largest rows
    awk '/cuda op time/ { on = 1 } on' "$L/$name.log" | head -40
}
opt int8 --quant int8
opt int8_sage8 --quant int8 --attention sage8
opt fast --quant fp8 --attention sage8
tar -czf /tmp/floor.tar.gz -C "$(dirname "$L")" floor && mv /tmp/floor.tar.gz "$(dirname "$L")/"
