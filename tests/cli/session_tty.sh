#!/usr/bin/env bash
# The interactive session on a terminal (docs/model/features.md 3), run under a pseudo-terminal with script(1):
#  - with the line editor (a build linked with libedit): the "h3> " prompt; history in $HOME/.h3_history
#    (H3_HISTORY overrides it): blank lines and a repeat of the previous line are not added, the next session
#    recalls entries with the up arrow, at most 500 entries are kept, an unwritable history file gives one
#    warning line and the session goes on;
#  - without it (EDIT=0 build): the prompt, plain lines, no history file;
#  - from a pipe (no terminal) either build reads plain lines and writes no history.
set -u
source "$(dirname "$0")/lib/common.bash"
SESSION="$H3 generate -d $TINY --width 64 --height 32 --frames 120 --steps 2"
# session NAME HOME [VAR=VALUE...] < input: runs a session on a pty, output in $tmp/NAME.out, status in $tmp/NAME.rc
session() {
    local name=$1 home=$2; shift 2
    mkdir -p "$home"
    # exec: script(1) runs the command through $SHELL -c; a shell left waiting in between (dash, when $SHELL is
    # unset or /bin/sh) would take the terminal's Ctrl-C itself and end the session
    env HOME="$home" "$@" script -qec "exec $SESSION" /dev/null >"$tmp/$name.out" 2>&1
    echo $? >"$tmp/$name.rc"
}
# live NAME HOME: starts a session on a pty fed from a FIFO on fd 3 (send TEXT writes to it); finish closes it and
# waits. Input goes in when the output shows the session is ready for it (wait_for), not after a guessed delay.
live() {
    local name=$1 home=$2
    mkdir -p "$home"; rm -f "$tmp/$name.fifo"; mkfifo "$tmp/$name.fifo"
    (env HOME="$home" timeout 120 script -qec "exec $SESSION" /dev/null <"$tmp/$name.fifo" >"$tmp/$name.out" 2>&1
     echo $? >"$tmp/$name.rc") &
    live_pid=$!
    exec 3>"$tmp/$name.fifo"
    live_name=$name
}
send() { printf "$1" >&3; }
# wait_for EXTENDED-REGEX [N]: until the session's output has the pattern at least N times (60 s at most)
wait_for() {
    local i
    for i in $(seq 1 600); do
        [ "$(grep -aEo "$1" "$tmp/$live_name.out" 2>/dev/null | wc -l)" -ge "${2:-1}" ] && return 0
        sleep 0.1
    done
    echo "note: timed out waiting for /$1/ in $live_name's output"; return 1
}
finish() { exec 3>&-; wait "$live_pid"; }
# entries of a libedit history file (after its _HiStOrY_V2_ line), one per line, the space escape \040 decoded
entries() { tail -n +2 "$1" | sed 's/\\040/ /g'; }

if ! command -v script >/dev/null; then
    bad "script(1) (util-linux) is needed to run a session on a terminal"
    echo "RESULT $pass $fail"; exit 1
fi
editor=0
ldd "$H3" 2>/dev/null | grep -q libedit && editor=1

printf '!seed 11\n!seed 11\n   \n!status\n!quit\n' | session one "$tmp/home"
check "session on a pty exits 0" '[ "$(cat $tmp/one.rc)" = 0 ]'
check "the h3> prompt on a terminal" 'grep -aq "h3> " "$tmp/one.out"'
check "!seed answered" 'grep -aq "seed 11 (fixed)" "$tmp/one.out"'
if [ $editor = 1 ]; then
    check "history file written" '[ -f "$tmp/home/.h3_history" ]'
    check "history: blank and repeated lines not added" \
        '[ "$(entries "$tmp/home/.h3_history" | tr "\n" "|")" = "!seed 11|!status|!quit|" ]'
    # up arrow three times: !quit, !status, then !seed 11
    printf '!seed 5\n\033[A\033[A\033[A\033[A\n!quit\n' | session two "$tmp/home"
    check "second session exits 0" '[ "$(cat $tmp/two.rc)" = 0 ]'
    check "up arrow recalls the previous session's entry" \
        '[ "$(grep -ac "seed 11 (fixed)" "$tmp/two.out")" -ge 1 ] && grep -aq "seed 5 (fixed)" "$tmp/two.out"'
    printf '!seed 3\n!quit\n' | session three "$tmp/home3" H3_HISTORY="$tmp/elsewhere"
    check "H3_HISTORY names the history file" '[ -f "$tmp/elsewhere" ] && [ ! -e "$tmp/home3/.h3_history" ]'
    { for i in $(seq 1 520); do echo "!seed $i"; done; echo '!quit'; } | session many "$tmp/home4"
    check "520 lines: exit 0" '[ "$(cat $tmp/many.rc)" = 0 ]'
    check "history keeps the last 500 entries" \
        '[ "$(entries "$tmp/home4/.h3_history" | wc -l)" = 500 ] && [ "$(entries "$tmp/home4/.h3_history" | tail -1)" = "!quit" ] &&
         [ "$(entries "$tmp/home4/.h3_history" | head -1)" = "!seed 22" ]'
    printf '!seed 4\n!seed 6\n!quit\n' | session ro "$tmp/home5" H3_HISTORY="$tmp/no/such/dir/history"
    check "unwritable history: the session goes on (exit 0)" \
        '[ "$(cat $tmp/ro.rc)" = 0 ] && grep -aq "seed 6 (fixed)" "$tmp/ro.out"'
    check "unwritable history: one warning line" \
        '[ "$(grep -ac "cannot write the history file $tmp/no/such/dir/history" "$tmp/ro.out")" = 1 ]'
else
    check "no editor: no history file" '[ ! -e "$tmp/home/.h3_history" ]'
fi
# Ctrl-C at the prompt cancels the line being typed, the session goes on; during a generation it cancels the
# generation cleanly (checked between phases and denoising steps; --steps 400 keeps the denoising busy long enough)
live ctrlc "$tmp/home7"
wait_for 'h3> '; send '!seed 5\n'; wait_for 'seed 5 \(fixed\)'; wait_for 'h3> ' 2
send 'partial line'; wait_for 'partial line'; send '\003'; wait_for 'h3> ' 3
send '!seed 6\n'; wait_for 'seed 6 \(fixed\)'; send '!quit\n'; finish
check "Ctrl-C at the prompt: the line is dropped, the session goes on and exits 0" \
    '[ "$(cat $tmp/ctrlc.rc)" = 0 ] && grep -aq "seed 6 (fixed)" "$tmp/ctrlc.out" && ! grep -aq "^video-" "$tmp/ctrlc.out" &&
     ! grep -aq "partial line!seed" "$tmp/ctrlc.out"'
SESSION="$SESSION --steps 400 -o '' --dump-latents $tmp/c.safetensors"
live gen "$tmp/home8"
wait_for 'h3> '; send 'A red fox.\n'; wait_for 'denoise .* [1-9][0-9]*/400'; send '\003'
wait_for 'h3> ' 2; send '!seed 8\n'; wait_for 'seed 8 \(fixed\)'; send '!quit\n'; finish
check "Ctrl-C during a generation cancels it with one line, the session goes on (exit 0), nothing written" \
    '[ "$(cat $tmp/gen.rc)" = 0 ] && grep -aq "h3: cancelled (Ctrl-C) during the denoising" "$tmp/gen.out" &&
     grep -aq "seed 8 (fixed)" "$tmp/gen.out" && grep -aq "0 generated, 0 failed" "$tmp/gen.out" &&
     ! ls "$tmp"/c*.safetensors >/dev/null 2>&1'
SESSION="$H3 generate -d $TINY --width 64 --height 32 --frames 120 --steps 2"
printf '!seed 9\n!quit\n' | HOME="$tmp/home6" $SESSION >"$tmp/pipe.out" 2>&1
check "from a pipe: exit 0, no prompt, no history" \
    '[ $? = 0 ] && grep -q "seed 9 (fixed)" "$tmp/pipe.out" && ! grep -q "h3> " "$tmp/pipe.out" && [ ! -e "$tmp/home6/.h3_history" ]'
echo "RESULT $pass $fail"
