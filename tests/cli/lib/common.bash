# Shared by the CLI tests (sourced, not run): the binary and the tiny fixture, a scratch folder removed at exit,
# the pass/fail counters and three ways to count a check. Callers print "RESULT $pass $fail" at the end.
H3=${H3:-build/h3}
TINY=tests/fixtures/tiny
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
ok()  { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
check() { if eval "$2"; then ok; else bad "$1"; fi; } # check NAME 'shell condition'
# python3's interpreter itself, found once: through a version manager's shim (pyenv) each start costs ~0.1 s more,
# and the serve tests start it hundreds of times (docs/testing.md "Run time")
PYTHON=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null); [ -x "$PYTHON" ] || PYTHON=python3
