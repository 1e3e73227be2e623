#!/usr/bin/env bash
# h3 info on the real release skeleton (configs + indexes, no weights) and on corrupted copies.
set -u
source "$(dirname "$0")/lib/common.bash" # H3, TINY, $tmp (removed at exit), pass/fail, ok, bad, check
SKEL=tests/fixtures/skeleton
expect() { # expect DESCRIPTION WANT_RC PATTERN... -- CMD...
    local desc=$1 want=$2; shift 2
    local pats=()
    while [ "$1" != "--" ]; do pats+=("$1"); shift; done; shift
    local out rc
    out=$("$@" 2>&1); rc=$?
    [ "$rc" -eq "$want" ] || { bad "$desc: exit $rc, want $want"; echo "$out" | tail -5; return; }
    for p in "${pats[@]}"; do
        grep -qF -- "$p" <<<"$out" || { bad "$desc: output lacks '$p'"; echo "$out" | tail -5; return; }
    done
    ok
}

expect "skeleton validates (index only)" 0 \
    "transformer (DiT, t2va + fl2va)" "tensors: 638 (config implies 638, 66,280,430,080 bytes)" \
    "total_size 66,280,430,080 bytes" "BF16 626 tensors" "F32 12 tensors" \
    "FL2VA/ (original FL2VA partition)" "tensors: 535 (config implies 535, 66,280,430,144 bytes)" \
    "1058 tensors in 14 shards, total_size 66,714,780,128 bytes" "703 tensors in 3 shards, total_size 10,415,475,936 bytes" \
    "shift=12.0" "shift=3.0" "151643 tokens" -- "$H3" info -d "$SKEL" --index-only
expect "FL2VA tree alone" 0 "original partition layout" "tensors: 535" -- "$H3" info -d "$SKEL/FL2VA" --index-only
expect "weights required without --index-only" 2 "14 of 14 shards listed by" "problems found" -- "$H3" info -d "$SKEL"

cp -r "$SKEL" "$tmp/renamed"; chmod -R u+w "$tmp/renamed"
sed -i 's/"transformer_blocks.7.attn.to_q.weight"/"transformer_blocks.7.attn.to_qq.weight"/' \
    "$tmp/renamed/transformer/diffusion_pytorch_model.safetensors.index.json"
expect "renamed tensor" 2 "tensor 'transformer_blocks.7.attn.to_qq.weight' is not implied by the config" \
    "tensor 'transformer_blocks.7.attn.to_q.weight' implied by the config is missing" -- "$H3" info -d "$tmp/renamed" --index-only

cp -r "$SKEL" "$tmp/trunc"; chmod -R u+w "$tmp/trunc"
f="$tmp/trunc/transformer_ref/diffusion_pytorch_model.safetensors.index.json"
head -c 5000 "$f" > "$f.x" && mv "$f.x" "$f"
expect "truncated index" 2 "transformer_ref/diffusion_pytorch_model.safetensors.index.json: not valid JSON" -- "$H3" info -d "$tmp/trunc" --index-only

cp -r "$SKEL" "$tmp/size"; chmod -R u+w "$tmp/size"
sed -i 's/"total_size": 66280430144/"total_size": 66280430000/' "$tmp/size/FL2VA/transformer/model.safetensors.index.json"
expect "wrong total_size" 2 "index total_size 66,280,430,000 bytes but the config implies 66,280,430,144" -- "$H3" info -d "$tmp/size" --index-only

cp -r "$SKEL" "$tmp/cfg"; chmod -R u+w "$tmp/cfg"
sed -i 's/"num_layers": 50/"num_layers": 49/' "$tmp/cfg/transformer/config.json"
expect "config disagreeing with the index" 2 "tensor 'transformer_blocks.49.adaln_proj.linear.bias' is not implied by the config" "... 12 unexpected tensors in all" -- "$H3" info -d "$tmp/cfg" --index-only

# A real (tiny) snapshot with weights: validates fully, then corrupted shard headers are caught.
expect "tiny snapshot with weights" 0 "tensors: 62 (config implies 62" "ok" -- "$H3" info -d "$TINY"
cp -rL "$TINY" "$tmp/shape"; chmod -R u+w "$tmp/shape"
shard="$tmp/shape/transformer/diffusion_pytorch_model-00001-of-00002.safetensors"
# Same byte length, so the file stays a valid safetensors file with a transposed tensor.
sed -i 's/"proj_in.weight":{"dtype":"F32","shape":\[48,96\]/"proj_in.weight":{"dtype":"F32","shape":[96,48]/' "$shard"
expect "transposed tensor in a shard" 2 "tensor 'proj_in.weight': F32 [96,48], config implies F32 [48,96]" -- "$H3" info -d "$tmp/shape"
cp -rL "$TINY" "$tmp/trshard"; chmod -R u+w "$tmp/trshard"
shard="$tmp/trshard/transformer_ref/diffusion_pytorch_model-00002-of-00002.safetensors"
head -c $(( $(stat -c%s "$shard") - 100 )) "$shard" > "$shard.x" && mv "$shard.x" "$shard"
expect "truncated shard" 2 "diffusion_pytorch_model-00002-of-00002.safetensors" "beyond the data area" -- "$H3" info -d "$tmp/trshard"
rm "$tmp/trshard/transformer_ref/diffusion_pytorch_model-00002-of-00002.safetensors"
expect "missing shard" 2 "shards missing (1 of 2)" -- "$H3" info -d "$tmp/trshard"

expect "not a snapshot" 2 "no model_index.json" -- "$H3" info -d "$SKEL/tokenizer"
expect "missing dir" 2 "not a directory" -- "$H3" info -d "$tmp/nope"
expect "missing -d" 2 "-d SNAPSHOT_DIR is required" -- "$H3" info
echo "RESULT $pass $fail"
