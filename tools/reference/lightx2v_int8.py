#!/usr/bin/env python3
"""Writes the tiny DiT (tests/fixtures/tiny/transformer) as LightX2V's generic converter writes an INT8 checkpoint for
model type h3 (tools/convert/converter.py with --quantized --linear_type int8 -t h3), as a test fixture (docs/int8.md).

What LightX2V's converter does, reproduced here (read from its code; not copied):
* scope: every 2-D tensor whose dotted name has "attn", "ff" or "adaln_proj" as its third part (key_idx 2), i.e. the
  main blocks' to_q, to_k, to_v, to_out.0, ff.net.0.proj, ff.net.2 and adaln_proj.linear weights (the refiner's
  names have the block index there and are left alone); every other tensor keeps its dtype and bytes
  (preserve_non_quant_dtype for h3);
* rule (quant.py QuantWeightINT8, on the tensor as stored, bf16): max_val = absmax per row clamped to >= 1e-5,
  scale = max_val / 127, q = clamp(round(w / scale), -128, 127) as int8, every step in bf16;
* names: the weight keeps its name, the scale is "<name>_scale" ("...weight_scale"), bf16 [N, 1];
* files: "<output_name>_part<i>.safetensors" (output_name "converted"), a chunk every 100 tensors in the order
  the tensors were read (shards in order, names sorted within each), plus "diffusion_pytorch_model.safetensors.index.json"
  whose total_size is the sum of the part files' sizes; --single_file writes "converted.safetensors" and no index;
  no "__metadata__" beyond safetensors' own; config.json copied (--copy_no_weight_files).

    nice python3 tools/reference/lightx2v_int8.py [--root tests/fixtures] [--chunk 100]

writes <root>/int8/lightx2v/ (parts + index + config.json) and <root>/int8/lightx2v_single/ (one file + config.json).
"""
import argparse
import json
import os
import shutil

import torch
from safetensors import safe_open
from safetensors.torch import save_file

TARGET = ("attn", "ff", "adaln_proj")


def quant_lightx2v(w):
    max_val = w.abs().amax(dim=1, keepdim=True).clamp(min=1e-5)
    scales = max_val / 127
    q = torch.clamp(torch.round(w / scales), -128, 127).to(torch.int8)
    return q, scales.view(w.shape[0], -1)


def convert(src):
    index = json.load(open(os.path.join(src, "diffusion_pytorch_model.safetensors.index.json")))
    files = []
    for f in index["weight_map"].values():
        if f not in files:
            files.append(f)
    out = {}
    for f in sorted(files):
        with safe_open(os.path.join(src, f), "pt") as s:
            for k in s.keys():
                t = s.get_tensor(k)
                parts = k.split(".")
                if t.dim() == 2 and len(parts) > 2 and parts[2] in TARGET:
                    q, sc = quant_lightx2v(t)
                    out[k] = q
                    out[k + "_scale"] = sc
                else:
                    out[k] = t
    return out


def write(dst, tensors, chunk, single, src):
    if os.path.exists(dst):
        shutil.rmtree(dst)
    os.makedirs(dst)
    if single:
        save_file(tensors, os.path.join(dst, "converted.safetensors"))
    else:
        index = {"metadata": {"total_size": 0}, "weight_map": {}}
        items = list(tensors.items())
        for c in range(0, len(items), chunk):
            name = f"converted_part{c // chunk}.safetensors"
            part = dict(items[c:c + chunk])
            save_file(part, os.path.join(dst, name))
            for k in part:
                index["weight_map"][k] = name
            index["metadata"]["total_size"] += os.path.getsize(os.path.join(dst, name))
        with open(os.path.join(dst, "diffusion_pytorch_model.safetensors.index.json"), "w") as f:
            json.dump(index, f, indent=2)
    shutil.copy2(os.path.join(src, "config.json"), os.path.join(dst, "config.json"))
    for f in os.listdir(dst):
        os.chmod(os.path.join(dst, f), 0o644)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures"))
    ap.add_argument("--chunk", type=int, default=40)  # LightX2V -c; 40 gives the tiny DiT two parts
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    src = os.path.join(root, "tiny", "transformer")
    t = convert(src)
    n8 = sum(1 for v in t.values() if v.dtype == torch.int8)
    write(os.path.join(root, "int8", "lightx2v"), t, a.chunk, False, src)
    write(os.path.join(root, "int8", "lightx2v_single"), t, a.chunk, True, src)
    print(f"wrote {root}/int8/lightx2v{{,_single}}: {len(t)} tensors, {n8} int8 (chunks of {a.chunk})")


if __name__ == "__main__":
    main()
