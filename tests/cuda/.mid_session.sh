set -u
B=.dev-main; export LD_LIBRARY_PATH=$B/lib
echo "== test_cuda_upload"; $B/tests/cuda/test_cuda_upload 2048 2>&1 | tail -12
echo "== dit_block parity (release-width weights through the staged upload)"; $B/tests/cuda/dit_block_cuda parity 300 2>&1 | grep -E "RESULT|FAIL|rel"
echo "== test_cuda_fp8"; $B/tests/cuda/test_cuda_fp8 2>&1 | grep -E "RESULT|FAIL"
echo "== DiT bench load (random weights: no upload)"; $B/h3 bench --backend cuda --what dit --repeats 1 --shapes 544x960x124 2>&1 | grep -E "^DIT"
