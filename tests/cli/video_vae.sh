#!/usr/bin/env bash
# `h3 probe vae-decode / vae-encode` (PROBE.md): runs on the goldens, bad input -> one line, exit 2,
# no output file. Numerical parity is tests/test_video_vae.c (same library code).
set -u
G=tests/fixtures/golden/video_vae
source "$(dirname "$0")/lib/probe_checks.bash"

export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 # tiny models: thread hand-offs cost more than the work
run_ok decode vae-decode --model $G/model --in $G/decode_L8.in.safetensors --out "$tmp/d.safetensors"
[ -s "$tmp/d.safetensors" ] && ok || bad "decode wrote nothing"
run_ok encode vae-encode --model $G/model --in $G/encode_T22.in.safetensors --out "$tmp/e.safetensors"
[ -s "$tmp/e.safetensors" ] && ok || bad "encode wrote nothing"
run_ok "tiny snapshot decode" vae-decode --model $TINY --in $G/tiny_decode.in.safetensors --out "$tmp/t.safetensors"
run_ok "vae folder as --model" vae-encode --model $TINY/vae --in $G/tiny_encode.in.safetensors --out "$tmp/f.safetensors"

run_bad "missing input" "input 'latents'" "$tmp/x1" vae-decode --model $G/model \
    --in $G/encode_T1.in.safetensors --out "$tmp/x1"
run_bad "wrong channels" "input 'latents'" "$tmp/x2" vae-decode --model $TINY \
    --in $G/decode_L7.in.safetensors --out "$tmp/x2"
run_bad "decode input to encode" "input 'sample'" "$tmp/x3" vae-encode --model $G/model \
    --in $G/decode_L7.in.safetensors --out "$tmp/x3"
run_bad "bf16 encoder" "fp32 only" "$tmp/x4" vae-encode --model $G/model --precision bf16 \
    --in $G/encode_T1.in.safetensors --out "$tmp/x4"
run_bad "no vae" "config.json" "$tmp/x5" vae-decode --model "$tmp" \
    --in $G/decode_L7.in.safetensors --out "$tmp/x5"
run_bad "encode size" "multiples of the spatial ratio" "$tmp/x6" vae-encode --model $TINY \
    --in $G/encode_T1.in.safetensors --out "$tmp/x6"
# --vae-quant fp8 (docs/fast.md): runs, and differs from the bf16 decoder (its numbers: tests/test_video_vae.c)
run_ok "fp8 decoder" vae-decode --model $G/model --precision bf16 --vae-quant fp8 --in $G/decode_L8.in.safetensors \
    --out "$tmp/d8.safetensors"
run_ok "bf16 decoder" vae-decode --model $G/model --precision bf16 --in $G/decode_L8.in.safetensors --out "$tmp/d16.safetensors"
[ -s "$tmp/d8.safetensors" ] && ! cmp -s "$tmp/d8.safetensors" "$tmp/d16.safetensors" && ok || bad "fp8 decode missing or equal to bf16"
run_bad "fp8 needs bf16" "needs --precision bf16" "$tmp/x7" vae-decode --model $G/model --vae-quant fp8 \
    --in $G/decode_L7.in.safetensors --out "$tmp/x7"
run_bad "bad --vae-quant" "must be none or fp8" "$tmp/x8" vae-decode --model $G/model --precision bf16 --vae-quant int4 \
    --in $G/decode_L7.in.safetensors --out "$tmp/x8"
run_bad "--vae-quant on encode" "vae-decode op only" "$tmp/x9" vae-encode --model $G/model --precision bf16 --vae-quant fp8 \
    --in $G/encode_T1.in.safetensors --out "$tmp/x9"
echo "RESULT $pass $fail"
