#!/usr/bin/env bash
# `h3 probe audio-decode / audio-encode` (PROBE.md): runs on the goldens, bad input -> one line, exit 2,
# no output file. Numerical parity is tests/test_audio_vae.c (same library code).
set -u
G=tests/fixtures/golden/audio_vae
source "$(dirname "$0")/lib/probe_checks.bash"

run_ok decode audio-decode --model $TINY --in $G/decode_t12.in.safetensors --out "$tmp/d.safetensors"
[ -s "$tmp/d.safetensors" ] && ok || bad "decode wrote nothing"
run_ok encode audio-encode --model $TINY --in $G/encode_n123.in.safetensors --out "$tmp/e.safetensors"
[ -s "$tmp/e.safetensors" ] && ok || bad "encode wrote nothing"
run_ok "audio_vae folder as --model" audio-encode --model $G/model --in $G/full_encode_n123.in.safetensors \
    --out "$tmp/f.safetensors"

run_bad "missing input" "input 'latents'" "$tmp/x1" audio-decode --model $TINY \
    --in $G/encode_n7.in.safetensors --out "$tmp/x1"
run_bad "wrong channels" "latent_channels 32" "$tmp/x2" audio-decode --model $TINY \
    --in $G/full_decode_t12.in.safetensors --out "$tmp/x2"
run_bad "decode input to encode" "input 'sample'" "$tmp/x3" audio-encode --model $TINY \
    --in $G/decode_t1.in.safetensors --out "$tmp/x3"
run_bad "bf16" "fp32 only" "$tmp/x4" audio-decode --model $TINY --precision bf16 \
    --in $G/decode_t1.in.safetensors --out "$tmp/x4"
run_bad "no audio_vae" "audio_vae/config.json" "$tmp/x5" audio-decode --model "$tmp" \
    --in $G/decode_t1.in.safetensors --out "$tmp/x5"
echo "RESULT $pass $fail"
