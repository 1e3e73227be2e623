#!/usr/bin/env bash
# --show / !show (docs/model/features.md 2 and 3): terminal previews on the tiny fixture, the terminal chosen by the
# environment (KITTY_WINDOW_ID: Kitty graphics; TERM_PROGRAM=iTerm.app: iTerm2 inline images):
#  - one image after every denoising pass, then one per final frame, on stdout; a line on stderr per pass;
#  - Kitty: raw RGB at the canvas size (s=64, v=32), base64 in chunks; iTerm2: a 24-bit BMP of the canvas shown
#    at --zoom x its size (width=128px at the default zoom 2);
#  - the outputs (latents, frames, audio) are byte-identical with and without --show;
#  - no graphics terminal: one warning line and no images; --zoom 0 is refused (exit 2);
#  - the session's !show is refused without a graphics terminal and turns previews on with one; a session's kept video
#    decoder serves the later generations' previews.
set -u
source "$(dirname "$0")/lib/common.bash"
# a clean terminal environment, then the variables given
term() { env -u KITTY_WINDOW_ID -u TERM_PROGRAM -u GHOSTTY_RESOURCES_DIR -u ITERM_SESSION_ID -u WEZTERM_PANE \
             -u KONSOLE_VERSION TERM=dumb "$@"; }
BASE=(-d "$TINY" --width 64 --height 32 --frames 120 --steps 2 --seed 5 -p "A red fox." -o '')
ESC=$'\033'

term "$H3" generate "${BASE[@]}" --dump-latents "$tmp/plain.st" >"$tmp/plain.out" 2>"$tmp/plain.err"
check "without --show: exit 0, nothing on stdout" '[ $? = 0 ] && [ ! -s "$tmp/plain.out" ]'

term KITTY_WINDOW_ID=1 "$H3" generate "${BASE[@]}" --show --zoom 1 --dump-latents "$tmp/kitty.st" \
    >"$tmp/kitty.out" 2>"$tmp/kitty.err"
check "kitty: exit 0" '[ $? = 0 ]'
check "kitty: outputs identical to the run without --show" 'cmp -s "$tmp/plain.st" "$tmp/kitty.st"'
check "kitty: 2 pass previews + 124 final frames" '[ "$(grep -ac "${ESC}_Ga=T" "$tmp/kitty.out")" = 126 ]'
check "kitty: a line on stderr per pass" \
    'grep -q "preview after pass 1/2" "$tmp/kitty.err" && grep -q "preview after pass 2/2" "$tmp/kitty.err"'
check "kitty: raw RGB at the canvas size" 'head -1 "$tmp/kitty.out" | grep -aq "${ESC}_Ga=T,f=24,s=64,v=32,q=2,m=[01];"'
head -1 "$tmp/kitty.out" | sed -e "s/${ESC}_G[^;]*;//g" -e "s/${ESC}\\\\//g" | base64 -d >"$tmp/k0.rgb" 2>/dev/null
check "kitty: the first preview decodes to 64 x 32 x 3 bytes" '[ "$(stat -c %s "$tmp/k0.rgb")" = 6144 ]'
check "kitty: the preview is not flat" '[ "$(od -An -tu1 -v "$tmp/k0.rgb" | tr -s " " "\n" | sort -u | wc -l)" -gt 8 ]'
sed -n 3p "$tmp/kitty.out" | sed -e "s/${ESC}_G[^;]*;//g" -e "s/${ESC}\\\\//g" | base64 -d >"$tmp/k2.rgb" 2>/dev/null
sed -n 126p "$tmp/kitty.out" | sed -e "s/${ESC}_G[^;]*;//g" -e "s/${ESC}\\\\//g" | base64 -d >"$tmp/k125.rgb" 2>/dev/null
check "kitty: final frames decode, first and last differ" \
    '[ "$(stat -c %s "$tmp/k2.rgb")" = 6144 ] && [ "$(stat -c %s "$tmp/k125.rgb")" = 6144 ] && ! cmp -s "$tmp/k2.rgb" "$tmp/k125.rgb"'

# --preview-width N (h3_params.preview_width): at most half the canvas, the pass previews come at half size from
# 2x2-averaged latents (gen_preview.c); the final frames and every output are unchanged
term KITTY_WINDOW_ID=1 "$H3" generate "${BASE[@]}" --show --zoom 1 --preview-width 32 --dump-latents "$tmp/half.st" \
    >"$tmp/half.out" 2>"$tmp/half.err"
check "--preview-width 32: exit 0, outputs identical to the run without --show" '[ $? = 0 ] && cmp -s "$tmp/plain.st" "$tmp/half.st"'
check "--preview-width 32: 2 pass previews at 32 x 16, then 124 final frames at 64 x 32" \
    '[ "$(grep -ac "${ESC}_Ga=T,f=24,s=32,v=16," "$tmp/half.out")" = 2 ] && [ "$(grep -ac "${ESC}_Ga=T,f=24,s=64,v=32," "$tmp/half.out")" = 124 ]'
head -1 "$tmp/half.out" | sed -e "s/${ESC}_G[^;]*;//g" -e "s/${ESC}\\\\//g" | base64 -d >"$tmp/h0.rgb" 2>/dev/null
check "--preview-width 32: the first preview decodes to 32 x 16 x 3 bytes and is not flat" \
    '[ "$(stat -c %s "$tmp/h0.rgb")" = 1536 ] && [ "$(od -An -tu1 -v "$tmp/h0.rgb" | tr -s " " "\n" | sort -u | wc -l)" -gt 8 ]'
term KITTY_WINDOW_ID=1 "$H3" generate "${BASE[@]}" --show --preview-width 40 --dump-latents "$tmp/h40.st" >"$tmp/h40.out" 2>/dev/null
check "--preview-width 40 (more than half of 64): full-size previews" '[ "$(grep -ac "${ESC}_Ga=T,f=24,s=64,v=32," "$tmp/h40.out")" = 126 ]'
term "$H3" generate "${BASE[@]}" --preview-width 0 >/dev/null 2>"$tmp/pw0.err"
check "--preview-width 0: exit 2 with one line" '[ $? = 2 ] && [ "$(wc -l <"$tmp/pw0.err")" = 1 ] && grep -q "preview-width" "$tmp/pw0.err"'

term TERM_PROGRAM=iTerm.app "$H3" generate "${BASE[@]}" --show --dump-latents "$tmp/iterm.st" >"$tmp/iterm.out" 2>"$tmp/iterm.err"
check "iterm2: exit 0, 126 images" '[ $? = 0 ] && [ "$(grep -ac "${ESC}]1337;File=inline=1;" "$tmp/iterm.out")" = 126 ]'
check "iterm2: a BMP of 6198 bytes shown at zoom 2" \
    'head -1 "$tmp/iterm.out" | grep -aq "${ESC}]1337;File=inline=1;size=6198;width=128px;height=64px;preserveAspectRatio=1:"'
head -1 "$tmp/iterm.out" | sed -e "s/^${ESC}]1337;File=[^:]*://" -e "s/\\a\$//" | base64 -d >"$tmp/i0.bmp" 2>/dev/null
check "iterm2: the payload is a 64 x 32, 24-bit BMP" \
    '[ "$(head -c 2 "$tmp/i0.bmp")" = BM ] && [ "$(stat -c %s "$tmp/i0.bmp")" = 6198 ] &&
     [ "$(od -An -tu4 -j18 -N8 "$tmp/i0.bmp" | tr -s " ")" = " 64 32" ] && [ "$(od -An -tu2 -j28 -N2 "$tmp/i0.bmp" | tr -d " ")" = 24 ]'
check "iterm2: the same pixels as kitty's (BGR rows bottom-up)" \
    '[ "$(tail -c 6144 "$tmp/i0.bmp" | od -An -tu1 -v | tr -s " " "\n" | sort | uniq -c | md5sum)" = "$(od -An -tu1 -v "$tmp/k0.rgb" | tr -s " " "\n" | sort | uniq -c | md5sum)" ]'

term "$H3" generate "${BASE[@]}" --show --dump-latents "$tmp/none.st" >"$tmp/none.out" 2>"$tmp/none.err"
check "no graphics terminal: exit 0, one warning, no images" \
    '[ $? = 0 ] && [ "$(grep -c "no graphics terminal detected" "$tmp/none.err")" = 1 ] && [ ! -s "$tmp/none.out" ]'
term KITTY_WINDOW_ID=1 "$H3" generate "${BASE[@]}" --show --zoom 0 --dump-latents "$tmp/z.st" >/dev/null 2>"$tmp/zoom.err"
check "--zoom 0: exit 2 with one line" '[ $? = 2 ] && [ "$(wc -l <"$tmp/zoom.err")" = 1 ] && grep -q "zoom" "$tmp/zoom.err"'

SBASE=(-d "$TINY" --width 64 --height 32 --frames 120 --steps 2 --seed 5 -o '' --dump-latents "$tmp/sess.st")
printf '!show on\n!status\n!quit\n' | term "$H3" generate "${SBASE[@]}" >"$tmp/s1.out" 2>"$tmp/s1.err"
check "session without a graphics terminal: !show on refused, status off" \
    'grep -q "!show: no graphics terminal" "$tmp/s1.err" && grep -q "^show off (terminal graphics: none, zoom 2)" "$tmp/s1.out"'
printf '!show on\nA red fox.\n!show off\nA red fox.\n!quit\n' | term KITTY_WINDOW_ID=1 "$H3" generate "${SBASE[@]}" \
    >"$tmp/s2.out" 2>"$tmp/s2.err"
check "session with kitty: !show on, previews for the first generation only" \
    '[ $? = 0 ] && grep -q "^show on" "$tmp/s2.out" && [ "$(grep -ac "${ESC}_Ga=T" "$tmp/s2.out")" = 126 ]'
# the session's default keeps the video decoder: the second generation's previews come from it (docs/model/features.md 3: the
# kept decoder serves as the preview decoder), the same images as the first's (the same seed and prompt)
printf '!show on\nA red fox.\nA red fox.\n!quit\n' | term KITTY_WINDOW_ID=1 "$H3" generate "${SBASE[@]}" \
    >"$tmp/s3.out" 2>"$tmp/s3.err"
check "session with kitty: two generations, 2 x 126 images" '[ $? = 0 ] && [ "$(grep -ac "${ESC}_Ga=T" "$tmp/s3.out")" = 252 ]'
check "session: the second generation's previews from the kept decoder (one preview decoder loaded)" \
    '[ "$(grep -c "^load preview VAE" "$tmp/s3.err")" = 1 ] && grep -q "^h3: video VAE decoder resident" "$tmp/s3.err"'
grep -a "${ESC}_Ga=T" "$tmp/s3.out" | head -126 >"$tmp/s3a"; grep -a "${ESC}_Ga=T" "$tmp/s3.out" | tail -126 >"$tmp/s3b"
check "session: the kept decoder's previews and frames = the first generation's" 'cmp -s "$tmp/s3a" "$tmp/s3b"'
echo "RESULT $pass $fail"
