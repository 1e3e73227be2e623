#!/usr/bin/env bash
# `h3 generate` flag validation (one line naming the flag and the rule, exit 2, nothing written)
# and `h3 make-tiny` (writes a snapshot that `h3 info` validates; never overwrites).
set -u
source "$(dirname "$0")/lib/common.bash" # H3, TINY, $tmp (removed at exit), pass/fail, ok, bad, check
IMG=tests/fixtures/media/rgb.png
check() { # check DESCRIPTION PATTERN -- ARGS...
    local desc=$1 pat=$2; shift 3
    local out rc
    out=$("$H3" generate "$@" 2>&1 </dev/null); rc=$?
    if [ "$rc" -ne 2 ]; then echo "FAIL $desc: exit $rc, want 2: $out"; fail=$((fail + 1)); return; fi
    if [ "$(printf '%s\n' "$out" | wc -l)" -ne 1 ]; then echo "FAIL $desc: more than one line: $out"; fail=$((fail + 1)); return; fi
    if ! grep -qF -- "$pat" <<<"$out"; then echo "FAIL $desc: '$out' lacks '$pat'"; fail=$((fail + 1)); return; fi
    if [ -n "$(ls -A "$tmp/out")" ]; then echo "FAIL $desc: wrote files"; fail=$((fail + 1)); return; fi
    pass=$((pass + 1))
}
mkdir -p "$tmp/out"
O="$tmp/out/x.mp4"
check "no model" "-d SNAPSHOT_DIR is required" -- -p hi -o "$O"
check "no prompt: a session, which takes no -o FILE" "a session writes video-NNNN.mp4" -- -d "$TINY" -o "$O"
check "empty prompt" "-p: the prompt is empty" -- -d "$TINY" -p "" -o "$O"
check "width alone" "--width and --height must be given together" -- -d "$TINY" -p hi -o "$O" --width 64
check "not multiple of 32" "multiples of 32" -- -d "$TINY" -p hi -o "$O" --width 100 --height 64
check "too small" "at least 32" -- -d "$TINY" -p hi -o "$O" --width 32 --height 16
check "zero width" "--width expects an integer" -- -d "$TINY" -p hi -o "$O" --width 0 --height 64
check "pixel cap" "pixel cap" -- -d "$TINY" -p hi -o "$O" --width 1024 --height 1024
check "aspect" "aspect ratio outside 1:4..4:1" -- -d "$TINY" -p hi -o "$O" --width 1280 --height 256
check "frames and seconds" "--frames and --seconds are mutually exclusive" -- -d "$TINY" -p hi -o "$O" --frames 124 --seconds 6
check "too short" "--frames: num_frames" -- -d "$TINY" -p hi -o "$O" --frames 22
check "too long" "rounded up to 362" -- -d "$TINY" -p hi -o "$O" --frames 346
check "seconds negative" "--seconds must be a finite number > 0" -- -d "$TINY" -p hi -o "$O" --seconds -3
check "seconds nan" "--seconds must be a finite number > 0" -- -d "$TINY" -p hi -o "$O" --seconds nan
check "seconds text" "--seconds expects a number" -- -d "$TINY" -p hi -o "$O" --seconds abc
check "steps zero" "--steps expects an integer in 1..1000" -- -d "$TINY" -p hi -o "$O" --steps 0
check "steps text" "--steps expects an integer" -- -d "$TINY" -p hi -o "$O" --steps many
check "reuse range" "--reuse expects an integer in 1..3" -- -d "$TINY" -p hi -o "$O" --reuse 4
check "layers range" "--layers expects an integer in 35..50" -- -d "$TINY" -p hi -o "$O" --layers 51
check "quant needs bf16" "--quant fp8 needs --precision bf16" -- -d "$TINY" -p hi -o "$O" --precision fp32 --quant fp8
check "quant value" "--quant must be none, fp8 or int8" -- -d "$TINY" -p hi -o "$O" --quant fp4
check "streaming and fp8" "--ssd-streaming cannot be combined with --quant fp8" -- -d "$TINY" -p hi -o "$O" --ssd-streaming --quant fp8
check "token reduction needs bf16" "--token-reduction needs --precision bf16" -- -d "$TINY" -p hi -o "$O" --precision fp32 --token-reduction
H3_TOKEN_REDUCTION_BLOCKS=9:3 check "token reduction blocks override" "H3_TOKEN_REDUCTION_BLOCKS" -- -d "$TINY" -p hi -o "$O" --token-reduction
H3_TOKEN_REDUCTION_SCALE=7 check "token reduction scale override" "H3_TOKEN_REDUCTION_SCALE" -- -d "$TINY" -p hi -o "$O" --token-reduction
H3_TOKEN_REDUCTION_EARLY=x check "token reduction early override" "H3_TOKEN_REDUCTION_EARLY" -- -d "$TINY" -p hi -o "$O" --token-reduction
check "render alone" "--render-width and --render-height must be given together" -- -d "$TINY" -p hi -o "$O" --render-width 64
check "render multiple" "must be multiples of 32" -- -d "$TINY" -p hi -o "$O" --width 128 --height 64 --render-width 48 --render-height 32
check "render aspect" "must have exactly its aspect" -- -d "$TINY" -p hi -o "$O" --width 128 --height 64 --render-width 96 --render-height 64
check "render keyframes" "need --width/--height" -- -d "$TINY" -p hi -o "$O" --first-frame "$IMG" --render-width 64 --render-height 64
check "core-reuse range" "--core-reuse expects an integer in 1..6" -- -d "$TINY" -p hi -o "$O" --core-reuse 7
check "core-reuse with reuse" "--core-reuse 2 cannot be combined with --reuse 2" -- -d "$TINY" -p hi -o "$O" --core-reuse 2 --reuse 2
check "seed negative" "--seed expects an unsigned 64-bit integer" -- -d "$TINY" -p hi -o "$O" --seed -1
check "seed overflow" "--seed expects an unsigned 64-bit integer" -- -d "$TINY" -p hi -o "$O" --seed 18446744073709551616
check "precision" "--precision must be bf16 or fp32" -- -d "$TINY" -p hi -o "$O" --precision fp16
check "backend" "--backend must be cpu or cuda" -- -d "$TINY" -p hi -o "$O" --backend tpu
check "unknown flag" "unknown option '--colour'" -- -d "$TINY" -p hi -o "$O" --colour red
check "missing value" "--steps needs a value" -- -d "$TINY" -p hi -o "$O" --steps
check "anchors + refs" "cannot be combined with --ref-*" -- -d "$TINY" -p hi -o "$O" --first-frame "$IMG" --ref-image "$IMG" --frames 124
check "missing keyframe" "--last-frame $tmp/nope.png: not a readable file" -- -d "$TINY" -p hi -o "$O" --last-frame "$tmp/nope.png"
check "ref2va needs frames" "ref2va needs --frames or --seconds" -- -d "$TINY" -p hi -o "$O" --ref-image "$IMG"
check "audio-only refs" "audio-only references are not allowed" -- -d "$TINY" -p hi -o "$O" --frames 124 --ref-audio "$IMG"
check "video-audio one path" "--ref-video-audio takes two paths" -- -d "$TINY" -p hi -o "$O" --frames 124 --ref-video-audio "$IMG"
args=(); for i in $(seq 10); do args+=(--ref-image "$IMG"); done
check "ten images" "at most 9 image references" -- -d "$TINY" -p hi -o "$O" --frames 124 "${args[@]}"
args=(); for i in $(seq 13); do args+=(--ref-image "$IMG"); done
check "thirteen refs" "at most 12 references in total" -- -d "$TINY" -p hi -o "$O" --frames 124 "${args[@]}"
check "four videos" "at most 3 video references" -- -d "$TINY" -p hi -o "$O" --frames 124 --ref-silent-video "$IMG" --ref-silent-video "$IMG" --ref-silent-video "$IMG" --ref-silent-video "$IMG"
check "output folder" "-o $tmp/nodir/x.mp4: the folder does not exist" -- -d "$TINY" -p hi -o "$tmp/nodir/x.mp4"
check "nothing to write" "nothing would be written" -- -d "$TINY" -p hi -o ""
check "random weights t2va only" "--random-weights: only t2va" -- -d "$TINY" -p hi -o "" --random-weights --first-frame "$IMG"

# --random-weights: the whole pipeline on models made from the configs, nothing written with -o '';
# the profile lists the load phases apart from the compute
out=$("$H3" generate -d "$TINY" -p "A fox." -o "" --random-weights --steps 2 --width 64 --height 32 --profile 2>&1); rc=$?
if [ $rc -eq 0 ] && grep -q "make random transformer" <<<"$out" && grep -q "^  compute " <<<"$out" && [ -z "$(ls -A "$tmp/out")" ]; then
    pass=$((pass + 1)); else echo "FAIL --random-weights run: rc $rc: $(tail -3 <<<"$out")"; fail=$((fail + 1)); fi

# an H3_TOKEN_REDUCTION_BLOCKS end past the model's blocks is known once its config is read: still exit 2, nothing written
out=$(H3_TOKEN_REDUCTION_BLOCKS=4:900 "$H3" generate -d "$TINY" -p hi -o "" --dump-latents "$tmp/tr.st" --token-reduction \
      --steps 2 --width 64 --height 32 2>&1 </dev/null); rc=$?
if [ $rc -eq 2 ] && tail -1 <<<"$out" | grep -qF "H3_TOKEN_REDUCTION_BLOCKS must be BEGIN:END" && [ ! -e "$tmp/tr.st" ]; then
    pass=$((pass + 1)); else echo "FAIL token reduction blocks past the model: rc $rc: $(tail -1 <<<"$out")"; fail=$((fail + 1)); fi

# --ssd-streaming (docs/model/features.md 7.3) on the CPU backend, whose weights are the file mapping already: a note, and the
# resident run's latents (the streamed path itself: test_dit's --ssd-streaming cases, tests/cuda/test_cuda_stream)
"$H3" generate -d "$TINY" -p "A fox." -o "" --dump-latents "$tmp/st0.st" --steps 2 --width 64 --height 32 >/dev/null 2>&1 </dev/null
"$H3" generate -d "$TINY" -p "A fox." -o "" --dump-latents "$tmp/st1.st" --steps 2 --width 64 --height 32 --ssd-streaming \
    >"$tmp/st.log" 2>&1 </dev/null
if grep -q "^h3: --ssd-streaming: no effect on the CPU backend" "$tmp/st.log" && [ -s "$tmp/st0.st" ] && cmp -s "$tmp/st0.st" "$tmp/st1.st"
then pass=$((pass + 1)); else echo "FAIL --ssd-streaming on the CPU: $(tail -1 "$tmp/st.log")"; fail=$((fail + 1)); fi

# --info (docs/model/features.md 2): alone it inspects only (h3 info's report, exit 0); with -p it inspects, then generates
out=$("$H3" generate -d "$TINY" --info 2>&1 </dev/null); rc=$?
if [ $rc -eq 0 ] && grep -q "^snapshot $TINY" <<<"$out" && [ "$out" = "$("$H3" info -d "$TINY" 2>&1)" ]; then
    pass=$((pass + 1)); else echo "FAIL generate --info: rc $rc: $(tail -2 <<<"$out")"; fail=$((fail + 1)); fi
out=$("$H3" generate -d "$TINY" --info -p "A fox." -o "" --dump-latents "$tmp/info.st" --steps 2 --width 64 --height 32 \
      2>&1 </dev/null); rc=$?
if [ $rc -eq 0 ] && grep -q "^snapshot $TINY" <<<"$out" && [ -s "$tmp/info.st" ]; then
    pass=$((pass + 1)); else echo "FAIL generate --info -p: rc $rc: $(tail -2 <<<"$out")"; fail=$((fail + 1)); fi
out=$("$H3" generate -d "$tmp/nosuch" --info 2>&1 </dev/null); rc=$?
if [ $rc -eq 2 ]; then pass=$((pass + 1)); else echo "FAIL generate --info on a missing snapshot: rc $rc: $out"; fail=$((fail + 1)); fi

# make-tiny: a valid snapshot, atomic, never overwriting.
if "$H3" make-tiny "$tmp/snap" >/dev/null 2>&1 && "$H3" info -d "$tmp/snap" >/dev/null 2>&1; then pass=$((pass + 1)); else echo "FAIL make-tiny + info"; fail=$((fail + 1)); fi
out=$("$H3" make-tiny "$tmp/snap" 2>&1); rc=$?
if [ $rc -eq 2 ] && grep -qF "already exists" <<<"$out"; then pass=$((pass + 1)); else echo "FAIL make-tiny overwrite: $rc $out"; fail=$((fail + 1)); fi
out=$("$H3" make-tiny "$tmp/snap2" --skeleton "$tmp/none" 2>&1); rc=$?
if [ $rc -eq 2 ] && grep -qF "release skeleton" <<<"$out" && [ -z "$(ls "$tmp" | grep snap2)" ]; then pass=$((pass + 1)); else echo "FAIL make-tiny bad skeleton: $rc $out"; fail=$((fail + 1)); fi
echo "RESULT $pass $fail"
