# The helpers of tests/cli/serve.sh and tests/cli/serve_remix.sh (sourced after lib/common.bash): a server on a free
# port, the JSON of a reply, a job's status, the error replies' code and message. Sourcing it also stops the script
# (RESULT, exit 0) where `h3 serve` cannot run: a build without libmicrohttpd, or MEDIA=0 (checked to be refused).
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT

if ! "$H3" serve --help >/dev/null 2>&1; then
    echo "(h3 built without libmicrohttpd: serve tests skipped)"; echo "RESULT 0 0"; exit 0
fi
if "$H3" generate -d "$TINY" -p x -o "$tmp/probe.mp4" --width 64 --height 32 --steps 1 2>&1 | grep -q "MEDIA=0"; then
    out=$("$H3" serve -d "$TINY" --port 0 --data "$tmp/d0" 2>&1); rc=$?
    check "MEDIA=0: serve refused ($out)" '[ $rc = 2 ] && grep -q "MEDIA=0" <<<"$out"'
    echo "RESULT $pass $fail"; exit 0
fi

J='Content-Type: application/json'
start_server() { # DATA LOG [flags...]: starts a server, sets PID and B (the base URL)
    local data=$1 log=$2; shift 2
    setsid "$H3" serve -d "$TINY" --port 0 --data "$data" --threads 2 "$@" >"$log" 2>&1 </dev/null &
    PID=$!; pids+=("$PID"); B=
    for _ in $(seq 100); do
        B=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$log" | head -1 | sed 's/listening on //')
        [ -n "$B" ] && return 0
        kill -0 "$PID" 2>/dev/null || break
        sleep 0.1
    done
    bad "server did not start: $(tail -2 "$log")"; return 1
}
jget() { # EXPR: a Python expression on the JSON on stdin (d); a tuple printed space-separated
    "$PYTHON" -I -S -c 'import json,sys; d=json.load(sys.stdin); r=eval(sys.argv[1]); print(" ".join(map(str, r)) if isinstance(r, tuple) else r)' "$1" 2>/dev/null
}
submit() { curl -s -o "$tmp/sub.json" -w '%{http_code}' -X POST "$B/v1/videos" -H "$J" -d "$1"; }
status_of() { curl -s "$B/v1/videos/$1" | jget 'd["status"]'; }
wait_status() { # ID STATUS SECONDS
    for _ in $(seq $(($3 * 5))); do [ "$(status_of "$1")" = "$2" ] && return 0; sleep 0.2; done; return 1
}

t_start=$(date +%s); t_sec=$t_start
section_done() { local now; now=$(date +%s); echo "section $1: $((now - t_sec)) s"; t_sec=$now; }
err() { # NAME EXPECTED_CODE MESSAGE_REGEX curl-args...
    local name=$1 want=$2 re=$3; shift 3
    local code; code=$(curl -s -o "$tmp/err.json" -w '%{http_code}' "$@")
    local msg; msg=$(jget 'd["error"]["message"]' <"$tmp/err.json")
    check "$name: $want ($code: $msg)" '[ "$code" = "$want" ] && grep -qE "$re" <<<"$msg"'
}
