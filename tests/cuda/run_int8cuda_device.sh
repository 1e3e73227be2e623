#!/usr/bin/env bash
# --quant int8 on the GPU machine (docs/int8.md): the CUDA pass of the int8 rows of the backend-ops harness (CUDA
# vs the CPU twin, codes / scales / int32 accumulators / bf16 outputs bit for bit), the tiny t2va with
# --quant int8 CUDA vs CPU (and a converted snapshot vs --quant int8 on its source, on CUDA, bit for bit), h3
# bench's DiT forward at 544x960x124 with --quant int8 beside bf16 and fp8 (best of 3, peak memory, the outputs
# against the bf16 forward on the same random weights), then the per-op rates at the block shapes (--perf).
# Builds nothing: carry a staged build (tools/dev_stage.sh). Each step is capped; the whole stays under 230 s.
# Usage (device): bash tests/cuda/run_int8cuda_device.sh [DIR, default .dev-int8cuda]
set -u
B=${1:-.dev-int8cuda}
bash tools/dev_unpack.sh "$B"
O=${OUT:-/tmp/h3_int8cuda}
mkdir -p "$O"
export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
T0=$(date +%s)
left() { echo $((228 - ($(date +%s) - T0))); }
cap() { local l; l=$(left); [ "$l" -gt "$1" ] && echo "$1" || echo "$l"; } # min(wanted, what is left)
H3=$B/h3 HO=$B/tests/test_backend_ops CMP=$B/tests/cuda/cmp_dumps
W=$(mktemp -d /tmp/h3_int8cuda.XXXXXX)

# 1. harness, the CUDA pass (the CPU pass runs in CI)
for op in int8_quant_rows int8_matmul; do
    timeout "$(cap 50)" stdbuf -oL "$HO" --backend cuda --op $op >"$O/harness_$op.log" 2>&1
    echo "== harness $op (cuda): rc $? $(grep '^RESULT' "$O/harness_$op.log")"
    grep -E 'FAILED|^FAIL' "$O/harness_$op.log" | head -5
done
grep -E '^\[cuda\] int8_matmul .*sm90' "$O/harness_int8_matmul.log" # the own kernel's rows (H3_INT8_GEMM=sm90)

# 2. tiny end to end: t2va --quant int8, CUDA vs CPU; a converted snapshot vs runtime quantization on CUDA
GA=(-d tests/fixtures/tiny -p "A red fox trots across fresh snow at dawn." --seed 20260 --width 64 --height 32
    --frames 124 --steps 4 --precision bf16 -o '')
for be in cpu cuda; do
    timeout "$(cap 40)" "$H3" generate "${GA[@]}" --quant int8 --backend $be --dump-latents "$W/e2e.$be.st" --profile \
        >"$O/e2e_$be.log" 2>&1
    echo "== tiny t2va --quant int8 on $be: rc $? $(grep -E 'DiT on|quant' "$O/e2e_$be.log" | head -2 | tr '\n' ' ')"
done
[ -f "$W/e2e.cpu.st" ] && [ -f "$W/e2e.cuda.st" ] && "$CMP" 1e-1 "$W/e2e.cpu.st" "$W/e2e.cuda.st" "int8 cuda-vs-cpu" |
    tee "$O/e2e_cmp.log" | grep -E 'latents|audio |frames|RESULT'
timeout "$(cap 30)" "$H3" quantize -d tests/fixtures/tiny -o "$W/q" >"$O/quantize.log" 2>&1 || echo "quantize failed: $(tail -1 "$O/quantize.log")"
G=tests/fixtures/golden/dit
for m in "tests/fixtures/tiny --quant int8:rt" "$W/q:cv" "$W/q/FL2VA:cvo"; do
    timeout "$(cap 20)" "$H3" probe dit --model ${m%:*} --in $G/t2va.in.safetensors --out "$W/p.${m##*:}.st" \
        --precision bf16 --backend cuda >"$O/probe_${m##*:}.log" 2>&1 || echo "probe ${m##*:}: $(tail -1 "$O/probe_${m##*:}.log")"
done
cmp -s "$W/p.rt.st" "$W/p.cv.st" && echo "ok   cuda: converted snapshot == --quant int8 on its source (bit for bit)" ||
    echo "FAIL cuda: converted snapshot != --quant int8 on its source"
cmp -s "$W/p.rt.st" "$W/p.cvo.st" && echo "ok   cuda: converted original layout == diffusers layout (bit for bit)" ||
    echo "DIFF cuda: converted original layout != diffusers layout"

# 3. the DiT forward at 544x960x124: int8 (cuBLASLt, then H3_INT8_GEMM=sm90: the own kernel), bf16, fp8 (best of
# 3), int8 with grouped FC2; the per-op rates between
bench() { # tag, args...
    local tag=$1; shift
    timeout "$(cap 75)" "$H3" bench --backend cuda --what dit --repeats 3 --shapes 544x960x124 "$@" >"$O/bench_$tag.log" 2>&1
    echo "== DiT $tag: rc $?"; grep -E '^DIT|quantized|^h3' "$O/bench_$tag.log" | sed 's/ text=.*seconds=/ seconds=/'
}
# 4. per-op rates at the block shapes (M = 19540): int8 GEMM + dequantization, the int32 GEMM alone, the quantizer;
# fp8 and bf16 beside them in the same call
perf() {
    for op in "$@"; do
        [ "$(left)" -gt 8 ] || break
        timeout "$(cap 40)" "$HO" --perf --reps 5 --backend cuda --op $op 2>&1 | grep -E '^\[cuda\] perf' |
            grep -v "M=2122\|M=37966" | tee -a "$O/perf.log"
    done
}
bench int8 --quant int8 --compare-bf16 1
H3_INT8_GEMM=sm90 bench int8sm90 --quant int8 --compare-bf16 1
bench bf16
perf int8_matmul int8_quant_rows
bench fp8 --quant fp8 --compare-bf16 1
bench int8g --quant int8 --int8-fc2-groups 1 --compare-bf16 1
perf fp8_matmul bf16_matmul
rm -rf "$W"
echo "total $(( $(date +%s) - T0 )) s"
