#!/usr/bin/env bash
# One device call after the hardening work (docs/robustness.md): the backend-ops harness and the old suites it
# replaces (run_harness_device.sh), the tiny end to end CUDA vs CPU (run_e2e_device.sh: the result checks, the
# output and shard preflights run on the CUDA path too), a tiny snapshot with a NaN planted in block 1 run on CUDA
# (without --profile the phase is named; with --profile, in bf16 and fp32, block 1), and the 4-evaluation t2va at 960x544x124 with random
# weights as a session of two prompts (the warm second generation, with the non-finite checks in place).
# Build here: make CUDA=1 MEDIA=0 BUILD=build-cuda cuda-tests build-cuda/h3 build-cuda/tests/cuda/cmp_dumps, then
# bash tools/dev_stage.sh build-cuda .dev-main; carry .dev-main. Usage (device): bash tests/cuda/run_hardening_device.sh .dev-main
set -u
cd "$(dirname "$0")/../.."
B=${1:-build-cuda}
O=${OUT:-hardening-logs}
mkdir -p "$O"
bash tools/dev_unpack.sh "$B"
export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
OUT="$O/harness" bash tests/cuda/run_harness_device.sh "$B" >"$O/harness_run.log" 2>&1
echo "== harness: rc $?"; grep -E '^RESULT|^== |^FAIL' "$O/harness_run.log" | head -20
OUT="$O/e2e" bash tests/cuda/run_e2e_device.sh "$B" >"$O/e2e_run.log" 2>&1
echo "== tiny end to end: $(grep RESULT "$O/e2e_run.log" | tail -1)"; grep FAIL "$O/e2e_run.log" | head
N="$O/nan"; rm -rf "$N"; cp -rL tests/fixtures/tiny "$N" # -L: the fixture links its tokenizer
python3 tests/cli/lib/plant_nan.py "$N/transformer"
G=(--backend cuda --width 64 --height 32 --frames 120 --steps 2 -p "A red fox." -o '')
for prec in none bf16 fp32; do
    if [ $prec = none ]; then extra=(); else extra=(--precision $prec --profile); fi
    "$B/h3" generate -d "$N" "${G[@]}" "${extra[@]}" --dump-latents "$O/n-$prec.safetensors" >"$O/nan-$prec.log" 2>&1
    echo "== NaN weight, cuda, ${extra[*]:-no --profile}: rc $? (want 1); $(tail -1 "$O/nan-$prec.log")"
done
ls "$O"/n-*.safetensors 2>/dev/null && echo "FAIL: a latents dump was written"
P="A red fox runs through fresh snow at dawn, its breath steaming in the cold air, while birds call from the pines."
P2="A surfer rides a glassy wave at sunset while gulls circle overhead and the crowd on the beach cheers."
printf '%s\n%s\n' "$P" "$P2" | "$B/h3" generate -d tests/fixtures/skeleton --random-weights --backend cuda -o '' \
    --width 960 --height 544 --frames 124 --steps 4 --profile --seed 42 >"$O/session.log" 2>&1
echo "== session, 2 prompts, bf16: rc $?"
grep -E '^  (text encoder|denoise|audio VAE decode|video VAE decode|compute)|^video-000|not finite|^h3: .*(error|fail)' "$O/session.log"
