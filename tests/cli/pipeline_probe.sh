#!/usr/bin/env bash
# `h3 probe sigmas / layout / noise / denoise` (PROBE.md, docs/probe.md): run on the goldens; bad
# input -> one line on stderr, exit 2, no output file. Value parity of the probe outputs is checked
# by tests/test_{sched,layout,noise,denoise}.c (they run the same probe ops on the same files).
set -u
source "$(dirname "$0")/lib/common.bash" # H3, TINY, $tmp (removed at exit), pass/fail, ok, bad, check
G=tests/fixtures/golden/pipeline

run_ok() { # name, out file, args...
    local name=$1 out=$2; shift 2
    if "$H3" probe "$@" --out "$out" 2>"$tmp/err" && [ -s "$out" ]; then ok; else bad "$name: $(cat "$tmp/err")"; fi
}
run_bad() { # name, expected stderr fragment, args...
    local name=$1 want=$2; shift 2
    local out="$tmp/bad_${pass}_${fail}.safetensors"
    "$H3" probe "$@" --out "$out" 2>"$tmp/err"; rc=$?
    lines=$(wc -l <"$tmp/err")
    if [ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] && grep -qF -- "$want" "$tmp/err" && [ ! -e "$out" ]; then ok
    else bad "$name: rc $rc, $lines lines: $(cat "$tmp/err")"; fi
}

run_ok sigmas "$tmp/s.safetensors" sigmas --in $G/sigmas_n21_video.in.safetensors
run_ok "layout t2va" "$tmp/l1.safetensors" layout --in $G/layout_t2va.in.safetensors
run_ok "layout fl2va" "$tmp/l2.safetensors" layout --in $G/layout_fl2va_both.in.safetensors
run_ok "layout ref2va" "$tmp/l3.safetensors" layout --in $G/layout_ref2va_worked.in.safetensors
run_ok noise "$tmp/n.safetensors" noise --in $G/noise_42_1x24x1x4x6.in.safetensors
run_ok "denoise ref2va" "$tmp/d.safetensors" denoise --model $TINY --component transformer_ref \
    --in $G/denoise_ref2va.in.safetensors
run_ok "denoise from a transformer folder" "$tmp/d2.safetensors" denoise --model $TINY/transformer_ref \
    --in $G/denoise_ref2va.in.safetensors

run_bad "N = 1" "num_inference_steps" sigmas --in $G/bad_sigmas_n1.in.safetensors
run_bad "shift 0" "shift" sigmas --in $G/bad_sigmas_shift0.in.safetensors
run_bad "layout input to sigmas" "input 'num_inference_steps'" sigmas --in $G/layout_t2va.in.safetensors
run_bad "bad anchor" "anchors[0]" layout --in $G/bad_layout_anchor.in.safetensors
run_bad "odd latent grid" "divisible by the patch" layout --in $G/bad_layout_odd.in.safetensors
run_bad "unknown reference kind" "references[0]" layout --in $G/bad_layout_refkind.in.safetensors
run_bad "sigmas input to layout" "input 'text_token_tags'" layout --in $G/sigmas_n5_video.in.safetensors
run_bad "negative shape" "input 'shape'" noise --in $G/bad_noise_shape.in.safetensors
run_bad "denoise without rows" "input 'latents'" denoise --model $TINY --in $G/layout_t2va.in.safetensors
run_bad "denoise without a model" "--model" denoise --model "$tmp" --in $G/denoise_t2va.in.safetensors
echo "RESULT $pass $fail"
