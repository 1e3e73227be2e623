#!/usr/bin/env bash
# --ssd-streaming on the GPU (docs/model/features.md 7.3), one device call: the parity test (test_cuda_stream: weight slots, streamed
# = resident bit for bit), the tiny snapshot through h3 generate --backend cuda (streamed latents = resident), h3 bench
# of the DiT resident and streamed at the three shapes (SHAPES=... to pick; the same run: ratios and peak memory), and
# the 4-evaluation t2va at 544x960x124 with --ssd-streaming (one-shot, --profile: peak memory; SKIP_PIPELINE=1 skips it).
# Usage (device): bash tests/cuda/run_stream_device.sh [build dir, default .dev-main]
set -u
B=${1:-.dev-main}
bash tools/dev_unpack.sh "$B"
O=${OUT:-/tmp/h3_stream}
mkdir -p "$O"
export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
nproc; free -g | head -2
s=$(date +%s); "$B/tests/cuda/test_cuda_stream" >"$O/test_stream.log" 2>&1
echo "== test_cuda_stream: rc $? ($(( $(date +%s) - s )) s) $(grep '^RESULT' "$O/test_stream.log" | tail -1)"
grep -E '^  |^FAIL' "$O/test_stream.log" | head -30
# h3 generate on the tiny snapshot with the CUDA backend: the latents with --ssd-streaming are the resident run's bytes
for prec in bf16 fp32; do
    for st in "" --ssd-streaming; do
        "$B/h3" generate -d tests/fixtures/tiny --backend cuda -p "A fox." -o '' --dump-latents "$O/tiny_$prec$st.st" \
            --steps 3 --width 64 --height 32 --precision $prec $st >"$O/tiny.log" 2>&1 || { echo "FAIL tiny $prec $st"; tail -2 "$O/tiny.log"; }
    done
    if cmp -s "$O/tiny_$prec.st" "$O/tiny_$prec--ssd-streaming.st"; then echo "== tiny generate --backend cuda $prec: streamed = resident (bytes)"
    else echo "FAIL tiny generate --backend cuda $prec: the streamed latents differ"; fi
done
grep -E "ssd-streaming" "$O/tiny.log"
for st in 0 1; do
    "$B/h3" bench --backend cuda --what dit --repeats 2 --ssd-streaming $st ${SHAPES:+--shapes $SHAPES} >"$O/bench_$st.log" 2>&1
    echo "== bench DiT --ssd-streaming $st: rc $?"; grep -E '^(DIT|dit:)|rror' "$O/bench_$st.log"
done
if [ -z "${SKIP_PIPELINE:-}" ]; then
    P="A red fox runs through fresh snow at dawn, its breath steaming in the cold air, while birds call from the pines."
    "$B/h3" generate -d tests/fixtures/skeleton --random-weights --backend cuda -p "$P" -o '' --width 960 --height 544 \
        --frames 124 --steps 4 --profile --ssd-streaming >"$O/pipeline_stream.log" 2>&1
    echo "== generate --random-weights 960x544x124, 4 evaluations, --ssd-streaming: rc $?"
    sed -n '/^profile:/,$p' "$O/pipeline_stream.log"; grep -E "ssd-streaming" "$O/pipeline_stream.log"
fi
