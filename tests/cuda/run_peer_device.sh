#!/usr/bin/env bash
# h3 against its strongest Python peers in ONE device call (docs/cuda.md "Peers"), at one shape (544x960x124):
# h3 bench's DiT forward (bf16; --quant fp8; --quant int8; fast = --preset fast or, where h3 bench has no --preset,
# --quant fp8 --attention sage8 --vae-quant fp8) and its video decode, then tools/reference/peer_bench.py: diffusers
# 0.42.1 eager and with regional torch.compile, + torchao FP8 rowwise + compile, + torchao INT8 W8A8 + compile, and
# diffusers' video decode under fp16 autocast; then the ratio table (tools/reference/peer_table.py).
# Every step has its own timeout, cut to what is left of PEER_BUDGET (570 s; ~7 min expected: give the call
# timeout_s 600) and the peers run in separate processes (the eager outputs
# passed on through --ref-save / --ref-load), so a compile that takes too long costs its own row only.
# Carry: the staged build (tools/dev_stage.sh) and the wheels of tools/reference/peer_wheels.sh (.peer-wheels).
# The logs go to $OUT/all.tar.gz (packed after every step); stdout: timestamped progress, the table, RESULT.
# Usage (device): bash tests/cuda/run_peer_device.sh [build dir, default .dev-main] [wheels, default .peer-wheels]
#                 [shape, default 544x960x124] [peer repeats, default 3]
set -u
B=${1:-.dev-main}
W=${2:-.peer-wheels}
SHAPE=${3:-544x960x124}
REP=${4:-3}
T0=$(date +%s)
say() { echo "[$(date -u +%H:%M:%S) +$(($(date +%s) - T0))s] $*"; }
bash tools/dev_unpack.sh "$B" # tools/dev_stage.sh's bundle
BA=$(cd "$B" && pwd)
export LD_LIBRARY_PATH="$BA/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
O=${OUT:-/tmp/h3_peer}
L=$O/peer
mkdir -p "$L"
pack() { # the table so far, then the archive: a call stopped at its limit still brings both back
    python3 tools/reference/peer_table.py "$L" "$SHAPE" >"$L/summary.md" 2>&1
    tar -czf "$O/all.tar.gz" -C "$O" peer
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
PASS=0
FAIL=0
END=$((T0 + ${PEER_BUDGET:-570})) # seconds for the whole call (the device tool's limit is 600)
# h3's rows first, each within its own small limit; the peers' limits shrink to what the budget has left
step() { # name, limit seconds, seconds kept for the steps after it, pattern its log must hold, command...
    local name=$1 lim=$2 keep=$3 pat=$4
    shift 4
    local left=$((END - $(date +%s) - keep))
    [ $left -lt $lim ] && lim=$left
    if [ $lim -lt 10 ]; then
        say "$name: skipped (the call's budget is spent)"
        FAIL=$((FAIL + 1))
        return
    fi
    say "$name: start (limit ${lim} s)"
    local s=$(date +%s)
    timeout -k 5 "$lim" "$@" >"$L/$name.log" 2>&1
    local rc=$?
    say "$name: rc $rc, $(($(date +%s) - s)) s"
    grep -E "$pat|^PEER .*failed|^h3: |^peer_bench: " "$L/$name.log" | head -8
    if [ $rc -eq 0 ] && grep -qE "$pat" "$L/$name.log"; then PASS=$((PASS + 1)); else FAIL=$((FAIL + 1)); fi
    pack
}

# the wheels: diffusers 0.42.1 and torchao 0.18.0 (no internet there)
say "installing $(ls "$W"/*.whl 2>/dev/null | xargs -n1 basename 2>/dev/null | tr '\n' ' ')into /tmp/site"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$W"/*.whl \
    >"$L/pip.log" 2>&1 || { say "pip install failed:"; tail -3 "$L/pip.log"; }
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export TORCHINDUCTOR_CACHE_DIR=/tmp/peer_inductor # compiled kernels kept for a later call on a warm machine
python3 -c 'import diffusers, torchao, torch; print("diffusers", diffusers.__version__, "torchao", torchao.__version__, "torch", torch.__version__)' \
    2>"$L/import.log" || { say "import failed:"; tail -2 "$L/import.log"; }

# h3 first: the engine's rows are the ones the table cannot do without
H=("$BA/h3" bench --backend cuda --shapes "$SHAPE" --repeats 3)
step h3_bf16 50 0 '^(DIT|VAE) ' "${H[@]}" --what dit,vae --vae-repeats 2
step h3_fp8 40 0 '^DIT ' "${H[@]}" --what dit --quant fp8 --compare-bf16 1
step h3_int8 40 0 '^DIT ' "${H[@]}" --what dit --quant int8 --compare-bf16 1
step h3_int8_sage8 40 0 '^DIT ' "${H[@]}" --what dit --quant int8 --attention sage8 --compare-bf16 1
if "$BA/h3" bench --help 2>&1 | grep -q -- '--preset'; then FAST=(--preset fast); else FAST=(--quant fp8 --attention sage8 --vae-quant fp8); fi
say "fast = ${FAST[*]}"
step h3_fast 50 0 '^(DIT|VAE) ' "${H[@]}" --what dit,vae --vae-repeats 2 --compare-bf16 1 "${FAST[@]}"

P=(python3 tools/reference/peer_bench.py --shapes "$SHAPE" --repeats "$REP")
REF=/tmp/peer_ref_$SHAPE.pt
rm -f "$REF"
step peer_bf16 150 235 '^PEER dit compile ' "${P[@]}" --modes eager,compile --ref-save "$REF"
RL=()
[ -f "$REF" ] && RL=(--ref-load "$REF")
step peer_fp8 170 135 '^PEER dit fp8 ' "${P[@]}" --modes fp8 "${RL[@]}"
step peer_int8 170 35 '^PEER dit int8 ' "${P[@]}" --modes int8 "${RL[@]}"
step peer_vae 40 0 '^PEER vae ' "${P[@]}" --what vae --vae-repeats 2

pack
cat "$L/summary.md"
say "done"
echo "RESULT $PASS $FAIL"
