#!/usr/bin/env bash
# INT8 W8A8 (docs/int8.md): `h3 quantize` on the tiny snapshot (codes and scales by the rule, every other tensor's
# bytes, the index; an existing DST refused; nothing left behind on failure), `h3 info` on the result and on the
# LightX2V-made fixtures, each scope-validation breach rejected with one line and exit 2, `h3 probe dit` on a
# converted snapshot bit-identical to `--quant int8` on its source (both layouts), `--int8-fc2-groups`, the session's
# `!quant`, `h3 bench --quant int8`.
# The numbers against the torch W8A8 forward are tests/test_int8.c (same library code).
set -u
source "$(dirname "$0")/lib/common.bash" # H3, TINY, $tmp (removed at exit), pass/fail, ok, bad, check
G=tests/fixtures/golden/dit
LX=tests/fixtures/int8
PY="$PYTHON $(dirname "$0")/lib/st_int8.py"

one_line_2() { # name, expected stderr fragment, out file (must not exist), cmd...
    local name=$1 want=$2 out=$3; shift 3
    "$@" >/dev/null 2>"$tmp/err"; rc=$?
    lines=$(wc -l <"$tmp/err")
    if [ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] && grep -q -- "$want" "$tmp/err" && [ ! -e "$out" ]; then ok
    else bad "$name: rc $rc, $lines lines: $(cat "$tmp/err")"; fi
}
probe() { # model, out, extra args...
    local m=$1 o=$2; shift 2
    "$H3" probe dit --model "$m" --in $G/t2va.in.safetensors --out "$o" --precision bf16 "$@" 2>"$tmp/err"
}

# --- the converter
for prof in dit_proj mlp all; do
    if "$H3" quantize -d $TINY -o "$tmp/q_$prof" --profile $prof >"$tmp/out" 2>"$tmp/err"; then ok
    else bad "quantize --profile $prof: $(cat "$tmp/err")"; continue; fi
    grep -q "as int8 profile $prof" "$tmp/out" && grep -q "peak RSS" "$tmp/out" && ok || bad "$prof: summary: $(cat "$tmp/out")"
    grep -q "ETA" "$tmp/err" && ok || bad "$prof: no progress line"
    for tree in transformer transformer_ref FL2VA/transformer Ref2VA/transformer; do
        r=$($PY check $TINY/$tree "$tmp/q_$prof/$tree")
        case $prof in dit_proj) want=6 ;; mlp) want=2 ;; all) want=7 ;; esac
        case $tree in FL2VA/*|Ref2VA/*) [ $prof = mlp ] || want=$((want - 2)) ;; esac # one fused qkv_proj
        [ "${r%%,*}" = "ok: I8 $((2 * want))" ] && ok || bad "$prof $tree: $r (want I8 $((2 * want)))"
    done
    # the other components are hard links of the source's files
    [ "$(stat -c %i $TINY/vae/config.json)" = "$(stat -c %i "$tmp/q_$prof/vae/config.json")" ] && ok || bad "$prof: vae not linked"
    "$H3" info -d "$tmp/q_$prof" >"$tmp/info" 2>&1 && grep -q "int8: W8A8 profile $prof" "$tmp/info" && ok \
        || bad "$prof: info: $(grep -i 'int8\|problem\|error' "$tmp/info" | head -3)"
done
ls -a "$tmp" | grep -q '^\.q_.*tmp\|\.tmp' && bad "temporary folder left beside DST" || ok
one_line_2 "existing DST" "exists" "$tmp/none" "$H3" quantize -d $TINY -o "$tmp/q_mlp"
one_line_2 "bad profile" "--profile" "$tmp/q_x" "$H3" quantize -d $TINY -o "$tmp/q_x" --profile fc2
one_line_2 "int8 source" "already int8" "$tmp/q_x" "$H3" quantize -d "$tmp/q_mlp" -o "$tmp/q_x"
cp -rL $TINY "$tmp/nan"
"$PYTHON" "$(dirname "$0")/lib/plant_nan.py" "$tmp/nan/transformer"
"$H3" quantize -d "$tmp/nan" -o "$tmp/q_nan" >/dev/null 2>"$tmp/err"; rc=$? # progress lines, then the one error line
[ $rc -eq 2 ] && tail -1 "$tmp/err" | grep -q "ff.net.2.weight' row 0 is not finite" && [ ! -e "$tmp/q_nan" ] && ok \
    || bad "non-finite weight: rc $rc: $(tail -1 "$tmp/err")"
[ -z "$(ls -A "$tmp" | grep -v -x -e nan -e 'q_dit_proj' -e 'q_mlp' -e 'q_all' -e err -e out -e info)" ] && ok \
    || bad "failed conversion left: $(ls -A "$tmp")"

# --- the converted snapshot runs, bit-identical to runtime quantization of its source
probe $TINY "$tmp/rt.st" --quant int8 && ok || bad "probe --quant int8: $(cat "$tmp/err")"
probe "$tmp/q_dit_proj" "$tmp/cv.st" && ok || bad "probe converted: $(cat "$tmp/err")"
cmp -s "$tmp/rt.st" "$tmp/cv.st" && ok || bad "converted snapshot != --quant int8 on its source"
probe "$tmp/q_dit_proj/FL2VA" "$tmp/cvo.st" && ok || bad "probe converted FL2VA: $(cat "$tmp/err")"
cmp -s "$tmp/rt.st" "$tmp/cvo.st" && ok || bad "converted original layout != diffusers layout"
probe $TINY "$tmp/bf.st" && ok || bad "probe bf16: $(cat "$tmp/err")"
cmp -s "$tmp/rt.st" "$tmp/bf.st" && bad "int8 output equals bf16 (int8 not taken)" || ok
for d in lightx2v lightx2v_single; do
    probe $LX/$d "$tmp/$d.st" && ok || bad "probe $d: $(cat "$tmp/err")"
done
cmp -s "$tmp/lightx2v.st" "$tmp/lightx2v_single.st" && ok || bad "LightX2V parts != single file"
# M5-style (our layout, no metadata: the profile inferred from the I8 tensors)
cp -a "$tmp/q_dit_proj/transformer" "$tmp/m5"
$PY meta "$tmp/m5" h3.int8_profile - && $PY meta "$tmp/m5" h3.quant -
probe "$tmp/m5" "$tmp/m5.st" && cmp -s "$tmp/m5.st" "$tmp/cv.st" && ok || bad "no metadata: $(cat "$tmp/err")"
# --int8-fc2-groups: the tiny FFN (64) is not a multiple of 1024
one_line_2 "fc2 groups on tiny" "int8-fc2-groups" "$tmp/g.st" probe $TINY "$tmp/g.st" --quant int8 --int8-fc2-groups
one_line_2 "int8 in fp32 mode" "precision bf16" "$tmp/f.st" "$H3" probe dit --model $TINY --in $G/t2va.in.safetensors \
    --out "$tmp/f.st" --quant int8

# h3 generate: --quant int8 on the source and the converted snapshot give the same latents
GA=(--width 64 --height 64 --steps 1 --frames 120 -p "A red fox." --seed 7)
"$H3" generate -d $TINY "${GA[@]}" --quant int8 --dump-latents "$tmp/ga.st" -o "$tmp/ga.mp4" 2>"$tmp/err" && ok \
    || bad "generate --quant int8: $(tail -1 "$tmp/err")"
"$H3" generate -d "$tmp/q_dit_proj" "${GA[@]}" --dump-latents "$tmp/gb.st" -o "$tmp/gb.mp4" 2>"$tmp/err" && ok \
    || bad "generate on the converted snapshot: $(tail -1 "$tmp/err")"
cmp -s "$tmp/ga.st" "$tmp/gb.st" && ok || bad "generate: converted snapshot != --quant int8 (latents)"
one_line_2 "generate int8 + ssd-streaming" "cannot be combined with --quant int8" "$tmp/gc.mp4" \
    "$H3" generate -d $TINY "${GA[@]}" --quant int8 --ssd-streaming -o "$tmp/gc.mp4"
one_line_2 "generate int8 fp32" "need --precision bf16" "$tmp/gc.mp4" \
    "$H3" generate -d $TINY "${GA[@]}" --quant int8 --precision fp32 -o "$tmp/gc.mp4"
rm -f "$tmp"/g?.mp4 "$tmp"/g?.st

# --- scope validation: each breach one line, exit 2, at load (probe) and a problem in info
breach() { # name, expected fragment, edit...
    local name=$1 want=$2; shift 2
    rm -rf "$tmp/b"; cp -a "$tmp/q_dit_proj" "$tmp/b"
    "$@"
    one_line_2 "$name (load)" "$want" "$tmp/b.st" probe "$tmp/b" "$tmp/b.st"
    "$H3" info -d "$tmp/b" >"$tmp/info" 2>&1; rc=$?
    [ $rc -ne 0 ] && grep -q -- "$want" "$tmp/info" && ok || bad "$name (info): rc $rc: $(grep -- "$want" "$tmp/info")"
}
B=transformer_blocks.0
breach "profile all named, adaln_proj BF16" "must be I8" $PY meta "$tmp/b/transformer" h3.int8_profile all
breach "profile unknown" "is not one of" $PY meta "$tmp/b/transformer" h3.int8_profile fc2
breach "scale missing" "missing: every I8 weight needs its scale" \
    $PY rename "$tmp/b/transformer" $B.attn.to_q.weight_scale $B.attn.to_q.weight_scales
breach "scale shape [N]" "an int8 scale is F32 or BF16" $PY retype "$tmp/b/transformer" $B.ff.net.2.weight_scale F32 '[48]'
breach "scale zero" "not finite and positive" $PY fill "$tmp/b/transformer" $B.ff.net.2.weight_scale 00
breach "scale NaN" "not finite and positive" $PY fill "$tmp/b/transformer" $B.attn.to_k.weight_scale ff
breach "I8 outside every profile" "no int8 profile quantizes it" \
    $PY retype "$tmp/b/transformer" token_refiner.refiner_blocks.0.attn.to_q.weight I8 '[64, 96]'
breach "in-scope weight not I8" "must be I8" $PY retype "$tmp/b/transformer" $B.attn.to_v.weight BF16 '[64, 24]'
breach "I8 of the wrong shape" "the config implies" $PY retype "$tmp/b/transformer" $B.attn.to_out.0.weight I8 '[24, 128]'
rm -rf "$tmp/b"; cp -a "$TINY/transformer" "$tmp/b" # (probe takes a transformer folder)
$PY rename "$tmp/b" $B.attn.norm_q.weight $B.attn.norm_q.weight_scale
one_line_2 "stray scale in a plain snapshot" "no weight of this snapshot is I8" "$tmp/b.st" probe "$tmp/b" "$tmp/b.st"

# --- the LightX2V fixtures in info
for d in lightx2v lightx2v_single; do
    rm -rf "$tmp/lxs"; cp -a "$tmp/q_mlp" "$tmp/lxs"; rm -rf "$tmp/lxs/transformer"; cp -a $LX/$d "$tmp/lxs/transformer"
    "$H3" info -d "$tmp/lxs" >"$tmp/info" 2>&1; rc=$?
    [ $rc -eq 0 ] && grep -q "int8: W8A8 profile all" "$tmp/info" && ok || bad "info $d: rc $rc: $(grep -i 'problem\|int8' "$tmp/info" | head -3)"
done
# --- the session's !quant: a generation after "!quant int8" is the one-shot --quant int8 run byte for byte; a bad
# value is one error line and the session goes on; fp32 refuses it
SA=(-d $TINY --width 64 --height 32 --frames 120 --steps 1 --seed 3 -o '')
"$H3" generate "${SA[@]}" -p "A red fox." --quant int8 --dump-latents "$tmp/s_one.st" 2>"$tmp/err" || bad "one-shot: $(tail -1 "$tmp/err")"
printf '%s\n' "!quant int8" "A red fox." "!quant bogus" "!quant" "!quant none" "A red fox." |
    TMPDIR="$tmp" "$H3" generate "${SA[@]}" --dump-latents "$tmp/s.st" >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc -eq 0 ] && ok || bad "session !quant: exit $rc: $(tail -2 "$tmp/err")"
cmp -s "$tmp/s_one.st" "$tmp/s-0001.st" && ok || bad "session !quant int8 != one-shot --quant int8"
cmp -s "$tmp/s_one.st" "$tmp/s-0002.st" && bad "session !quant none still int8" || ok
[ "$(grep -c "!quant expects none, fp8, int8 or int8-fc2-groups, got 'bogus'" "$tmp/err")" -eq 1 ] && ok \
    || bad "!quant bogus: $(grep -i quant "$tmp/err")"
grep -q "^quant int8$" "$tmp/out" && ok || bad "!quant shows: $(grep '^quant' "$tmp/out")"
printf '%s\n' "!quant int8" | "$H3" generate "${SA[@]}" --precision fp32 >"$tmp/out" 2>"$tmp/err"
grep -q "^h3: !quant: --quant int8 needs --precision bf16" "$tmp/err" && ok || bad "!quant int8 in fp32: $(cat "$tmp/err")"
# --- h3 bench --quant int8 (tiny config, CPU): a timed forward and its distance from the bf16 forward on the same
# random weights (--compare-bf16 1); the flag rules
BN=(bench --backend cpu --what dit --shapes 64x64x5 --config $TINY/transformer --repeats 1)
"$H3" "${BN[@]}" --quant int8 --compare-bf16 1 >"$tmp/out" 2>"$tmp/err"; rc=$?
rel=$(sed -n 's/^DIT .* vs_bf16_video_rel_l2=\([^ ]*\) .*/\1/p' "$tmp/out")
[ $rc -eq 0 ] && grep -q "quantized to INT8 (per token)" "$tmp/out" && [ -n "$rel" ] &&
    awk -v r="$rel" 'BEGIN { exit !(r > 0 && r < 5e-2) }' && ok || bad "bench --quant int8: rc $rc, rel $rel: $(tail -2 "$tmp/err")"
one_line_2 "bench fc2 groups without int8" "needs --quant int8" "$tmp/none" "$H3" "${BN[@]}" --int8-fc2-groups 1
one_line_2 "bench compare without quant" "needs --quant" "$tmp/none" "$H3" "${BN[@]}" --compare-bf16 1
echo "RESULT $pass $fail"
