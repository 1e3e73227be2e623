#!/usr/bin/env bash
# Output paths and temporary files (docs/robustness.md "Outputs and temporary files"), on the tiny fixture:
#  1. an existing -o / --wav / --dump-latents that is not a regular file (a FIFO, a character device made with
#     mknod in the scratch folder, a directory, a symbolic link) or a --frames-dir that is not a directory is
#     refused with one line and exit 2, and stays as it was; -o - is refused;
#  11. an output location that cannot be written (missing or non-directory parent, read-only folder, a
#     --frames-dir holding other files) is refused the same way before any phase runs (one line: no progress);
#  2. the session's !save does not follow a planted PATH.part symbolic link;
#  9. two sessions with the same !output DIR take different video-NNNN numbers (and lat-NNNN dumps);
#  13. SIGTERM during a generation (one-shot or session) leaves no temporary file and no placeholder; a later run
#     removes the stale temporaries of ours (dead creator pid) beside its target and nothing else.
set -u
source "$(dirname "$0")/lib/common.bash" # H3, TINY, $tmp (removed at exit), pass/fail, ok, bad, check
G=(-d "$TINY" --width 64 --height 64 --steps 1 --frames 120)
refuse() { # refuse DESCRIPTION PATTERN -- ARGS...: exit 2, exactly one line (so no phase ran), naming PATTERN
    local desc=$1 pat=$2; shift 3
    local out rc
    out=$("$H3" generate "$@" 2>&1 </dev/null); rc=$?
    if [ "$rc" -ne 2 ]; then bad "$desc: exit $rc, want 2: $(tail -1 <<<"$out")"; return; fi
    if [ "$(printf '%s\n' "$out" | wc -l)" -ne 1 ]; then bad "$desc: more than one line (ran phases?): $(tail -1 <<<"$out")"; return; fi
    if ! grep -qF -- "$pat" <<<"$out"; then bad "$desc: '$out' lacks '$pat'"; return; fi
    ok
}
temps() { ls -A "$1" | grep -c 'h3tmp'; } # temporaries left in a folder

# which build: the first real run (also the reference MP4 for !save)
mkdir -p "$tmp/ref"
media=1
if ! "$H3" generate "${G[@]}" -p "A red fox." --seed 7 -o "$tmp/ref/a.mp4" 2>"$tmp/err0"; then
    if grep -q "MEDIA=0" "$tmp/err0"; then media=0; else bad "reference run: $(tail -1 "$tmp/err0")"; fi
fi

# 1. targets that are not regular files
mkfifo "$tmp/fifo"
mkdir -p "$tmp/adir"
ln -s "$tmp/fifo" "$tmp/link"
echo precious >"$tmp/victim"; ln -s "$tmp/victim" "$tmp/vlink"
chardev=0
mknod "$tmp/null" c 1 3 2>/dev/null && chardev=1
refuse "dump to a FIFO" "--dump-latents $tmp/fifo: exists and is not a regular file" -- "${G[@]}" -p x -o '' --dump-latents "$tmp/fifo"
refuse "dump to a directory" "--dump-latents $tmp/adir: is a directory" -- "${G[@]}" -p x -o '' --dump-latents "$tmp/adir"
refuse "dump to a symbolic link" "--dump-latents $tmp/vlink: is a symbolic link" -- "${G[@]}" -p x -o '' --dump-latents "$tmp/vlink"
refuse "dump into a folder path" "--dump-latents $tmp/adir/: names a folder" -- "${G[@]}" -p x -o '' --dump-latents "$tmp/adir/"
if [ $chardev = 1 ]; then
    refuse "dump to a character device" "--dump-latents $tmp/null: exists and is not a regular file" -- "${G[@]}" -p x -o '' --dump-latents "$tmp/null"
fi
if [ $media = 1 ]; then
    refuse "-o FIFO" "-o $tmp/fifo: exists and is not a regular file" -- "${G[@]}" -p x -o "$tmp/fifo"
    refuse "-o directory" "-o $tmp/adir: is a directory" -- "${G[@]}" -p x -o "$tmp/adir"
    refuse "-o symbolic link to a FIFO" "-o $tmp/link: is a symbolic link" -- "${G[@]}" -p x -o "$tmp/link"
    refuse "-o -" "-o -: standard output is not supported" -- "${G[@]}" -p x -o -
    refuse "--wav FIFO" "--wav $tmp/fifo: exists and is not a regular file" -- "${G[@]}" -p x -o '' --wav "$tmp/fifo"
    refuse "--frames-dir FIFO" "--frames-dir $tmp/fifo: exists and is not a directory" -- "${G[@]}" -p x -o '' --frames-dir "$tmp/fifo"
    refuse "--frames-dir regular file" "--frames-dir $tmp/victim: exists and is not a directory" -- "${G[@]}" -p x -o '' --frames-dir "$tmp/victim"
    if [ $chardev = 1 ]; then
        refuse "-o character device" "-o $tmp/null: exists and is not a regular file" -- "${G[@]}" -p x -o "$tmp/null"
        refuse "--wav character device" "--wav $tmp/null: exists and is not a regular file" -- "${G[@]}" -p x -o '' --wav "$tmp/null"
        refuse "--frames-dir character device" "--frames-dir $tmp/null: exists and is not a directory" -- "${G[@]}" -p x -o '' --frames-dir "$tmp/null"
    fi
fi
check "the FIFO stays a FIFO" '[ -p "$tmp/fifo" ]'
check "the victim is unchanged" '[ "$(cat "$tmp/victim")" = precious ] && [ -L "$tmp/vlink" ]'
[ $chardev = 1 ] && check "the device node stays a character device" '[ -c "$tmp/null" ]'
check "nothing written beside the refused targets" '[ "$(temps "$tmp")" = 0 ] && [ "$(ls -A "$tmp/adir")" = "" ]'

# 11. locations that cannot be written, found before the first phase
touch "$tmp/afile"
refuse "dump into a missing folder" "--dump-latents $tmp/nope/x.safetensors: the folder does not exist" -- "${G[@]}" -p x -o '' --dump-latents "$tmp/nope/x.safetensors"
refuse "dump under a regular file" "--dump-latents $tmp/afile/x.safetensors: the folder does not exist" -- "${G[@]}" -p x -o '' --dump-latents "$tmp/afile/x.safetensors"
if [ $media = 1 ]; then
    refuse "-o into a missing folder" "-o $tmp/nope/x.mp4: the folder does not exist" -- "${G[@]}" -p x -o "$tmp/nope/x.mp4"
    mkdir -p "$tmp/busy"; echo mine >"$tmp/busy/notes.txt"
    refuse "--frames-dir holding other files" "--frames-dir $tmp/busy: exists and holds 'notes.txt'" -- "${G[@]}" -p x -o '' --frames-dir "$tmp/busy"
    check "the busy frames folder is unchanged" '[ "$(ls -A "$tmp/busy")" = notes.txt ]'
    # a read-only folder: as root (which writes anywhere) the run drops to nobody when setpriv can
    mkdir -p "$tmp/ro"; chmod 555 "$tmp/ro"
    if [ "$(id -u)" != 0 ]; then
        refuse "-o in a read-only folder" "-o $tmp/ro/x.mp4: cannot create a temporary file" -- "${G[@]}" -p x -o "$tmp/ro/x.mp4"
    elif command -v setpriv >/dev/null && chmod 755 "$tmp" &&
        setpriv --reuid=65534 --regid=65534 --clear-groups test -r "$TINY/model_index.json" 2>/dev/null; then
        out=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$H3" generate "${G[@]}" -p x -o "$tmp/ro/x.mp4" 2>&1 </dev/null); rc=$?
        if [ $rc = 2 ] && [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] && grep -qF -- "-o $tmp/ro/x.mp4: cannot create a temporary file" <<<"$out"; then ok
        else bad "-o in a read-only folder (as nobody): exit $rc: $(tail -1 <<<"$out")"; fi
    fi
fi

# 2. !save does not follow a planted PATH.part link (nor any other name beside PATH)
if [ $media = 1 ]; then
    mkdir -p "$tmp/t2" "$tmp/save"
    echo precious >"$tmp/save/victim"
    ln -s "$tmp/save/victim" "$tmp/save/saved.mp4.part"
    printf '%s\n' "!seed 7" "A red fox." "!save $tmp/save/saved.mp4" |
        TMPDIR="$tmp/t2" "$H3" generate "${G[@]}" >"$tmp/out2" 2>"$tmp/err2" || bad "!save session: $(tail -1 "$tmp/err2")"
    check "!save leaves the planted link's target alone" '[ "$(cat "$tmp/save/victim")" = precious ]'
    check "!save wrote the video" 'cmp -s "$tmp/save/saved.mp4" "$tmp/ref/a.mp4" && [ ! -L "$tmp/save/saved.mp4" ]'
    check "!save left no temporary" '[ "$(temps "$tmp/save")" = 0 ]'
fi

# 9. two sessions, one !output folder: A picks its number, is stopped inside its generation, B runs to the end
if [ $media = 1 ]; then MUX=(); else MUX=(-o ''); fi
mkdir -p "$tmp/t9" "$tmp/shared"
mkfifo "$tmp/inA"
TMPDIR="$tmp/t9" "$H3" generate "${G[@]}" "${MUX[@]}" --dump-latents "$tmp/shared/lat.safetensors" <"$tmp/inA" >"$tmp/outA" 2>"$tmp/errA" &
pidA=$!
exec 7>"$tmp/inA"
printf '%s\n' "!output $tmp/shared" "!seed 7" "A red fox." >&7
for _ in $(seq 600); do grep -q "text encoder on" "$tmp/errA" && break; sleep 0.1; done
kill -STOP $pidA
printf '%s\n' "!output $tmp/shared" "!seed 8" "A cat." |
    TMPDIR="$tmp/t9" "$H3" generate "${G[@]}" "${MUX[@]}" --dump-latents "$tmp/shared/lat.safetensors" >"$tmp/outB" 2>"$tmp/errB" ||
    bad "session B: $(tail -1 "$tmp/errB")"
kill -CONT $pidA
exec 7>&-
wait $pidA || bad "session A: $(tail -1 "$tmp/errA")"
nA=$(grep -o '^video-[0-9]*' "$tmp/outA"); nB=$(grep -o '^video-[0-9]*' "$tmp/outB")
check "two sessions took two numbers ($nA, $nB)" '[ -n "$nA" ] && [ -n "$nB" ] && [ "$nA" != "$nB" ]'
check "both dumps are there" '[ -s "$tmp/shared/lat-0001.safetensors" ] && [ -s "$tmp/shared/lat-0002.safetensors" ]'
if [ $media = 1 ]; then
    check "both videos are there" '[ -s "$tmp/shared/video-0001.mp4" ] && [ -s "$tmp/shared/video-0002.mp4" ]'
fi
check "no temporaries in the shared folder" '[ "$(temps "$tmp/shared")" = 0 ]'

# 13. SIGTERM in the text phase: the temporaries (made before it) go; the session's claimed number goes too
mkdir -p "$tmp/sig"
if [ $media = 1 ]; then OUT=(-o "$tmp/sig/a.mp4" --wav "$tmp/sig/a.wav" --frames-dir "$tmp/sig/fr"); else OUT=(-o ''); fi
"$H3" generate "${G[@]}" -p x "${OUT[@]}" --dump-latents "$tmp/sig/a.safetensors" 2>"$tmp/errS" &
pidS=$!
for _ in $(seq 600); do [ "$(temps "$tmp/sig")" != 0 ] && grep -q "text encoder on" "$tmp/errS" && break; sleep 0.1; done
kill -TERM $pidS
wait $pidS; rc=$?
check "SIGTERM: killed by the signal (rc $rc)" '[ $rc = 143 ]'
check "SIGTERM: no temporary and no output left ($(ls -A "$tmp/sig" | tr '\n' ' '))" '[ -z "$(ls -A "$tmp/sig")" ]'
mkdir -p "$tmp/sigs" "$tmp/t13"
mkfifo "$tmp/inS"
TMPDIR="$tmp/t13" "$H3" generate "${G[@]}" "${MUX[@]}" --dump-latents "$tmp/sigs/lat.safetensors" <"$tmp/inS" >/dev/null 2>"$tmp/errSS" &
pidSS=$!
exec 8>"$tmp/inS"
printf '%s\n' "!output $tmp/sigs" "A red fox." >&8
for _ in $(seq 600); do grep -q "text encoder on" "$tmp/errSS" && break; sleep 0.1; done
kill -TERM $pidSS
wait $pidSS; rc=$?
exec 8>&-
check "SIGTERM in a session: killed by the signal (rc $rc)" '[ $rc = 143 ]'
check "SIGTERM in a session: no placeholder and no temporary ($(ls -A "$tmp/sigs" | tr '\n' ' '))" '[ -z "$(ls -A "$tmp/sigs")" ]'

# 13. the sweep: stale temporaries of ours (pid no longer alive) beside the target go; a live pid's, other
# patterns and user files stay
mkdir -p "$tmp/sw"
dead=$(bash -c 'echo $$')
touch "$tmp/sw/.a.safetensors.h3tmp-$dead-abcdefghijkl" "$tmp/sw/.other.mp4.h3tmp-$dead-ABCDEFGHIJ12"
mkdir "$tmp/sw/.fr.h3tmp-$dead-abcdefghijkl"; touch "$tmp/sw/.fr.h3tmp-$dead-abcdefghijkl/frame_00000.png"
keep=(".a.safetensors.h3tmp-$$-abcdefghijkl" ".a.safetensors.h3tmp-$dead-abc" ".a.safetensors.h3tmp-xyz"
      "notes.h3tmp-$dead-abcdefghijkl" ".a.safetensors.h3tmp-$dead-abcdefghijkl.bak")
for k in "${keep[@]}"; do echo mine >"$tmp/sw/$k"; done
ln -s "$tmp/victim" "$tmp/sw/.b.mp4.h3tmp-$dead-abcdefghijkl"
"$H3" generate "${G[@]}" -p x -o '' --dump-latents "$tmp/sw/a.safetensors" 2>"$tmp/errW" || bad "sweep run: $(tail -1 "$tmp/errW")"
check "sweep: the stale temporaries of ours are gone" '[ ! -e "$tmp/sw/.a.safetensors.h3tmp-$dead-abcdefghijkl" ] &&
    [ ! -e "$tmp/sw/.other.mp4.h3tmp-$dead-ABCDEFGHIJ12" ] && [ ! -e "$tmp/sw/.fr.h3tmp-$dead-abcdefghijkl" ]'
for k in "${keep[@]}"; do check "sweep keeps $k" '[ "$(cat "$tmp/sw/$k")" = mine ]'; done
check "sweep keeps a symbolic link of our pattern" '[ -L "$tmp/sw/.b.mp4.h3tmp-$dead-abcdefghijkl" ] && [ "$(cat "$tmp/victim")" = precious ]'
check "sweep run wrote its output" '[ -s "$tmp/sw/a.safetensors" ]'
echo "RESULT $pass $fail"
