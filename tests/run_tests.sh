#!/usr/bin/env bash
# Runs every test binary and the CLI tests, adds up the RESULT lines, prints "N passed, N failed".
# The tests are independent (each has its own scratch folder), so H3_TEST_JOBS=N runs N at a time,
# the slowest first; each one's output is printed whole, in the usual order, with its wall time.
# Default 1: the heavy tests use every core through OpenMP/OpenBLAS already, and on the 2-core CI
# machine `make test` took 11m50s two at a time and 6m38s one at a time (session 8).
set -u
cd "$(dirname "$0")/.."
build=${H3_BUILD:-build}
jobs=${H3_TEST_JOBS:-1}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

names=(); cmds=()
for t in "$build"/tests/test_*; do
    [ -x "$t" ] || continue
    names+=("$(basename "$t")"); cmds+=("bin:$t")
done
for s in tests/cli/*.sh; do
    [ -f "$s" ] || continue
    names+=("$(basename "$s")"); cmds+=("cli:$s")
done

# The slowest tests start first so the last ones to finish are short (measured on 2 cores).
slow="session.sh serve.sh test_e2e condition.sh test_condition test_dit test_text_encoder test_video_vae"
order=()
for n in $slow; do for i in "${!names[@]}"; do [ "${names[$i]}" = "$n" ] && order+=("$i"); done; done
for i in "${!names[@]}"; do case " $slow " in *" ${names[$i]} "*) ;; *) order+=("$i") ;; esac; done

run_one() { # index: writes $logs/<i>.out, .rc and .s
    local i=$1 c=${cmds[$1]} t0 rc
    t0=$(date +%s.%N)
    case $c in
        bin:*) "${c#bin:}" >"$logs/$i.out" 2>&1; rc=$? ;;
        cli:*) H3="$build/h3" bash "${c#cli:}" >"$logs/$i.out" 2>&1; rc=$? ;;
    esac
    echo "$rc" >"$logs/$i.rc"
    awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f\n", b - a }' >"$logs/$i.s"
}

running=0
for i in "${order[@]}"; do
    if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
    run_one "$i" &
    running=$((running + 1))
done
wait

passed=0; failed=0
for i in "${!names[@]}"; do
    n=${names[$i]}; c=${cmds[$i]}; rc=$(cat "$logs/$i.rc" 2>/dev/null || echo 255)
    echo "== $n ($(cat "$logs/$i.s" 2>/dev/null || echo ?) s)"
    grep -v '^RESULT ' "$logs/$i.out"
    res=$(grep '^RESULT ' "$logs/$i.out" | tail -1)
    if [ -z "$res" ]; then
        case $c in bin:*) echo "  (crashed or exited early: rc $rc)" ;; *) echo "  (script failed: rc $rc)" ;; esac
        failed=$((failed + 1)); continue
    fi
    set -- $res
    passed=$((passed + $2)); failed=$((failed + $3))
    if [ "$rc" -ne 0 ] && [ "$3" -eq 0 ]; then failed=$((failed + 1)); echo "  (rc $rc)"; fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
