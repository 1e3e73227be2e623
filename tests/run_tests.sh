#!/usr/bin/env bash
# Runs every test binary and the CLI tests, adds up the RESULT lines, prints "N passed, N failed".
# The tests are independent (each has its own scratch folder), so they run H3_TEST_JOBS at a time
# (default: one per core), the slowest first, each with cores / jobs OpenMP and OpenBLAS threads
# (at least one; OMP_NUM_THREADS / OPENBLAS_NUM_THREADS set by the caller win): on 2 cores one test
# per core with one thread each keeps both busy where one test at a time left a core idle in its
# serial parts (docs/testing.md "Run time"). serve.sh, whose event checks wait on real time, runs
# last and alone with every core. Each test's output is printed whole, in the usual order, with its
# wall time.
set -u
cd "$(dirname "$0")/.."
build=${H3_BUILD:-build}
cores=$(nproc 2>/dev/null || echo 1)
jobs=${H3_TEST_JOBS:-$cores}
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=1
threads=$((cores / jobs)); [ "$threads" -ge 1 ] || threads=1
alone="serve.sh" # timing-sensitive: after the others, by itself
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

names=(); cmds=()
for t in "$build"/tests/test_*; do
    [ -x "$t" ] || continue
    if [ "$(basename "$t")" = test_e2e ] && [ -z "${H3_E2E_TASKS:-}${H3_E2E_SKIP:-}" ]; then
        # its ref2va case takes as long as the other cases together: two processes (tests/test_e2e.c)
        names+=(test_e2e test_e2e_ref2va)
        cmds+=("bin:H3_E2E_SKIP=ref2va:$t" "bin:H3_E2E_TASKS=ref2va:$t")
        continue
    fi
    names+=("$(basename "$t")"); cmds+=("bin:$t")
done
for s in tests/cli/*.sh; do
    [ -f "$s" ] || continue
    names+=("$(basename "$s")"); cmds+=("cli:$s")
done

# The slowest tests start first so the last ones to finish are short (measured on 2 cores).
slow="test_e2e_ref2va serve_remix.sh lora.sh test_backend_ops session.sh int8.sh rope256.sh test_e2e numbers.sh"
order=(); last=()
for n in $slow; do for i in "${!names[@]}"; do [ "${names[$i]}" = "$n" ] && order+=("$i"); done; done
for i in "${!names[@]}"; do
    case " $slow " in *" ${names[$i]} "*) continue ;; esac
    case " $alone " in *" ${names[$i]} "*) last+=("$i") ;; *) order+=("$i") ;; esac
done

run_one() { # index, threads: writes $logs/<i>.out, .rc and .s
    local i=$1 c=${cmds[$1]} t0 rc
    local th=(OMP_NUM_THREADS="${OMP_NUM_THREADS:-$2}" OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-$2}")
    t0=$(date +%s.%N)
    case $c in
        bin:H3_E2E_*=*) # bin:<VAR>=<list>:<path>
            local t=${c#bin:}
            env "${th[@]}" "${t%%:*}" "${t#*:}" >"$logs/$i.out" 2>&1; rc=$? ;;
        bin:*) env "${th[@]}" "${c#bin:}" >"$logs/$i.out" 2>&1; rc=$? ;;
        cli:*) env "${th[@]}" H3="$build/h3" bash "${c#cli:}" >"$logs/$i.out" 2>&1; rc=$? ;;
    esac
    echo "$rc" >"$logs/$i.rc"
    awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f\n", b - a }' >"$logs/$i.s"
}

running=0
for i in "${order[@]}"; do
    if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
    run_one "$i" "$threads" &
    running=$((running + 1))
done
wait
for i in "${last[@]}"; do run_one "$i" "$cores"; done

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
