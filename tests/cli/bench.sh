#!/usr/bin/env bash
# `h3 bench` on the CPU with the tiny configs: the output format (not the timings) and bad flags
# (one line, exit 2). The GPU numbers are in docs/cuda.md ("h3 bench").
set -u
source "$(dirname "$0")/lib/common.bash" # H3, TINY, $tmp (removed at exit), pass/fail, ok, bad, check
num='[0-9][0-9.e+-]*'

OMP_WAIT_POLICY=passive "$H3" bench --backend cpu --shapes 64x64x22,96x64x22 --text 16 --repeats 1 \
    --config $TINY/transformer --vae-config $TINY/vae >"$tmp/out" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 0 ] && ok || bad "tiny bench: rc $rc: $(cat "$tmp/err")"
grep -q '^h3 bench: backend cpu, precision bf16, text rows 16' "$tmp/out" && ok || bad "header line"
# S = 16 text + 7 latent frames x (4/2 x 4/2) video + 2 x 37 audio rows = 118 (64 x 64); 132 (96 x 64)
for s in "64x64x22 S=118" "96x64x22 S=132"; do
    shape=${s% *}; S=${s#* }
    grep -Eq "^DIT shape=$shape $S text=16 video_rows=[0-9]+ audio_rows=74 K=2 seconds=$num best=$num tflop=$num tflops=$num peak_gib=$num$" "$tmp/out" \
        && ok || bad "DIT line for $shape"
    grep -Eq "^VAE shape=$shape latents=24x7x[0-9]+x[0-9]+ frames=22 seconds=$num peak_gib=$num$" "$tmp/out" \
        && ok || bad "VAE line for $shape"
    grep -Eq "^\| $shape \| ${S#S=} \| $num \|" "$tmp/out" && ok || bad "table row for $shape"
done
# the released shapes carry the diffusers baseline and a ratio (DiT only, cheap with the tiny config)
OMP_WAIT_POLICY=passive "$H3" bench --backend cpu --shapes 512x512x22 --text 8 --repeats 1 --what dit --config $TINY/transformer \
    >"$tmp/out2" 2>"$tmp/err"
grep -Eq "^DIT shape=512x512x22 S=1874 .* baseline_s=0.170 ratio=$num$" "$tmp/out2" && ok || bad "baseline ratio: $(cat "$tmp/err")"
grep -q '^VAE' "$tmp/out2" && bad "--what dit ran the VAE" || ok

# --vae-batch: one VAE line per value (per-tile path first, then the batched one, with the speedup)
OMP_WAIT_POLICY=passive "$H3" bench --backend cpu --shapes 64x64x22 --what vae --vae-batch 1,0 --vae-config $TINY/vae \
    >"$tmp/out3" 2>"$tmp/err"
grep -Eq "^VAE shape=64x64x22 latents=24x7x4x4 frames=22 seconds=$num peak_gib=$num vae_batch=1$" "$tmp/out3" && ok || bad "vae_batch=1 line: $(cat "$tmp/err")"
grep -Eq "^VAE shape=64x64x22 latents=24x7x4x4 frames=22 seconds=$num peak_gib=$num vae_batch=0 speedup_vs_batch1=$num$" "$tmp/out3" && ok || bad "vae_batch=0 line"

run_bad() { # name, expected stderr fragment, args...
    local name=$1 want=$2; shift 2
    "$H3" bench "$@" >/dev/null 2>"$tmp/err"; rc=$?
    lines=$(wc -l <"$tmp/err")
    if [ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] && grep -q -- "$want" "$tmp/err"; then ok
    else bad "$name: rc $rc, $lines lines: $(cat "$tmp/err")"; fi
}
run_bad "bad shape" "--shapes" --backend cpu --shapes 64x64
run_bad "canvas not /32" "--shapes" --backend cpu --shapes 80x64x22
run_bad "bad backend" "--backend" --backend tpu
run_bad "bad precision" "--precision" --backend cpu --precision fp8
run_bad "bad what" "--what" --backend cpu --what dit,audio
run_bad "bad repeats" "--repeats" --backend cpu --repeats 0
run_bad "bad vae batch" "--vae-batch" --backend cpu --vae-batch 1,x
run_bad "unknown flag" "--frobnicate" --backend cpu --frobnicate 1
# --gguf-type: the blocks' linears as random GGUF blocks kept on the backend (docs/checkpoints.md); the tiny config's
# 48-wide rows take the one-value types only, a 32-block type is refused naming the tensor (at load: exit 1)
OMP_WAIT_POLICY=passive "$H3" bench --backend cpu --shapes 64x64x22 --text 16 --repeats 1 --what dit --gguf-type F16 \
    --config $TINY/transformer >"$tmp/out4" 2>"$tmp/err"
grep -Eq "^DIT shape=64x64x22 S=118 .* peak_gib=$num gguf_type=F16 stream_gb=$num .*slots_gib=$num$" "$tmp/out4" && ok || bad "gguf_type line: $(cat "$tmp/err")"
"$H3" bench --backend cpu --shapes 64x64x22 --text 16 --repeats 1 --what dit --gguf-type Q8_0 --config $TINY/transformer \
    >/dev/null 2>"$tmp/err" && bad "Q8_0 on 48-wide rows accepted" || grep -q "not whole Q8_0 blocks of 32" "$tmp/err" && ok || bad "Q8_0 refusal: $(cat "$tmp/err")"
run_bad "bad gguf type" "--gguf-type must be" --backend cpu --gguf-type Q9
run_bad "gguf type + quant" "cannot be combined with --quant" --backend cpu --gguf-type Q8_0 --quant fp8
# h3 make-lora --random (docs/lora.md "Random LoRAs") and --lora on random weights: merged at load, its cost printed
"$H3" make-lora --random --rank 8 --config $TINY/transformer "$tmp/l8.safetensors" >"$tmp/ml.log" 2>"$tmp/err" &&
    grep -q "rank 8, 2 blocks x 6 linears" "$tmp/ml.log" && ok || bad "make-lora: $(cat "$tmp/err")"
OMP_WAIT_POLICY=passive "$H3" bench --backend cpu --shapes 64x64x22 --text 16 --repeats 1 --what dit --lora "$tmp/l8.safetensors:0.5" \
    --config $TINY/transformer >"$tmp/out5" 2>"$tmp/err"
grep -Eq "^dit: --lora .*l8.safetensors \(scale 0.5\) merged into the random weights at load: $num s" "$tmp/out5" && grep -q '^DIT shape=64x64x22' "$tmp/out5" \
    && ok || bad "bench --lora: $(cat "$tmp/err")"
# --lora on random GGUF blocks: kept quantized, the LoRA merged into each slot as it is expanded (docs/lora.md)
OMP_WAIT_POLICY=passive "$H3" bench --backend cpu --shapes 64x64x22 --text 16 --repeats 1 --what dit --gguf-type F16 \
    --lora "$tmp/l8.safetensors:0.5" --config $TINY/transformer >"$tmp/out6" 2>"$tmp/err"
grep -Eq "^DIT shape=64x64x22 .* gguf_type=F16 .* lora_merges=$num lora_factors_gib=$num$" "$tmp/out6" \
    && grep -q "kept as factors for the streamed blocks" "$tmp/out6" && ok || bad "bench --lora + --gguf-type: $(cat "$tmp/out6" "$tmp/err")"
# ... the outputs of the same blocks dequantized at load + merged at load (H3_GGUF_RESIDENT=off), compared by hash
bh() { # H3_GGUF_RESIDENT, args...
    local r=$1; shift
    H3_GGUF_RESIDENT=$r H3_BENCH_HASH=1 OMP_WAIT_POLICY=passive "$H3" bench --backend cpu --shapes 64x64x22 --text 16 \
        --repeats 1 --what dit --gguf-type F16 --config $TINY/transformer "$@" >"$tmp/bh_$r" 2>>"$tmp/err"
    grep -q "$([ $r = off ] && echo 'merged into the random weights at load' || echo 'kept as factors')" "$tmp/bh_$r" || [ $# = 0 ] &&
        grep -o 'video fnv1a [0-9a-f]*, audio fnv1a [0-9a-f]*' "$tmp/bh_$r"
}
hq=$(bh auto --lora "$tmp/l8.safetensors:0.5") hd=$(bh off --lora "$tmp/l8.safetensors:0.5") h0=$(bh auto)
[ -n "$hq" ] && [ "$hq" = "$hd" ] && [ "$hq" != "$h0" ] && ok || bad "random GGUF + LoRA: kept quantized '$hq', dequantized '$hd', no LoRA '$h0'"
mlbad() { # name, fragment, args...
    local name=$1 want=$2; shift 2
    "$H3" make-lora "$@" >/dev/null 2>"$tmp/err"; rc=$?
    if [ "$rc" -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q -- "$want" "$tmp/err"; then ok; else bad "make-lora $name: rc $rc: $(cat "$tmp/err")"; fi
}
mlbad "no --random" "give --random" "$tmp/x.safetensors"
mlbad "bad rank" "--rank must be" --random --rank 0 "$tmp/x.safetensors"
mlbad "no output" "give the output file" --random
run_bad "gguf type + streaming" "cannot be combined with --ssd-streaming" --backend cpu --gguf-type Q8_0 --ssd-streaming 1
echo "RESULT $pass $fail"
[ "$fail" -eq 0 ]
