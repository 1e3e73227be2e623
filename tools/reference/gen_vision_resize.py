#!/usr/bin/env python3
"""Goldens for images the Qwen3-VL image processor resizes (smart_resize != input size).

Writes tests/fixtures/golden/text_encoder/vision_resize.out.safetensors and vision_resize.json.
Reads the tiny snapshot made by gen_text_encoder.py (tests/fixtures/tiny/{text_encoder,processor}).

Reference: transformers' AutoImageProcessor on the snapshot's processor/ folder. Without torchvision
(this environment, and tools/reference/gen_e2e.py) that is Qwen2VLImageProcessorPil: PIL BICUBIC
resize of the uint8 image to smart_resize's (h, w), float32(x * (1/255)), (v - mean) / std, patchify.
The script refuses to run if another processor class is picked (e.g. torchvision on PYTHONPATH).

The input images are integer-hash noise (reproduced by tests/test_vision.c), so nothing but the
outputs is stored. pixel_values are too big to store (824 x 1536 floats); the golden keeps a
position-weighted checksum of their float32 bit patterns (sum of bits[i] * (2i + 1) mod 2^64) plus
per-column sums for diagnostics. Tower outputs: one batched fp32 call over the three images, as
diffusers batches the images of a request.
"""
import json
import os

import numpy as np
import torch
from PIL import Image
from safetensors.torch import save_file
from transformers import AutoImageProcessor, Qwen3VLForConditionalGeneration

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TINY = os.path.join(ROOT, "tests/fixtures/tiny")
GOLDEN = os.path.join(ROOT, "tests/fixtures/golden/text_encoder")

# (height, width, seed): up-scaled by min_pixels (96x128 -> 224x320, the fl2va canvas that used to
# fail), height down / width up by rounding (270x240 -> 256x256: Pillow's vertical-first order),
# both down by rounding (270x300 -> 256x288).
CASES = [(96, 128, 1), (270, 240, 2), (270, 300, 3)]


def hash_image(h, w, seed):
    """uint8 [h, w, 3]: byte 0 of a 32-bit integer mix of (index + seed * 0x9E3779B9)."""
    i = np.arange(h * w * 3, dtype=np.uint64)
    x = (i + np.uint64(seed) * np.uint64(0x9E3779B9)) & np.uint64(0xFFFFFFFF)
    m = np.uint64(0xFFFFFFFF)
    x ^= x >> np.uint64(16)
    x = (x * np.uint64(0x7FEB352D)) & m
    x ^= x >> np.uint64(15)
    x = (x * np.uint64(0x846CA68B)) & m
    x ^= x >> np.uint64(16)
    return (x & np.uint64(255)).astype(np.uint8).reshape(h, w, 3)


def bits_checksum(pv):
    """sum_i bits(pv[i]) * (2i + 1) mod 2^64 over the row-major float32 array."""
    b = np.ascontiguousarray(pv, dtype=np.float32).view(np.uint32).astype(np.uint64).ravel()
    k = np.arange(b.size, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    with np.errstate(over="ignore"):
        return int(np.sum(b * k, dtype=np.uint64))


def main():
    torch.manual_seed(0)
    ip = AutoImageProcessor.from_pretrained(os.path.join(TINY, "processor"))
    assert type(ip).__name__ == "Qwen2VLImageProcessorPil", f"expected the PIL processor, got {type(ip).__name__}"
    images = [Image.fromarray(hash_image(h, w, s)) for h, w, s in CASES]
    out = ip(images=images, return_tensors="pt")
    pv, grid = out["pixel_values"], out["image_grid_thw"]
    assert pv.dtype == torch.float32
    m = Qwen3VLForConditionalGeneration.from_pretrained(os.path.join(TINY, "text_encoder"), dtype=torch.float32).eval()
    with torch.no_grad():
        o = m.model.get_image_features(pv, grid)
    merged = torch.cat(o.pooler_output, 0).float().contiguous()
    deep = torch.stack([torch.cat(d, 0) for d in o.deepstack_features], 0).float().contiguous()

    tensors = {"image_grid_thw": grid.to(torch.int64).contiguous(), "image_embeds": merged,
               "deepstack_features": deep}
    meta = {"processor": type(ip).__name__, "resample": int(ip.resample), "cases": []}
    row = 0
    for k, (h, w, s) in enumerate(CASES):
        n = int(grid[k].prod())
        part = pv[row:row + n].numpy()
        row += n
        tensors[f"pixel_column_sums_{k}"] = torch.from_numpy(part.astype(np.float64).sum(0).astype(np.float32))
        meta["cases"].append({"height": h, "width": w, "seed": s, "grid_thw": [int(v) for v in grid[k]],
                              "pixel_checksum": str(bits_checksum(part))})
    save_file(tensors, os.path.join(GOLDEN, "vision_resize.out.safetensors"))
    with open(os.path.join(GOLDEN, "vision_resize.json"), "w") as f:
        json.dump(meta, f, indent=1)
    for c in meta["cases"]:
        print(f"{c['height']}x{c['width']} -> grid {c['grid_thw']} checksum {c['pixel_checksum']}")
    print(f"merged {tuple(merged.shape)}, deepstack {tuple(deep.shape)}")


if __name__ == "__main__":
    main()
