#!/usr/bin/env bash
# Where the time goes on the GPU machine: clocks / power / throttle reasons sampled every 100 ms while the
# DiT bench runs back to back (is the sustained rate power-bound?), the per-op device time of the DiT
# (H3_CUDA_OPTIME) and of the batched video decoder (H3_VAE_PROFILE, synced per op kind, plus H3_CUDA_OPTIME).
# Builds nothing: stage a CUDA build with tools/dev_stage.sh and carry it. Logs under $OUT.
# Usage (repository root on the device): bash tests/cuda/run_profile_device.sh [DIR, default .dev-main]
set -u
D=${1:-.dev-main}
bash tools/dev_unpack.sh "$D" # tools/dev_stage.sh's bundle
O=${OUT:-/tmp/h3_profile}
mkdir -p "$O"
export LD_LIBRARY_PATH="$PWD/$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi -q -d POWER,CLOCK | grep -E 'Power Limit|Max Clocks|SM  |Graphics' | head -20
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active \
    --format=csv,noheader -lms 100 >"$O/smi.csv" 2>&1 &
smi=$!
H3_CUDA_OPTIME=1 "$D/h3" bench --backend cuda --what dit --repeats 3 --shapes 544x960x124 >"$O/dit_optime.log" 2>&1
kill $smi 2>/dev/null
grep -E '^DIT|calls|op time' "$O/dit_optime.log"
echo "== smi during the DiT bench (clock MHz, W, throttle reasons): distribution"
awk -F', ' '{c[$2" | "$5]++} END {for (k in c) print c[k], k}' "$O/smi.csv" | sort -rn | head -8
awk -F', ' '{gsub(/ W/,"",$3); if ($3+0 > 300) {n++; s+=$3; m+=$2}} END {if (n) printf "busy samples %d: mean %.0f W, mean %.0f MHz\n", n, s/n, m/n}' "$O/smi.csv"
cfg=tests/fixtures/skeleton/vae
H3_VAE_PROFILE=1 "$D/h3" bench --backend cuda --what vae --precision bf16 --shapes 544x960x124 \
    --vae-config $cfg >"$O/vae_profile.log" 2>&1
grep -E 'profile|^VAE|h3:' "$O/vae_profile.log" | head -40
H3_CUDA_OPTIME=1 "$D/h3" bench --backend cuda --what vae --precision bf16 --shapes 544x960x124 --vae-repeats 2 \
    --vae-config $cfg >"$O/vae_optime.log" 2>&1
grep -E '^VAE|calls|op time' "$O/vae_optime.log" | head -40
