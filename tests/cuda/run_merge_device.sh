#!/usr/bin/env bash
# One device call after merging the public API's CLI, the pipeline split, the env-knob table, INT8 (CPU) and the
# single-file transformers: the backend-ops harness (run_harness_device.sh), the tiny end to end CUDA vs CPU
# (run_e2e_device.sh), the API on the GPU (run_api_device.sh), and the single-file transformer on CUDA: h3 probe
# dit --backend cuda with --transformer (safetensors, GGUF) against the snapshot / the GGUF's dequantized
# safetensors, byte for byte, fp32 and bf16. Prints one summary line per part.
# Build here: make CUDA=1 MEDIA=0 BUILD=build-cuda cuda-tests build-cuda/h3 build-cuda/tests/cuda/cmp_dumps
# build-cuda/libh3.so; bash tools/dev_stage.sh build-cuda .dev-main; carry .dev-main.
# Usage (device): bash tests/cuda/run_merge_device.sh .dev-main
set -u
cd "$(dirname "$0")/../.."
B=${1:-build-cuda}
O=${OUT:-merge-logs}
mkdir -p "$O"
bash tools/dev_unpack.sh "$B"
export LD_LIBRARY_PATH="$B/lib:$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
OUT="$O/harness" bash tests/cuda/run_harness_device.sh "$B" >"$O/harness_run.log" 2>&1
echo "== harness: rc $? $(grep -E '^RESULT' "$O/harness_run.log" | tail -1)"; grep -E '^FAIL|FAIL \(' "$O/harness_run.log" | head -10
OUT="$O/e2e" bash tests/cuda/run_e2e_device.sh "$B" >"$O/e2e_run.log" 2>&1
echo "== tiny end to end: $(grep RESULT "$O/e2e_run.log" | tail -1)"; grep FAIL "$O/e2e_run.log" | head
OUT="$O/api" bash tests/cuda/run_api_device.sh "$B" >"$O/api_run.log" 2>&1
echo "== API on the GPU: $(grep RESULT "$O/api_run.log" | tail -1)"; grep -E 'FAIL|^==' "$O/api_run.log" | head -12
T=tests/fixtures/tiny SF=tests/fixtures/single_file IN=tests/fixtures/golden/dit/t2va.in.safetensors
pass=0 fail=0
for prec in fp32 bf16; do
    P=(probe dit --model $T --in $IN --backend cuda --precision $prec)
    "$B/h3" "${P[@]}" --out "$O/snap_$prec.st" 2>>"$O/sf.log"
    "$B/h3" "${P[@]}" --transformer $SF/tiny_transformer.safetensors --out "$O/sf_$prec.st" 2>>"$O/sf.log"
    "$B/h3" "${P[@]}" --transformer $SF/tiny_transformer.gguf --out "$O/gg_$prec.st" 2>>"$O/sf.log"
    "$B/h3" "${P[@]}" --transformer $SF/tiny_transformer_from_gguf.safetensors --out "$O/ggr_$prec.st" 2>>"$O/sf.log"
    if cmp -s "$O/snap_$prec.st" "$O/sf_$prec.st"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL single file $prec (cuda)"; fi
    if cmp -s "$O/gg_$prec.st" "$O/ggr_$prec.st"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL GGUF $prec (cuda)"; fi
done
echo "== single-file transformer on CUDA: RESULT $pass $fail"; tail -3 "$O/sf.log"
"$B/h3" generate -d $T -p "A red fox." --width 64 --height 32 --steps 2 -o '' --backend cuda --quant int8 >"$O/int8.log" 2>&1
echo "== --quant int8 on CUDA: rc $? (want 2); $(tail -1 "$O/int8.log")"
