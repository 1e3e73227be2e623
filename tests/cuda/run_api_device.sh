#!/usr/bin/env bash
# The public API on the GPU machine (docs/api.md, issue 20): the examples built against libh3.so run the tiny
# snapshot with backend "auto" and must pick CUDA; h3 generate's default (auto) gives the same latents as
# --backend cuda --device 0; --device 1 on a one-GPU machine is refused with one line (exit 2) under auto and cuda;
# with no visible GPU auto runs on the CPU and says why; a session reports the CUDA backend and = the one-shot.
# Build here: make CUDA=1 MEDIA=0 BUILD=build-cuda build-cuda/h3 build-cuda/libh3.so, then
# bash tools/dev_stage.sh build-cuda .dev-main; carry .dev-main. Usage (device): bash tests/cuda/run_api_device.sh .dev-main
set -u
cd "$(dirname "$0")/../.."
B=${1:-build-cuda}
O=${OUT:-api-logs}
mkdir -p "$O"
bash tools/dev_unpack.sh "$B"
export LD_LIBRARY_PATH="$B/lib:$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
T=tests/fixtures/tiny
G=(-d "$T" -p "A red fox." --width 64 --height 32 --steps 2 -o '')
pass=0; fail=0
check() { if eval "$2"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1"; fi; }
nvidia-smi -L
mkdir -p "$O/frames"
H3_EXAMPLE_SIZE=64x32 H3_EXAMPLE_STEPS=2 "$B/examples/frames" "$T" "$O/frames" "A red fox." >"$O/frames.log" 2>&1; rc=$?
echo "== examples/frames (auto): rc $rc; $(tail -1 "$O/frames.log")"
check "frames.c with auto runs on CUDA" '[ $rc = 0 ] && grep -qE "^([0-9]+) of \1 frames 64x32, .* on cuda" "$O/frames.log"'
"$B/h3" generate "${G[@]}" --dump-latents "$O/auto.safetensors" >"$O/auto.log" 2>&1; rc=$?
echo "== h3 generate, default backend: rc $rc; $(grep -m1 -E ' on (cpu|cuda)' "$O/auto.log")"
check "h3 generate's default (auto) picks CUDA" '[ $rc = 0 ] && grep -qE " on cuda$" "$O/auto.log"'
"$B/h3" generate "${G[@]}" --backend cuda --device 0 --dump-latents "$O/cuda.safetensors" >"$O/cuda.log" 2>&1
check "auto = --backend cuda --device 0, bit for bit" 'cmp -s "$O/auto.safetensors" "$O/cuda.safetensors"'
for b in auto cuda; do
    "$B/h3" generate "${G[@]}" --backend $b --device 1 --dump-latents "$O/d1.safetensors" >"$O/d1-$b.log" 2>&1; rc=$?
    echo "== --backend $b --device 1: rc $rc; $(tail -1 "$O/d1-$b.log")"
    check "--backend $b --device 1 on one GPU: exit 2, one line" '[ $rc = 2 ] && [ $(wc -l <"$O/d1-$b.log") = 1 ] && grep -q "device 1" "$O/d1-$b.log"'
done
CUDA_VISIBLE_DEVICES= "$B/h3" generate "${G[@]}" --dump-latents "$O/nogpu.safetensors" >"$O/nogpu.log" 2>&1; rc=$?
echo "== no visible GPU, auto: rc $rc; $(grep -m1 -E ' on (cpu|cuda)' "$O/nogpu.log")"
check "no visible GPU: auto runs on the CPU and says why" '[ $rc = 0 ] && grep -qE "on cpu \(auto: (no GPU|driver error)" "$O/nogpu.log"'
printf '!status\nA red fox.\n' | "$B/h3" generate -d "$T" --width 64 --height 32 --steps 2 -o '' \
    --dump-latents "$O/s.safetensors" --seed 42 >"$O/session.log" 2>&1
check "a session on auto: backend cuda, = the one-shot" 'grep -q "backend cuda" "$O/session.log" && cmp -s "$O/s-0001.safetensors" "$O/auto.safetensors"'
echo "RESULT $pass $fail"
