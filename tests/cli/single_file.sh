#!/usr/bin/env bash
# h3 generate --transformer FILE (docs/checkpoints.md): the tiny snapshot's transformer given as a single file
# (tests/fixtures/single_file, made by tools/reference/gen_single_file.py and checked there against diffusers'
# from_single_file) generates the very latents the snapshot does, in bf16 and fp32, as safetensors and under
# ComfyUI's prefix; its GGUF repackaging generates what the gguf package's dequantization of it does; bad files are
# refused before the first phase (one line, exit 2, nothing written); ref2va refuses the option.
set -u
source "$(dirname "$0")/lib/common.bash"
SF=tests/fixtures/single_file
G=(-d $TINY --width 64 --height 32 --frames 120 --steps 2 --seed 5 -p "A red fox." -o '')

gen() { # name, dump, args...
    local name=$1 dump=$2; shift 2
    if "$H3" generate "${G[@]}" --dump-latents "$dump" "$@" >"$tmp/out" 2>&1; then ok; else bad "$name: $(tail -2 "$tmp/out")"; fi
}
for prec in bf16 fp32; do
    gen "snapshot $prec" "$tmp/snap_$prec.st" --precision $prec
    for f in tiny_transformer tiny_transformer_prefixed; do
        gen "$f $prec" "$tmp/${f}_$prec.st" --precision $prec --transformer $SF/$f.safetensors
        cmp -s "$tmp/snap_$prec.st" "$tmp/${f}_$prec.st" && ok || bad "$f $prec: latents differ from the snapshot's"
    done
    gen "GGUF $prec" "$tmp/gguf_$prec.st" --precision $prec --transformer $SF/tiny_transformer.gguf
    gen "GGUF reference $prec" "$tmp/gguf_ref_$prec.st" --precision $prec --transformer $SF/tiny_transformer_from_gguf.safetensors
    cmp -s "$tmp/gguf_$prec.st" "$tmp/gguf_ref_$prec.st" && ok || bad "GGUF $prec: latents differ from its dequantized safetensors"
done

refuse() { # name, message fragment, args...
    local name=$1 want=$2; shift 2
    "$H3" generate "${G[@]}" --dump-latents "$tmp/x.st" "$@" >"$tmp/out" 2>&1; local rc=$?
    if [ $rc = 2 ] && grep -q -- "$want" "$tmp/out" && [ ! -e "$tmp/x.st" ] && ! grep -q "text encoder" "$tmp/out"; then ok
    else bad "$name: rc $rc: $(cat "$tmp/out")"; fi
}
refuse "pruned" "a pruned MiniMax-H3 checkpoint" --transformer $SF/pruned.safetensors
refuse "not an H3 transformer" "not a MiniMax-H3 single-file transformer" --transformer $TINY/audio_vae/diffusion_pytorch_model.safetensors
refuse "missing" "nofile.safetensors" --transformer "$tmp/nofile.safetensors"
head -c 20000 $SF/tiny_transformer.gguf >"$tmp/cut.gguf"
refuse "truncated GGUF" "cut.gguf" --transformer "$tmp/cut.gguf"
printf 'GGUF\003\0\0\0' >"$tmp/short.gguf"
refuse "an 8-byte GGUF" "short.gguf" --transformer "$tmp/short.gguf"
refuse "ref2va" "ref2va runs transformer_ref" --transformer $SF/tiny_transformer.safetensors \
    --ref-image tests/fixtures/golden/e2e/ref2va_image.png
echo "RESULT $pass $fail"
