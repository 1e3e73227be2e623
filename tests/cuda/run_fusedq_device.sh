#!/usr/bin/env bash
# Fused activation quantization on the GPU machine (docs/fast.md "Fused quantization"), in one call:
#  1. the backend-ops harness rows of the four fused ops on CUDA (fused = its two ops bit for bit on both sides, and
#     against the CPU twin), the producers' own rows (their kernels gained the fused variant), then the same rows
#     in --perf mode at the release shapes (the fused op, the producer alone and the quantizer alone, ms each)
#  2. tests/cli/fusedq.sh with --backend cuda: the tiny DiT (int8, int8 + sage8, both layouts, an mlp-profile int8
#     snapshot; fp8 / fp8 + sage8 / --preset fast / int8 through h3 generate) and the fp8 video decoder, fused vs
#     H3_FUSED_QUANT=0 bit for bit
#  3. h3 bench at 544x960x124 (random release-size weights, one process per mode, best of 2): DiT bf16, --quant fp8,
#     --quant int8, fp8 + sage8, int8 + sage8 (each with --compare-bf16 1: the distance from the bf16 forward), then
#     the video decoder bf16 and --vae-quant fp8
#  4. H3_CUDA_OPTIME=1 per-op table of the `--preset fast` DiT (--quant fp8 --attention sage8; h3 bench has no
#     --preset flag), every timed op with its total
#  5. the same quant modes with H3_FUSED_QUANT=0 (the separate quantization passes) for the before/after in this call
# Session 11's numbers before the fusion (H200): DiT bf16 2.054 s, fp8 1.640, int8 1.665, fp8+sage8 1.462,
# int8+sage8 1.494; VAE bf16 1.895 s, fp8 1.501 s.
# Builds nothing: stage a CUDA build (make CUDA=1 MEDIA=0 BUILD=build-cuda-nomedia cuda-tests
# build-cuda-nomedia/h3 build-cuda-nomedia/tests/test_backend_ops; bash tools/dev_stage.sh build-cuda-nomedia .dev-fq)
# and carry it. Logs go to $OUT/all.tar.gz (one archive); stdout is the summary, ending in RESULT <passed> <failed>
# (the harness rows, the tiny bit-identity checks and part 5's fused = unfused distances; the timings are reported,
# not asserted).
# Usage (device): bash tests/cuda/run_fusedq_device.sh [DIR, default .dev-fq] [parts, default 12345]
set -u
cd "$(dirname "$0")/../.."
B=${1:-.dev-fq}
PARTS=${2:-12345}
bash tools/dev_unpack.sh "$B"
B=$(cd "$B" && pwd)
O=${OUT:-/tmp/h3_fusedq}
L=$O/fusedq
mkdir -p "$L"
export LD_LIBRARY_PATH="$B/lib:$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
pack() { tar -czf "$O/all.tar.gz" -C "$O" fusedq; }
P=0; F=0
count() { # log: adds its RESULT line
    local r; r=$(grep -E '^RESULT' "$1" | tail -1)
    [ -n "$r" ] || { F=$((F + 1)); echo "  (no RESULT line in $(basename "$1"))"; return; }
    P=$((P + $(echo "$r" | awk '{print $2}'))); F=$((F + $(echo "$r" | awk '{print $3}')))
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1
FQ_OPS="bf16_rmsnorm_modulate_q bf16_gated_residual_rmsnorm_modulate_q bf16_swiglu_q vae_residual_rmsnorm_q"
if [[ $PARTS == *1* ]]; then
    for op in $FQ_OPS bf16_rmsnorm_modulate bf16_residual_norm bf16_swiglu fp8_quant_rows int8_quant_rows; do
        timeout 60 "$B/tests/test_backend_ops" --backend cuda --op $op >"$L/harness_$op.log" 2>&1
        echo "== harness $op (CUDA): rc $? $(grep -E '^RESULT' "$L/harness_$op.log" | tail -1)"
        grep -E '^FAIL|: FAIL' "$L/harness_$op.log" | head -5
        count "$L/harness_$op.log"
    done
    grep -h "fused vs the two ops" "$L"/harness_*_q.log | grep -v " 0 of " | head -5
    grep -h "fused vs the two ops" "$L"/harness_*_q.log | awk '{n++} END {print "  fused-vs-composition checks printed:", n + 0}'
    for op in $FQ_OPS; do
        timeout 60 "$B/tests/test_backend_ops" --backend cuda --perf --op $op >"$L/perf_$op.log" 2>&1
        echo "== perf $op: rc $?"; grep -E 'perf' "$L/perf_$op.log" | sed 's/^\[cuda\] perf //'
    done
    pack
fi
if [[ $PARTS == *2* ]]; then
    H3="$B/h3" H3_ARGS="--backend cuda" timeout 150 bash tests/cli/fusedq.sh >"$L/tiny.log" 2>&1
    echo "== tiny fused vs H3_FUSED_QUANT=0 on CUDA (tests/cli/fusedq.sh): rc $? $(grep RESULT "$L/tiny.log")"
    grep FAIL "$L/tiny.log" | head -5
    count "$L/tiny.log"
    pack
fi
D=(bench --backend cuda --what dit --shapes 544x960x124 --repeats 2)
VB=(bench --backend cuda --what vae --shapes 544x960x124 --vae-repeats 2)
dit() { # tag, env..., -- , mode args
    local tag=$1; shift
    local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
    local cmp=(); [ $# -gt 0 ] && cmp=(--compare-bf16 1)
    env "${envs[@]}" timeout 100 "$B/h3" "${D[@]}" "$@" "${cmp[@]}" >"$L/dit_$tag.log" 2>&1
    local rc=$?
    echo "== DiT $tag ($*): rc $rc"; grep -E '^DIT' "$L/dit_$tag.log" | head -2
    [ $rc -eq 0 ] || tail -3 "$L/dit_$tag.log"
    pack
}
vae() { # tag, env..., --, args
    local tag=$1; shift
    local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
    env "${envs[@]}" timeout 100 "$B/h3" "${VB[@]}" "$@" >"$L/vae_$tag.log" 2>&1
    local rc=$?
    echo "== VAE $tag ($*): rc $rc"; grep -E '^VAE' "$L/vae_$tag.log" | head -3
    [ $rc -eq 0 ] || tail -3 "$L/vae_$tag.log"
    pack
}
if [[ $PARTS == *3* ]]; then
    dit bf16 H3_FUSED_QUANT=1 --
    dit fp8 H3_FUSED_QUANT=1 -- --quant fp8
    dit int8 H3_FUSED_QUANT=1 -- --quant int8
    dit fp8_sage8 H3_FUSED_QUANT=1 -- --quant fp8 --attention sage8
    dit int8_sage8 H3_FUSED_QUANT=1 -- --quant int8 --attention sage8
    vae bf16 H3_FUSED_QUANT=1 -- --vae-quant none
    vae fp8 H3_FUSED_QUANT=1 -- --vae-quant fp8
fi
if [[ $PARTS == *4* ]]; then
    H3_CUDA_OPTIME=1 timeout 100 "$B/h3" "${D[@]}" --quant fp8 --attention sage8 >"$L/optime_fast.log" 2>&1
    echo "== H3_CUDA_OPTIME=1, DiT --quant fp8 --attention sage8 (= --preset fast's DiT), 2 forwards + warm-up: rc $?"
    grep -E '^DIT' "$L/optime_fast.log" | head -2
    # the table (op, calls, total ms, share), largest first
    grep -E '^h3: cuda op time' "$L/optime_fast.log" | tail -1
    awk '/^h3: cuda op time/ {t = 1; n = 0; delete rows; next} t && /^  / {rows[n++] = $0} END {for (i = 0; i < n; i++) print rows[i]}' \
        "$L/optime_fast.log" | sort -k4 -g -r | head -40
    H3_CUDA_OPTIME=1 timeout 100 "$B/h3" "${VB[@]}" --vae-quant fp8 >"$L/optime_vae_fp8.log" 2>&1
    echo "== H3_CUDA_OPTIME=1, VAE --vae-quant fp8: rc $? (the bf16 / fp8 / fused / vae ops; h3_matmul, layernorm untimed)"
    grep -E '^VAE' "$L/optime_vae_fp8.log" | head -2
    awk '/^h3: cuda op time/ {t = 1; n = 0; delete rows; next} t && /^  / {rows[n++] = $0} END {for (i = 0; i < n; i++) print rows[i]}' \
        "$L/optime_vae_fp8.log" | sort -k4 -g -r | head -15
    pack
fi
if [[ $PARTS == *5* ]]; then
    dit fp8_sage8_unfused H3_FUSED_QUANT=0 -- --quant fp8 --attention sage8
    vae fp8_unfused H3_FUSED_QUANT=0 -- --vae-quant fp8
    dit int8_unfused H3_FUSED_QUANT=0 -- --quant int8
    dit fp8_unfused H3_FUSED_QUANT=0 -- --quant fp8
    # the same weights and inputs (seeded): fused and unfused forwards print the same distances from bf16
    for m in fp8_sage8 int8 fp8; do
        a=$(grep -o 'vs_bf16[^ ]*' "$L/dit_$m.log" 2>/dev/null | tr '\n' ' ')
        b=$(grep -o 'vs_bf16[^ ]*' "$L/dit_${m}_unfused.log" 2>/dev/null | tr '\n' ' ')
        if [ -n "$a" ] && [ "$a" = "$b" ]; then P=$((P + 1)); echo "  $m: fused = unfused distances from bf16 ($a)"
        else F=$((F + 1)); echo "  $m: fused and unfused distances DIFFER: '$a' vs '$b'"; fi
    done
fi
pack
echo "RESULT $P $F"
