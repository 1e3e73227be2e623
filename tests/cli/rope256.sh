#!/usr/bin/env bash
# The 256-square RoPE adaptation (docs/model/features.md 5.7) on the tiny fixture: at a 256x256 render canvas h3 halves every
# row's spatial RoPE coordinates (one stderr line says so) and --use-reference-rope / !reference-rope keep the
# released ones; other canvases are untouched. (The loop-level rule, halved coordinates bit for bit, is in
# tests/test_denoise.c; the diffusers parity at 256x256 runs with --use-reference-rope in tests/test_e2e.c.)
set -u
source "$(dirname "$0")/lib/common.bash"
NOTE="spatial RoPE coordinates halved"
run() { # name, args...
    local n=$1; shift
    "$H3" generate -d "$TINY" -p "A red fox." --frames 120 --steps 2 --seed 3 -o '' --dump-latents "$tmp/$n.st" "$@" \
        >/dev/null 2>"$tmp/$n.err"
    echo $? >"$tmp/$n.rc"
}
run sq --width 256 --height 256
run sqref --width 256 --height 256 --use-reference-rope
run wide --width 256 --height 224
run wideref --width 256 --height 224 --use-reference-rope
for n in sq sqref wide wideref; do check "$n: exit 0" '[ "$(cat $tmp/$n.rc)" = 0 ]'; done
check "256x256: one line says the coordinates are halved" '[ "$(grep -c "$NOTE" "$tmp/sq.err")" = 1 ]'
check "256x256 --use-reference-rope: no such line" '! grep -q "$NOTE" "$tmp/sqref.err"'
check "256x256: the adaptation changes the output" '! cmp -s "$tmp/sq.st" "$tmp/sqref.st"'
check "256x224: no line, and the flag changes nothing" \
    '! grep -q "$NOTE" "$tmp/wide.err" && cmp -s "$tmp/wide.st" "$tmp/wideref.st"'
printf '!reference-rope on\n!status\nA red fox.\n!reference-rope off\nA red fox.\n!quit\n' |
    "$H3" generate -d "$TINY" --width 256 --height 256 --frames 120 --steps 2 --seed 3 -o '' \
        --dump-latents "$tmp/sess.st" >"$tmp/sess.out" 2>"$tmp/sess.err"
check "session: exit 0" '[ $? = 0 ]'
check "session: !reference-rope on, !status says released" \
    'grep -q "^reference rope on" "$tmp/sess.out" && grep -q "spatial RoPE at 256x256: released" "$tmp/sess.out"'
check "session: with !reference-rope on = the one-shot with --use-reference-rope" 'cmp -s "$tmp/sess-0001.st" "$tmp/sqref.st"'
check "session: after !reference-rope off = the one-shot default" 'cmp -s "$tmp/sess-0002.st" "$tmp/sq.st"'
echo "RESULT $pass $fail"
