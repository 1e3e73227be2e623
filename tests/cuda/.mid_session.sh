set -u
B=.dev-main; export LD_LIBRARY_PATH=$B/lib
echo "== test_cuda_bf16 hw"; $B/tests/cuda/test_cuda_bf16 > $OUT/bf16.log 2>&1; grep -E "RESULT|FAIL" $OUT/bf16.log
echo "== test_cuda_bf16 sw"; H3_BF16_ROUND=sw $B/tests/cuda/test_cuda_bf16 > $OUT/bf16sw.log 2>&1; grep -E "RESULT|FAIL" $OUT/bf16sw.log
echo "== test_cuda_fp8"; $B/tests/cuda/test_cuda_fp8 > $OUT/fp8.log 2>&1; grep -E "RESULT|FAIL|torch" $OUT/fp8.log
for r in sw hw; do echo "== DiT bf16 round $r"; H3_BF16_ROUND=$r H3_CUDA_OPTIME=1 $B/h3 bench --backend cuda --what dit --repeats 2 --shapes 544x960x124 > $OUT/dit_$r.log 2>&1; grep -E "^DIT|rmsnorm|head_norm|swiglu|gated" $OUT/dit_$r.log; done
echo "== DiT fp8"; $B/h3 bench --backend cuda --what dit --repeats 2 --shapes 544x960x124 --quant fp8 2>&1 | grep -E "^DIT"
P="A red fox runs through fresh snow at dawn, its breath steaming in the cold air, while birds call from the pines."
P2="A surfer rides a glassy wave at sunset while gulls circle overhead and the crowd on the beach cheers."
for q in none fp8; do
  echo "== session, 2 prompts, --quant $q"
  printf '%s\n%s\n' "$P" "$P2" | $B/h3 generate -d tests/fixtures/skeleton --random-weights --backend cuda -o '' --width 960 --height 544 --frames 124 --steps 4 --profile --seed 42 --quant $q > $OUT/session_$q.log 2>&1
  echo "rc $?"; grep -E "^  (text encoder|denoise|audio VAE decode|video VAE decode|compute|total)|video-000" $OUT/session_$q.log
done
