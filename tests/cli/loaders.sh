#!/usr/bin/env bash
# The loaders on hostile snapshots (docs/robustness.md, "Snapshots, configs and safetensors"): FIFOs in place of
# configs, shards and tokenizer files; configs with huge or overflowing sizes; shards with trailing bytes, relabelled
# dtypes, unlisted or truncated tensors; -d at a folder that is no snapshot; unreadable files. Every case must end
# with exit 2 and one clear line: the timeout guards turn a hang into a failure, the memory guard a runaway list.
set -u
source "$(dirname "$0")/lib/common.bash" # H3, TINY, $tmp (removed at exit), pass/fail, ok, bad, check
T=30 # seconds: each case is instant when it is right
expect() { # expect DESCRIPTION WANT_RC PATTERN... [-- !ABSENT...] -- CMD...
    local desc=$1 want=$2; shift 2
    local pats=() nots=()
    while [ "$1" != "--" ]; do pats+=("$1"); shift; done; shift
    if [ "${1:-}" = "!" ]; then shift; while [ "$1" != "--" ]; do nots+=("$1"); shift; done; shift; fi
    local out rc
    out=$(timeout -k 5 "$T" "$@" 2>&1 </dev/null); rc=$?
    [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || { bad "$desc: hung (killed after ${T}s)"; return; }
    [ "$rc" -eq "$want" ] || { bad "$desc: exit $rc, want $want"; echo "$out" | tail -4; return; }
    for p in "${pats[@]}"; do
        grep -qF -- "$p" <<<"$out" || { bad "$desc: output lacks '$p'"; echo "$out" | tail -4; return; }
    done
    for p in "${nots[@]+"${nots[@]}"}"; do
        ! grep -qF -- "$p" <<<"$out" || { bad "$desc: output has '$p'"; echo "$out" | tail -4; return; }
    done
    ok
}
copy() { rm -rf "$tmp/$1"; cp -rL "$TINY" "$tmp/$1"; chmod -R u+w "$tmp/$1"; }
GEN=(generate -p "A fox." -o "" --dump-latents "$tmp/out/x.st" --steps 1 --width 64 --height 32)
mkdir -p "$tmp/out"; chmod 777 "$tmp/out"

# 1. FIFOs: refused at open (O_NONBLOCK + fstat), never waited on.
copy fifo
rm "$tmp/fifo/transformer/config.json"; mkfifo "$tmp/fifo/transformer/config.json"
expect "FIFO config.json (info)" 2 "transformer/config.json: not a regular file (a FIFO)" -- "$H3" info -d "$tmp/fifo"
copy fifo2
rm "$tmp/fifo2/model_index.json"; mkfifo "$tmp/fifo2/model_index.json"
expect "FIFO model_index.json (generate)" 2 "model_index.json: not a regular file (a FIFO)" -- "$H3" "${GEN[@]}" -d "$tmp/fifo2"
copy fifo3
s="$tmp/fifo3/vae/diffusion_pytorch_model-00002-of-00002.safetensors"; rm "$s"; mkfifo "$s"
expect "FIFO shard (info)" 2 "diffusion_pytorch_model-00002-of-00002.safetensors: not a regular file (a FIFO)" -- "$H3" info -d "$tmp/fifo3"
expect "FIFO shard (generate, before the text encoder)" 2 "not a regular file (a FIFO)" -- ! "text encoder [" -- \
    "$H3" "${GEN[@]}" -d "$tmp/fifo3"
copy fifo4
rm "$tmp/fifo4/tokenizer/vocab.json"; mkfifo "$tmp/fifo4/tokenizer/vocab.json"
expect "FIFO vocab.json (info)" 2 "tokenizer/vocab.json: not a regular file (a FIFO)" -- "$H3" info -d "$tmp/fifo4"
expect "FIFO vocab.json (generate)" 2 "tokenizer/vocab.json: not a regular file (a FIFO)" -- "$H3" "${GEN[@]}" -d "$tmp/fifo4"
copy fifo5
rm "$tmp/fifo5/tokenizer/merges.txt"; mkfifo "$tmp/fifo5/tokenizer/merges.txt"
expect "FIFO merges.txt (info)" 2 "tokenizer/merges.txt: not a regular file (a FIFO)" -- "$H3" info -d "$tmp/fifo5"

# 2. Sizes from configs: plausible ranges, 64-bit arithmetic, and no list longer than the weights' tensor count.
copy huge
sed -i 's/"num_layers": 2/"num_layers": 1073741824/' "$tmp/huge/transformer/config.json"
expect "num_layers 2^30 (info, 4 GB address-space guard)" 2 '"num_layers" must be an integer in [1, 1024]' -- \
    bash -c 'ulimit -v 4000000; exec "$@"' _ "$H3" info -d "$tmp/huge"
copy huge2
sed -i 's/"num_hidden_layers": 51/"num_hidden_layers": 1073741824/' "$tmp/huge2/text_encoder/config.json"
expect "text num_hidden_layers 2^30 (info)" 2 '"num_hidden_layers" must be an integer in [1, 1024]' -- \
    bash -c 'ulimit -v 4000000; exec "$@"' _ "$H3" info -d "$tmp/huge2"
copy ovf
sed -i 's/"num_layers": 2/"num_layers": 2147483647/' "$tmp/ovf/transformer/config.json"
expect "num_layers + num_refiner_layers past INT_MAX (info)" 2 '"num_layers" must be an integer in [1, 1024]' -- \
    bash -c 'ulimit -v 4000000; exec "$@"' _ "$H3" info -d "$tmp/ovf"
copy many
sed -i 's/"num_layers": 2/"num_layers": 1000/' "$tmp/many/transformer/config.json"
expect "config implying more tensors than the index holds (info)" 2 \
    "DiT: the config implies more tensors than the 62 the weights hold" -- "$H3" info -d "$tmp/many"
expect "the same (generate, before the text encoder)" 2 "DiT: the config implies more tensors than the 62 the weights hold" -- \
    ! "text encoder [" -- "$H3" "${GEN[@]}" -d "$tmp/many"

# 3. Shards by the reference format's rules, one validator for info and generate.
copy trail
printf 'xxxxxxxx' >> "$tmp/trail/transformer/diffusion_pytorch_model-00002-of-00002.safetensors"
expect "trailing bytes after a shard's data (info)" 2 "8 trailing bytes after the data area" -- "$H3" info -d "$tmp/trail"
expect "trailing bytes (generate)" 2 "8 trailing bytes after the data area" -- "$H3" "${GEN[@]}" -d "$tmp/trail"
copy relabel
# same header length: "dtype":"BF16" -> "dtype": "F16"
sed -i 's/"context_embedder.weight":{"dtype":"BF16"/"context_embedder.weight":{"dtype": "F16"/' \
    "$tmp/relabel/transformer/diffusion_pytorch_model-00001-of-00002.safetensors"
expect "BF16 tensor relabelled F16 (info)" 2 "tensor 'context_embedder.weight': F16 [48,16], config implies BF16 [48,16]" -- \
    "$H3" info -d "$tmp/relabel"
expect "BF16 tensor relabelled F16 (generate)" 2 "tensor 'context_embedder.weight': F16 [48,16], config implies BF16 [48,16]" -- \
    "$H3" "${GEN[@]}" -d "$tmp/relabel"
copy unlisted
sed -i '/"proj_in.bias":/d' "$tmp/unlisted/transformer/diffusion_pytorch_model.safetensors.index.json"
expect "tensor in a shard that the index does not list (info)" 2 "holds tensor 'proj_in.bias' that the index does not map to it" -- \
    "$H3" info -d "$tmp/unlisted"
expect "the same (generate)" 2 "holds tensor 'proj_in.bias' that the index does not map to it" -- "$H3" "${GEN[@]}" -d "$tmp/unlisted"
copy trunc
s="$tmp/trunc/vae/diffusion_pytorch_model-00002-of-00002.safetensors"
head -c $(( $(stat -c%s "$s") - 100 )) "$s" > "$s.x" && mv "$s.x" "$s"
expect "truncated VAE shard: generate fails before the text encoder" 2 "vae/diffusion_pytorch_model-00002-of-00002.safetensors" \
    "beyond the data area" -- ! "text encoder [" "load tokenizer" -- "$H3" "${GEN[@]}" -d "$tmp/trunc"
expect "the same in a session: no generation starts" 1 "beyond the data area" -- ! "text encoder [" -- \
    bash -c 'printf "A fox.\n!quit\n" | "$@"' _ "$H3" generate -d "$tmp/trunc" -o "" --dump-latents "$tmp/s.st" --steps 1 --width 64 --height 32
copy trunc2
s="$tmp/trunc2/transformer/diffusion_pytorch_model-00002-of-00002.safetensors"
head -c $(( $(stat -c%s "$s") - 100 )) "$s" > "$s.x" && mv "$s.x" "$s"
expect "truncated DiT shard: generate fails before the text encoder" 2 "beyond the data area" -- ! "text encoder [" -- \
    "$H3" "${GEN[@]}" -d "$tmp/trunc2"

# 4. -d at a folder that is no snapshot: info's message, exit 2, no session.
mkdir -p "$tmp/notsnap/tokenizer"
expect "-d not a snapshot (generate)" 2 "no model_index.json (not a MiniMax-H3 snapshot folder)" -- ! "vocab.json" -- \
    "$H3" "${GEN[@]}" -d "$tmp/notsnap"
expect "-d not a snapshot (session)" 2 "no model_index.json (not a MiniMax-H3 snapshot folder)" -- ! "h3>" "vocab.json" -- \
    bash -c 'printf "!quit\n" | "$@"' _ "$H3" generate -d "$tmp/notsnap"
expect "-d an original partition (generate)" 2 "an original partition tree" -- "$H3" "${GEN[@]}" -d "$tmp/trunc/FL2VA"

# 5. Permission errors worded as such (not as "not valid JSON"); as root, the command runs as nobody.
copy perm
chmod 000 "$tmp/perm/transformer/config.json"
copy perm2
chmod 000 "$tmp/perm2/tokenizer/vocab.json"
AS=()
if [ "$(id -u)" = 0 ]; then
    chmod 755 "$tmp"; AS=(setpriv --reuid=65534 --regid=65534 --clear-groups)
fi
expect "unreadable config.json (info)" 2 "transformer/config.json: cannot open: permission denied" -- ! "not valid JSON" -- \
    "${AS[@]}" "$H3" info -d "$tmp/perm"
expect "unreadable vocab.json (generate)" 2 "tokenizer/vocab.json: cannot open: permission denied" -- ! "not valid JSON" -- \
    "${AS[@]}" "$H3" "${GEN[@]}" -d "$tmp/perm2"
echo "RESULT $pass $fail"
