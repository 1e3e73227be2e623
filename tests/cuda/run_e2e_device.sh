#!/usr/bin/env bash
# Tiny end to end on the GPU: `h3 generate --backend cuda` against `--backend cpu` on the tiny
# snapshot, for t2va and fl2va with the settings of tests/fixtures/golden/e2e/<task>.json (h3_args),
# in fp32 and bf16, compared tensor by tensor with tests/cuda/cmp_dumps (relative L2 / max abs):
#   fp32: CUDA vs CPU <= 1e-4, and CUDA vs the diffusers golden <= 1e-3 (tests/test_e2e.c's bar);
#   bf16: CUDA vs CPU <= 3e-2 (tensor-core GEMMs and cuDNN attention round differently from the CPU
#         twins), and also with H3_CUDA_PRECISION=fp32 (the GPU's exact paths, bf16 roundings kept).
# Also checks that every phase ran on cuda (text encoder, vision tower and VAE encoders for fl2va,
# DiT, audio and video VAE decoders: no "on cpu" line), and runs the component probes whose ops are
# ops.h / ops.h / ops.h (text-encode, vision, audio-decode, audio-encode,
# vae-encode) on both backends: CUDA vs CPU <= 1e-4 in fp32, <= 3e-2 in bf16.
#
# Build here:  make CUDA=1 MEDIA=0 BUILD=build-cuda build-cuda/h3 build-cuda/tests/cuda/cmp_dumps
#              (the GPU machine has no libutf8proc: cp /usr/lib/x86_64-linux-gnu/libutf8proc.so.2* build-cuda/lib/)
# Device:      bash tests/cuda/run_e2e_device.sh build-cuda     (carry build-cuda; logs under $OUT)
# The GPU machine has no FFmpeg, so the fl2va keyframes are given as PPM (tests/cuda/fixtures/,
# the same pixels as the golden's PNGs; a MEDIA=0 build reads binary PPM). Last line: RESULT <passed> <failed>.
set -u
B=${1:-build-cuda}
bash tools/dev_unpack.sh "$B" # tools/dev_stage.sh's bundle
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
# (XARGS: extra generate flags after the task's own)
XARGS=()
run() {
    local task=$1 prec=$2 be=$3 tag=$4; shift 4
    mapfile -t args < <(task_args "$task")
    local t0=$(date +%s.%N)
    env "$@" "$H3" generate "${args[@]}" "${XARGS[@]}" --precision "$prec" --backend "$be" -o '' --dump-latents "$WORK/$task.$tag.st" \
        --profile >"$WORK/log" 2>&1
    local rc=$? t1=$(date +%s.%N)
    { echo "===== $task $tag ($*): exit $rc, $(awk "BEGIN{printf \"%.2f\", $t1 - $t0}") s"; grep -v "elapsed, ETA" "$WORK/log"; } >>"$RUNS"
    if [ $rc -ne 0 ]; then bad "$task $tag: h3 generate exited $rc: $(grep '^h3: ' "$WORK/log" | tail -1)"; return 1; fi
    ok "$task $tag: h3 generate $(awk "BEGIN{printf \"%.2f\", $t1 - $t0}") s"
    if [ "$be" = cuda ]; then # where each phase ran: all on the GPU
        local want=("DiT on cuda" "video VAE decoder on cuda" "audio VAE decoder on cuda")
        if [ "$task" = fl2va ]; then
            want+=("text encoder + vision tower on cuda" "VAE encoders (conditions) on cuda" "vision tower [cuda]")
        else
            want+=("text encoder on cuda")
        fi
        for w in "${want[@]}"; do
            grep -qF "$w" "$WORK/log" && ok "$task $tag: '$w'" || bad "$task $tag: no line '$w' on stderr"
        done
        if grep -E "^h3: .* on cpu|\[cpu\]" "$WORK/log" >/dev/null; then
            bad "$task $tag: a phase ran on the CPU: $(grep -E '^h3: .* on cpu|\[cpu\]' "$WORK/log" | head -1)"
        else
            ok "$task $tag: no phase on cpu"
        fi
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

# speed controls and the render canvas (docs/model/features.md 5.2, 5.4, 5.6) on both backends, fp32
for spec in "reuse:--steps 6 --reuse 2" "core-reuse:--steps 6 --core-reuse 2" \
            "render:--width 128 --height 64 --render-width 64 --render-height 32"; do
    name=${spec%%:*}
    read -ra XARGS <<<"${spec#*:}"
    run t2va fp32 cpu "$name.cpu" && run t2va fp32 cuda "$name.cuda" &&
        compare 1e-4 "$WORK/t2va.$name.cpu.st" "$WORK/t2va.$name.cuda.st" "t2va/$name fp32 cuda-vs-cpu"
    XARGS=()
    rm -f "$WORK"/t2va.*.st
done

# --quant fp8 (docs/fp8.md): the DiT's FP8 W8A8 linears, CUDA (cuBLASLt FP8) vs the CPU twins. The backends differ
# as in bf16 (GEMM summation order, the rounding of P), but a one-ulp difference of an activation can move its E4M3
# code by a whole step (2^-4 relative), so the bar is fp8's own error scale: the tiny DiT forward is 2.2e-2 from the
# fp32 reference in fp8 (tests/test_dit.c), and the audio decoder amplifies latent differences ~7x (bf16: 2.8e-3
# latents -> 1.9e-2 audio). Measured 2026-12-01: latents 9.1e-3 / 1.1e-2, frames 5.3e-3, audio 6.0e-2.
XARGS=(--quant fp8)
run t2va bf16 cpu fp8.cpu && run t2va bf16 cuda fp8.cuda &&
    compare 1e-1 "$WORK/t2va.fp8.cpu.st" "$WORK/t2va.fp8.cuda.st" "t2va/fp8 cuda-vs-cpu"
XARGS=()
rm -f "$WORK"/t2va.*.st

# --token-reduction (docs/model/features.md 5.5): the pooled middle blocks (block 0 of the tiny model's 2 through the
# environment's range), CUDA vs CPU in bf16
XARGS=(--token-reduction)
run t2va bf16 cpu tr.cpu H3_TOKEN_REDUCTION_BLOCKS=0:1 H3_TOKEN_REDUCTION_EARLY=0 &&
    run t2va bf16 cuda tr.cuda H3_TOKEN_REDUCTION_BLOCKS=0:1 H3_TOKEN_REDUCTION_EARLY=0 &&
    compare 3e-2 "$WORK/t2va.tr.cpu.st" "$WORK/t2va.tr.cuda.st" "t2va/token-reduction bf16 cuda-vs-cpu"
XARGS=()
rm -f "$WORK"/t2va.*.st

# component probes on both backends (the ops of ops.h / ops.h / ops.h)
T=tests/fixtures/tiny G=tests/fixtures/golden
probe_pair() { # LABEL TOL PROBE-ARGS...: cpu and cuda outputs compared with cmp_dumps
    local label=$1 tol=$2; shift 2
    for be in cpu cuda; do
        local t0=$(date +%s.%N)
        "$H3" probe "$@" --backend $be --out "$WORK/p.$be.st" >"$WORK/log" 2>&1
        local rc=$? t1=$(date +%s.%N)
        { echo "===== probe $label --backend $be: exit $rc, $(awk "BEGIN{printf \"%.2f\", $t1 - $t0}") s"; cat "$WORK/log"; } >>"$RUNS"
        [ $rc -eq 0 ] || { bad "probe $label --backend $be: exit $rc, $(tail -1 "$WORK/log")"; rm -f "$WORK"/p.*.st; return 1; }
    done
    compare "$tol" "$WORK/p.cpu.st" "$WORK/p.cuda.st" "probe $label cuda-vs-cpu"
    rm -f "$WORK"/p.*.st
}
probe_pair "audio-decode t12" 1e-4 audio-decode --model $T --in $G/audio_vae/decode_t12.in.safetensors
probe_pair "audio-decode full t12" 1e-4 audio-decode --model $G/audio_vae/model --in $G/audio_vae/full_decode_t12.in.safetensors
probe_pair "audio-encode n123" 1e-4 audio-encode --model $T --in $G/audio_vae/encode_n123.in.safetensors
probe_pair "audio-encode full n123" 1e-4 audio-encode --model $G/audio_vae/model --in $G/audio_vae/full_encode_n123.in.safetensors
probe_pair "vae-encode T22" 1e-4 vae-encode --model $G/video_vae/model --in $G/video_vae/encode_T22.in.safetensors
probe_pair "vae-encode T1" 1e-4 vae-encode --model $G/video_vae/model --in $G/video_vae/encode_T1.in.safetensors
probe_pair "vae-encode tiny" 1e-4 vae-encode --model $T/vae --in $G/video_vae/tiny_encode.in.safetensors
for c in fox dialog; do
    probe_pair "text-encode $c fp32" 1e-4 text-encode --model $T --in $G/text_encoder/text_encode_$c.in.safetensors
    probe_pair "text-encode $c bf16" 3e-2 text-encode --model $T --precision bf16 --in $G/text_encoder/text_encode_$c.in.safetensors
done
probe_pair "vision fp32" 1e-4 vision --model $T --in $G/text_encoder/vision.in.safetensors
probe_pair "vision bf16" 3e-2 vision --model $T --precision bf16 --in $G/text_encoder/vision.in.safetensors

rm -rf "$WORK"
say "RESULT $pass $fail"
