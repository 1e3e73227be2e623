#!/usr/bin/env bash
# `h3 probe text-encode` / `vision` (PROBE.md, docs/probe.md): run on the goldens and match them
# bit for bit in bf16 (the fp32 tolerance checks are tests/test_text_encoder.c, same library code);
# bad input -> one line, exit 2, no output file.
set -u
G=tests/fixtures/golden/text_encoder
source "$(dirname "$0")/lib/probe_checks.bash"
# same_tensor OUT GOLDEN NAME: byte-identical tensor data (the data area after the JSON header)
same_tensor() {
    "$PYTHON" - "$1" "$2" "$3" <<'PY' 2>/dev/null
import json, struct, sys
def data(path, name):
    b = open(path, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])[name]
    s, e = h["data_offsets"]; return h["shape"], b[8 + n + s: 8 + n + e]
sys.exit(0 if data(sys.argv[1], sys.argv[3]) == data(sys.argv[2], sys.argv[3]) else 1)
PY
}

for c in fox dialog; do
    run_ok "text-encode $c fp32" text-encode --model $TINY --in $G/text_encode_$c.in.safetensors --out "$tmp/$c.safetensors"
    [ -s "$tmp/$c.safetensors" ] && ok || bad "text-encode $c wrote nothing"
    run_ok "text-encode $c bf16" text-encode --model $TINY --precision bf16 --in $G/text_encode_$c.in.safetensors \
        --out "$tmp/$c.bf16.safetensors"
    if command -v python3 >/dev/null; then
        same_tensor "$tmp/$c.bf16.safetensors" $G/text_encode_$c.bf16.out.safetensors hidden_states && ok \
            || bad "text-encode $c bf16 differs from transformers"
    fi
done
run_ok "vision fp32" vision --model $TINY --in $G/vision.in.safetensors --out "$tmp/v.safetensors"
run_ok "vision bf16" vision --model $TINY --precision bf16 --in $G/vision.in.safetensors --out "$tmp/v16.safetensors"
if command -v python3 >/dev/null; then
    for t in image_embeds deepstack_features; do
        same_tensor "$tmp/v16.safetensors" $G/vision.bf16.out.safetensors $t && ok || bad "vision bf16 $t differs"
    done
fi

run_bad "missing input_ids" "input 'input_ids'" "$tmp/x1" text-encode --model $TINY \
    --in $G/vision.in.safetensors --out "$tmp/x1"
run_bad "pixel values without grid" "must be given together" "$tmp/x2" text-encode --model $TINY \
    --in $G/ref2va.in.safetensors --out "$tmp/x2"
run_bad "vision without pixel_values" "input 'pixel_values'" "$tmp/x3" vision --model $TINY \
    --in $G/text_encode_fox.in.safetensors --out "$tmp/x3"
run_bad "no text_encoder folder" "config.json" "$tmp/x4" text-encode --model $G \
    --in $G/text_encode_fox.in.safetensors --out "$tmp/x4"

echo "RESULT $pass $fail"
