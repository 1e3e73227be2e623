#!/usr/bin/env bash
# --parallel N (docs/parallel.md) on the GPU machine. On every machine:
#  1. tests/test_parallel --cuda 1: the DiT forward through the NCCL team with one rank against the plain forward,
#     bit for bit (tiny snapshot golden inputs, a random 3-head DiT; fp32, bf16, fp8, int8, sage8, --ssd-streaming).
#  2. tests/cuda/test_comm_nccl 1 (the communicator, NCCL's self send/receive).
#  3. h3 generate on the tiny snapshot on CUDA: --parallel 1 vs the plain run's latents (same code path: a check
#     that the flag changes nothing at one rank).
# With 2 or more GPUs (nvidia-smi -L | wc -l) also the issue's targets:
#  4. test_parallel --cuda N and test_comm_nccl N for N = 2, 4 (<= GPUs): the measured rel L2 / max abs per case.
#  5. h3 bench --random-weights DiT forwards (bf16) at 1344x768x124, 768x1344x362 and 544x960x124 with --parallel 1,
#     2, 4 (<= GPUs): seconds per forward, each DIT line with parallel=N.
#  6. a warm session at 960x544x124, 4 passes (--steps 4), --preset fast, bf16, --random-weights, two prompts, with
#     --parallel 1, 2, 4: the second generation's phase times (the ranks' transformers kept between them).
# Build here: make CUDA=1 BUILD=build-cuda NVCC_ARCH="-gencode=arch=compute_90a,code=sm_90a" cuda-tests build-cuda/h3 \
#   build-cuda/tests/test_parallel; bash tools/dev_stage.sh build-cuda .dev-par; carry .dev-par.
# Usage (device): bash tests/cuda/run_parallel_device.sh .dev-par      Prints RESULT <passed> <failed>.
set -u
cd "$(dirname "$0")/../.."
B=${1:-build-cuda}
O=${OUT:-parallel-logs}
mkdir -p "$O"
bash tools/dev_unpack.sh "$B"
export LD_LIBRARY_PATH="$(realpath "$B")/lib:$(realpath "$B")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export NCCL_NVLS_ENABLE=0 # NVLink multicast stays off (docs/parallel.md); never cuMulticastCreate
export OMP_WAIT_POLICY=passive
NG=$(nvidia-smi -L 2>/dev/null | wc -l)
echo "== GPUs: $NG"
pass=0; fail=0
res() { # name, rc, log: adds the log's RESULT line (or one failure for a crash)
    local r
    r=$(grep -E '^RESULT' "$3" | tail -1)
    if [ -n "$r" ]; then set -- "$1" "$2" "$3" $r; pass=$((pass + $5)); fail=$((fail + $6)); echo "== $1: rc $2, $r"
    else fail=$((fail + 1)); echo "== $1: rc $2, no RESULT"; tail -3 "$3"; fi
    grep -E '^FAIL' "$3" | head -5
}

timeout 240 "$B/tests/test_parallel" --cuda 1 >"$O/parity_1.log" 2>&1
res "test_parallel --cuda 1 (NCCL, one rank, bit-identity)" $? "$O/parity_1.log"
grep -E 'N=1 ' "$O/parity_1.log" | sed 's/^ */   /' | head -20
timeout 120 "$B/tests/cuda/test_comm_nccl" 1 >"$O/comm_1.log" 2>&1
res "test_comm_nccl 1" $? "$O/comm_1.log"

T=tests/fixtures/tiny
GA=(-d $T -p "A red fox runs through snow." --width 64 --height 64 --steps 2 --frames 120 --seed 7 --backend cuda -o '')
timeout 120 "$B/h3" generate "${GA[@]}" --dump-latents "$O/tiny_plain.st" >"$O/tiny_plain.log" 2>&1; r1=$?
timeout 120 "$B/h3" generate "${GA[@]}" --parallel 1 --dump-latents "$O/tiny_p1.st" >"$O/tiny_p1.log" 2>&1; r2=$?
if [ $r1 -eq 0 ] && [ $r2 -eq 0 ] && cmp -s "$O/tiny_plain.st" "$O/tiny_p1.st"; then pass=$((pass + 1)); echo "== tiny generate --parallel 1 = plain: ok"
else fail=$((fail + 1)); echo "== tiny generate --parallel 1 vs plain: rc $r1 / $r2, latents differ or missing"; tail -2 "$O/tiny_p1.log"; fi

if [ "$NG" -ge 2 ]; then
    NS="2"; [ "$NG" -ge 4 ] && NS="2 4"
    for n in $NS; do
        timeout 300 "$B/tests/test_parallel" --cuda $n >"$O/parity_$n.log" 2>&1
        res "test_parallel --cuda $n" $? "$O/parity_$n.log"
        grep -E "N=$n " "$O/parity_$n.log" | sed 's/^ */   /' | head -20
        timeout 120 "$B/tests/cuda/test_comm_nccl" $n >"$O/comm_$n.log" 2>&1
        res "test_comm_nccl $n" $? "$O/comm_$n.log"
    done
    for n in 1 $NS; do
        timeout 900 "$B/h3" bench --backend cuda --what dit --repeats 2 --parallel $n \
            --shapes 1344x768x124,768x1344x362,544x960x124 >"$O/bench_p$n.log" 2>&1
        echo "== bench DiT --parallel $n: rc $?"; grep -E '^DIT|^dit: --parallel|rror' "$O/bench_p$n.log"
    done
    P="A red fox runs through fresh snow at dawn, its breath steaming in the cold air, while birds call from the pines."
    P2="A surfer rides a glassy wave at sunset while gulls circle overhead and the crowd on the beach cheers."
    for n in 1 $NS; do
        printf '%s\n%s\n' "$P" "$P2" | timeout 900 "$B/h3" generate -d tests/fixtures/skeleton --random-weights --backend cuda \
            -o '' --width 960 --height 544 --frames 124 --steps 4 --preset fast --precision bf16 --profile --seed 42 \
            --parallel $n >"$O/session_p$n.log" 2>&1
        echo "== session 960x544x124, 4 passes, --preset fast, --parallel $n: rc $?"
        grep -E '^  (text encoder|denoise|audio VAE decode|video VAE decode|compute)|^video-000|parallel|rror' \
            "$O/session_p$n.log" | head -20
    done
else
    echo "== one GPU: the multi-GPU targets (bench at 1344x768x124 / 768x1344x362 / 544x960x124 with --parallel 2, 4,"
    echo "   the warm --preset fast session) need a machine with 2+ GPUs: this script runs them there"
fi
echo "RESULT $pass $fail"
tar -czf "$O/all.tar.gz" -C "$O" --exclude all.tar.gz . 2>/dev/null
