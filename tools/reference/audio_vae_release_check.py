#!/usr/bin/env python3
"""Release-size audio VAE check (not a committed fixture: the model is 577 MiB).

  nice python3 tools/reference/audio_vae_release_check.py OUT_DIR [--weights AUDIO_VAE_DIR]

Without --weights, builds the release config (tests/fixtures/skeleton/audio_vae/config.json) with every
parameter randomized as gen_audio_vae.py does and saves it to OUT_DIR (config.json +
diffusion_pytorch_model.safetensors). With --weights, uses the real audio_vae folder instead.
Writes OUT_DIR/{dec,enc}.{in,out}.safetensors (decode [2,32,8], encode [2,1,6000]) in fp32 plus an
fp64 reference ("*_f64" outputs). Then compare, e.g.:
  h3 probe audio-decode --model OUT_DIR --in OUT_DIR/dec.in.safetensors --out /tmp/d.safetensors
Measured (random weights): C vs fp64 rel L2 8.7e-6 pre-clamp decode, 6.1e-5 encode mean; torch fp32 vs
fp64 2.3e-5 and 6.1e-5 (docs/audio_vae.md).
"""
import argparse
import json
import os
import sys

import torch
from safetensors.torch import save_file
from diffusers import AutoencoderKLMiniMaxH3Audio

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_audio_vae import ROOT, build  # noqa: E402


def run(model, z, wave):
    cap = {}
    h = model.decoder.conv_post.register_forward_hook(lambda m, i, o: cap.__setitem__("pre", o.detach().clone()))
    with torch.no_grad():
        sample = model.decode(z).sample
        post = model.encode(wave).latent_dist
    h.remove()
    return {"sample": sample, "sample_pre_clamp": cap["pre"]}, {"mean": post.mean, "logs": post.logs}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--weights")
    a = ap.parse_args()
    torch.set_num_threads(max(1, (os.cpu_count() or 2) // 2))
    if a.weights:
        model = AutoencoderKLMiniMaxH3Audio.from_pretrained(a.weights).float().eval()
        os.makedirs(a.out, exist_ok=True)
    else:
        cfg = json.load(open(os.path.join(ROOT, "tests/fixtures/skeleton/audio_vae/config.json")))
        model = build({k: v for k, v in cfg.items() if not k.startswith("_")}, 7)
        model.save_pretrained(a.out, safe_serialization=True)
    g = torch.Generator().manual_seed(5)
    z = torch.randn(2, model.config.latent_channels, 8, generator=g)
    wave = torch.randn(2, 1, 6000, generator=g) * 0.3
    dec, enc = run(model, z, wave)
    dec64, enc64 = run(model.double(), z.double(), wave.double())
    dec.update({k + "_f64": v for k, v in dec64.items()})
    enc.update({k + "_f64": v for k, v in enc64.items()})
    save_file({"latents": z}, os.path.join(a.out, "dec.in.safetensors"))
    save_file({k: v.contiguous() for k, v in dec.items()}, os.path.join(a.out, "dec.out.safetensors"))
    save_file({"sample": wave}, os.path.join(a.out, "enc.in.safetensors"))
    save_file({k: v.contiguous() for k, v in enc.items()}, os.path.join(a.out, "enc.out.safetensors"))
    print("wrote", a.out)


if __name__ == "__main__":
    main()
