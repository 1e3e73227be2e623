#!/usr/bin/env bash
# The tile-batched bf16 video decoder on the GPU machine: parity (tests/cuda/vae_decode_cuda), then
# `h3 bench --what vae` with the per-tile path (vae_batch 1) and the batched one (vae_batch 0) in one run,
# a per-op profile (H3_VAE_PROFILE=1) and a batch-size sweep at 544x960x124. Builds nothing: stage a CUDA build
# with tools/dev_stage.sh (layout DIR/h3, DIR/tests/cuda/*, DIR/lib) and carry DIR. Logs under $OUT.
# Usage (repository root on the device): bash tests/cuda/run_vae_device.sh [DIR, default .dev-main]
set -u
cd "$(dirname "$0")/../.."
D=${1:-.dev-main}
bash tools/dev_unpack.sh "$D" # tools/dev_stage.sh's bundle
export LD_LIBRARY_PATH="$PWD/$D/lib:${LD_LIBRARY_PATH:-}"
out=${OUT:-vae-logs}
mkdir -p "$out"
cfg=tests/fixtures/skeleton/vae
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1 | tee "$out/gpu.txt"
rc=0
echo "== vae_decode_cuda"
timeout 150 "$D/tests/cuda/vae_decode_cuda" >"$out/vae_decode_cuda.log" 2>&1 || rc=1
grep -E 'rel_l2|RESULT|FAIL|h3:' "$out/vae_decode_cuda.log"
echo "== bench: per-tile path (vae_batch=1) vs batched (vae_batch=0)"
timeout 120 "$D/h3" bench --backend cuda --what vae --precision bf16 --vae-batch 1,0 --vae-config $cfg \
    >"$out/bench.log" 2>&1 || rc=1
cat "$out/bench.log"
echo "== profile at 544x960x124 (synced per op kind: a diagnostic, slower than the bench)"
H3_VAE_PROFILE=1 timeout 60 "$D/h3" bench --backend cuda --what vae --precision bf16 --shapes 544x960x124 \
    --vae-config $cfg >"$out/profile.log" 2>&1 || rc=1
H3_VAE_ATTN=tile H3_VAE_PROFILE=1 timeout 60 "$D/h3" bench --backend cuda --what vae --precision bf16 \
    --shapes 544x960x124 --vae-config $cfg >>"$out/profile.log" 2>&1 || rc=1
grep -E 'profile|^VAE|h3:' "$out/profile.log"
echo "== batch sweep at 544x960x124"
timeout 90 "$D/h3" bench --backend cuda --what vae --precision bf16 --shapes 544x960x124 --vae-batch 6,12,18,27,32 \
    --vae-config $cfg >"$out/sweep.log" 2>&1 || rc=1
grep -E '^VAE|h3:' "$out/sweep.log"
exit $rc
