#!/usr/bin/env bash
# --lora with --ssd-streaming on the GPU (docs/lora.md "--ssd-streaming"): the LoRA factors resident, merged into each
# block's slot as it is filled (h3_lora_merge_into on the copy stream). One device call, ~3-4 minutes. Parts (each
# prints "== ..." lines with its numbers; the last line is RESULT <passed> <failed>):
#   1. the backend-ops harness rows of lora_merge_into: CUDA vs the CPU twin bit for bit (BF16 / F32 / F16, odd
#      shapes, ranks 1 / 16 / 23 / 64, head-interleaved rows, through a slot, a release to_q), and the --perf lines
#      at the release block's shapes (ms, TFLOP/s);
#   2. tests/test_lora --stream-cuda: the tiny snapshot and the FL2VA tree with two LoRAs, --ssd-streaming (map and
#      direct reads) against the resident merged model on CUDA: outputs bit for bit, pieces merged at fill;
#   2b. tests/cuda/test_cuda_lora64 at the release width: rank 64, 3 streamed blocks (slots refilled) vs resident;
#   3. h3 generate --backend cuda on the tiny snapshot: one and two LoRAs, resident vs --ssd-streaming (map, direct):
#      --dump-latents identical (cmp), and the log's fill-time merge line;
#   4. the release width (--random-weights via h3 bench, LAYERS release blocks, default 50, SHAPES default
#      544x960x124) with --ssd-streaming 1, without and with a random rank-64 LoRA (h3 make-lora --random): seconds
#      per forward, peak GPU GiB, stream GB per forward, the LoRA pieces merged per forward and the factors' GiB.
# Build here: make CUDA=1 MEDIA=0 BUILD=build-cuda NVCC_ARCH="-gencode=arch=compute_90a,code=sm_90a" all cuda-tests;
# bash tools/dev_stage.sh build-cuda .dev-main; carry .dev-main.
# Usage (device): bash tests/cuda/run_lora_stream_device.sh .dev-main   (logs packed into $OUT/lora_stream.tar)
set -u
cd "$(dirname "$0")/../.."
B=${1:-.dev-main}
O=${OUT:-/tmp/h3_lora_stream}
W=$(mktemp -d)
mkdir -p "$O"
bash tools/dev_unpack.sh "$B" >/dev/null 2>&1
B=$(cd "$B" && pwd)
export LD_LIBRARY_PATH="$B/lib:$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
pass=0 fail=0
res() { if [ "$1" = 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $2"; fi; }
t0=$(date +%s)

# 1. harness rows
"$B/tests/test_backend_ops" --op lora_merge_into >"$W/harness.log" 2>&1; rc=$?
grep -q '^== backend cuda' "$W/harness.log" || { echo "no CUDA pass ran"; rc=1; }
echo "== harness lora_merge_into (CPU pass, CUDA pass vs the twin, bit for bit): rc $rc $(grep '^RESULT' "$W/harness.log" | tail -1)"
grep -E '^FAIL' "$W/harness.log" | head -10
grep -E '^\[cuda\] .*: (ok|FAIL)' "$W/harness.log" | sed 's/^/   /'
grep -E '^\s*\[cuda\] merged weight' "$W/harness.log" | sed 's/^/   /'
res $rc "harness lora_merge_into"
"$B/tests/test_backend_ops" --perf --backend cuda --op lora_merge_into --reps 20 >"$W/harness_perf.log" 2>&1
echo "== harness --perf lora_merge_into (ms per call; a release block = 3 x to_q + to_out (~to_q) + ffn in + ffn down)"
grep -E 'perf' "$W/harness_perf.log" | sed 's/^/   /'

# 2. the library test on CUDA (both layouts, map and direct reads)
if [ -x "$B/tests/test_lora" ]; then
    "$B/tests/test_lora" --stream-cuda >"$W/test_lora.log" 2>&1; rc=$?
    echo "== test_lora --stream-cuda: rc $rc $(grep '^RESULT' "$W/test_lora.log" | tail -1)"
    grep -E '^  \[cuda\]|^FAIL' "$W/test_lora.log" | head -12
else
    rc=1; echo "== test_lora --stream-cuda: $B/tests/test_lora not staged (tools/dev_stage.sh copies it)"
fi
res $rc "test_lora --stream-cuda"

# 2b. the release width (tests/cuda/test_cuda_lora64, random weights): 1 block merged at load == merged by hand, then
#     3 streamed blocks with a rank-64 LoRA merged at fill == the resident merged model, two forwards
"$B/tests/cuda/test_cuda_lora64" >"$W/test_cuda_lora64.log" 2>&1; rc=$?
echo "== test_cuda_lora64 (release width, rank 64; --ssd-streaming 3 blocks vs resident): rc $rc $(grep '^RESULT' "$W/test_cuda_lora64.log" | tail -1)"
grep -E '^  |^FAIL' "$W/test_cuda_lora64.log" | head -8
res $rc test_cuda_lora64

# 3. h3 generate on the tiny snapshot: resident vs streamed latents
L=tests/fixtures/lora
G=(-d tests/fixtures/tiny -p "A red fox." --width 64 --height 32 --frames 120 --steps 2 --seed 5 -o '' --backend cuda)
for case in one two; do
    LA=(--lora $L/ai_toolkit.safetensors)
    [ $case = two ] && LA=(--lora $L/peft.safetensors:0.5 --lora $L/kohya.safetensors:1.25)
    "$B/h3" generate "${G[@]}" "${LA[@]}" --dump-latents "$W/g_${case}_res.st" >"$W/g_${case}_res.log" 2>&1
    for reads in map direct; do
        H3_STREAM_READ=$reads "$B/h3" generate "${G[@]}" "${LA[@]}" --ssd-streaming --dump-latents "$W/g_${case}_$reads.st" \
            >"$W/g_${case}_$reads.log" 2>&1
        r=1
        [ -s "$W/g_${case}_res.st" ] && cmp -s "$W/g_${case}_res.st" "$W/g_${case}_$reads.st" &&
            grep -q "LoRA pieces merged into the slots as they were filled" "$W/g_${case}_$reads.log" && r=0
        echo "== generate cuda, $case LoRA(s), --ssd-streaming ($reads) vs resident: $([ $r = 0 ] && echo 'identical latents' || echo 'DIFFER or no fill-time merge')"
        grep -hE 'LoRA pieces|block copies|rror' "$W/g_${case}_$reads.log" | sed 's/^/   /' | tail -3
        res $r "generate $case $reads"
    done
done

# 4. the release width: --ssd-streaming with and without a rank-64 LoRA
SH=${SHAPES:-544x960x124} NL=${LAYERS:-50}
mkdir -p "$W/cfg"
sed -E "s/\"num_layers\": *[0-9]+/\"num_layers\": $NL/" tests/fixtures/skeleton/transformer/config.json >"$W/cfg/config.json"
s=$(date +%s)
"$B/h3" make-lora --random --rank 64 --layers $NL "$W/lora64.safetensors" >"$W/make_lora.log" 2>&1; rc=$?
echo "== make-lora --random --rank 64 ($NL release blocks): rc $rc ($(( $(date +%s) - s )) s), $(du -h "$W/lora64.safetensors" 2>/dev/null | cut -f1)"
res $rc "make-lora"
for l in none lora; do
    s=$(date +%s)
    "$B/h3" bench --backend cuda --what dit --shapes "$SH" --repeats 2 --config "$W/cfg" --ssd-streaming 1 \
        $([ $l = lora ] && echo --lora "$W/lora64.safetensors") >"$W/bench_$l.log" 2>&1; rc=$?
    echo "== bench DiT $SH, $NL release blocks, --ssd-streaming 1, ${l/none/no LoRA}: rc $rc ($(( $(date +%s) - s )) s)"
    grep -E '^(DIT|dit:)|rror' "$W/bench_$l.log" | sed 's/^/   /'
    res $rc "bench stream $l"
done
echo "== summary (per forward; peak GiB = the pool's high-water mark):"
for l in none lora; do
    echo "   ${l/none/no LoRA}: $(grep '^DIT' "$W/bench_$l.log" | tail -1 | grep -oE '(seconds|best|peak_gib|stream_gb|stream_gbps|lora_merges|lora_factors_gib)=[^ ]+' | tr '\n' ' ')"
done
rm -f "$W/lora64.safetensors"
echo "== total $(( $(date +%s) - t0 )) s"
tar -cf "$O/lora_stream.tar" -C "$W" . && rm -rf "$W"
echo "RESULT $pass $fail"
