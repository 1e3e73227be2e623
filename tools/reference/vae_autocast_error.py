"""Error of diffusers' own reduced-precision video VAE decode against its fp32 decode, on the fp32 goldens of
tests/fixtures/golden/video_vae (the basis of the bf16-mode bound in tests/test_video_vae.c).

The pipeline decodes under torch.autocast(float16) on CUDA (docs/model/video_vae.md 11); here the same autocast runs on the CPU
with float16 and bfloat16. Prints rel L2 and max |diff| on the decoded (normalized) pixels per case.
Usage: nice python3 tools/reference/vae_autocast_error.py"""
import os

import torch
from safetensors.torch import load_file
from diffusers import AutoencoderKLMiniMaxH3

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GOLD = os.path.join(ROOT, "tests", "fixtures", "golden", "video_vae")


def set_tiling(model, t):
    if t is None:
        model.enable_tiling(256, 256, 64, 64)
    elif t[0] == 0:
        model.disable_tiling()
    else:
        model.enable_tiling(*t)


def main():
    torch.manual_seed(0)
    models = {"spec16": AutoencoderKLMiniMaxH3.from_pretrained(os.path.join(GOLD, "model", "vae")).eval(),
              "tiny": AutoencoderKLMiniMaxH3.from_pretrained(os.path.join(ROOT, "tests", "fixtures", "tiny", "vae")).eval()}
    cases = [("spec16", n) for n in ("decode_L7", "decode_L11", "decode_L7_untiled", "decode_L3")] + [("tiny", "tiny_decode")]
    for mname, case in cases:
        m = models[mname]
        ins = load_file(os.path.join(GOLD, case + ".in.safetensors"))
        ref = load_file(os.path.join(GOLD, case + ".out.safetensors"))["sample"].double()
        t = ins.get("tiling")
        set_tiling(m, None if t is None else [int(v) for v in t.tolist()])
        for dt in (torch.float16, torch.bfloat16):
            with torch.no_grad(), torch.autocast("cpu", dtype=dt):
                out = m.decode(ins["latents"]).sample
            d = out.double() - ref
            print(f"{case:18s} autocast {str(dt):15s} rel_l2 {d.norm().item() / ref.norm().item():.3e}  "
                  f"max_abs {d.abs().max().item():.3e}", flush=True)


if __name__ == "__main__":
    main()
