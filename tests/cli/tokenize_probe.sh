#!/usr/bin/env bash
# `h3 probe tokenize` (PROBE.md): text u8 [n] -> input_ids i64 [L]. The outputs must be byte-identical to
# the goldens written with the HF tokenizer (tools/reference/gen_tokenizer_cases.py); bad input -> one
# line on stderr, exit 2, no output file. Id parity over all cases is tests/test_tokenizer.c.
set -u
source "$(dirname "$0")/lib/common.bash" # H3, TINY, $tmp (removed at exit), pass/fail, ok, bad, check
G=tests/fixtures/golden/tokenizer
SNAP=tests/fixtures/skeleton

run_bad() { # name, expected stderr fragment, args...
    local name=$1 want=$2; shift 2
    local out="$tmp/bad_${pass}_${fail}.safetensors"
    "$H3" probe tokenize "$@" --out "$out" 2>"$tmp/err"; rc=$?
    lines=$(wc -l <"$tmp/err")
    if [ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] && grep -qF -- "$want" "$tmp/err" && [ ! -e "$out" ]; then ok
    else bad "$name: rc $rc, $lines lines: $(cat "$tmp/err")"; fi
}

for c in mixed guide empty; do
    if "$H3" probe tokenize --model $SNAP --in $G/$c.in.safetensors --out "$tmp/$c.st" 2>"$tmp/err"; then
        cmp -s "$tmp/$c.st" $G/$c.out.safetensors && ok || bad "$c: output differs from the reference"
    else bad "$c: $(cat "$tmp/err")"; fi
done
# --model may also name the tokenizer folder itself
"$H3" probe tokenize --model $SNAP/tokenizer --in $G/mixed.in.safetensors --out "$tmp/m2.st" 2>"$tmp/err" &&
    cmp -s "$tmp/m2.st" $G/mixed.out.safetensors && ok || bad "tokenizer folder as --model: $(cat "$tmp/err")"

run_bad "invalid UTF-8" "invalid UTF-8 at byte 3" --model $SNAP --in $G/bad_utf8.in.safetensors
run_bad "wrong dtype" "input 'text': dtype I64" --model $SNAP --in $G/bad_dtype.in.safetensors
run_bad "missing input" "input 'text'" --model $SNAP --in $G/mixed.out.safetensors
run_bad "no tokenizer" "vocab.json: cannot open" --model "$tmp" --in $G/mixed.in.safetensors
echo "RESULT $pass $fail"
