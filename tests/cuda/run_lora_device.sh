#!/usr/bin/env bash
# LoRA on the GPU (docs/lora.md): h3 probe dit / denoise --lora on CUDA (fp32 with H3_CUDA_PRECISION=fp32, and bf16)
# on the snapshot, the FL2VA tree, two LoRAs and the ref2va partition, the outputs left in $OUT for a comparison with
# tests/fixtures/lora/expect/*.forward.out and denoise_t2va_ai_toolkit.out (rel L2); generate with the LoRA resident,
# streamed (map and direct reads: must be the resident bits) and under --quant fp8. Not yet run on the device.
# Build here: make CUDA=1 MEDIA=0 BUILD=build-cuda build-cuda/h3, then bash tools/dev_stage.sh build-cuda .dev-main;
# carry .dev-main. Usage (device): bash tests/cuda/run_lora_device.sh .dev-main
set -u
cd "$(dirname "$0")/../.."
B=${1:-build-cuda}
OUT=${OUT:-lora-logs}
mkdir -p "$OUT"
bash tools/dev_unpack.sh "$B" >/dev/null 2>&1
export LD_LIBRARY_PATH="$B/lib:$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
L=tests/fixtures/lora; I=tests/fixtures/golden/dit/t2va.in.safetensors; T=tests/fixtures/tiny; nvidia-smi -L
for prec in fp32 bf16; do
 P=$([ $prec = fp32 ] && echo H3_CUDA_PRECISION=fp32 || echo H3_LORA_RUN=1)
 env $P $B/h3 probe dit --backend cuda --precision $prec --model $T --in $I --lora $L/ai_toolkit.safetensors --out $OUT/cuda_ai_$prec.st; echo "probe ai $prec rc $?"
 env $P $B/h3 probe dit --backend cuda --precision $prec --model $T --in $I --lora $L/peft.safetensors:0.5 --lora $L/kohya.safetensors:1.25 --out $OUT/cuda_pk_$prec.st; echo "probe pk $prec rc $?"
 env $P $B/h3 probe dit --backend cuda --precision $prec --model $T/FL2VA --in $I --lora $L/ai_toolkit.safetensors --out $OUT/cuda_ai_fl_$prec.st; echo "probe fl $prec rc $?"
 env $P $B/h3 probe dit --backend cuda --precision $prec --model $T --component transformer_ref --in tests/fixtures/golden/dit/ref2va.in.safetensors --lora $L/ref.safetensors --out $OUT/cuda_ref_$prec.st; echo "probe ref $prec rc $?"
done
H3_CUDA_PRECISION=fp32 $B/h3 probe denoise --backend cuda --model $T --in tests/fixtures/golden/pipeline/denoise_t2va.in.safetensors --lora $L/ai_toolkit.safetensors --out $OUT/cuda_den.st; echo "denoise rc $?"
G=(-d $T -p "A red fox." --width 64 --height 32 --frames 120 --steps 2 --seed 5 -o '' --backend cuda)
$B/h3 generate "${G[@]}" --lora $L/ai_toolkit.safetensors --dump-latents $OUT/g_res.st > $OUT/g1.log 2>&1; echo "gen resident rc $?"
$B/h3 generate "${G[@]}" --lora $L/ai_toolkit.safetensors --ssd-streaming --dump-latents $OUT/g_str.st > $OUT/g2.log 2>&1; echo "gen stream rc $?"
H3_STREAM_READ=direct $B/h3 generate "${G[@]}" --lora $L/ai_toolkit.safetensors --ssd-streaming --dump-latents $OUT/g_str2.st > $OUT/g3.log 2>&1; echo "gen stream direct rc $?"
$B/h3 generate "${G[@]}" --lora $L/ai_toolkit.safetensors --quant fp8 --dump-latents $OUT/g_fp8.st > $OUT/g4.log 2>&1; echo "gen fp8 lora rc $?"
$B/h3 generate "${G[@]}" --quant fp8 --dump-latents $OUT/g_fp8n.st > $OUT/g5.log 2>&1; echo "gen fp8 rc $?"
cmp $OUT/g_res.st $OUT/g_str.st && echo "stream = resident"
cmp $OUT/g_res.st $OUT/g_str2.st && echo "stream direct = resident"
cmp -s $OUT/g_fp8.st $OUT/g_fp8n.st || echo "fp8 + lora differs from fp8"
grep -h "stream\|slot" $OUT/g2.log | tail -2
