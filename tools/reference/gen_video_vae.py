#!/usr/bin/env python3
"""Video VAE fixtures (AutoencoderKLMiniMaxH3, diffusers 0.42.1) for tests/test_video_vae.c.

Writes, deterministically (fixed seeds, fp32 on the CPU):
  tests/fixtures/golden/video_vae/model/vae/   the tiny test config of docs/model/video_vae.md section 16,
                                               every parameter randomized, release layout (2 shards + index)
  tests/fixtures/golden/video_vae/<case>.{in,out}.safetensors
      vae-decode cases: IN latents [1,C,L,h,w] (+ optional `tiling`), OUT sample [1,3,T,H,W]
      vae-encode cases: IN sample [1,3,T,H,W] (+ optional `tiling`), OUT mean, logvar
  tests/fixtures/tiny/vae/                     the tiny-snapshot VAE (latent_channels 24, ratios 16/4 as
                                               the release, everything else tiny; 2 shards + index)
  tests/fixtures/golden/video_vae/tiny_{decode,encode}.{in,out}.safetensors  goldens on that snapshot

`tiling` (i64 [4]) = enable_tiling(tile_h, tile_w, min_overlap_h, min_overlap_w), an h3 probe extension
(docs/video_vae.md); when absent the reference default 256/256/64/64 applies. Kept tiny so the
fixtures fit the 3 MB share.

Run: nice python3 tools/reference/gen_video_vae.py   (needs torch, diffusers 0.42.1, safetensors)
"""
import json
import os
import shutil
import sys

import torch
from safetensors.torch import save_file
from diffusers import AutoencoderKLMiniMaxH3

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GOLD = os.path.join(ROOT, "tests", "fixtures", "golden", "video_vae")
TINY = os.path.join(ROOT, "tests", "fixtures", "tiny", "vae")

RELEASE_MEAN = [0.858090341091156, -0.9606591463088989, 1.0661640167236328, -0.5090325474739075,
                -0.2727581858634949, -1.3675414323806763, -0.2553254961967468, -0.26907554268836975,
                -0.5376840829849243, -0.0464097298681736, 0.6657370328903198, 0.19690127670764923,
                -0.5460608005523682, -0.4035342037677765, -0.23683024942874908, 0.25928452610969543,
                -0.30133944749832153, 0.211341992020607, -1.1206848621368408, 0.3581933379173279,
                -0.04225143790245056, 0.2604829967021942, 0.22864092886447906, 0.7056031823158264]
RELEASE_STD = [1.2223774194717407, 1.2767263650894165, 1.6831774711608887, 1.7549455165863037,
               1.5636216402053833, 2.194143533706665, 0.9653137922286987, 1.0569885969161987,
               0.841948926448822, 0.7729952931404114, 1.8955937623977661, 0.946841835975647,
               0.7996809482574463, 0.44988900423049927, 0.7197399735450745, 0.6936293244361877,
               2.961095094680786, 2.7694199085235596, 3.0496184825897217, 2.1088054180145264,
               3.276226282119751, 3.1627357006073, 2.2816812992095947, 2.6127843856811523]


def randomize(model, seed):
    """Every parameter random: identity defaults (unit gains, zero biases, zero scale1/scale2 and
    register tokens) would hide bugs (conventions.md)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            r = torch.randn(p.shape, generator=g, dtype=torch.float32)
            if p.ndim >= 2 and "register_tokens" not in name:
                fan_in = p[0].numel()
                p.copy_(r / fan_in ** 0.5)
            elif name.endswith("norm1.weight") or name.endswith("norm2.weight") or "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.2 * r)
            elif "scale1" in name or "scale2" in name:
                p.copy_(0.5 + 0.2 * r)
            else:
                p.copy_(0.3 * r)


def save_release_layout(model, folder, shard_size):
    """diffusers layout: config.json + sharded safetensors with an index, all F32 like the release."""
    if os.path.isdir(folder):
        shutil.rmtree(folder)
    model.save_pretrained(folder, safe_serialization=True, max_shard_size=shard_size)
    names = sorted(os.listdir(folder))
    assert any(n.endswith(".index.json") for n in names), f"{folder}: expected a sharded save, got {names}"


def save_case(name, inputs, outputs):
    os.makedirs(GOLD, exist_ok=True)
    save_file({k: v.contiguous() for k, v in inputs.items()}, os.path.join(GOLD, name + ".in.safetensors"))
    save_file({k: v.contiguous() for k, v in outputs.items()}, os.path.join(GOLD, name + ".out.safetensors"))
    shapes = {k: list(v.shape) for k, v in {**inputs, **outputs}.items()}
    print(f"  {name}: {shapes}")


def set_tiling(model, tiling):
    if tiling is None:  # the reference default
        model.enable_tiling(256, 256, 64, 64)
    elif tiling[0] == 0:  # h3 probe convention: tile height 0 = tiling off
        model.disable_tiling()
    else:
        model.enable_tiling(*tiling)


def decode_case(model, name, shape, tiling, seed):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(shape, generator=g, dtype=torch.float32)
    set_tiling(model, tiling)
    with torch.no_grad():
        out = model.decode(z).sample
    ins = {"latents": z}
    if tiling is not None:
        ins["tiling"] = torch.tensor(tiling, dtype=torch.int64)
    save_case(name, ins, {"sample": out.float()})


def encode_case(model, name, shape, tiling, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g, dtype=torch.float32)
    set_tiling(model, tiling)
    with torch.no_grad():
        post = model.encode(x).latent_dist
    ins = {"sample": x}
    if tiling is not None:
        ins["tiling"] = torch.tensor(tiling, dtype=torch.int64)
    save_case(name, ins, {"mean": post.mean.float(), "logvar": post.logvar.float()})


def spec16_model():
    """docs/model/video_vae.md section 16: ratios 8 (spatial) / 4 (temporal), partial rotary with two
    frequencies per axis, both resnet kinds, all downsampler kinds, a level without downsampler."""
    m = AutoencoderKLMiniMaxH3(
        in_channels=3, out_channels=3, latent_channels=4,
        block_out_channels=(8, 16, 16, 32), layers_per_block=2,
        spatial_downsample_factors=(2, 2, 2, 1), temporal_downsample_factors=(1, 2, 2, 1),
        norm_num_groups=4,
        decoder_num_layers=2, decoder_num_attention_heads=2, decoder_attention_head_dim=16,
        decoder_num_register_tokens=2, decoder_ffn_mult=2,
        clip_length=17, token_drop=3,
        latents_mean=(0.1, -0.2, 0.3, -0.4), latents_std=(1.5, 0.5, 2.0, 0.8))
    randomize(m, 1234)
    return m.eval()


def tiny_snapshot_model():
    """The tiny snapshot's VAE: latent_channels 24 (= the tiny DiT's in_channels) and the release's
    ratios (spatial 16, temporal 4, clip 17, token_drop 3) so the pipeline geometry is the release's;
    widths, depth and heads tiny. rope_dim = int(8 * 0.75) = 6: one frequency per axis."""
    m = AutoencoderKLMiniMaxH3(
        in_channels=3, out_channels=3, latent_channels=24,
        block_out_channels=(4, 8, 8, 8), layers_per_block=1,
        spatial_downsample_factors=(2, 2, 2, 2), temporal_downsample_factors=(1, 2, 2, 1),
        norm_num_groups=2,
        decoder_num_layers=1, decoder_num_attention_heads=1, decoder_attention_head_dim=8,
        decoder_num_register_tokens=2, decoder_ffn_mult=2,
        clip_length=17, token_drop=3,
        latents_mean=tuple(RELEASE_MEAN), latents_std=tuple(RELEASE_STD))
    randomize(m, 4321)
    return m.eval()


def main():
    torch.manual_seed(0)
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    print("spec-16 model ->", os.path.join(GOLD, "model", "vae"))
    m = spec16_model()
    save_release_layout(m, os.path.join(GOLD, "model", "vae"), "400KB")

    # vae-decode: multi-clip (L = 7, 8, 11, 12: no-pad and pad paths, temporal blending) and
    # multi-tile (both axes, unequal round-robin overlaps in L7).
    decode_case(m, "decode_L7", (1, 4, 7, 3, 6), (16, 24, 8, 8), 11)     # 24x48 px: 2 x 3 tiles
    decode_case(m, "decode_L8", (1, 4, 8, 2, 4), (16, 16, 8, 8), 12)     # 16x32 px: 1 x 3 tiles
    decode_case(m, "decode_L11", (1, 4, 11, 3, 2), (16, 16, 8, 8), 13)   # 24x16 px: 2 x 1 tiles
    decode_case(m, "decode_L12", (1, 4, 12, 2, 3), (16, 16, 8, 8), 14)   # 16x24 px: 1 x 2 tiles
    decode_case(m, "decode_L7_untiled", (1, 4, 7, 2, 3), (0, 0, 0, 0), 15)  # tiling off
    decode_case(m, "decode_L3", (1, 4, 3, 1, 2), None, 16)               # shortest decodable: 1 chunk, 4 pad latents

    # vae-encode: single frame (tiled 2 x 3, round robin), one clip (default tiling = one tile),
    # tiled multi-clip with last-frame padding (T = 22, 39).
    encode_case(m, "encode_T1", (1, 3, 1, 24, 48), (16, 24, 8, 8), 21)
    encode_case(m, "encode_T17", (1, 3, 17, 16, 16), None, 22)
    encode_case(m, "encode_T22", (1, 3, 22, 24, 32), (16, 24, 8, 8), 23)
    encode_case(m, "encode_T39", (1, 3, 39, 16, 24), (16, 16, 8, 8), 24)
    encode_case(m, "encode_T5", (1, 3, 5, 16, 16), None, 25)             # shorter than a clip: 12 repeats

    print("tiny snapshot vae ->", TINY)
    t = tiny_snapshot_model()
    save_release_layout(t, TINY, "150KB")
    decode_case(t, "tiny_decode", (1, 24, 7, 1, 2), None, 31)
    encode_case(t, "tiny_encode", (1, 3, 1, 32, 32), None, 32)

    total = 0
    for d in (GOLD, TINY):
        for base, _, files in os.walk(d):
            total += sum(os.path.getsize(os.path.join(base, f)) for f in files)
    print(f"fixture bytes: {total} ({total / 1e6:.2f} MB)")


if __name__ == "__main__":
    sys.exit(main())
