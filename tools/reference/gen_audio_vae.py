#!/usr/bin/env python3
"""Audio VAE fixtures (AutoencoderKLMiniMaxH3Audio, diffusers 0.42.1) for tests/test_audio_vae.c.

Writes
  tests/fixtures/tiny/audio_vae/            the tiny snapshot's audio VAE (release layout: config.json +
                                            diffusion_pytorch_model.safetensors). docs/model/audio_vae.md 13.1
                                            `tiny_full` with latent_channels = 32 (= the tiny DiT's
                                            audio_in_channels), latent_dim 128 and 2 heads (head_dim 64
                                            pooled 2:1 to 32).
  tests/fixtures/golden/audio_vae/model/    docs/model/audio_vae.md 13.1 `tiny_full` itself (latent_channels 8, head_dim 16).
  tests/fixtures/golden/audio_vae/model_pool/  docs/model/audio_vae.md 13.3 (head_dim 10 pooled to 8: uneven, overlapping bins).
  tests/fixtures/golden/audio_vae/<case>.in/.out.safetensors   probe tensors (PROBE.md names):
      audio-decode: IN latents [B,C,T]        OUT sample [B,1,hop*T], sample_pre_clamp (conv_post output)
      audio-encode: IN sample [B,1,N]         OUT mean [B,C,ceil(N/hop)], logs (posterior log-std)
  tests/fixtures/golden/audio_vae/latent_norm.safetensors      pipeline (de)normalization with the tiny
      snapshot's latents_mean/std: z_norm -> z (decode side), mean -> mean_norm (encode side).

Every parameter is randomized as docs/model/audio_vae.md 13.4 says (buffers `filter` and `zero_k_bias` keep their values).
Deterministic (fixed seeds); CPU; fp32.  Run:  nice python3 tools/reference/gen_audio_vae.py
"""
import json
import math
import os
import shutil
import sys

import torch
from safetensors.torch import save_file
from diffusers import AutoencoderKLMiniMaxH3Audio

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TINY_DIR = os.path.join(ROOT, "tests/fixtures/tiny/audio_vae")
GOLD_DIR = os.path.join(ROOT, "tests/fixtures/golden/audio_vae")

BASE = dict(
    encoder_dim=4,
    encoder_rates=[2, 5],
    decoder_dim=16,
    decoder_rates=[5, 2],
    decoder_kernel_sizes=[9, 4],
    resblock_kernel_sizes=[3, 7, 11],
    resblock_dilation_sizes=[[1, 3, 5], [1, 3, 5], [1, 3, 5]],
    sampling_rate=32000,
)

# The snapshot model: latent_channels 32 to match the DiT; latent_dim 128 / 2 heads -> head_dim 64 -> 32.
TINY = dict(BASE, latent_dim=128, latent_channels=32, num_attention_heads=2,
            latents_mean=[round(-0.4 + 0.025 * i, 6) for i in range(32)],
            latents_std=[round(0.8 + 0.05 * ((7 * i) % 32), 6) for i in range(32)])
# docs/model/audio_vae.md 13.1 tiny_full.
TINY_FULL = dict(BASE, latent_dim=32, latent_channels=8, num_attention_heads=2,
                 latents_mean=[0.1 * i for i in range(8)], latents_std=[1.0 + 0.1 * i for i in range(8)])
# docs/model/audio_vae.md 13.3: head_dim 10 pooled to 8 bins.
TINY_POOL = dict(TINY_FULL, latent_dim=40, num_attention_heads=4)


def build(cfg, seed):
    torch.manual_seed(seed)
    model = AutoencoderKLMiniMaxH3Audio(**cfg).float().eval()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            if leaf == "alpha" and p.dim() == 3:           # Snake1d, linear scale
                v = torch.rand(p.shape, generator=g) + 0.5
            elif leaf in ("alpha", "beta"):                # SnakeBeta, log scale
                v = torch.randn(p.shape, generator=g) * 0.3
            elif leaf == "weight_g":
                v = torch.rand(p.shape, generator=g) + 0.5
            elif ".norm" in name and leaf == "weight":     # LayerNorm gains (norm1/2/3, mlp.norm)
                v = 1.0 + torch.randn(p.shape, generator=g) * 0.1
            else:
                v = torch.randn(p.shape, generator=g) * 0.2
            p.copy_(v)
    return model


def save_model(model, out_dir):
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    model.save_pretrained(out_dir, safe_serialization=True)


def save_pair(case, inputs, outputs):
    os.makedirs(GOLD_DIR, exist_ok=True)
    save_file({k: v.contiguous() for k, v in inputs.items()}, os.path.join(GOLD_DIR, case + ".in.safetensors"))
    save_file({k: v.contiguous() for k, v in outputs.items()}, os.path.join(GOLD_DIR, case + ".out.safetensors"))


def decode_case(model, case, latents):
    captured = {}
    h = model.decoder.conv_post.register_forward_hook(lambda m, i, o: captured.__setitem__("pre", o.detach().clone()))
    with torch.no_grad():
        sample = model.decode(latents).sample
    h.remove()
    save_pair(case, {"latents": latents}, {"sample": sample, "sample_pre_clamp": captured["pre"]})
    pre = captured["pre"]
    print(f"  {case}: latents {list(latents.shape)} -> sample {list(sample.shape)}, pre-clamp peak "
          f"{pre.abs().max().item():.3f}, clamped fraction {(pre.abs() > 1).float().mean().item():.2f}")


def encode_case(model, case, wave):
    with torch.no_grad():
        post = model.encode(wave).latent_dist
    save_pair(case, {"sample": wave}, {"mean": post.mean, "logs": post.logs})
    print(f"  {case}: sample {list(wave.shape)} -> mean {list(post.mean.shape)}")


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    if os.path.isdir(GOLD_DIR):
        shutil.rmtree(GOLD_DIR)
    os.makedirs(GOLD_DIR)
    gen = torch.Generator().manual_seed(1234)

    def randn(*shape, scale=1.0):
        return torch.randn(*shape, generator=gen) * scale

    # ---- the snapshot model (hop 10, 32 latent channels) ----
    tiny = build(TINY, 100)
    save_model(tiny, TINY_DIR)
    print(f"tiny snapshot audio_vae: {sum(p.numel() for p in tiny.state_dict().values())} values -> {TINY_DIR}")
    decode_case(tiny, "decode_t12", randn(2, 32, 12))
    decode_case(tiny, "decode_t4", randn(2, 32, 4))
    decode_case(tiny, "decode_t1", randn(2, 32, 1))
    encode_case(tiny, "encode_n123", randn(2, 1, 123, scale=0.5))  # not a multiple of the hop -> 13 latents
    encode_case(tiny, "encode_n47", randn(2, 1, 47, scale=0.5))    # 5 latents
    encode_case(tiny, "encode_n7", randn(2, 1, 7, scale=0.5))      # 1 latent
    encode_case(tiny, "encode_n40", randn(2, 1, 40, scale=0.5))    # aligned, no padding

    # Pipeline (de)normalization (decoders.py / encoders.py): fp32, mul-then-add and sub-then-div.
    mean = torch.tensor(TINY["latents_mean"])
    std = torch.tensor(TINY["latents_std"])
    z_norm = randn(2, 32, 5)
    z = z_norm * std.view(1, -1, 1) + mean.view(1, -1, 1)
    enc_mean = randn(2, 32, 5)
    enc_norm = ((enc_mean.transpose(1, 2) - mean.view(1, 1, -1)) / std.view(1, 1, -1)).transpose(1, 2)
    save_file({"z_norm": z_norm, "z": z, "mean": enc_mean, "mean_norm": enc_norm.contiguous()},
              os.path.join(GOLD_DIR, "latent_norm.safetensors"))

    # ---- docs/model/audio_vae.md 13.1 tiny_full (latent_channels 8) ----
    full = build(TINY_FULL, 200)
    save_model(full, os.path.join(GOLD_DIR, "model"))
    print(f"tiny_full: {sum(p.numel() for p in full.state_dict().values())} values")
    decode_case(full, "full_decode_t12", randn(2, 8, 12))
    encode_case(full, "full_encode_n123", randn(2, 1, 123, scale=0.5))

    # ---- docs/model/audio_vae.md 13.3 uneven pooling ----
    pool = build(TINY_POOL, 300)
    save_model(pool, os.path.join(GOLD_DIR, "model_pool"))
    encode_case(pool, "pool_encode_n123", randn(2, 1, 123, scale=0.5))

    total = 0
    for d in (TINY_DIR, GOLD_DIR):
        for r, _, fs in os.walk(d):
            total += sum(os.path.getsize(os.path.join(r, f)) for f in fs)
    print(f"fixture bytes: {total}")


if __name__ == "__main__":
    sys.exit(main())
