#!/usr/bin/env bash
# LoRAs and the schedulers' shifts (docs/lora.md). Parity with diffusers (merged weights bit for bit, forwards and a
# 4-evaluation denoise) is tests/test_lora.c; this script checks the CLI around it:
#  - h3 generate --lora changes the latents; the snapshot and the single-file transformer with the same LoRA give
#    the very same latents (bf16 and fp32); --lora F:0 gives the LoRA-less latents bit for bit; two LoRAs run;
#  - --ssd-streaming (map and direct reads) with one and two LoRAs, and fp32: the resident latents bit for bit, the LoRA
#    merged into the slots as they are filled (the log line);
#  - a GGUF transformer kept quantized (H3_GGUF_RESIDENT=on) + a LoRA: the dequantized-at-load latents, bf16 and fp32;
#  - h3 probe dit --lora on the diffusers snapshot, the FL2VA tree and the single file writes the same bytes;
#  - --shift 12:3 is the snapshot's schedule bit for bit, --shift 6 is --shift 6:3 (the audio default), 6:3 differs;
#    --step-update euler is the default, training_euler differs (both rules bit for bit in test_lora.c);
#  - a session's !lora / !lora off / !shift give the one-shot latents of the same flags (re-merged from the
#    untouched weights, never compounded);
#  - bad LoRAs and flags are refused before the first phase: one line naming the file/key/flag, exit 2, nothing
#    written (unknown key, wrong shape, DoRA, a transformer_ref LoRA or --lora-ref on t2va, 9 LoRAs, bad scales,
#    a missing file, --random-weights, bad --shift).
set -u
source "$(dirname "$0")/lib/common.bash" # H3, TINY, $tmp (removed at exit), pass/fail, ok, bad, check
L=tests/fixtures/lora
SF=tests/fixtures/single_file/tiny_transformer.safetensors
G=(-d $TINY --width 64 --height 32 --frames 120 --steps 2 --seed 5 -p "A red fox." -o '')

gen() { # name, dump, args...
    local name=$1 dump=$2; shift 2
    if "$H3" generate "${G[@]}" --dump-latents "$dump" "$@" >"$tmp/out" 2>&1; then ok; else bad "$name: $(tail -2 "$tmp/out")"; fi
}
same() { cmp -s "$2" "$3" && ok || bad "$1: $2 and $3 differ"; }
differ() { [ -e "$2" ] && [ -e "$3" ] && ! cmp -s "$2" "$3" && ok || bad "$1: $2 and $3 are identical (or missing)"; }

for prec in bf16 fp32; do
    gen "no LoRA $prec" "$tmp/base_$prec.st" --precision $prec
    gen "LoRA $prec" "$tmp/lora_$prec.st" --precision $prec --lora $L/ai_toolkit.safetensors
    differ "the LoRA changes the latents ($prec)" "$tmp/base_$prec.st" "$tmp/lora_$prec.st"
    gen "LoRA on the single file $prec" "$tmp/lora_sf_$prec.st" --precision $prec --transformer $SF --lora $L/ai_toolkit.safetensors
    same "single file + LoRA = snapshot + LoRA ($prec)" "$tmp/lora_$prec.st" "$tmp/lora_sf_$prec.st"
    gen "scale 0 $prec" "$tmp/zero_$prec.st" --precision $prec --lora $L/peft.safetensors:0
    same "scale 0 = no LoRA ($prec)" "$tmp/base_$prec.st" "$tmp/zero_$prec.st"
done
# merged before --quant int8 quantizes the blocks' linears
gen "int8" "$tmp/i8.st" --quant int8
gen "int8 + LoRA" "$tmp/i8_lora.st" --quant int8 --lora $L/ai_toolkit.safetensors
differ "int8 quantizes the merged weights" "$tmp/i8.st" "$tmp/i8_lora.st"
gen "two LoRAs" "$tmp/two.st" --lora $L/peft.safetensors:0.5 --lora $L/kohya.safetensors:1.25
differ "two LoRAs change the latents" "$tmp/base_bf16.st" "$tmp/two.st"
# --ssd-streaming (bf16): no merged host copies, the LoRA merged into each block's slot as it is filled (docs/lora.md);
# the parts read from the mapping or the files as stored: the resident model's latents bit for bit
for reads in map direct; do
    export H3_STREAM_READ=$reads
    gen "LoRA streamed ($reads)" "$tmp/lora_ss_$reads.st" --ssd-streaming --lora $L/ai_toolkit.safetensors
    same "--ssd-streaming ($reads) + LoRA = resident + LoRA" "$tmp/lora_bf16.st" "$tmp/lora_ss_$reads.st"
    # the CPU backend's generate runs resident (its weights are the file mapping): it says so; a GPU run merges per fill
    grep -q -e "LoRA pieces merged into the slots as they were filled" -e "ssd-streaming: no effect on the CPU backend" "$tmp/out" \
        && ok || bad "streamed LoRA ($reads): neither a fill-time merge nor the CPU's resident run reported: $(grep -i -e lora -e stream "$tmp/out" | tail -2)"
    gen "two LoRAs streamed ($reads)" "$tmp/two_ss_$reads.st" --ssd-streaming --lora $L/peft.safetensors:0.5 --lora $L/kohya.safetensors:1.25
    same "--ssd-streaming ($reads) + two LoRAs = resident + two LoRAs" "$tmp/two.st" "$tmp/two_ss_$reads.st"
    # fp32: the touched parts held F32 in the slots (test_lora.c checks the slot path itself on the CPU backend)
    gen "LoRA streamed fp32 ($reads)" "$tmp/lora_ss32_$reads.st" --ssd-streaming --precision fp32 --lora $L/ai_toolkit.safetensors
    same "--ssd-streaming ($reads) --precision fp32 + LoRA = resident + LoRA" "$tmp/lora_fp32.st" "$tmp/lora_ss32_$reads.st"
done
unset H3_STREAM_READ
# a GGUF transformer kept quantized (H3_GGUF_RESIDENT=on: the CPU twin feeds the slots) + a LoRA merged into each slot as
# it is expanded: the latents of the file dequantized at load + merged (docs/checkpoints.md), bf16 and fp32
GG=tests/fixtures/single_file/tiny_transformer.gguf
for prec in bf16 fp32; do
    export H3_GGUF_RESIDENT=off
    gen "GGUF dequantized + LoRA $prec" "$tmp/gg_off_$prec.st" --precision $prec --transformer $GG --lora $L/ai_toolkit.safetensors
    export H3_GGUF_RESIDENT=on
    gen "GGUF kept quantized + LoRA $prec" "$tmp/gg_on_$prec.st" --precision $prec --transformer $GG --lora $L/ai_toolkit.safetensors
    same "GGUF kept quantized + LoRA = dequantized at load + LoRA ($prec)" "$tmp/gg_off_$prec.st" "$tmp/gg_on_$prec.st"
    gen "GGUF kept quantized $prec" "$tmp/gg_base_$prec.st" --precision $prec --transformer $GG
    unset H3_GGUF_RESIDENT
    differ "the LoRA changes the GGUF's latents ($prec)" "$tmp/gg_base_$prec.st" "$tmp/gg_on_$prec.st"
done

# the probe on the three weight layouts: the same bytes (the merge lands on the original layout's fused rows)
I=tests/fixtures/golden/dit/t2va.in.safetensors
for prec in fp32 bf16; do
    "$H3" probe dit --model $TINY --in $I --precision $prec --lora $L/musubi.safetensors --out "$tmp/p_d.st" 2>"$tmp/err" && ok || bad "probe snapshot: $(cat "$tmp/err")"
    "$H3" probe dit --model $TINY/FL2VA --in $I --precision $prec --lora $L/musubi.safetensors --out "$tmp/p_o.st" 2>"$tmp/err" && ok || bad "probe FL2VA: $(cat "$tmp/err")"
    "$H3" probe dit --model $TINY --transformer $SF --in $I --precision $prec --lora $L/musubi.safetensors --out "$tmp/p_s.st" 2>"$tmp/err" && ok || bad "probe single file: $(cat "$tmp/err")"
    same "probe FL2VA tree = snapshot with the LoRA ($prec)" "$tmp/p_d.st" "$tmp/p_o.st"
    same "probe single file = snapshot with the LoRA ($prec)" "$tmp/p_d.st" "$tmp/p_s.st"
done

# --shift
gen "shift 12:3" "$tmp/s123.st" --shift 12:3
same "--shift 12:3 = the snapshot's schedulers" "$tmp/base_bf16.st" "$tmp/s123.st"
gen "shift 6:3" "$tmp/s63.st" --shift 6:3
gen "shift 6" "$tmp/s6.st" --shift 6
same "--shift 6 = --shift 6:3" "$tmp/s63.st" "$tmp/s6.st"
differ "--shift 6:3 changes the latents" "$tmp/base_bf16.st" "$tmp/s63.st"
gen "Turbo settings" "$tmp/turbo.st" --shift 6:3 --lora $L/ai_toolkit.safetensors:0.8
# --step-update (the two rules bit for bit: test_lora.c): euler is the default, training_euler rounds differently
gen "step update euler" "$tmp/eu.st" --step-update euler
same "--step-update euler = the default" "$tmp/base_bf16.st" "$tmp/eu.st"
gen "step update training_euler" "$tmp/te.st" --step-update training_euler --shift 6:3
differ "--step-update training_euler rounds differently" "$tmp/s63.st" "$tmp/te.st"

# a session: !lora, !lora off, !shift, against one-shot runs with the same flags
printf '%s\n' "!seed 5" "!lora $L/ai_toolkit.safetensors" "A red fox." "!lora off" "A red fox." \
    "!lora $L/peft.safetensors 0.5" "!lora $L/kohya.safetensors 1.25" "A red fox." "!lora off" "!shift 6:3" "A red fox." \
    "!shift default" "A red fox." "!shift 6:3" "!step-update training_euler" "A red fox." "!quit" |
    "$H3" generate -d $TINY --width 64 --height 32 --frames 120 --steps 2 -o '' --dump-latents "$tmp/sess.st" >"$tmp/sout" 2>&1 \
    && ok || bad "session: $(tail -3 "$tmp/sout")"
same "session !lora = --lora" "$tmp/lora_bf16.st" "$tmp/sess-0001.st"
same "session !lora off = no LoRA (never compounded)" "$tmp/base_bf16.st" "$tmp/sess-0002.st"
same "session two LoRAs = --lora x2" "$tmp/two.st" "$tmp/sess-0003.st"
same "session !shift 6:3 = --shift 6:3" "$tmp/s63.st" "$tmp/sess-0004.st"
same "session !shift default" "$tmp/base_bf16.st" "$tmp/sess-0005.st"
same "session !step-update training_euler" "$tmp/te.st" "$tmp/sess-0006.st"

refuse() { # name, message fragment, args...
    local name=$1 want=$2; shift 2
    "$H3" generate "${G[@]}" --dump-latents "$tmp/x.st" "$@" >"$tmp/out" 2>&1; local rc=$?
    if [ $rc = 2 ] && [ "$(wc -l <"$tmp/out")" = 1 ] && grep -q -- "$want" "$tmp/out" && [ ! -e "$tmp/x.st" ]; then ok
    else bad "$name: rc $rc: $(cat "$tmp/out")"; fi
}
refuse "unknown key" "blocks.0.attn.bogus.lora_A.weight' maps to no MiniMax-H3 DiT weight" --lora $L/bad_unknown.safetensors
refuse "wrong shape" "the model's weight is \[48,64\]" --lora $L/bad_shape.safetensors
refuse "DoRA" "a DoRA file" --lora $L/bad_dora.safetensors
refuse "lora_adapter_metadata rank" "lora_adapter_metadata gives module .* rank 8 (r)" --lora $L/bad_meta_rank.safetensors
refuse "lora_adapter_metadata DoRA" "transformer.use_dora: a DoRA adapter" --lora $L/bad_meta_dora.safetensors
refuse "transformer_ref LoRA on t2va" "transformer_ref.-prefixed" --lora $L/ref.safetensors
refuse "--lora-ref on t2va" "routes it to the transformer_ref partition" --lora-ref $L/peft.safetensors
refuse "another model's LoRA" "the model's weight is" --lora $L/diffsynth_hd128.safetensors
nine=(); for i in 1 2 3 4 5 6 7 8 9; do nine+=(--lora $L/peft.safetensors:0.1); done
refuse "9 LoRAs" "at most 8 LoRAs" "${nine[@]}"
refuse "scale x" "the scale after ':' must be a finite number" --lora $L/peft.safetensors:x
refuse "scale nan" "the scale after ':' must be a finite number" --lora $L/peft.safetensors:nan
refuse "scale 1e9" "the scale after ':' must be a finite number" --lora $L/peft.safetensors:1e9
refuse "missing file" "nofile.safetensors" --lora "$tmp/nofile.safetensors"
refuse "not a safetensors file" "config.json" --lora $TINY/transformer/config.json
refuse "with --random-weights" "needs the checkpoint's weights" --lora $L/peft.safetensors --random-weights
refuse "step update x" "--step-update must be euler or training_euler" --step-update x
refuse "shift 0" "--shift expects VIDEO" --shift 0
refuse "shift x" "--shift expects VIDEO" --shift x
refuse "shift 6:" "--shift expects VIDEO" --shift 6:
refuse "shift 6:-1" "--shift expects VIDEO" --shift 6:-1
"$H3" probe dit --model $TINY --in $I --lora $L/bad_dora.safetensors --out "$tmp/x.st" 2>"$tmp/err"; rc=$?
[ $rc = 2 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "DoRA" "$tmp/err" && [ ! -e "$tmp/x.st" ] && ok || bad "probe DoRA: rc $rc $(cat "$tmp/err")"
"$H3" probe sigmas --model $TINY --in $I --lora $L/peft.safetensors --out "$tmp/x.st" 2>"$tmp/err"; rc=$?
[ $rc = 2 ] && grep -q "option of the dit and denoise ops" "$tmp/err" && ok || bad "probe --lora on sigmas: rc $rc $(cat "$tmp/err")"
echo "RESULT $pass $fail"
