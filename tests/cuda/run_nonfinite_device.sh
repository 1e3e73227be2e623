#!/usr/bin/env bash
# One device call for the non-finite checks on the GPU (docs/robustness.md "Flags, numbers, results and messages"):
# the backend-ops harness (count_nonfinite fp32 and bf16 rows among the rest), the tiny end to end CUDA vs CPU, a
# tiny snapshot with a NaN planted in block 1's FFN output weight run with --backend cuda (without --profile: the
# phase named; with --profile, in bf16 and fp32: block 1 named), then the 4-evaluation t2va at 960x544x124 on random
# weights as a session of two prompts with --profile (so the per-block checks are in the timings) beside h3 bench's
# DiT forward (no checks). Build here: make CUDA=1 MEDIA=0 BUILD=build-cuda cuda-tests build-cuda/h3
# build-cuda/tests/cuda/cmp_dumps; bash tools/dev_stage.sh build-cuda .dev-main; carry .dev-main.
# Usage (device): bash tests/cuda/run_nonfinite_device.sh .dev-main
set -u
cd "$(dirname "$0")/../.."
B=${1:-build-cuda}
O=${OUT:-nonfinite-logs}
mkdir -p "$O"
bash tools/dev_unpack.sh "$B"
export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
OUT="$O/harness" bash tests/cuda/run_harness_device.sh "$B" >"$O/harness_run.log" 2>&1
echo "== harness: rc $?"; grep -E '^RESULT|^== |^FAIL' "$O/harness_run.log" | head -20
grep -E 'count_nonfinite' "$O/harness_run.log" | head -12
OUT="$O/e2e" bash tests/cuda/run_e2e_device.sh "$B" >"$O/e2e_run.log" 2>&1
echo "== tiny end to end: $(grep RESULT "$O/e2e_run.log" | tail -1)"; grep FAIL "$O/e2e_run.log" | head

N="$O/nan"; rm -rf "$N"; cp -rL tests/fixtures/tiny "$N" # -L: the fixture links its tokenizer
python3 - "$N/transformer" <<'PY'
import json, struct, sys, os
d = sys.argv[1]  # every value of block 1's FFN output weight set to a bf16 NaN (as tests/cli/numbers.sh does)
for name in sorted(os.listdir(d)):
    if not name.endswith(".safetensors"): continue
    p = os.path.join(d, name); b = bytearray(open(p, "rb").read())
    n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
    t = h.get("transformer_blocks.1.ff.net.2.weight")
    if t:
        lo, hi = t["data_offsets"]; b[8 + n + lo:8 + n + hi] = b"\xc0\x7f" * ((hi - lo) // 2)
        open(p, "wb").write(b)
PY
G=(--backend cuda --width 64 --height 32 --frames 120 --steps 2 -p "A red fox." -o '')
"$B/h3" generate -d "$N" "${G[@]}" --dump-latents "$O/n0.safetensors" >"$O/nan0.log" 2>&1
echo "== NaN weight, cuda, no --profile: rc $? (want 1); $(tail -1 "$O/nan0.log")"
for prec in bf16 fp32; do
    "$B/h3" generate -d "$N" "${G[@]}" --precision $prec --profile --dump-latents "$O/n-$prec.safetensors" >"$O/nan-$prec.log" 2>&1
    echo "== NaN weight, cuda, --profile, $prec: rc $? (want 1); $(tail -1 "$O/nan-$prec.log")"
done
ls "$O"/n*.safetensors 2>/dev/null && echo "FAIL: a latents dump was written"

"$B/h3" bench --backend cuda --what dit --repeats 2 --shapes 544x960x124 >"$O/bench.log" 2>&1
echo "== h3 bench DiT 544x960x124 bf16: rc $?"; grep -E '^DIT' "$O/bench.log"
P="A red fox runs through fresh snow at dawn, its breath steaming in the cold air, while birds call from the pines."
P2="A surfer rides a glassy wave at sunset while gulls circle overhead and the crowd on the beach cheers."
printf '%s\n%s\n' "$P" "$P2" | "$B/h3" generate -d tests/fixtures/skeleton --random-weights --backend cuda -o '' \
    --width 960 --height 544 --frames 124 --steps 4 --profile --seed 42 >"$O/session.log" 2>&1
echo "== session, 2 prompts, bf16, --profile (per-block checks on): rc $?"
grep -E '^  (text encoder|denoise|audio VAE decode|video VAE decode|compute)|^video-000|not finite|^h3: .*(error|fail)' "$O/session.log"
