#!/usr/bin/env bash
# --parallel N (docs/parallel.md) through the CLI on the tiny snapshot with CPU ranks: `h3 generate`'s latents with
# 2 and 3 ranks equal the plain run's bit for bit (fp32 and bf16), and the frames with the video decode's tiles dealt to 3 ranks;
# a session runs two generations on 2 ranks (the ranks' transformers kept between them, !status shows it) with
# the plain latents; `h3 probe dit --parallel 2` writes the plain output; `h3 bench --parallel 2` says it; the bad
# uses are one line with exit 2. The DiT forward's parity per mode is tests/test_parallel.c.
set -u
source "$(dirname "$0")/lib/common.bash" # H3, TINY, $tmp (removed at exit), pass/fail, ok, bad, check
export OMP_WAIT_POLICY=passive
# The bit-identity checks need a BLAS whose sgemm rows do not depend on how many rows it is given; OpenBLAS's
# Haswell/Zen kernels sum the tail rows of each 12-row group differently (docs/parallel.md "Bit-exactness"), so the
# checks run on its Sandybridge kernels, whose rows do not (measured there).
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Sandybridge}
GA=(--width 64 --height 64 --steps 2 --frames 120 -p "A red fox." --seed 7 --backend cpu -o '')

one_line_2() { # name, expected stderr fragment, cmd...
    local name=$1 want=$2; shift 2
    "$@" >/dev/null 2>"$tmp/err"; rc=$?
    lines=$(wc -l <"$tmp/err")
    if [ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] && grep -q -- "$want" "$tmp/err"; then ok
    else bad "$name: rc $rc, $lines lines: $(cat "$tmp/err")"; fi
}

for prec in bf16 fp32; do
    "$H3" generate -d $TINY "${GA[@]}" --precision $prec --dump-latents "$tmp/p1.st" 2>"$tmp/err" && ok \
        || bad "generate $prec: $(tail -1 "$tmp/err")"
    for n in 2 3; do
        "$H3" generate -d $TINY "${GA[@]}" --precision $prec --parallel $n --dump-latents "$tmp/p$n.st" 2>"$tmp/err" \
            && ok || bad "generate $prec --parallel $n: $(tail -1 "$tmp/err")"
        grep -q -- "--parallel $n: the DiT on $n CPU ranks" "$tmp/err" && ok || bad "$prec --parallel $n: no rank line"
        cmp -s "$tmp/p1.st" "$tmp/p$n.st" && ok || bad "$prec --parallel $n: latents differ from the plain run"
    done
    echo "  generate $prec: --parallel 2 and 3 latents bit-identical to the plain run's"
done

# the video decode on 3 ranks (its tiles dealt to them): the frames equal the plain run's (a MEDIA=1 build)
if "$H3" generate -d $TINY "${GA[@]}" --frames-dir "$tmp/f1" 2>"$tmp/err"; then
    "$H3" generate -d $TINY "${GA[@]}" --parallel 3 --frames-dir "$tmp/f3" 2>"$tmp/err" && ok || bad "frames --parallel 3: $(tail -1 "$tmp/err")"
    grep -q "video decoder's tiles dealt to the 3 ranks" "$tmp/err" && ok || bad "--parallel 3: the decode did not run on 3 ranks"
    diff -rq "$tmp/f1" "$tmp/f3" >/dev/null && ok || bad "--parallel 3: frames differ from the plain run's"
elif ! grep -q "MEDIA=0" "$tmp/err"; then bad "frames: $(tail -1 "$tmp/err")"; fi

# a session on 2 ranks: both generations equal the one-shot plain run; the second keeps the ranks' transformers
printf '%s\n' "A red fox." "!again" "!status" | "$H3" generate -d $TINY --width 64 --height 64 --steps 2 --frames 120 \
    --seed 7 --backend cpu --precision fp32 --parallel 2 --resident --dump-latents "$tmp/s.st" -o '' >"$tmp/out" 2>"$tmp/err"
[ $? -eq 0 ] && ok || bad "session --parallel 2: $(tail -2 "$tmp/err")"
cmp -s "$tmp/p1.st" "$tmp/s-0001.st" && ok || bad "session --parallel 2: video-0001's latents differ from the plain run"
cmp -s "$tmp/p1.st" "$tmp/s-0002.st" && ok || bad "session --parallel 2: video-0002's latents differ from the plain run"
grep -q "ranks 1..1's transformers resident" "$tmp/err" && ok || bad "session: the rank 1 transformer was not kept"
grep -q "parallel 2" "$tmp/out" && ok || bad "!status does not show parallel 2: $(cat "$tmp/out")"

G=tests/fixtures/golden/dit
"$H3" probe dit --model $TINY --in $G/ref2va.in.safetensors --component transformer_ref --precision bf16 --out "$tmp/d1.st" \
    2>"$tmp/err" && ok || bad "probe: $(cat "$tmp/err")"
"$H3" probe dit --model $TINY --in $G/ref2va.in.safetensors --component transformer_ref --precision bf16 --out "$tmp/d2.st" \
    --parallel 2 2>"$tmp/err" && ok || bad "probe --parallel 2: $(cat "$tmp/err")"
cmp -s "$tmp/d1.st" "$tmp/d2.st" && ok || bad "probe dit --parallel 2: output differs from one rank"
"$H3" bench --backend cpu --shapes 64x64x22 --text 16 --repeats 1 --what dit --config $TINY/transformer --parallel 2 \
    >"$tmp/out" 2>"$tmp/err" && ok || bad "bench --parallel 2: $(cat "$tmp/err")"
grep -Eq "^DIT shape=64x64x22 S=118 .* parallel=2$" "$tmp/out" && ok || bad "bench: no parallel=2 in the DIT line"

one_line_2 "generate --parallel 9" "1..8" "$H3" generate -d $TINY "${GA[@]}" --parallel 9 --dump-latents "$tmp/x.st"
one_line_2 "generate --parallel 0" "1..8" "$H3" generate -d $TINY "${GA[@]}" --parallel 0 --dump-latents "$tmp/x.st"
one_line_2 "--parallel with --token-reduction" "cross the ranks' rows" "$H3" generate -d $TINY "${GA[@]}" --parallel 2 \
    --token-reduction --dump-latents "$tmp/x.st"
one_line_2 "bench --parallel x" "1..8" "$H3" bench --backend cpu --parallel x
one_line_2 "probe --parallel 9" "1..8" "$H3" probe dit --model $TINY --in $G/t2va.in.safetensors --out "$tmp/x.st" --parallel 9
one_line_2 "probe vae --parallel" "dit op only" "$H3" probe vae-decode --model $TINY --in $G/t2va.in.safetensors --out "$tmp/x.st" --parallel 2
echo "RESULT $pass $fail"
[ "$fail" -eq 0 ]
