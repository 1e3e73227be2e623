#!/usr/bin/env bash
# Tiny end to end on the GPU: `h3 generate --backend cuda` against `--backend cpu` on the tiny
# snapshot, for t2va and fl2va with the settings of tests/fixtures/golden/e2e/<task>.json (h3_args),
# in fp32 and bf16, compared tensor by tensor with tests/cuda/cmp_dumps (relative L2 / max abs):
#   fp32: CUDA vs CPU <= 1e-4, and CUDA vs the diffusers golden <= 1e-3 (tests/test_e2e.c's bar);
#   bf16: CUDA vs CPU <= 3e-2 (tensor-core GEMMs and cuDNN attention round differently from the CPU
#         twins), and also with H3_CUDA_PRECISION=fp32 (the GPU's exact paths, bf16 roundings kept).
# Also checks that each phase ran where it should (DiT and video VAE decoder on cuda, the others on
# cpu) and that ops without CUDA twins fail with one clean line instead of crashing.
#
# Build here:  make CUDA=1 MEDIA=0 BUILD=build-cuda build-cuda/h3 build-cuda/tests/cuda/cmp_dumps
#              (the GPU machine has no libutf8proc: cp /usr/lib/x86_64-linux-gnu/libutf8proc.so.2* build-cuda/lib/)
# Device:      bash tests/cuda/run_e2e_device.sh build-cuda     (carry build-cuda; logs under $OUT)
# The GPU machine has no FFmpeg, so the fl2va keyframes are given as PPM (tests/cuda/fixtures/,
# the same pixels as the golden's PNGs; a MEDIA=0 build reads binary PPM). Last line: RESULT <passed> <failed>.
set -u
B=${1:-build-cuda}
LOGDIR=${OUT:-/tmp/h3_e2e_cuda}
WORK=$(mktemp -d /tmp/h3_e2e_cuda.XXXXXX)
mkdir -p "$LOGDIR"
export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
H3="$B/h3" CMP="$B/tests/cuda/cmp_dumps" SUM="$LOGDIR/e2e.log" RUNS="$LOGDIR/runs.log"
: >"$SUM"; : >"$RUNS"
pass=0 fail=0
say() { echo "$*" | tee -a "$SUM"; }
ok() { pass=$((pass + 1)); say "ok   $*"; }
bad() { fail=$((fail + 1)); say "FAIL $*"; }

# h3_args of the golden json, one per line, keyframes swapped for their PPM twins, --precision dropped
task_args() {
    python3 - "$1" <<'EOF'
import json, sys
a = json.load(open("tests/fixtures/golden/e2e/%s.json" % sys.argv[1]))["h3_args"]
out, skip = [], False
for x in a:
    if skip: skip = False; continue
    if x == "--precision": skip = True; continue
    out.append(x.replace("tests/fixtures/golden/e2e/", "tests/cuda/fixtures/").replace(".png", ".ppm"))
print("\n".join(out))
EOF
}

# run TASK PREC BACKEND TAG [ENV...]: one h3 generate, dump in $WORK/TASK.TAG.st, log appended to runs.log
run() {
    local task=$1 prec=$2 be=$3 tag=$4; shift 4
    mapfile -t args < <(task_args "$task")
    local t0=$(date +%s.%N)
    env "$@" "$H3" generate "${args[@]}" --precision "$prec" --backend "$be" -o '' --dump-latents "$WORK/$task.$tag.st" \
        --profile >"$WORK/log" 2>&1
    local rc=$? t1=$(date +%s.%N)
    { echo "===== $task $tag ($*): exit $rc, $(awk "BEGIN{printf \"%.2f\", $t1 - $t0}") s"; grep -v "elapsed, ETA" "$WORK/log"; } >>"$RUNS"
    if [ $rc -ne 0 ]; then bad "$task $tag: h3 generate exited $rc: $(grep '^h3: ' "$WORK/log" | tail -1)"; return 1; fi
    ok "$task $tag: h3 generate $(awk "BEGIN{printf \"%.2f\", $t1 - $t0}") s"
    if [ "$be" = cuda ]; then # where each phase ran
        local want=("DiT on cuda" "video VAE decoder on cuda" "audio VAE decoder on cpu (" "on cpu (backend_text.h")
        [ "$task" = fl2va ] && want+=("VAE encoders (conditions) on cpu (")
        for w in "${want[@]}"; do
            grep -qF "h3: " "$WORK/log" && grep -F "h3: " "$WORK/log" | grep -qF "$w" && ok "$task $tag: '$w'" \
                || bad "$task $tag: no line '$w' on stderr"
        done
    fi
    return 0
}

# compare TOL REF TEST LABEL [--golden]
compare() {
    local out
    out=$("$CMP" ${5:-} "$1" "$2" "$3" "$4" 2>&1)
    local rc=$?
    echo "$out" | grep -v '^RESULT' | tee -a "$SUM"
    [ $rc -eq 0 ] && ok "$4: every tensor within $1" || bad "$4: cmp_dumps exit $rc"
}

say "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
for task in t2va fl2va; do
    run "$task" fp32 cpu fp32.cpu && run "$task" fp32 cuda fp32.cuda &&
        compare 1e-4 "$WORK/$task.fp32.cpu.st" "$WORK/$task.fp32.cuda.st" "$task/fp32 cuda-vs-cpu"
    [ -f "$WORK/$task.fp32.cuda.st" ] &&
        compare 1e-3 "tests/fixtures/golden/e2e/$task.out.safetensors" "$WORK/$task.fp32.cuda.st" "$task/fp32 cuda-vs-diffusers" --golden
    run "$task" bf16 cpu bf16.cpu && run "$task" bf16 cuda bf16.cuda &&
        compare 3e-2 "$WORK/$task.bf16.cpu.st" "$WORK/$task.bf16.cuda.st" "$task/bf16 cuda-vs-cpu"
    run "$task" bf16 cuda bf16.cuda-fp32paths H3_CUDA_PRECISION=fp32 &&
        compare 3e-2 "$WORK/$task.bf16.cpu.st" "$WORK/$task.bf16.cuda-fp32paths.st" "$task/bf16 cuda(H3_CUDA_PRECISION=fp32)-vs-cpu"
    rm -f "$WORK/$task".*.st
done

# ops without CUDA twins: one clean error line, exit 1 or 2, no crash
T=tests/fixtures/tiny G=tests/fixtures/golden
clean_fail() { # LABEL EXPECT PROBE-ARGS...
    local label=$1 expect=$2; shift 2
    "$H3" probe "$@" --backend cuda --out "$WORK/x.st" >"$WORK/log" 2>&1
    local rc=$?
    { echo "===== probe $label: exit $rc"; cat "$WORK/log"; } >>"$RUNS"
    if { [ $rc -eq 1 ] || [ $rc -eq 2 ]; } && grep -qF "$expect" "$WORK/log" && [ ! -e "$WORK/x.st" ]; then
        ok "probe $label --backend cuda fails cleanly: $(tail -1 "$WORK/log")"
    else
        bad "probe $label --backend cuda: exit $rc, $(tail -1 "$WORK/log")"
    fi
}
clean_fail audio-decode "no cuda twins" audio-decode --model $T --in $G/audio_vae/decode_t12.in.safetensors
clean_fail vae-encode "has no convolution ops" vae-encode --model $T --in $G/video_vae/encode_T1.in.safetensors
clean_fail "text-encode bf16" "no CUDA twin" text-encode --model $T --precision bf16 --in $G/text_encoder/text_encode_fox.in.safetensors

rm -rf "$WORK"
say "RESULT $pass $fail"
