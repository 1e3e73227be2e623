# Shared by the probe CLI tests (sourced, not run): counters, a scratch folder, and the two checks
# of the probe contract: an op that must succeed, and bad input that must fail with exactly one line
# on stderr, exit code 2 and no output file. Callers print "RESULT $pass $fail" at the end.
source "$(dirname "${BASH_SOURCE[0]}")/common.bash"

run_ok() { # name, args...
    local name=$1; shift
    if "$H3" probe "$@" 2>"$tmp/err"; then ok; else bad "$name: $(cat "$tmp/err")"; fi
}
run_bad() { # name, expected stderr fragment, out file, args...
    local name=$1 want=$2 out=$3; shift 3
    "$H3" probe "$@" 2>"$tmp/err"; rc=$?
    lines=$(wc -l <"$tmp/err")
    if [ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] && grep -q -- "$want" "$tmp/err" && [ ! -e "$out" ]; then ok
    else bad "$name: rc $rc, $lines lines: $(cat "$tmp/err")"; fi
}
