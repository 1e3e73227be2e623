#!/usr/bin/env bash
# --attention exact|sage8 (docs/fast.md) through the CLI: `h3 probe dit` and `h3 generate` on the tiny snapshot take
# it (the DiT's attention then runs the 8-bit op's CPU twin: a different output from exact, close to it, the same
# bits twice), and the bad uses are one line with exit 2 and nothing written. The op's numbers are
# tests/test_sage8.c (against the torch reference) and the backend-ops harness (CUDA against the twin).
set -u
source "$(dirname "$0")/lib/common.bash" # H3, TINY, $tmp (removed at exit), pass/fail, ok, bad, check
G=tests/fixtures/golden/dit

one_line_2() { # name, expected stderr fragment, out file (must not exist), cmd...
    local name=$1 want=$2 out=$3; shift 3
    "$@" >/dev/null 2>"$tmp/err"; rc=$?
    lines=$(wc -l <"$tmp/err")
    if [ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] && grep -q -- "$want" "$tmp/err" && [ ! -e "$out" ]; then ok
    else bad "$name: rc $rc, $lines lines: $(cat "$tmp/err")"; fi
}
probe() { # out, extra args...
    local o=$1; shift
    "$H3" probe dit --model $TINY --in $G/t2va.in.safetensors --out "$o" --precision bf16 "$@" 2>"$tmp/err"
}
# relative L2 of every F32 tensor of a against b (the probe's outputs), the largest one printed
rel() {
    "$PYTHON" - "$1" "$2" <<'PY'
import json, math, struct, sys
def load(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    out = {}
    for k, v in h.items():
        if k == "__metadata__" or v["dtype"] != "F32":
            continue
        s, e = v["data_offsets"]
        out[k] = struct.unpack("<%df" % ((e - s) // 4), b[8 + n + s:8 + n + e])
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
worst = 0.0
for k in b:
    num = sum((x - y) ** 2 for x, y in zip(a[k], b[k]))
    den = sum(y * y for y in b[k])
    worst = max(worst, math.sqrt(num / den) if den else math.sqrt(num))
print("%.3e" % worst)
PY
}

probe "$tmp/exact.st" && ok || bad "probe exact: $(cat "$tmp/err")"
probe "$tmp/exact2.st" --attention exact && cmp -s "$tmp/exact.st" "$tmp/exact2.st" && ok || bad "--attention exact is not the default"
probe "$tmp/s8.st" --attention sage8 && ok || bad "probe --attention sage8: $(cat "$tmp/err")"
probe "$tmp/s8b.st" --attention sage8 && cmp -s "$tmp/s8.st" "$tmp/s8b.st" && ok || bad "sage8: not the same bits twice"
cmp -s "$tmp/s8.st" "$tmp/exact.st" && bad "sage8 output equals exact (the 8-bit op not taken)" || ok
r=$(rel "$tmp/s8.st" "$tmp/exact.st")
"$PYTHON" -c "import sys; sys.exit(0 if float('$r') < 0.1 else 1)" && ok || bad "sage8 vs exact DiT output: rel L2 $r >= 0.1"
echo "  probe dit: sage8 vs exact rel L2 $r (tiny model)"
one_line_2 "probe sage8 fp32" "precision bf16" "$tmp/f.st" "$H3" probe dit --model $TINY --in $G/t2va.in.safetensors \
    --out "$tmp/f.st" --attention sage8
one_line_2 "probe bad --attention" "exact or sage8" "$tmp/f.st" probe "$tmp/f.st" --attention int4

GA=(--width 64 --height 64 --steps 1 --frames 120 -p "A red fox." --seed 7)
"$H3" generate -d $TINY "${GA[@]}" --attention sage8 --dump-latents "$tmp/ga.st" -o "$tmp/ga.mp4" 2>"$tmp/err" && ok \
    || bad "generate --attention sage8: $(tail -1 "$tmp/err")"
"$H3" generate -d $TINY "${GA[@]}" --dump-latents "$tmp/gb.st" -o "$tmp/gb.mp4" 2>"$tmp/err" && ok \
    || bad "generate exact: $(tail -1 "$tmp/err")"
cmp -s "$tmp/ga.st" "$tmp/gb.st" && bad "generate: sage8 latents equal exact" || ok
one_line_2 "generate sage8 fp32" "needs --precision bf16" "$tmp/gc.mp4" \
    "$H3" generate -d $TINY "${GA[@]}" --attention sage8 --precision fp32 -o "$tmp/gc.mp4"
one_line_2 "generate bad --attention" "exact or sage8" "$tmp/gc.mp4" \
    "$H3" generate -d $TINY "${GA[@]}" --attention fast -o "$tmp/gc.mp4"
# --preset fast (docs/fast.md): the three fast modes where the flags are at their defaults, said in the log; an
# explicit non-default value wins; the same latents as the three flags given by hand
"$H3" generate -d $TINY "${GA[@]}" --preset fast --dump-latents "$tmp/pf.st" -o '' 2>"$tmp/err" && ok \
    || bad "generate --preset fast: $(tail -1 "$tmp/err")"
grep -q "preset fast: DiT linears fp8, attention sage8, video decoder fp8" "$tmp/err" && ok || bad "--preset fast: no log line"
"$H3" generate -d $TINY "${GA[@]}" --quant fp8 --attention sage8 --vae-quant fp8 --dump-latents "$tmp/ph.st" -o '' \
    2>/dev/null && cmp -s "$tmp/pf.st" "$tmp/ph.st" && ok || bad "--preset fast differs from its three flags"
"$H3" generate -d $TINY "${GA[@]}" --preset fast --quant int8 --dump-latents "$tmp/pi.st" -o '' 2>"$tmp/err" && \
    grep -q "preset fast: DiT linears int8, attention sage8, video decoder fp8" "$tmp/err" && ok \
    || bad "--preset fast --quant int8: $(grep preset "$tmp/err")"
"$H3" generate -d $TINY "${GA[@]}" --preset exact --dump-latents "$tmp/pe.st" -o '' 2>/dev/null && \
    cmp -s "$tmp/pe.st" "$tmp/gb.st" && ok || bad "--preset exact is not the default"
one_line_2 "bad --preset" "exact or fast" "$tmp/gd.mp4" "$H3" generate -d $TINY "${GA[@]}" --preset turbo -o "$tmp/gd.mp4"
one_line_2 "--preset fast fp32" "needs --precision bf16" "$tmp/gd.mp4" \
    "$H3" generate -d $TINY "${GA[@]}" --preset fast --precision fp32 -o "$tmp/gd.mp4"
echo "RESULT $pass $fail"
