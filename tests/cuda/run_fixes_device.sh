#!/usr/bin/env bash
# Session 13's fixes on the GPU machine, one short call (~3 min):
#  1. the backend-ops harness, fp8_matmul rows only (--op fp8_matmul): the CUDA GEMM against the CPU twin, including
#     the shapes cuBLASLt refuses (K not a multiple of 16, N / ldy not of 8: the plain dot-product kernel);
#  2. h3 generate on the tiny snapshot, --preset fast, on CUDA (its 8-wide decoder GEMMs took that path): rc 0 and
#     an MP4 with every frame finite (the pipeline's finite check), and the same on the CPU for the record;
#  3. tests/cuda/run_parallel_device.sh (test_parallel --cuda 1 now builds rank backends only on GPUs that exist).
#  4. the MP4 writer's bytes: test_media's threaded-vs-sync check on this host's CPU (x264 without AVX-512).
# Build here: make CUDA=1 MEDIA=1 BUILD=build-cuda-media NVCC_ARCH="-gencode=arch=compute_90a,code=sm_90a" cuda-tests
#   build-cuda-media/h3 build-cuda-media/tests/test_parallel build-cuda-media/tests/test_backend_ops
#   build-cuda-media/tests/test_media; FFMPEG_MIN=/work/ffmpeg-min bash tools/dev_stage.sh build-cuda-media .dev-main
# Usage (device): bash tests/cuda/run_fixes_device.sh .dev-main     Prints RESULT <passed> <failed>.
set -u
cd "$(dirname "$0")/../.."
B=${1:-.dev-main}
O=${OUT:-/tmp/h3_fixes}
mkdir -p "$O"
bash tools/dev_unpack.sh "$B"
BA=$(cd "$B" && pwd)
export LD_LIBRARY_PATH="$BA/lib:$BA${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMP_WAIT_POLICY=passive
lscpu | grep -E 'Model name|Flags' | sed 's/\(Flags:.\{0,40\}\).*\(avx512[a-z]*\).*/\1 ... \2 .../' | head -2
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "== ok: $*"; }
bad() { fail=$((fail + 1)); echo "== FAIL: $*"; }

timeout 200 "$BA/tests/test_backend_ops" --op fp8_matmul >"$O/harness_fp8.log" 2>&1
grep -E '^\[(cpu|cuda)\] fp8_matmul.*: (ok|FAIL)|^FAIL|^RESULT' "$O/harness_fp8.log"
r=$(grep -E '^RESULT' "$O/harness_fp8.log" | tail -1)
if [ -n "$r" ] && grep -q '^\[cuda\] fp8_matmul' "$O/harness_fp8.log"; then set -- $r; pass=$((pass + $2)); fail=$((fail + $3))
else bad "harness fp8_matmul: no RESULT or no CUDA pass"; fi

T=tests/fixtures/tiny
for be in cuda cpu; do
    timeout 200 "$BA/h3" generate -d $T -p "A red fox runs through snow." --width 64 --height 64 --steps 2 --frames 120 \
        --seed 7 --backend $be --preset fast --profile -o "$O/tiny_fast_$be.mp4" >"$O/tiny_fast_$be.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && [ -s "$O/tiny_fast_$be.mp4" ]; then ok "tiny generate --preset fast --backend $be: $(stat -c %s "$O/tiny_fast_$be.mp4") bytes"
    else bad "tiny generate --preset fast --backend $be: rc $rc"; tail -3 "$O/tiny_fast_$be.log"; fi
    grep -E 'preset fast' "$O/tiny_fast_$be.log" | head -2
done

timeout 120 "$BA/tests/test_media" >"$O/test_media.log" 2>&1
grep -E 'mp4 writer|^FAIL|^RESULT' "$O/test_media.log"
r=$(grep -E '^RESULT' "$O/test_media.log" | tail -1)
if [ -n "$r" ]; then set -- $r; pass=$((pass + $2)); fail=$((fail + $3)); else bad "test_media: no RESULT"; fi

OUT="$O/parallel" bash tests/cuda/run_parallel_device.sh "$B" >"$O/parallel.log" 2>&1
grep -E '^==|^RESULT|^FAIL' "$O/parallel.log" | head -30
r=$(grep -E '^RESULT' "$O/parallel.log" | tail -1)
if [ -n "$r" ]; then set -- $r; pass=$((pass + $2)); fail=$((fail + $3)); else bad "run_parallel_device: no RESULT"; fi
rm -f "$O/parallel/all.tar.gz"
echo "RESULT $pass $fail"
tar -czf "$O/../fixes.tar.gz" -C "$O" . 2>/dev/null && mv "$O/../fixes.tar.gz" "$O/fixes.tar.gz"
