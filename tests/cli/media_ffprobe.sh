#!/usr/bin/env bash
# The MP4 our writer produces (test_media --write-mp4: 22 frames 64x48 + 29600 stereo samples),
# checked from outside with ffprobe: H.264 yuv420p at 24 fps, AAC-LC 32 kHz stereo, durations in
# sync. Skipped (RESULT 0 0) without ffprobe or in a MEDIA=0 build.
set -u
source "$(dirname "$0")/lib/common.bash" # H3, TINY, $tmp (removed at exit), pass/fail, ok, bad, check
T=$(dirname "$H3")/tests/test_media

if ! command -v ffprobe >/dev/null || [ ! -x "$T" ]; then
    echo "skipped: needs ffprobe and $T"; echo "RESULT 0 0"; exit 0
fi
if ! "$T" --write-mp4 "$tmp/clip.mp4" 2>"$tmp/err"; then
    if grep -q "MEDIA=0" "$tmp/err"; then echo "skipped: MEDIA=0 build"; echo "RESULT 0 0"; exit 0; fi
    bad "writing the clip: $(cat "$tmp/err")"; echo "RESULT $pass $fail"; exit 1
fi
ls -A "$tmp" | grep -q h3tmp && bad "temporary file left next to the MP4" || ok

probe() { # stream selector, entries
    ffprobe -v error -select_streams "$1" -count_frames -show_entries "stream=$2" -of default=nw=1 "$tmp/clip.mp4"
}
v=$(probe v:0 codec_name,pix_fmt,width,height,avg_frame_rate,nb_read_frames,duration,color_space)
a=$(probe a:0 codec_name,profile,sample_rate,channels,duration)
expect() { # text, line
    grep -qxF -- "$2" <<<"$1" && ok || bad "ffprobe lacks '$2' in: $(tr '\n' ' ' <<<"$1")"
}
expect "$v" codec_name=h264
expect "$v" pix_fmt=yuv420p
expect "$v" width=64
expect "$v" height=48
expect "$v" avg_frame_rate=24/1
expect "$v" nb_read_frames=22
expect "$v" color_space=bt709
expect "$a" codec_name=aac
expect "$a" profile=LC
expect "$a" sample_rate=32000
expect "$a" channels=2
# Durations: video 22/24 = 0.916667 s, audio 29600/32000 = 0.925 s; within one AAC frame (32 ms).
vd=$(grep ^duration= <<<"$v" | cut -d= -f2); ad=$(grep ^duration= <<<"$a" | cut -d= -f2)
awk -v v="$vd" -v a="$ad" 'BEGIN { exit !(v > 0.9166 && v < 0.9168 && a >= 0.925 && a < 0.925 + 0.032) }' \
    && ok || bad "durations video $vd audio $ad"
# The moov atom comes first (faststart), so the file plays while still downloading.
moov=$(grep -obUaF moov "$tmp/clip.mp4" | head -1 | cut -d: -f1)
mdat=$(grep -obUaF mdat "$tmp/clip.mp4" | head -1 | cut -d: -f1)
[ -n "$moov" ] && [ -n "$mdat" ] && [ "$moov" -lt "$mdat" ] && ok || bad "moov ($moov) is not before mdat ($mdat)"
# --x264-preset (h3_params.x264_preset): the default is x264's fast; --preset fast encodes with veryfast unless told.
# x264 records its settings in the stream (an SEI): fast looks 30 frames ahead, veryfast 10.
G=(generate -d "$TINY" -p "A red fox." --width 64 --height 32 --steps 1 --seed 3)
"$H3" "${G[@]}" -o "$tmp/def.mp4" 2>/dev/null && "$H3" "${G[@]}" --x264-preset fast -o "$tmp/fast.mp4" 2>/dev/null
cmp -s "$tmp/def.mp4" "$tmp/fast.mp4" && grep -qaF "rc_lookahead=30" "$tmp/def.mp4" && ok || bad "the default MP4 is not x264's fast preset"
"$H3" "${G[@]}" --x264-preset veryfast -o "$tmp/vf.mp4" 2>/dev/null
n=$(ffprobe -v error -select_streams v:0 -count_frames -show_entries stream=nb_read_frames -of csv=p=0 "$tmp/vf.mp4" 2>&1)
[ "$n" = 124 ] && grep -qaF "rc_lookahead=10" "$tmp/vf.mp4" && ! cmp -s "$tmp/def.mp4" "$tmp/vf.mp4" && ok \
    || bad "--x264-preset veryfast: $n frames or not veryfast's settings"
"$H3" "${G[@]}" --preset fast -o "$tmp/pf.mp4" 2>/dev/null && grep -qaF "rc_lookahead=10" "$tmp/pf.mp4" && ok \
    || bad "--preset fast does not encode with veryfast"
"$H3" "${G[@]}" --preset fast --x264-preset fast -o "$tmp/pff.mp4" 2>/dev/null && grep -qaF "rc_lookahead=30" "$tmp/pff.mp4" && ok \
    || bad "--preset fast --x264-preset fast: the explicit preset does not win"
out=$("$H3" "${G[@]}" --x264-preset quick -o "$tmp/q.mp4" 2>&1); rc=$?
[ $rc = 2 ] && [ "$(wc -l <<<"$out")" = 1 ] && grep -q "x264-preset must be one of" <<<"$out" && [ ! -e "$tmp/q.mp4" ] && ok \
    || bad "--x264-preset quick: rc $rc, $out"
echo "RESULT $pass $fail"
[ "$fail" -eq 0 ]
