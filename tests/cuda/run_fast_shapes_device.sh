#!/usr/bin/env bash
# The fast path's numbers in one call (issue 19's shapes, ~8 min): random release-shape weights.
#  1. h3 bench DiT at 512x512x22, 544x960x124, 1344x768x124: bf16 and the fast set (--quant fp8
#     --attention sage8) with --compare-bf16 1 (its error against the bf16 forward on the same weights);
#  2. (WITH_VAE=1) h3 bench video decode at 544x960x124: bf16 and --vae-quant fp8 (WITH_FP8=1: the fp8 DiT too);
#  3. a warm session (two prompts) at 960x544x124, 4 passes, --preset fast, to MP4 (x264 veryfast): the second
#     generation's phase times, prompt to MP4.
# Usage (device): bash tests/cuda/run_fast_shapes_device.sh .dev-main      Logs packed into $OUT/fast_shapes.tar.gz
set -u
cd "$(dirname "$0")/../.."
B=${1:-.dev-main}
O=${OUT:-/tmp/h3_fast_shapes}
mkdir -p "$O"
bash tools/dev_unpack.sh "$B"
BA=$(cd "$B" && pwd)
export LD_LIBRARY_PATH="$BA/lib:$BA${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMP_WAIT_POLICY=passive
T0=$(date +%s)
say() { echo "[+$(($(date +%s) - T0))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
S3=512x512x22,544x960x124,1344x768x124
run() { # name, limit, args of h3...
    local name=$1 lim=$2; shift 2
    timeout "$lim" "$BA/h3" "$@" >"$O/$name.log" 2>&1
    say "== $name: rc $?"
    grep -E '^DIT|^VAE|compare|rel_l2|rror' "$O/$name.log" | head -12
}
run dit_bf16 150 bench --what dit --shapes $S3 --repeats 3
[ -n "${WITH_FP8:-}" ] && run dit_fp8 150 bench --what dit --shapes $S3 --repeats 3 --quant fp8
run dit_fast 150 bench --what dit --shapes $S3 --repeats 3 --quant fp8 --attention sage8 --compare-bf16 1
[ -n "${WITH_VAE:-}" ] && run vae 150 bench --what vae --shapes 544x960x124 --vae-repeats 2 --precision bf16 --vae-quant none
[ -n "${WITH_VAE:-}" ] && run vae_fp8 150 bench --what vae --shapes 544x960x124 --vae-repeats 2 --precision bf16 --vae-quant fp8
P="A red fox runs through fresh snow at dawn, its breath steaming in the cold air, while birds call from the pines."
P2="A surfer rides a glassy wave at sunset while gulls circle overhead and the crowd on the beach cheers."
mkdir -p "$O/clips"
printf '%s\n%s\n%s\n' "!output $O/clips" "$P" "$P2" | timeout 200 "$BA/h3" generate -d tests/fixtures/skeleton \
    --random-weights --backend cuda --width 960 --height 544 --frames 124 --steps 4 --preset fast --seed 42 --profile \
    >"$O/session.log" 2>&1
say "== session 960x544x124, 4 passes, --preset fast, to MP4: rc $?"
grep -E '^  (text encoder|denoise|audio VAE decode|video VAE decode|mux|compute|total)|preset fast|rror' "$O/session.log" | tail -16
ls -la "$O/clips"
rm -rf "$O/clips"
tar -czf /tmp/fast_shapes.tar.gz -C "$O" . && mv /tmp/fast_shapes.tar.gz "$O/"
