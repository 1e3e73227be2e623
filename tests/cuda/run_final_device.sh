#!/usr/bin/env bash
# One device call with everything issue 7 reports: the CUDA parity suites (every op through test_backend_ops,
# the wgmma attention kernel, the batched video decoder, one
# full-width DiT block, the random tiny forward), h3 bench (DiT and video decode at the three shapes),
# the 4-evaluation t2va pipeline at 544x960x124 on random release-shaped weights (generate
# --random-weights --profile), the tiny end to end (run_e2e_device.sh), and the same-run diffusers
# baseline (tools/reference/cuda_baseline_pipeline.py, diffusers source carried in $REF); also the FP8 ops
# (in test_backend_ops), the DiT with --quant fp8 and the pipeline as an interactive session of two prompts (warm); and
# --ssd-streaming (test_cuda_stream, the DiT bench and the one-shot pipeline with the blocks streamed); and the sustained
# GEMM / attention floor of a forward (bench_cuda_ops sustained).
# Usage (device): bash tests/cuda/run_final_device.sh [build dir, default .dev-main] [diffusers src dir]
set -u
B=${1:-.dev-main}
bash tools/dev_unpack.sh "$B" # tools/dev_stage.sh's bundle
REF=${2:-.dev-ref/src}
O=${OUT:-/tmp/h3_final}
mkdir -p "$O"
export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
T="$O/tests.log"
: >"$T"
for t in test_backend_ops vae_decode_cuda test_cuda_bench test_cuda_upload test_cuda_stream; do
    s=$(date +%s)
    if [ $t = test_backend_ops ]; then "$B/tests/$t" >>"$T" 2>&1; else "$B/tests/cuda/$t" >>"$T" 2>&1; fi
    echo "== $t: rc $? ($(( $(date +%s) - s )) s) $(grep '^RESULT' "$T" | tail -1)"
done
s=$(date +%s); "$B/tests/cuda/test_flash_sm90" quick >>"$T" 2>&1; echo "== test_flash_sm90 quick: rc $? ($(( $(date +%s) - s )) s) $(grep '^RESULT' "$T" | tail -1)"
s=$(date +%s); "$B/tests/cuda/dit_block_cuda" parity 300 >>"$T" 2>&1; echo "== dit_block parity: rc $? ($(( $(date +%s) - s )) s) $(grep '^RESULT' "$T" | tail -1)"
grep -E '^FAIL|cuda backend' "$T" | head -20

"$B/h3" bench --backend cuda --what dit --repeats 2 >"$O/bench.log" 2>&1
"$B/h3" bench --backend cuda --what vae --precision bf16 --vae-repeats 2 >>"$O/bench.log" 2>&1
grep -E '^(DIT|VAE) ' "$O/bench.log"
H3_CUDA_OPTIME=1 "$B/h3" bench --backend cuda --what dit --repeats 3 --shapes 544x960x124 >"$O/optime.log" 2>&1
echo "== per-op device time, 544x960x124, 4 forwards (1 warm-up + 3 timed):"; grep -E 'calls|op time' "$O/optime.log"
# the floor of a forward built from its two heavy kernels: one forward's GEMMs (cuBLASLt) alone, its attentions alone,
# and both interleaved, each back to back, with the SM clock and power sampled every 200 ms
nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader,nounits -lms 200 >"$O/smi.log" 2>&1 &
SMI=$!
"$B/tests/cuda/bench_cuda_ops" sustained 19540 >"$O/sustained.log" 2>&1
kill $SMI 2>/dev/null
echo "== sustained kernels, 544x960x124 (S = 19540):"; grep -E 'pass| 3 |floor' "$O/sustained.log"
awk -F', ' '{c+=$1; p+=$2; n++} END {if (n) printf "   nvidia-smi: %d samples, mean SM clock %.0f MHz, mean power %.0f W\n", n, c/n, p/n}' "$O/smi.log"

"$B/h3" bench --backend cuda --what dit --repeats 2 --quant fp8 >"$O/bench_fp8.log" 2>&1
echo "== DiT with --quant fp8 (FP8 W8A8 block linears, docs/fp8.md):"; grep -E '^DIT' "$O/bench_fp8.log"

"$B/h3" bench --backend cuda --what dit --repeats 2 --ssd-streaming 1 >"$O/bench_stream.log" 2>&1
echo "== DiT with --ssd-streaming (the blocks' linears from host memory through two slots, docs/model/features.md 7.3):"
grep -E '^DIT' "$O/bench_stream.log"

P="A red fox runs through fresh snow at dawn, its breath steaming in the cold air, while birds call from the pines."
"$B/h3" generate -d tests/fixtures/skeleton --random-weights --backend cuda -p "$P" -o '' --width 960 --height 544 \
    --frames 124 --steps 4 --profile >"$O/pipeline.log" 2>&1
echo "== generate --random-weights 960x544x124, 4 evaluations: rc $?"
sed -n '/^profile:/,$p' "$O/pipeline.log"
grep -E '^h3:' "$O/pipeline.log" | head -12
"$B/h3" generate -d tests/fixtures/skeleton --random-weights --backend cuda -p "$P" -o '' --width 960 --height 544 \
    --frames 124 --steps 4 --profile --ssd-streaming >"$O/pipeline_stream.log" 2>&1
echo "== the same with --ssd-streaming: rc $?"
sed -n '/^profile:/,$p' "$O/pipeline_stream.log"

# the same 4-evaluation t2va in an interactive session (docs/session.md), two prompts: the second generation runs in a
# warm process (CUDA context, cuBLASLt/cuDNN plans, pinned buffers kept), the "weights resident" case; bf16, then fp8
P2="A surfer rides a glassy wave at sunset while gulls circle overhead and the crowd on the beach cheers."
for q in none fp8; do
    printf '%s\n%s\n' "$P" "$P2" | "$B/h3" generate -d tests/fixtures/skeleton --random-weights --backend cuda -o '' \
        --width 960 --height 544 --frames 124 --steps 4 --profile --seed 42 --quant $q >"$O/session_$q.log" 2>&1
    echo "== session, 2 prompts, --quant $q: rc $?"
    grep -E '^  (text encoder|denoise|audio VAE decode|video VAE decode|compute)|^video-000' "$O/session_$q.log"
done

OUT="$O/e2e" bash tests/cuda/run_e2e_device.sh "$B" >"$O/e2e_run.log" 2>&1
echo "== tiny end to end: $(grep RESULT "$O/e2e_run.log" | tail -1)"; grep FAIL "$O/e2e_run.log" | head

if [ -d "$REF/diffusers" ]; then
    PYTHONUNBUFFERED=1 timeout 240 python3 tools/reference/cuda_baseline_pipeline.py "$REF" tests/fixtures/skeleton \
        544x960x124 >"$O/baseline.log" 2>&1
    echo "== diffusers baseline: rc $?"; grep -E 'BASELINE|^#|Error' "$O/baseline.log" | tail -8
fi
