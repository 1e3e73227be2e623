#!/usr/bin/env bash
# `h3 probe dit` (PROBE.md): runs on the goldens with every way of naming the weights; the diffusers
# and original layouts write byte-identical outputs; bad inputs -> one line, exit 2, no output file.
# Numerical parity against the reference is tests/test_dit.c (same library code).
set -u
source "$(dirname "$0")/lib/common.bash" # H3, TINY, $tmp (removed at exit), pass/fail, ok, bad, check
G=tests/fixtures/golden/dit

run_ok() { # name, args...
    local name=$1; shift
    if "$H3" probe dit "$@" 2>"$tmp/err"; then ok; else bad "$name: $(cat "$tmp/err")"; fi
}
run_bad() { # name, expected stderr fragment, args...
    local name=$1 want=$2; shift 2
    "$H3" probe dit "$@" --out "$tmp/x.safetensors" 2>"$tmp/err"; rc=$?
    lines=$(wc -l <"$tmp/err")
    if [ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] && grep -q -- "$want" "$tmp/err" && [ ! -e "$tmp/x.safetensors" ]; then ok
    else bad "$name: rc $rc, $lines lines: $(cat "$tmp/err")"; fi
}

for prec in fp32 bf16; do
    run_ok "t2va root $prec" --model $TINY --in $G/t2va.in.safetensors --out "$tmp/t2va_d_$prec.st" --precision $prec
    run_ok "t2va FL2VA $prec" --model $TINY/FL2VA --in $G/t2va.in.safetensors --out "$tmp/t2va_o_$prec.st" --precision $prec
    cmp -s "$tmp/t2va_d_$prec.st" "$tmp/t2va_o_$prec.st" && ok || bad "t2va $prec: layouts differ"
    run_ok "ref2va root $prec" --model $TINY --component transformer_ref --in $G/ref2va.in.safetensors \
        --out "$tmp/r_d_$prec.st" --precision $prec
    run_ok "ref2va Ref2VA $prec" --model $TINY/Ref2VA --in $G/ref2va.in.safetensors --out "$tmp/r_o_$prec.st" --precision $prec
    cmp -s "$tmp/r_d_$prec.st" "$tmp/r_o_$prec.st" && ok || bad "ref2va $prec: layouts differ"
done
# single-file transformers (docs/checkpoints.md; tools/reference/gen_single_file.py, checked there against diffusers'
# from_single_file): the snapshot's weights in the published single files' layout, plain and under ComfyUI's
# model.diffusion_model. prefix, write the very bytes the snapshot does, in both precisions
SF=tests/fixtures/single_file
for prec in fp32 bf16; do
    for f in tiny_transformer tiny_transformer_prefixed; do
        run_ok "single file $f $prec" --model $TINY --transformer $SF/$f.safetensors --in $G/t2va.in.safetensors \
            --out "$tmp/sf_${f}_$prec.st" --precision $prec
        cmp -s "$tmp/t2va_d_$prec.st" "$tmp/sf_${f}_$prec.st" && ok || bad "single file $f $prec: differs from the snapshot"
    done
done
# a GGUF repackaging of the same file (gen_gguf_transformer.py: Q8_0/Q4_0/Q5_0/Q4_1/Q5_1, F16, BF16, F32 tensors):
# dequantized at load with ggml's arithmetic into the snapshot's dtypes, it runs to the very bytes of the safetensors
# file holding the gguf package's dequantization of each tensor
for prec in fp32 bf16; do
    run_ok "GGUF single file $prec" --model $TINY --transformer $SF/tiny_transformer.gguf --in $G/t2va.in.safetensors \
        --out "$tmp/gguf_$prec.st" --precision $prec
    run_ok "its dequantized safetensors $prec" --model $TINY --transformer $SF/tiny_transformer_from_gguf.safetensors \
        --in $G/t2va.in.safetensors --out "$tmp/gguf_ref_$prec.st" --precision $prec
    cmp -s "$tmp/gguf_$prec.st" "$tmp/gguf_ref_$prec.st" && ok || bad "GGUF $prec: differs from the gguf package's dequantization"
done
head -c 20000 $SF/tiny_transformer.gguf >"$tmp/cut.gguf"
run_bad "a truncated GGUF" "cut.gguf" --model $TINY --transformer "$tmp/cut.gguf" --in $G/t2va.in.safetensors
run_bad "a pruned single file" "a pruned MiniMax-H3 checkpoint (adaln_t_table" --model $TINY \
    --transformer $SF/pruned.safetensors --in $G/t2va.in.safetensors
run_bad "not a MiniMax-H3 transformer" "not a MiniMax-H3 single-file transformer" --model $TINY \
    --transformer $TINY/audio_vae/diffusion_pytorch_model.safetensors --in $G/t2va.in.safetensors
run_bad "single file with the original config" "needs the diffusers config" --model $TINY/FL2VA \
    --transformer $SF/tiny_transformer.safetensors --in $G/t2va.in.safetensors
run_bad "single file, missing" "nofile.safetensors" --model $TINY --transformer "$tmp/nofile.safetensors" \
    --in $G/t2va.in.safetensors
"$H3" probe sigmas --model $TINY --transformer $SF/tiny_transformer.safetensors --in $G/t2va.in.safetensors \
    --out "$tmp/s.st" 2>"$tmp/err"
[ $? = 2 ] && grep -q -- "--transformer is an option of the dit op only" "$tmp/err" && ok || bad "--transformer on sigmas: $(cat "$tmp/err")"

run_ok "transformer folder" --model $TINY/transformer --in $G/fl2va.in.safetensors --out "$tmp/f.st"
run_ok "original folder" --model $TINY/FL2VA/transformer --in $G/fl2va.in.safetensors --out "$tmp/fo.st"
cmp -s "$tmp/f.st" "$tmp/fo.st" && ok || bad "fl2va: folder layouts differ"

run_bad "2-column position_ids" "position_ids" --model $TINY --in $G/bad_position_ids_2col.in.safetensors
run_bad "short token_tags" "token_tags" --model $TINY --in $G/bad_token_tags_short.in.safetensors
run_bad "2-D timestep" "input 'timestep'" --model $TINY --in $G/bad_timestep_2d.in.safetensors
run_bad "timestep_indices range" "timestep_indices" --model $TINY --in $G/bad_timestep_indices_range.in.safetensors
run_bad "video rows" "hidden_states" --model $TINY --in $G/bad_video_rows.in.safetensors
run_bad "output file as input" "input 'hidden_states'" --model $TINY --in $G/t2va.out.safetensors
run_bad "component vs partition" "does not match" --model $TINY/FL2VA --component transformer_ref \
    --in $G/ref2va.in.safetensors
run_bad "no weights" "no DiT weights" --model $G --in $G/t2va.in.safetensors
echo "RESULT $pass $fail"
