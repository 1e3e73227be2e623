#!/usr/bin/env bash
# The op table (docs/architecture.md "The op table") on the GPU machine, one call (~6 min): the refactor must change
# no bit. B is the staged build of the tree, BASE (optional) the staged build of the commit before it.
#  1. the backend-ops harness, full: every row's CUDA pass against the CPU twin (RESULT <passed> <failed>);
#  2. the CUDA suites beside it: test_flash_sm90, test_cuda_upload, test_cuda_gguf, test_cuda_stream,
#     test_cuda_lora64 (each prints RESULT);
#  3. with BASE: h3 generate on the tiny snapshot on CUDA in six modes (bf16, fp32, --quant fp8, --quant int8,
#     --attention sage8, --preset fast), B against BASE: the final latents (--dump-latents) and the MP4 byte for byte;
#  4. with BASE: the DiT forward at 544x960x124 (h3 bench, bf16 and the fast set), B and BASE alternated, so the
#     dispatchers' cost (one timer check per op) shows as a time difference if it has one.
# Build here: make CUDA=1 MEDIA=1 BUILD=build-cuda-media NVCC_ARCH="-gencode=arch=compute_90a,code=sm_90a" cuda-tests
#   build-cuda-media/h3 ...; FFMPEG_MIN=build-ffmpeg bash tools/dev_stage.sh build-cuda-media .dev-main (the same for
#   the base commit's tree into .dev-base).
# Usage (device): bash tests/cuda/run_optable_device.sh .dev-main [.dev-base]     Prints RESULT <passed> <failed>.
set -u
cd "$(dirname "$0")/../.."
B=${1:-.dev-main}
BASE=${2:-}
O=${OUT:-/tmp/h3_optable}
mkdir -p "$O"
bash tools/dev_unpack.sh "$B"
BA=$(cd "$B" && pwd)
export LD_LIBRARY_PATH="$BA/lib:$BA${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMP_WAIT_POLICY=passive
if [ -n "$BASE" ]; then bash tools/dev_unpack.sh "$BASE"; BB=$(cd "$BASE" && pwd); fi
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "== ok: $*"; }
bad() { fail=$((fail + 1)); echo "== FAIL: $*"; }
result() { # log name: add its RESULT line
    local r
    r=$(grep -E '^RESULT' "$1" | tail -1)
    if [ -n "$r" ]; then set -- $r "$2"; pass=$((pass + $2)); fail=$((fail + $3)); echo "== $4: $r"
    else bad "$2: no RESULT"; tail -3 "$1"; fi
}

timeout 300 "$BA/tests/test_backend_ops" >"$O/harness.log" 2>&1
grep -E '^FAIL|^== backend' "$O/harness.log" | head -20
grep -q '^== backend cuda' "$O/harness.log" || bad "harness: no CUDA pass"
result "$O/harness.log" test_backend_ops
for t in test_flash_sm90 test_cuda_upload test_cuda_gguf test_cuda_stream test_cuda_lora64; do
    [ -x "$BA/tests/cuda/$t" ] || { bad "$t missing"; continue; }
    timeout 200 "$BA/tests/cuda/$t" >"$O/$t.log" 2>&1
    grep -E '^FAIL' "$O/$t.log" | head -5
    result "$O/$t.log" "$t"
done

if [ -n "$BASE" ]; then
    T=tests/fixtures/tiny
    i=0
    for mode in "" "--precision fp32" "--quant fp8" "--quant int8" "--attention sage8" "--preset fast"; do
        i=$((i + 1))
        for w in new:$BA base:$BB; do
            n=${w%%:*} d=${w#*:}
            LD_LIBRARY_PATH="$d/lib:$d" timeout 200 "$d/h3" generate -d $T -p "A red fox runs through snow." \
                --width 64 --height 64 --steps 2 --frames 120 --seed 7 --backend cuda $mode \
                --dump-latents "$O/m$i.$n.st" -o "$O/m$i.$n.mp4" >"$O/m$i.$n.log" 2>&1 || echo "rc $? ($n, mode '$mode')"
        done
        if [ -s "$O/m$i.new.st" ] && cmp -s "$O/m$i.new.st" "$O/m$i.base.st" && cmp -s "$O/m$i.new.mp4" "$O/m$i.base.mp4"
        then ok "tiny generate cuda '${mode:-bf16}': latents and MP4 identical to the base build"
        else bad "tiny generate cuda '${mode:-bf16}': differs from the base build"; tail -2 "$O/m$i.new.log"; fi
    done
    S=544x960x124
    for rep in 1 2; do
        for w in new:$BA base:$BB; do
            n=${w%%:*} d=${w#*:}
            for m in "bf16:" "fast:--quant fp8 --attention sage8"; do
                LD_LIBRARY_PATH="$d/lib:$d" timeout 150 "$d/h3" bench --what dit --shapes $S --repeats 3 ${m#*:} \
                    >"$O/bench.$n.${m%%:*}.$rep.log" 2>&1
                echo "bench $rep $n ${m%%:*}: $(grep -iE 'dit' "$O/bench.$n.${m%%:*}.$rep.log" | tail -2 | tr '\n' ' ')"
            done
        done
    done
fi
echo "RESULT $pass $fail"
