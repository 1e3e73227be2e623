#!/usr/bin/env bash
# Flags, numbers, results and messages (docs/robustness.md):
#  1. one strict decimal syntax for every number of a flag or a session command (no sign, no spaces, no hex, no
#     exponent), NUL bytes in session lines refused;
#  2. the output-length rule, its message and --help agree with the reference (aligned 124..345 frames);
#  3. messages: an unknown trailing flag, --flag=value, --backend cuda on a CPU build (exit 2), !steps' help,
#     quoted inputs truncated;
#  4. the schedulers' configs are read (shift), checked and refused with one line;
#  5. the prompt's token limit;
#  6. --ref-audio's 15 s limit on the exact decoded duration;
#  7. non-finite latents or samples are an error naming the phase.
set -u
source "$(dirname "$0")/lib/common.bash" # H3, TINY, $tmp (removed at exit), pass/fail, ok, bad, check
IMG=tests/fixtures/media/rgb.png
mkdir -p "$tmp/out"
O="$tmp/out/x.mp4"
refuse() { # refuse DESCRIPTION PATTERN -- ARGS...: exit 2, one line holding PATTERN, nothing written
    local desc=$1 pat=$2; shift 3
    local out rc
    out=$("$H3" generate "$@" 2>&1 </dev/null); rc=$?
    if [ "$rc" -ne 2 ]; then bad "$desc: exit $rc, want 2: ${out:0:300}"; return; fi
    if [ "$(printf '%s\n' "$out" | wc -l)" -ne 1 ]; then bad "$desc: more than one line: ${out:0:300}"; return; fi
    if ! grep -qF -- "$pat" <<<"$out"; then bad "$desc: '${out:0:300}' lacks '$pat'"; return; fi
    if [ -n "$(ls -A "$tmp/out")" ]; then bad "$desc: wrote files"; return; fi
    ok
}
A=(-d "$TINY" -p hi -o "$O")

# ---- 1. numbers ----
refuse "seed with a leading space" "--seed expects an unsigned 64-bit integer, got ' -1'" -- "${A[@]}" --seed " -1"
refuse "seed with a plus sign" "--seed expects" -- "${A[@]}" --seed +7
refuse "seed in hex" "--seed expects" -- "${A[@]}" --seed 0x10
refuse "seed with a trailing space" "--seed expects" -- "${A[@]}" --seed "7 "
refuse "width with a leading space" "--width expects an integer" -- "${A[@]}" --width " 128" --height 64
refuse "height with a plus sign" "--height expects an integer" -- "${A[@]}" --width 128 --height +64
refuse "steps in hex" "--steps expects an integer" -- "${A[@]}" --steps 0x4
refuse "frames negative" "--frames expects an integer" -- "${A[@]}" --frames -124
refuse "seconds in hex" "--seconds must be a finite number > 0 in plain decimal" -- "${A[@]}" --seconds 0x5
refuse "seconds with an exponent" "--seconds must be a finite number > 0 in plain decimal" -- "${A[@]}" --seconds 1e1
refuse "seconds with a space" "--seconds must be a finite number > 0 in plain decimal" -- "${A[@]}" --seconds " 6"
refuse "seconds inf" "--seconds must be a finite number > 0 in plain decimal" -- "${A[@]}" --seconds inf
refuse "threads with a sign" "--threads expects an integer" -- "${A[@]}" --threads +2
out=$("$H3" make-tiny "$tmp/t" --seed " 5" 2>&1); rc=$?
check "make-tiny --seed ' 5' refused (exit 2)" '[ $rc = 2 ] && grep -q "expects an unsigned 64-bit integer" <<<"$out" && [ ! -e "$tmp/t" ]'
out=$("$H3" bench --backend cpu --repeats " 1" 2>&1); rc=$?
check "bench --repeats ' 1' refused (exit 2)" '[ $rc = 2 ] && grep -q "repeats must be an integer" <<<"$out"'

S=(generate -d "$TINY" --width 64 --height 32 --frames 120 --steps 2 -o '' --dump-latents "$tmp/s.safetensors")
session() { # session NAME < input: stdout in $tmp/NAME.out, stderr in $tmp/NAME.err, status in $tmp/NAME.rc
    "$H3" "${S[@]}" >"$tmp/$1.out" 2>"$tmp/$1.err"
    echo $? >"$tmp/$1.rc"
}
printf '%s\n' '!seed +7' '!seed  7x' '!seed 0x7' '!frames +120' '!frames 0x78' '!steps 2.0' '!seconds 0x5' \
    '!seconds 1e1' '!seconds -5' '!size +64x32' '!size 64x+32' '!size 64x 32' '!size 0x40x32' '!zoom 1e1' '!status' |
    session nums
check "session: 14 bad numbers, 14 error lines" '[ "$(grep -c "^h3: !" "$tmp/nums.err")" = 14 ]'
check "session: !seed +7 refused" 'grep -q "!seed expects an unsigned 64-bit integer.*got .+7." "$tmp/nums.err"'
check "session: !size 64x 32 refused" "grep -q \"!size expects WxH.*got '64x 32'\" \"\$tmp/nums.err\""
check "session: the state is unchanged" 'grep -q "^size 64x32," "$tmp/nums.out" && grep -q "^seed random" "$tmp/nums.out" &&
    grep -q "^frames 120 requested" "$tmp/nums.out" && grep -q "^steps 2," "$tmp/nums.out"'
printf '!seed 7\0 junk\n!seed 9\nA fox\0 and the rest\n!status\n' | session nul
check "session: a line with a NUL byte refused, twice" '[ "$(grep -c "holds a NUL byte" "$tmp/nul.err")" = 2 ]'
check "session: the NUL lines changed nothing and generated nothing" \
    'grep -q "seed 9 (fixed)" "$tmp/nul.out" && ! grep -q "seed 7 (fixed)" "$tmp/nul.out" && ! grep -q "^video-" "$tmp/nul.out" &&
     [ "$(cat "$tmp/nul.rc")" = 0 ]'
printf '!seed -1\n!seed random\n!seed 18446744073709551615\n!seed 18446744073709551616\n' | session seeds
check "session: !seed -1 and random are the documented keywords; 2^64-1 taken, 2^64 refused" \
    '[ "$(grep -c "seed random per generation" "$tmp/seeds.out")" = 2 ] && grep -q "seed 18446744073709551615 (fixed)" "$tmp/seeds.out" &&
     [ "$(grep -c "!seed expects" "$tmp/seeds.err")" = 1 ]'

# ---- 2. the output length ----
refuse "--seconds 15: the rule in the flags' terms" "--frames 108..345, --seconds 4.5..14.375" -- "${A[@]}" --seconds 15
refuse "--seconds 14.4 (346 frames -> 362)" "rounded up to 362" -- "${A[@]}" --seconds 14.4
refuse "--frames 346" "--frames 108..345, --seconds 4.5..14.375" -- "${A[@]}" --frames 346
refuse "--frames 107" "--frames 108..345, --seconds 4.5..14.375" -- "${A[@]}" --frames 107
printf '%s\n' '!seconds 14.375' '!frames 108' '!seconds 4.5' | session len
check "session: --seconds 14.375, --frames 108 and --seconds 4.5 are accepted" \
    'grep -q "seconds 14.375 = 345 frames requested -> 345 generated" "$tmp/len.out" &&
     grep -q "frames 108 requested -> 124 generated" "$tmp/len.out" && grep -q "seconds 4.5 = 108 frames requested -> 124" "$tmp/len.out"'
check "--help states the accepted lengths" '"$H3" generate --help | grep -q "frames 108..345, --seconds 4.5..14.375"'
check "README states the accepted lengths" 'grep -q "\`--frames 108..345\`, \`--seconds 4.5..14.375\`" README.md'

# ---- 3. messages ----
refuse "an unknown trailing flag" "unknown option '--colour'" -- "${A[@]}" --colour
refuse "--flag=value" "'--steps=4': write the value as the next argument (--steps 4)" -- "${A[@]}" --steps=4
refuse "--switch=value" "'--profile=1': --profile takes no value" -- "${A[@]}" --profile=1
refuse "a stray argument" "unexpected argument 'stray'" -- "${A[@]}" stray
refuse "a value flag at the end still needs its value" "--steps needs a value" -- "${A[@]}" --steps
if ! "$H3" generate --help | grep -q -- "--backend cpu|cuda" || ldd "$H3" | grep -q libcudart; then :; else
    refuse "--backend cuda on a CPU build is bad input" "built without CUDA" -- "${A[@]}" --backend cuda
fi
big=$(head -c 100000 /dev/zero | tr '\0' 7)
out=$("$H3" generate "${A[@]}" --seed "x$big" 2>&1); rc=$?
check "a 100 KB flag value is quoted truncated (exit 2, one short line)" \
    '[ $rc = 2 ] && [ ${#out} -lt 400 ] && grep -q "(100001 bytes)" <<<"$out"'
out=$("$H3" generate "${A[@]}" --last-frame "$tmp/$big" 2>&1); rc=$?
check "a 100 KB path is quoted truncated" '[ $rc = 2 ] && [ ${#out} -lt 400 ] && grep -q "not a readable file" <<<"$out"'
{ printf '!seed x'; head -c 2000000 /dev/zero | tr '\0' 7; printf '\n!'; head -c 2000000 /dev/zero | tr '\0' a; printf '\n'; } |
    session huge
check "session: 2 MB values and names are quoted truncated" \
    '[ "$(wc -l <"$tmp/huge.err")" -le 3 ] && [ "$(wc -c <"$tmp/huge.err")" -lt 1200 ] && [ "$(grep -c "(2000001 bytes)\|(2000000 bytes)" "$tmp/huge.err")" = 2 ]'
echo '!help' | session help
check "!steps' help says what !steps takes (1..1000), not >= 2" \
    'grep -q "!steps.*1\.\.1000" "$tmp/help.out" && ! grep -q "!steps.*>= 2" "$tmp/help.out"'

# ---- 4. the schedulers' configs ----
snap() { # snap DIR: the tiny snapshot with its own scheduler folders (the rest linked)
    mkdir -p "$1"
    for x in "$TINY"/*; do ln -s "$PWD/$x" "$1/$(basename "$x")"; done
    rm "$1/scheduler" "$1/audio_scheduler"
    cp -r "$TINY/scheduler" "$TINY/audio_scheduler" "$1/"
}
G=(--width 64 --height 32 --frames 120 --steps 2 -p "A red fox." -o '')
snap "$tmp/s5"; printf '{"_class_name": "MiniMaxH3Scheduler", "shift": 5.0}\n' >"$tmp/s5/scheduler/scheduler_config.json"
snap "$tmp/a9"; printf '{"_class_name": "MiniMaxH3Scheduler", "shift": 9.0}\n' >"$tmp/a9/audio_scheduler/scheduler_config.json"
"$H3" generate -d "$TINY" "${G[@]}" --dump-latents "$tmp/d12.safetensors" 2>/dev/null
"$H3" generate -d "$tmp/s5" "${G[@]}" --dump-latents "$tmp/d5.safetensors" 2>/dev/null
"$H3" generate -d "$tmp/a9" "${G[@]}" --dump-latents "$tmp/a9.safetensors" 2>/dev/null
check "scheduler/ shift 5.0 changes the latents, audio_scheduler/ shift 9.0 too (the configs are read)" \
    '[ -s "$tmp/d12.safetensors" ] && [ -s "$tmp/d5.safetensors" ] && [ -s "$tmp/a9.safetensors" ] &&
     ! cmp -s "$tmp/d12.safetensors" "$tmp/d5.safetensors" && ! cmp -s "$tmp/d12.safetensors" "$tmp/a9.safetensors"'
snap "$tmp/s0"; printf '{"_class_name": "MiniMaxH3Scheduler", "shift": 0}\n' >"$tmp/s0/scheduler/scheduler_config.json"
refuse "scheduler shift 0 refused" "s0/scheduler/scheduler_config.json: \"shift\" must be a number in (0, 1e+06]" -- \
    -d "$tmp/s0" "${G[@]}" --dump-latents "$tmp/out/x.safetensors"
snap "$tmp/sc"; printf '{"_class_name": "FlowMatchEulerDiscreteScheduler", "shift": 3.0}\n' >"$tmp/sc/audio_scheduler/scheduler_config.json"
refuse "another scheduler class refused" "\"_class_name\" must be \"MiniMaxH3Scheduler\"" -- \
    -d "$tmp/sc" "${G[@]}" --dump-latents "$tmp/out/x.safetensors"

# ---- 5. the prompt's token limit ----
long=$(head -c 100000 /dev/zero | tr '\0' a | sed 's/aaaa/fox /g')
out=$("$H3" generate -d "$TINY" "${G[@]/A red fox./$long}" --dump-latents "$tmp/out/p.safetensors" 2>&1); rc=$?
check "a 100 KB prompt is refused before the text encoder runs (exit 2, the limit named)" \
    '[ $rc = 2 ] && tail -1 <<<"$out" | grep -q "the prompt is [0-9]* tokens (100000 bytes), more than the 4096 h3 accepts" &&
     [ -z "$(ls -A "$tmp/out")" ] && [ ${#out} -lt 2000 ]'
printf '%s\n' "$long" | "$H3" "${S[@]}" >"$tmp/long.out" 2>"$tmp/long.err"
check "session: the same prompt fails with the same line, the session goes on (exit 1)" \
    '[ $? = 1 ] && grep -q "more than the 4096 h3 accepts" "$tmp/long.err"'

# ---- 6. --ref-audio's 15 s limit on the decoded duration ----
wav() { # wav PATH RATE SECONDS: a mono 16-bit WAV of a quiet tone
    "$PYTHON" - "$@" <<'PY'
import math, struct, sys, wave
path, rate, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
n = int(round(rate * secs))
with wave.open(path, "wb") as w:
    w.setnchannels(1); w.setsampwidth(2); w.setframerate(rate)
    w.writeframes(b"".join(struct.pack("<h", int(3000 * math.sin(i * 0.05))) for i in range(n)))
PY
}
R=(--width 64 --height 32 --frames 120 --steps 2 -p "A fox." -o '' --dump-latents "$tmp/out/r.safetensors" --ref-image "$IMG")
if "$PYTHON" -c 'import wave' 2>/dev/null; then
    wav "$tmp/a23.wav" 44100 23; wav "$tmp/a155.wav" 44100 15.5; wav "$tmp/a151.wav" 32000 15.01
    refuse "--ref-audio 23 s at 44.1 kHz refused" "the audio lasts more than the 15 s limit" -- -d "$TINY" "${R[@]}" --ref-audio "$tmp/a23.wav"
    refuse "--ref-audio 15.5 s at 44.1 kHz refused" "the audio lasts more than the 15 s limit" -- -d "$TINY" "${R[@]}" --ref-audio "$tmp/a155.wav"
    refuse "--ref-audio 15.01 s at 32 kHz refused" "the audio lasts more than the 15 s limit" -- -d "$TINY" "${R[@]}" --ref-audio "$tmp/a151.wav"
    "$PYTHON" - "$tmp/big.png" <<'PY'
import struct, sys, zlib
W = H = 20000  # a valid 1-bit PNG of 400 M pixels, 49 KB
chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
idat = zlib.compress((b"\0" * (1 + (W + 7) // 8)) * H, 9)
open(sys.argv[1], "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", W, H, 1, 0, 0, 0, 0)) +
                              chunk(b"IDAT", idat) + chunk(b"IEND", b""))
PY
    refuse "a valid 20000x20000 PNG exceeds the decoder's size limit (not called corrupt)" \
        "20000x20000 = 400000000 pixels exceed the decoder's size limit" -- "${A[@]}" --first-frame "$tmp/big.png"
else
    bad "python3 (wave) is needed to write the test's WAV files"
fi

# ---- 7. non-finite results ----
snap "$tmp/nan"; rm "$tmp/nan/transformer"; cp -r "$TINY/transformer" "$tmp/nan/"
"$PYTHON" "$(dirname "$0")/lib/plant_nan.py" "$tmp/nan/transformer"
out=$("$H3" generate -d "$tmp/nan" "${G[@]}" --dump-latents "$tmp/out/n.safetensors" 2>&1); rc=$?
check "a NaN weight: exit 1, the phase named, nothing written" \
    '[ $rc = 1 ] && tail -1 <<<"$out" | grep -q "denoise: the video latents after the DiT: [0-9]* of [0-9]* values are not finite" &&
     [ -z "$(ls -A "$tmp/out")" ]'
# --profile checks the residual stream after every block: the first block whose output went non-finite is named
for prec in bf16 fp32; do
    out=$("$H3" generate -d "$tmp/nan" "${G[@]}" --precision $prec --profile --dump-latents "$tmp/out/n.safetensors" 2>&1); rc=$?
    check "a NaN weight, --profile, $prec: exit 1, block 1 named, nothing written" \
        '[ $rc = 1 ] && tail -1 <<<"$out" | grep -q "denoise step 1/2: DiT block 1 (from 0, of [0-9]*): its output has [0-9]* of [0-9]* values not finite" &&
         [ -z "$(ls -A "$tmp/out")" ]'
done

echo "RESULT $pass $fail"
