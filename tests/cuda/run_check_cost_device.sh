#!/usr/bin/env bash
# One device call for the --profile per-block non-finite check (docs/robustness.md): its harness rows (tally and
# count, CUDA vs the CPU twin), the NaN-in-block-1 snapshot on CUDA (block 1 named in bf16 and fp32, nothing
# written), and its cost: h3 bench's DiT forward at 544x960x124 bf16 with --check-blocks 0 and 1, interleaved.
# Build here: make CUDA=1 MEDIA=0 BUILD=build-cuda cuda-tests build-cuda/h3; bash tools/dev_stage.sh build-cuda .dev-main;
# carry .dev-main. Usage (device): bash tests/cuda/run_check_cost_device.sh .dev-main
set -u
cd "$(dirname "$0")/../.."
B=${1:-build-cuda}
O=${OUT:-check-logs}
mkdir -p "$O"
bash tools/dev_unpack.sh "$B"
export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for op in tally_nonfinite count_nonfinite; do
    "$B/tests/test_backend_ops" --op $op >"$O/harness-$op.log" 2>&1
    echo "== harness $op: rc $? $(grep RESULT "$O/harness-$op.log")"; grep -E 'FAIL' "$O/harness-$op.log" | head -5
done
"$B/tests/test_backend_ops" --perf --backend cuda --op tally_nonfinite 2>&1 | grep perf
N="$O/nan"; rm -rf "$N"; cp -rL tests/fixtures/tiny "$N"
python3 tests/cli/lib/plant_nan.py "$N/transformer"
G=(--backend cuda --width 64 --height 32 --frames 120 --steps 2 -p "A red fox." -o '')
for prec in none bf16 fp32; do
    if [ $prec = none ]; then extra=(); else extra=(--precision $prec --profile); fi
    "$B/h3" generate -d "$N" "${G[@]}" "${extra[@]}" --dump-latents "$O/n-$prec.safetensors" >"$O/nan-$prec.log" 2>&1
    echo "== NaN weight, cuda, ${extra[*]:-no --profile}: rc $? (want 1); $(tail -1 "$O/nan-$prec.log")"
done
ls "$O"/n-*.safetensors 2>/dev/null && echo "FAIL: a latents dump was written"
for round in 1 2; do
    for chk in 0 1; do
        "$B/h3" bench --what dit --shapes 544x960x124 --repeats 3 --check-blocks $chk >"$O/bench-$chk-$round.log" 2>&1
        echo "== bench bf16 544x960x124 --check-blocks $chk (round $round): rc $? $(grep '^DIT' "$O/bench-$chk-$round.log")"
    done
done
