#!/usr/bin/env bash
# A GGUF transformer kept quantized on the GPU (docs/checkpoints.md "Quantized on the GPU"), one device call, under
# ~5 minutes. Parts (each prints one "== ..." line with its numbers; the last line is RESULT <passed> <failed>):
#   1. the backend-ops harness rows of h3_gguf_dequant / h3_gguf_fill_random: CUDA vs the CPU twin bit for bit
#      (every type, random bytes and random blocks, the release ffn-up size), and their --perf lines (GB/s);
#   2. tests/cuda/test_cuda_gguf: the tiny GGUF kept quantized (blocks expanded per block on the copy stream) gives
#      the dequantize-at-load bytes on CUDA (bf16, fp32), the random GGUF models against the CPU's;
#   3. h3 probe dit --backend cuda --transformer tiny_transformer.gguf: H3_GGUF_RESIDENT=auto (kept quantized) vs off
#      (dequantized at load), bytes, fp32 and bf16;
#   4. h3 bench --backend cuda --what dit at 544x960x124 (SHAPES=... to change): bf16 weights, --gguf-type Q8_0,
#      --gguf-type Q4_K: time per forward, peak GPU memory (the pool's high-water mark: weights + slots +
#      activations), the weight bytes, the bytes expanded per forward;
#   5. the rank-64 random LoRA (h3 make-lora --random): tests/cuda/test_cuda_lora64 (release width, 1 block: merged
#      at load == merged by hand with the test's own arithmetic, bit for bit, and the merge's seconds), the release
#      file's make time and size, and h3 bench on LORA_LAYERS (8) release blocks without / with it: the build time,
#      the merge's share, time per forward (SKIP_LORA=1 skips).
# Build here: make CUDA=1 MEDIA=0 BUILD=build-cuda NVCC_ARCH="-gencode=arch=compute_90a,code=sm_90a" cuda-tests
# build-cuda/h3; bash tools/dev_stage.sh build-cuda .dev-main; carry .dev-main.
# Usage (device): bash tests/cuda/run_gguf_lora_device.sh .dev-main   (outputs packed into $OUT/gguf_lora.tar)
set -u
cd "$(dirname "$0")/../.."
B=${1:-.dev-main}
O=${OUT:-/tmp/h3_gguf_lora}
W=$(mktemp -d)
mkdir -p "$O"
bash tools/dev_unpack.sh "$B"
B=$(cd "$B" && pwd)
export LD_LIBRARY_PATH="$B/lib:$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
pass=0 fail=0
res() { if [ "$1" = 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $2"; fi; }
t0=$(date +%s)

# 1. harness rows
"$B/tests/test_backend_ops" --op gguf_dequant >"$W/harness.log" 2>&1; rc=$?
echo "== harness gguf_dequant (CPU pass, CUDA pass vs the twin, bit for bit): rc $rc $(grep '^RESULT' "$W/harness.log" | tail -1)"
grep -q '^== backend cuda' "$W/harness.log" || { echo "no CUDA pass ran"; rc=1; }
grep -E '^FAIL' "$W/harness.log" | head -10
grep -E '^\[cuda\] .*: (ok|FAIL) \(' "$W/harness.log" | sed 's/^/   /'
grep -E 'cuda.*release ffn up' -A3 "$W/harness.log" | grep -E 'differ' | sed 's/^/   /' | head -4
res $rc "harness gguf_dequant"
"$B/tests/test_backend_ops" --perf --backend cuda --op gguf_dequant --reps 20 >"$W/harness_perf.log" 2>&1
echo "== harness --perf gguf_dequant (fill, dequant: ms, GB/s of blocks read + bf16 written)"
grep -E 'perf' "$W/harness_perf.log" | sed 's/^/   /'

# 2. the library test on CUDA
"$B/tests/cuda/test_cuda_gguf" >"$W/test_cuda_gguf.log" 2>&1; rc=$?
echo "== test_cuda_gguf: rc $rc $(grep '^RESULT' "$W/test_cuda_gguf.log" | tail -1)"
grep -E '^  |^FAIL' "$W/test_cuda_gguf.log" | head -20
res $rc test_cuda_gguf

# 3. h3 probe dit on the tiny GGUF: kept quantized vs dequantized at load
IN=tests/fixtures/golden/dit/t2va.in.safetensors GG=tests/fixtures/single_file/tiny_transformer.gguf
for prec in fp32 bf16; do
    P=(probe dit --model tests/fixtures/tiny --in $IN --backend cuda --precision $prec --transformer $GG)
    "$B/h3" "${P[@]}" --out "$W/gq_$prec.st" 2>>"$W/probe.log"
    H3_GGUF_RESIDENT=off "$B/h3" "${P[@]}" --out "$W/gd_$prec.st" 2>>"$W/probe.log"
    if [ -s "$W/gq_$prec.st" ] && cmp -s "$W/gq_$prec.st" "$W/gd_$prec.st"; then r=0; else r=1; fi
    echo "== probe dit --backend cuda $prec: GGUF kept quantized vs dequantized at load: $([ $r = 0 ] && echo identical bytes || echo DIFFER)"
    res $r "probe dit GGUF $prec"
done
tail -2 "$W/probe.log"

# 4. the release shape: bf16 weights vs random GGUF Q8_0 / Q4_K blocks
SH=${SHAPES:-544x960x124}
for g in none Q8_0 Q4_K; do
    s=$(date +%s)
    "$B/h3" bench --backend cuda --what dit --shapes "$SH" --repeats 2 --gguf-type $g >"$W/bench_$g.log" 2>&1; rc=$?
    echo "== bench DiT $SH --gguf-type $g: rc $rc ($(( $(date +%s) - s )) s)"
    grep -E '^(DIT|dit:)|rror' "$W/bench_$g.log" | sed 's/^/   /'
    res $rc "bench --gguf-type $g"
done
echo "== summary (seconds per forward, peak GiB):"
for g in none Q8_0 Q4_K; do
    l=$(grep '^DIT' "$W/bench_$g.log" | tail -1)
    w=$(grep -o 'random weights [0-9.e+]* GB' "$W/bench_$g.log" | head -1)
    echo "   $g: $(echo "$l" | grep -oE 'seconds=[^ ]+|peak_gib=[^ ]+|stream_gb=[^ ]+' | tr '\n' ' ')($w)"
done

# 5. the rank-64 LoRA at the release shape (SKIP_LORA=1 skips)
if [ -z "${SKIP_LORA:-}" ]; then
    "$B/tests/cuda/test_cuda_lora64" >"$W/test_cuda_lora64.log" 2>&1; rc=$?
    echo "== test_cuda_lora64 (release width, 1 block, rank 64: merged at load vs merged by hand): rc $rc $(grep '^RESULT' "$W/test_cuda_lora64.log" | tail -1)"
    grep -E '^  |^FAIL' "$W/test_cuda_lora64.log" | head -8
    res $rc test_cuda_lora64
    "$B/h3" make-lora --random --rank 64 "$W/lora64_r.safetensors" >"$W/make_lora.log" 2>&1; rc=$?
    echo "== make-lora --random --rank 64 (release, 50 blocks): rc $rc: $(tail -1 "$W/make_lora.log"); $(du -h "$W/lora64_r.safetensors" 2>/dev/null | cut -f1)"
    res $rc "make-lora release"
    NL=${LORA_LAYERS:-8}
    mkdir -p "$W/cfg$NL"
    sed -E "s/\"num_layers\": *[0-9]+/\"num_layers\": $NL/" tests/fixtures/skeleton/transformer/config.json >"$W/cfg$NL/config.json"
    "$B/h3" make-lora --random --rank 64 --layers $NL "$W/lora64_$NL.safetensors" >/dev/null 2>&1
    for l in none lora; do
        "$B/h3" bench --backend cuda --what dit --shapes "$SH" --repeats 2 --config "$W/cfg$NL" \
            $([ $l = lora ] && echo --lora "$W/lora64_$NL.safetensors") >"$W/bench_${NL}_$l.log" 2>&1; rc=$?
        echo "== bench DiT $SH, $NL release blocks, ${l/none/no LoRA}: rc $rc"
        grep -E '^(DIT|dit:)|rror' "$W/bench_${NL}_$l.log" | sed 's/^/   /'
        res $rc "bench $NL blocks $l"
    done
    rm -f "$W"/lora64_*.safetensors
else
    echo "== rank-64 LoRA: skipped (SKIP_LORA)"
fi

echo "== total $(( $(date +%s) - t0 )) s"
tar -cf "$O/gguf_lora.tar" -C "$W" . && rm -rf "$W"
echo "RESULT $pass $fail"
