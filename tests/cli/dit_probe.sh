#!/usr/bin/env bash
# `h3 probe dit` (PROBE.md): runs on the goldens with every way of naming the weights; the diffusers
# and original layouts write byte-identical outputs; bad inputs -> one line, exit 2, no output file.
# Numerical parity against the reference is tests/test_dit.c (same library code).
set -u
source "$(dirname "$0")/lib/common.bash" # H3, TINY, $tmp (removed at exit), pass/fail, ok, bad, check
G=tests/fixtures/golden/dit

run_ok() { # name, args...
    local name=$1; shift
    if "$H3" probe dit "$@" 2>"$tmp/err"; then ok; else bad "$name: $(cat "$tmp/err")"; fi
}
run_bad() { # name, expected stderr fragment, args...
    local name=$1 want=$2; shift 2
    "$H3" probe dit "$@" --out "$tmp/x.safetensors" 2>"$tmp/err"; rc=$?
    lines=$(wc -l <"$tmp/err")
    if [ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] && grep -q -- "$want" "$tmp/err" && [ ! -e "$tmp/x.safetensors" ]; then ok
    else bad "$name: rc $rc, $lines lines: $(cat "$tmp/err")"; fi
}

for prec in fp32 bf16; do
    run_ok "t2va root $prec" --model $TINY --in $G/t2va.in.safetensors --out "$tmp/t2va_d_$prec.st" --precision $prec
    run_ok "t2va FL2VA $prec" --model $TINY/FL2VA --in $G/t2va.in.safetensors --out "$tmp/t2va_o_$prec.st" --precision $prec
    cmp -s "$tmp/t2va_d_$prec.st" "$tmp/t2va_o_$prec.st" && ok || bad "t2va $prec: layouts differ"
    run_ok "ref2va root $prec" --model $TINY --component transformer_ref --in $G/ref2va.in.safetensors \
        --out "$tmp/r_d_$prec.st" --precision $prec
    run_ok "ref2va Ref2VA $prec" --model $TINY/Ref2VA --in $G/ref2va.in.safetensors --out "$tmp/r_o_$prec.st" --precision $prec
    cmp -s "$tmp/r_d_$prec.st" "$tmp/r_o_$prec.st" && ok || bad "ref2va $prec: layouts differ"
done
run_ok "transformer folder" --model $TINY/transformer --in $G/fl2va.in.safetensors --out "$tmp/f.st"
run_ok "original folder" --model $TINY/FL2VA/transformer --in $G/fl2va.in.safetensors --out "$tmp/fo.st"
cmp -s "$tmp/f.st" "$tmp/fo.st" && ok || bad "fl2va: folder layouts differ"

run_bad "2-column position_ids" "position_ids" --model $TINY --in $G/bad_position_ids_2col.in.safetensors
run_bad "short token_tags" "token_tags" --model $TINY --in $G/bad_token_tags_short.in.safetensors
run_bad "2-D timestep" "input 'timestep'" --model $TINY --in $G/bad_timestep_2d.in.safetensors
run_bad "timestep_indices range" "timestep_indices" --model $TINY --in $G/bad_timestep_indices_range.in.safetensors
run_bad "video rows" "hidden_states" --model $TINY --in $G/bad_video_rows.in.safetensors
run_bad "output file as input" "input 'hidden_states'" --model $TINY --in $G/t2va.out.safetensors
run_bad "component vs partition" "does not match" --model $TINY/FL2VA --component transformer_ref \
    --in $G/ref2va.in.safetensors
run_bad "no weights" "no DiT weights" --model $G --in $G/t2va.in.safetensors
echo "RESULT $pass $fail"
