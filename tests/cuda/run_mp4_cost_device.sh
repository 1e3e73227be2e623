#!/usr/bin/env bash
# What the MP4 costs a --preset fast generation on the GPU machine (docs/fast.md 8): a warm session of two 960x544x124
# prompts without MP4, the same to MP4 with OMP_WAIT_POLICY=passive (the decoder's idle OpenMP threads sleep instead
# of spinning against x264's), and bench/bench_mp4 (the encoder alone, in the caller's thread and on its own thread,
# without and with a 12 ms/frame decoder stand-in). Build as for run_media_comm_device.sh (MEDIA=1, .dev-media).
# Usage (device): bash tests/cuda/run_mp4_cost_device.sh [.dev-media]
set -u
cd "$(dirname "$0")/../.."
B=${1:-.dev-media}; bash tools/dev_unpack.sh "$B"; OUT=${OUT:-mp4-logs}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$B/lib:$PWD/$B
P="A red fox runs through fresh snow at dawn, its breath steaming in the cold air, while birds call from the pines."
P2="A surfer rides a glassy wave at sunset while gulls circle overhead and the crowd on the beach cheers."
G=(-d tests/fixtures/skeleton --random-weights --backend cuda --width 960 --height 544 --frames 124 --steps 4 --profile --seed 42 --preset fast)
printf '%s\n%s\n' "$P" "$P2" | timeout 70 $B/h3 generate "${G[@]}" -o '' > $OUT/nomp4.log 2>&1; echo "== no MP4: rc $?"
grep -E "^  (denoise|video VAE decode|mux|total|compute)" $OUT/nomp4.log | tail -5
mkdir -p $OUT/c2; printf '%s\n%s\n%s\n' "!output $OUT/c2" "$P" "$P2" | OMP_WAIT_POLICY=passive timeout 70 $B/h3 generate "${G[@]}" > $OUT/passive.log 2>&1; echo "== MP4, OMP_WAIT_POLICY=passive: rc $?"
grep -E "^  (denoise|video VAE decode|mux|total|compute)" $OUT/passive.log | tail -5
bm=$PWD/$B/bench/bench_mp4; (cd "$OUT" && timeout 40 "$bm" 960 544 124 0; timeout 40 "$bm" 960 544 124 12) 2>&1
rm -rf $OUT/c2
