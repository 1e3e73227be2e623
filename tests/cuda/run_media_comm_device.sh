#!/usr/bin/env bash
# The GPU machine has no FFmpeg: this checks the small FFmpeg that tools/build_ffmpeg_min.sh makes and
# tools/dev_stage.sh carries (a MEDIA=1 CUDA build), and the communicator on the machine's GPUs.
#  1. tests/cuda/test_comm_nccl (docs/parallel.md): the NCCL communicator, one thread per GPU.
#  2. bench/bench_mp4 at 960x544x124, sync vs the encoder thread, without and with a 15 ms/frame decoder stand-in
#     (1.9 s of video decode / 124 frames), docs/media.md "Encoding off the critical path".
#  4. the video decoder's --vae-quant fp8 (docs/fast.md): the harness's fp8_matmul rows (the bias epilogue) and
#     h3 bench --what vae at 544x960x124, bf16 then fp8.
#  3. h3 generate on the tiny snapshot on CUDA with -o clip.mp4 (the MP4 mux on the GPU machine; the file comes back
#     under $OUT to be checked with ffprobe here).
# Build here: bash tools/build_ffmpeg_min.sh; make CUDA=1 BUILD=build-cuda-media cuda-tests build-cuda-media/h3
# build-cuda-media/bench/bench_mp4; bash tools/dev_stage.sh build-cuda-media .dev-media; carry .dev-media.
# Usage (device): bash tests/cuda/run_media_comm_device.sh .dev-media
set -u
cd "$(dirname "$0")/../.."
B=${1:-build-cuda-media}
O=${OUT:-media-logs}
mkdir -p "$O"
bash tools/dev_unpack.sh "$B"
export LD_LIBRARY_PATH="$B/lib:$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
timeout 120 "$B/tests/cuda/test_comm_nccl" >"$O/comm.log" 2>&1
echo "== test_comm_nccl: rc $? $(grep -E '^  NCCL|^RESULT' "$O/comm.log" | tr '\n' ' ')"; grep -E 'FAIL|rror' "$O/comm.log" | head -5
if [ -x "$B/bench/bench_mp4" ]; then
    (bm=$(realpath "$B/bench/bench_mp4") && cd "$O" && timeout 60 "$bm" 960 544 124 0 && timeout 60 "$bm" 960 544 124 15) \
        >"$O/mp4.log" 2>&1
    echo "== bench_mp4: rc $?"; cat "$O/mp4.log" | head -8
fi
T=tests/fixtures/tiny
timeout 120 "$B/h3" generate -d $T -p "A red fox runs through snow." --width 64 --height 32 --steps 2 --backend cuda \
    -o "$O/clip.mp4" >"$O/gen.log" 2>&1
echo "== tiny generate -o clip.mp4 on CUDA: rc $? size $(stat -c %s "$O/clip.mp4" 2>/dev/null)"; tail -2 "$O/gen.log"
[ -f "$O/clip.mp4" ] && echo "   first bytes: $(head -c 12 "$O/clip.mp4" | od -An -c | tr -s ' ')"
timeout 120 "$B/tests/test_backend_ops" --backend cuda --op fp8_matmul >"$O/fp8_rows.log" 2>&1
echo "== harness fp8_matmul rows: rc $? $(grep -E '^RESULT' "$O/fp8_rows.log")"; grep -E '^FAIL|FAIL \(|bias.*(ok|FAIL)' "$O/fp8_rows.log" | head -8
for q in none fp8; do
    timeout 150 "$B/h3" bench --backend cuda --what vae --shapes 544x960x124 --vae-repeats 2 --vae-quant $q \
        >"$O/vae_$q.log" 2>&1
    echo "== bench vae --vae-quant $q: rc $?"; grep -E '^VAE|vae profile|^\| 544' "$O/vae_$q.log" | head -6
done
tar -czf "$O/all.tar.gz" -C "$O" --exclude all.tar.gz . 2>/dev/null
