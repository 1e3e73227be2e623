#!/usr/bin/env bash
# The session's !open and !zoom (docs/model/features.md 3): !open on hands each finished MP4 to the system opener (xdg-open;
# H3_OPENER names another program: here a script that records its argument), !open off stops it; refused without
# an opener or without MP4s (-o ''). !zoom sets the previews' scale (1..64). MP4s need FFmpeg: the !open part is
# skipped in a MEDIA=0 build.
set -u
source "$(dirname "$0")/lib/common.bash"
BASE=(-d "$TINY" --width 64 --height 32 --frames 120 --steps 2 --seed 4)

printf '!zoom 3\n!status\n!zoom 0\n!quit\n' | "$H3" generate "${BASE[@]}" -o '' --dump-latents "$tmp/z.st" \
    >"$tmp/z.out" 2>"$tmp/z.err"
check "!zoom: exit 0, set and shown" '[ $? = 0 ] && grep -q "^zoom 3" "$tmp/z.out" && grep -q "zoom 3)" "$tmp/z.out"'
check "!zoom 0 refused with one line" '[ "$(grep -c "zoom" "$tmp/z.err")" = 1 ]'
printf '!open on\n!quit\n' | "$H3" generate "${BASE[@]}" -o '' --dump-latents "$tmp/n.st" >/dev/null 2>"$tmp/n.err"
check "!open without MP4s refused" 'grep -q "!open: this session writes no MP4s" "$tmp/n.err"'

if "$H3" generate "${BASE[@]}" -p x -o "$tmp/probe.mp4" 2>&1 | grep -q "MEDIA=0"; then
    echo "skipped !open: MEDIA=0 build"
else
    printf '#!/bin/sh\necho "$1" >>"%s/opened"\n' "$tmp" >"$tmp/op.sh"
    chmod +x "$tmp/op.sh"
    printf '!open on\nA red fox.\n!open off\nA red fox.\n!quit\n' | H3_OPENER="$tmp/op.sh" TMPDIR="$tmp" \
        "$H3" generate "${BASE[@]}" >"$tmp/o.out" 2>"$tmp/o.err"
    check "!open session: exit 0" '[ $? = 0 ] && grep -q "^open on" "$tmp/o.out" && grep -q "^open off" "$tmp/o.out"'
    for i in $(seq 50); do [ -s "$tmp/opened" ] && break; sleep 0.1; done
    first=$(grep -o '/[^ ]*video-0001.mp4' "$tmp/o.out" | head -1)
    check "!open on: the first video (only) went to the opener" \
        '[ -n "$first" ] && [ "$(cat "$tmp/opened" 2>/dev/null)" = "$first" ] && [ -s "$first" ]'
    printf '!open on\n!quit\n' | H3_OPENER="$tmp/no-such-opener" TMPDIR="$tmp" "$H3" generate "${BASE[@]}" \
        >/dev/null 2>"$tmp/x.err"
    check "!open without an opener refused" 'grep -q "!open: $tmp/no-such-opener not found" "$tmp/x.err"'
fi
echo "RESULT $pass $fail"
