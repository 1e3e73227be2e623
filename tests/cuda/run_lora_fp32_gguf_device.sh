#!/usr/bin/env bash
# LoRAs with the checkpoint forms users have, on the GPU (issue 22; docs/lora.md "With --ssd-streaming",
# docs/checkpoints.md "Quantized on the GPU"): a GGUF transformer kept quantized + --lora (the pieces merged into each
# slot right after the fill expands it), --ssd-streaming --precision fp32 + --lora (the touched parts held F32 in the
# slots, widened on the copy stream), --ssd-streaming with a single-file safetensors transformer. One device call,
# under ~5 minutes. Parts (each prints "== ..." lines; the last line is RESULT <passed> <failed>):
#   1. tests/test_lora --stream-cuda: the tiny snapshot, the FL2VA tree and the prefixed single file with two LoRAs,
#      bf16 and fp32, --ssd-streaming (map and direct reads) vs the resident merged model on CUDA, bit for bit;
#   2. tests/cuda/test_cuda_gguf: the tiny GGUF kept quantized + two LoRAs == dequantized at load + merged on CUDA
#      (bf16, fp32: the parts F32 in the slots), auto + LoRA keeps the blocks quantized;
#   3. tests/cuda/test_cuda_lora64: release width, rank 64: 3 streamed blocks bf16, and fp32 with the LoRA on 2 of
#      them (the slots change their parts' dtypes as they are refilled), == the resident merged model;
#   4. h3 generate --backend cuda on the tiny snapshot (--dump-latents, cmp): fp32 --ssd-streaming + LoRA (map,
#      direct) vs resident; the GGUF + LoRA kept quantized (auto) vs H3_GGUF_RESIDENT=off, bf16 and fp32; the single
#      safetensors file --ssd-streaming (+ LoRA) vs resident, bf16 and fp32;
#   5. the release width with random weights and a random rank-64 LoRA (h3 make-lora --random): Q4_K blocks kept
#      quantized + LoRA vs the same blocks dequantized at load + merged (H3_GGUF_RESIDENT=off), LAYERS (8) release
#      blocks at 544x960x124, outputs compared by hash (H3_BENCH_HASH); then 50 release blocks Q4_K without / with the
#      LoRA: seconds per forward, peak GPU GiB, pieces merged per forward (SKIP_FULL=1 skips the 50 blocks).
# Build here: make CUDA=1 MEDIA=0 BUILD=build-cuda-nm NVCC_ARCH="-gencode=arch=compute_90a,code=sm_90a" -j2
# build-cuda-nm/h3 cuda-tests build-cuda-nm/tests/test_lora; bash tools/dev_stage.sh build-cuda-nm .dev-lora2; carry
# .dev-lora2.
# Usage (device): bash tests/cuda/run_lora_fp32_gguf_device.sh .dev-lora2   (logs packed into $OUT/lora_fp32_gguf.tar)
set -u
cd "$(dirname "$0")/../.."
B=${1:-.dev-lora2}
O=${OUT:-/tmp/h3_lora_fp32_gguf}
W=$(mktemp -d)
mkdir -p "$O"
bash tools/dev_unpack.sh "$B" >/dev/null 2>&1
B=$(cd "$B" && pwd)
export LD_LIBRARY_PATH="$B/lib:$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
pass=0 fail=0
res() { if [ "$1" = 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $2"; fi; }
t0=$(date +%s)

# 1-3. the library tests on CUDA
if [ -x "$B/tests/test_lora" ]; then
    timeout 120 "$B/tests/test_lora" --stream-cuda >"$W/test_lora.log" 2>&1; rc=$?
    echo "== test_lora --stream-cuda (bf16 + fp32, snapshot / FL2VA / single file, map + direct vs resident): rc $rc $(grep '^RESULT' "$W/test_lora.log" | tail -1)"
    grep -E '^  \[cuda\]|^FAIL' "$W/test_lora.log" | sed -E 's/, [0-9]+ factor bytes//' | head -14
else
    rc=1; echo "== test_lora --stream-cuda: $B/tests/test_lora not staged (build build-cuda/tests/test_lora)"
fi
res $rc "test_lora --stream-cuda"
timeout 120 "$B/tests/cuda/test_cuda_gguf" >"$W/test_cuda_gguf.log" 2>&1; rc=$?
echo "== test_cuda_gguf (GGUF kept quantized + 2 LoRAs vs dequantized at load + merged, bf16 / fp32): rc $rc $(grep '^RESULT' "$W/test_cuda_gguf.log" | tail -1)"
grep -E '^  |^FAIL' "$W/test_cuda_gguf.log" | head -12
res $rc test_cuda_gguf
timeout 240 "$B/tests/cuda/test_cuda_lora64" >"$W/test_cuda_lora64.log" 2>&1; rc=$?
echo "== test_cuda_lora64 (release width, rank 64; bf16 and fp32 streamed vs resident): rc $rc $(grep '^RESULT' "$W/test_cuda_lora64.log" | tail -1)"
grep -E '^  |^FAIL' "$W/test_cuda_lora64.log" | head -8
res $rc test_cuda_lora64
echo "== ($(( $(date +%s) - t0 )) s so far)"

# 4. h3 generate on the tiny snapshot: the new paths vs their resident / dequantized-at-load twins
L=tests/fixtures/lora GG=tests/fixtures/single_file/tiny_transformer.gguf
SF=tests/fixtures/single_file/tiny_transformer_prefixed.safetensors
G=(-d tests/fixtures/tiny -p "A red fox." --width 64 --height 32 --frames 120 --steps 2 --seed 5 -o '' --backend cuda)
gen() { # name, env assignment or -, args...
    local n=$1 v=$2; shift 2
    if [ "$v" = - ]; then "$B/h3" generate "${G[@]}" "$@" --dump-latents "$W/$n.st" >"$W/$n.log" 2>&1
    else env "$v" "$B/h3" generate "${G[@]}" "$@" --dump-latents "$W/$n.st" >"$W/$n.log" 2>&1; fi
}
same() { # what, a, b, log line that must be in b's log
    local r=1
    [ -s "$W/$2.st" ] && cmp -s "$W/$2.st" "$W/$3.st" && grep -q -- "$4" "$W/$3.log" && r=0
    echo "== generate cuda, $1: $([ $r = 0 ] && echo 'identical latents' || echo "DIFFER (or no '$4' in the log)")"
    grep -hE 'LoRA pieces|block copies|kept quantized|rror' "$W/$3.log" | sed 's/^/   /' | tail -3
    res $r "generate $1"
}
LA=(--lora $L/ai_toolkit.safetensors)
gen fp32_res - --precision fp32 "${LA[@]}"
for reads in map direct; do
    gen fp32_ss_$reads H3_STREAM_READ=$reads --precision fp32 --ssd-streaming "${LA[@]}"
    same "fp32 --ssd-streaming ($reads) + LoRA vs resident" fp32_res fp32_ss_$reads "[1-9][0-9]* parts held F32"
done
for prec in bf16 fp32; do
    gen gg_off_$prec H3_GGUF_RESIDENT=off --precision $prec --transformer $GG "${LA[@]}"
    gen gg_q_$prec - --precision $prec --transformer $GG "${LA[@]}"
    same "$prec GGUF kept quantized + LoRA vs dequantized at load + LoRA" gg_off_$prec gg_q_$prec "the GGUF kept quantized: "
    gen sf_res_$prec - --precision $prec --transformer $SF "${LA[@]}"
    gen sf_ss_$prec - --precision $prec --transformer $SF --ssd-streaming "${LA[@]}"
    same "$prec single file --ssd-streaming + LoRA vs resident" sf_res_$prec sf_ss_$prec "LoRA pieces merged into the slots"
    gen sf_res0_$prec - --precision $prec --transformer $SF
    gen sf_ss0_$prec - --precision $prec --transformer $SF --ssd-streaming
    same "$prec single file --ssd-streaming vs resident" sf_res0_$prec sf_ss0_$prec "block copies"
done
echo "== ($(( $(date +%s) - t0 )) s so far)"

# 5. the release width: random Q4_K blocks + a random rank-64 LoRA
SH=${SHAPES:-544x960x124} NL=${LAYERS:-8}
mkdir -p "$W/cfg$NL" "$W/cfg50"
sed -E "s/\"num_layers\": *[0-9]+/\"num_layers\": $NL/" tests/fixtures/skeleton/transformer/config.json >"$W/cfg$NL/config.json"
s=$(date +%s)
"$B/h3" make-lora --random --rank 64 --layers $NL "$W/lora64_$NL.safetensors" >"$W/make_lora_$NL.log" 2>&1; rc=$?
echo "== make-lora --random --rank 64 --layers $NL: rc $rc ($(( $(date +%s) - s )) s)"
res $rc "make-lora $NL"
for r in auto off; do
    s=$(date +%s)
    H3_BENCH_HASH=1 H3_GGUF_RESIDENT=$r "$B/h3" bench --backend cuda --what dit --shapes "$SH" --repeats 2 --config "$W/cfg$NL" \
        --gguf-type Q4_K --lora "$W/lora64_$NL.safetensors" >"$W/bench_q4k_${NL}_$r.log" 2>&1; rc=$?
    echo "== bench DiT $SH, $NL release blocks, Q4_K + rank-64 LoRA, H3_GGUF_RESIDENT=$r: rc $rc ($(( $(date +%s) - s )) s)"
    grep -E '^(DIT|dit:)|rror' "$W/bench_q4k_${NL}_$r.log" | sed 's/^/   /'
    res $rc "bench Q4_K $NL $r"
done
hq=$(grep -o 'video fnv1a [0-9a-f]*, audio fnv1a [0-9a-f]*' "$W/bench_q4k_${NL}_auto.log" | tail -1)
hd=$(grep -o 'video fnv1a [0-9a-f]*, audio fnv1a [0-9a-f]*' "$W/bench_q4k_${NL}_off.log" | tail -1)
grep -q "kept as factors" "$W/bench_q4k_${NL}_auto.log" && grep -q "merged into the random weights at load" "$W/bench_q4k_${NL}_off.log" &&
    [ -n "$hq" ] && [ "$hq" = "$hd" ]; r=$?
echo "== $NL release blocks Q4_K + LoRA: kept quantized (merged at fill) vs dequantized at load + merged: $([ $r = 0 ] && echo "identical outputs ($hq)" || echo "DIFFER ('$hq' vs '$hd')")"
res $r "Q4_K + LoRA == dequantized + merged"
rm -f "$W/lora64_$NL.safetensors"
if [ -z "${SKIP_FULL:-}" ]; then
    sed -E "s/\"num_layers\": *[0-9]+/\"num_layers\": 50/" tests/fixtures/skeleton/transformer/config.json >"$W/cfg50/config.json"
    s=$(date +%s)
    "$B/h3" make-lora --random --rank 64 "$W/lora64.safetensors" >"$W/make_lora.log" 2>&1; rc=$?
    echo "== make-lora --random --rank 64 (50 release blocks): rc $rc ($(( $(date +%s) - s )) s), $(du -h "$W/lora64.safetensors" 2>/dev/null | cut -f1)"
    res $rc "make-lora 50"
    for l in none lora; do
        s=$(date +%s)
        "$B/h3" bench --backend cuda --what dit --shapes "$SH" --repeats 2 --config "$W/cfg50" --gguf-type Q4_K \
            $([ $l = lora ] && echo --lora "$W/lora64.safetensors") >"$W/bench_q4k_50_$l.log" 2>&1; rc=$?
        echo "== bench DiT $SH, 50 release blocks, Q4_K kept quantized, ${l/none/no LoRA}: rc $rc ($(( $(date +%s) - s )) s)"
        grep -E '^(DIT|dit:)|rror' "$W/bench_q4k_50_$l.log" | sed 's/^/   /'
        res $rc "bench Q4_K 50 $l"
    done
    echo "== summary (per forward; peak GiB = the pool's high-water mark):"
    for l in none lora; do
        echo "   Q4_K ${l/none/no LoRA}: $(grep '^DIT' "$W/bench_q4k_50_$l.log" | tail -1 | grep -oE '(seconds|best|peak_gib|stream_gb|lora_merges|lora_factors_gib)=[^ ]+' | tr '\n' ' ')"
    done
    rm -f "$W/lora64.safetensors"
else
    echo "== 50 release blocks: skipped (SKIP_FULL)"
fi
echo "== total $(( $(date +%s) - t0 )) s"
tar -cf "$O/lora_fp32_gguf.tar" -C "$W" . && rm -rf "$W"
echo "RESULT $pass $fail"
