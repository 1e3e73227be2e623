#!/usr/bin/env bash
# Runs every test binary and the CLI tests, adds up the RESULT lines, prints "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
build=${H3_BUILD:-build}
passed=0; failed=0; broken=0
for t in "$build"/tests/test_*; do
    [ -x "$t" ] || continue
    echo "== $(basename "$t")"
    out=$("$t" 2>&1); rc=$?
    echo "$out" | grep -v '^RESULT '
    res=$(echo "$out" | grep '^RESULT ' | tail -1)
    if [ -z "$res" ]; then
        echo "  (crashed or exited early: rc $rc)"; broken=$((broken + 1)); failed=$((failed + 1)); continue
    fi
    set -- $res
    passed=$((passed + $2)); failed=$((failed + $3))
    if [ "$rc" -ne 0 ] && [ "$3" -eq 0 ]; then failed=$((failed + 1)); echo "  (rc $rc)"; fi
done
for s in tests/cli/*.sh; do
    [ -f "$s" ] || continue
    echo "== $(basename "$s")"
    out=$(H3="$build/h3" bash "$s" 2>&1); rc=$?
    echo "$out" | grep -v '^RESULT '
    res=$(echo "$out" | grep '^RESULT ' | tail -1)
    if [ -z "$res" ]; then echo "  (script failed: rc $rc)"; failed=$((failed + 1)); continue; fi
    set -- $res
    passed=$((passed + $2)); failed=$((failed + $3))
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
