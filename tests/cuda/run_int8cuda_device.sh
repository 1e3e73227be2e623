#!/usr/bin/env bash
# --quant int8 on the GPU machine (docs/int8.md). Sections (SECTIONS: which and in what order; default all, as listed):
#   harness  the CUDA pass of the int8 rows of the backend-ops harness: CUDA vs the CPU twin, codes / scales /
#            int32 accumulators / bf16 outputs bit for bit, the [sm90] rows with H3_INT8_GEMM=sm90;
#   e2e      the tiny t2va with --quant int8, CUDA vs CPU (E2E_BACKENDS=" " skips it); on CUDA a converted snapshot
#            (h3 quantize) vs --quant int8 on its source, and the original layout vs the diffusers one, bit for bit;
#   bench    h3 bench's DiT forward at 544x960x124 (best of 3, peak memory; the outputs against the bf16 forward on the
#            same random weights), for each of BENCHES (default: int8 int8sm90 bf16 fp8 int8g);
#   perf     the per-op rates at the block shapes, M = 19540 (PERF_OPS, default int8_matmul int8_quant_rows
#            fp8_matmul bf16_matmul);
#   passes   the 4-evaluation t2va at 960x544x124 on random weights (h3 generate --random-weights), for each of
#            PASSES (default none int8 fp8 int8g), the final latents / frames / audio of each against --quant none.
# Builds nothing: carry a staged build (tools/dev_stage.sh). Every step is capped, the whole stays under 228 s.
# Logs: one archive $OUT/all.tar.gz (a device run brings back few files); the summary on stdout.
# Usage (device): [SECTIONS="harness bench"] bash tests/cuda/run_int8cuda_device.sh [DIR, default .dev-int8cuda]
set -u
B=${1:-.dev-int8cuda}
bash tools/dev_unpack.sh "$B"
export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
SECTIONS=${SECTIONS:-harness e2e bench perf passes}
BENCHES=${BENCHES:-int8 int8sm90 bf16 fp8 int8g}
PERF_OPS=${PERF_OPS:-int8_matmul int8_quant_rows fp8_matmul bf16_matmul}
PASSES=${PASSES:-none int8 fp8 int8g}
T0=$(date +%s)
left() { echo $((228 - ($(date +%s) - T0))); }
cap() { local l; l=$(left); [ "$l" -gt "$1" ] && echo "$1" || echo "$l"; } # min(wanted, what is left)
H3=$B/h3 HO=$B/tests/test_backend_ops CMP=$B/tests/cuda/cmp_dumps
W=$(mktemp -d /tmp/h3_int8cuda.XXXXXX)
O=$W/logs
mkdir -p "$O" "${OUT:-/tmp/h3_int8cuda}"
pack() { tar -czf "${OUT:-/tmp/h3_int8cuda}/all.tar.gz" -C "$W" logs 2>/dev/null; rm -rf "$W"; }
trap pack EXIT

s_harness() {
    for op in int8_quant_rows int8_matmul; do
        timeout "$(cap 60)" stdbuf -oL "$HO" --backend cuda --op $op >"$O/harness_$op.log" 2>&1
        echo "== harness $op (cuda): rc $? $(grep '^RESULT' "$O/harness_$op.log")"
        grep -E 'FAILED|^FAIL' "$O/harness_$op.log" | head -5
    done
    grep -E '^\[cuda\] int8_matmul .*sm90' "$O/harness_int8_matmul.log" # the own kernel's rows (H3_INT8_GEMM=sm90)
}

s_e2e() {
    GA=(-d tests/fixtures/tiny -p "A red fox trots across fresh snow at dawn." --seed 20260 --width 64 --height 32
        --frames 124 --steps 4 --precision bf16 -o '')
    for be in ${E2E_BACKENDS:-cpu cuda}; do
        timeout "$(cap 40)" "$H3" generate "${GA[@]}" --quant int8 --backend $be --dump-latents "$W/e2e.$be.st" --profile \
            >"$O/e2e_$be.log" 2>&1
        echo "== tiny t2va --quant int8 on $be: rc $? $(grep -E 'DiT on|int8 W8A8' "$O/e2e_$be.log" | tr '\n' ' ')"
    done
    [ -f "$W/e2e.cpu.st" ] && [ -f "$W/e2e.cuda.st" ] && "$CMP" 1e-1 "$W/e2e.cpu.st" "$W/e2e.cuda.st" "int8 cuda-vs-cpu" |
        tee "$O/e2e_cmp.log" | grep -E 'latents|audio |frames|RESULT'
    timeout "$(cap 30)" "$H3" quantize -d tests/fixtures/tiny -o "$W/q" >"$O/quantize.log" 2>&1 ||
        echo "quantize failed: $(tail -1 "$O/quantize.log")"
    G=tests/fixtures/golden/dit
    for m in "tests/fixtures/tiny --quant int8:rt" "$W/q:cv" "$W/q/FL2VA:cvo"; do
        timeout "$(cap 20)" "$H3" probe dit --model ${m%:*} --in $G/t2va.in.safetensors --out "$W/p.${m##*:}.st" \
            --precision bf16 --backend cuda >"$O/probe_${m##*:}.log" 2>&1 || echo "probe ${m##*:}: $(tail -1 "$O/probe_${m##*:}.log")"
    done
    cmp -s "$W/p.rt.st" "$W/p.cv.st" && echo "ok   cuda: converted snapshot == --quant int8 on its source (bit for bit)" ||
        echo "FAIL cuda: converted snapshot != --quant int8 on its source"
    cmp -s "$W/p.rt.st" "$W/p.cvo.st" && echo "ok   cuda: converted original layout == diffusers layout (bit for bit)" ||
        echo "DIFF cuda: converted original layout != diffusers layout"
}

s_bench() {
    for tag in $BENCHES; do
        case $tag in
            int8) args=(--quant int8 --compare-bf16 1) ;;
            int8sm90) args=(--quant int8 --compare-bf16 1) ;;
            int8g) args=(--quant int8 --int8-fc2-groups 1 --compare-bf16 1) ;;
            fp8) args=(--quant fp8 --compare-bf16 1) ;;
            *) args=() ;;
        esac
        gemm=lt; [ $tag = int8sm90 ] && gemm=sm90
        H3_INT8_GEMM=$gemm timeout "$(cap 75)" "$H3" bench --backend cuda --what dit --repeats 3 --shapes 544x960x124 "${args[@]}" \
            >"$O/bench_$tag.log" 2>&1
        echo "== DiT $tag: rc $? $(grep -E '^DIT' "$O/bench_$tag.log" | sed 's/ text=.*seconds=/ seconds=/')"
        grep -E '^h3' "$O/bench_$tag.log" | head -3
    done
}

s_perf() {
    for op in $PERF_OPS; do
        [ "$(left)" -gt 8 ] || break
        timeout "$(cap 45)" "$HO" --perf --reps 5 --backend cuda --op $op 2>&1 | grep -E '^\[cuda\] perf' |
            grep -v "M=2122\|M=37966" | tee -a "$O/perf.log"
    done
}

s_passes() {
    P="A red fox runs through fresh snow at dawn, its breath steaming in the cold air, while birds call from the pines."
    for q in $PASSES; do
        [ "$(left)" -gt 15 ] || break
        args=(--quant $q); [ $q = int8g ] && args=(--quant int8 --int8-fc2-groups)
        timeout "$(cap 45)" "$H3" generate -d tests/fixtures/skeleton --random-weights --backend cuda -p "$P" -o '' \
            --width 960 --height 544 --frames 124 --steps 4 --seed 42 --profile "${args[@]}" --dump-latents "$W/pass_$q.st" \
            >"$O/pass_$q.log" 2>&1
        echo "== 4-evaluation t2va 960x544x124 --quant $q: rc $? $(grep -E '^  (denoise|compute)' "$O/pass_$q.log" | tr -s ' ' | tr '\n' ' ')"
        [ $q != none ] && [ -f "$W/pass_none.st" ] && [ -f "$W/pass_$q.st" ] &&
            "$CMP" 10 "$W/pass_none.st" "$W/pass_$q.st" "$q vs none" | tee "$O/pass_cmp_$q.log" | grep -E 'latents|audio |frames'
    done
}

for sec in $SECTIONS; do s_$sec; done
echo "total $(( $(date +%s) - T0 )) s"
