#!/usr/bin/env bash
# Fused activation quantization (docs/fast.md "Fused quantization"): the W8A8 GEMM inputs' codes written by the
# kernels that produce them give the same bits as the separate quantization passes (H3_FUSED_QUANT=0), in every
# DiT quantization mode, both checkpoint layouts, an int8 snapshot of the mlp profile (q|k|v in bf16: only the FFN's
# producers quantize) and the fp8 video decoder; and each mode still differs from bf16 (the 8-bit GEMMs ran). On the
# CPU the fused ops are their two twins in turn, so this checks the model's wiring (which producer fills which codes,
# the block-to-block hand-over of norm1's codes); tests/cuda/run_fusedq_device.sh runs the same on the GPU.
set -u
source "$(dirname "$0")/lib/common.bash" # H3, TINY, $tmp (removed at exit), pass/fail, ok, bad
G=tests/fixtures/golden/dit
V=tests/fixtures/golden/video_vae
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
probe() { # fused (1 / 0), model, out, extra args...
    local f=$1 m=$2 o=$3; shift 3
    H3_FUSED_QUANT=$f "$H3" probe dit --model "$m" --in $G/t2va.in.safetensors --out "$o" --precision bf16 ${H3_ARGS:-} "$@" \
        2>"$tmp/err"
}
"$H3" quantize -d $TINY -o "$tmp/q_mlp" --profile mlp >/dev/null 2>"$tmp/err" && ok || bad "quantize mlp: $(tail -1 "$tmp/err")"
probe 1 $TINY "$tmp/bf16.st" && ok || bad "probe bf16: $(cat "$tmp/err")"
i=0
while read -r model args; do
    i=$((i + 1))
    probe 1 "$model" "$tmp/f$i.st" $args && ok || bad "$model $args (fused): $(cat "$tmp/err")"
    probe 0 "$model" "$tmp/u$i.st" $args && ok || bad "$model $args (H3_FUSED_QUANT=0): $(cat "$tmp/err")"
    cmp -s "$tmp/f$i.st" "$tmp/u$i.st" && ok || bad "$model $args: fused quantization changed the output"
    [ "$model" = $TINY ] && { cmp -s "$tmp/f$i.st" "$tmp/bf16.st" && bad "$args: output equals bf16" || ok; }
done <<EOF2
$TINY --quant int8
$TINY --quant int8 --attention sage8
$TINY/FL2VA --quant int8
$tmp/q_mlp
EOF2
# --quant fp8 (h3 generate: `probe dit` takes int8 only): the latents of a 2-step generation
GA=(-d $TINY --width 64 --height 64 --steps 2 --frames 120 -p "A red fox." --seed 7 -o '' ${H3_ARGS:-})
"$H3" generate "${GA[@]}" --dump-latents "$tmp/gb.st" 2>"$tmp/err" && ok || bad "generate bf16: $(tail -1 "$tmp/err")"
for args in "--quant fp8" "--quant fp8 --attention sage8" "--preset fast" "--quant int8"; do
    i=$((i + 1))
    H3_FUSED_QUANT=1 "$H3" generate "${GA[@]}" $args --dump-latents "$tmp/g$i.st" 2>"$tmp/err" && ok \
        || bad "generate $args: $(tail -1 "$tmp/err")"
    H3_FUSED_QUANT=0 "$H3" generate "${GA[@]}" $args --dump-latents "$tmp/h$i.st" 2>"$tmp/err" && ok \
        || bad "generate $args (H3_FUSED_QUANT=0): $(tail -1 "$tmp/err")"
    cmp -s "$tmp/g$i.st" "$tmp/h$i.st" && ok || bad "generate $args: fused quantization changed the latents"
    cmp -s "$tmp/g$i.st" "$tmp/gb.st" && bad "generate $args: latents equal bf16" || ok
done
# the fp8 video decoder (the residual norms and SwiGLU write the GEMM inputs' codes)
vd() { # fused, out, extra args
    local f=$1 o=$2; shift 2
    H3_FUSED_QUANT=$f "$H3" probe vae-decode --model $V/model --precision bf16 --in $V/decode_L8.in.safetensors --out "$o" \
        ${H3_ARGS:-} "$@" 2>"$tmp/err"
}
vd 1 "$tmp/vf.st" --vae-quant fp8 && ok || bad "vae-decode fp8 (fused): $(cat "$tmp/err")"
vd 0 "$tmp/vu.st" --vae-quant fp8 && ok || bad "vae-decode fp8 (H3_FUSED_QUANT=0): $(cat "$tmp/err")"
cmp -s "$tmp/vf.st" "$tmp/vu.st" && ok || bad "vae-decode fp8: fused quantization changed the output"
vd 1 "$tmp/vb.st" && ok || bad "vae-decode bf16: $(cat "$tmp/err")"
cmp -s "$tmp/vf.st" "$tmp/vb.st" && bad "vae-decode fp8 equals bf16" || ok
echo "RESULT $pass $fail"
