"""Same-run diffusers baseline on the GPU machine for `h3 bench` / `h3 generate --random-weights`:
MiniMaxH3Transformer3DModel forward (BF16, the release config, random weights, the 12 fp32 tensors kept
fp32, SDPA) and AutoencoderKLMiniMaxH3 decode under fp16 autocast (released tiling), at the shapes given.
Timed with CUDA events after one warm-up; prints one line per measurement:
  BASELINE what=dit shape=544x960x124 S=19540 seconds=2.431
Usage: python3 cuda_baseline_pipeline.py DIFFUSERS_SRC SKELETON [WxHxF ...]   (never needed by the engine)"""
import json
import os
import sys
import time

import torch


def load_cfg(path):
    with open(path) as f:
        return {k: v for k, v in json.load(f).items() if not k.startswith("_")}


def timed(fn, reps):
    fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        out.append(a.elapsed_time(b) / 1e3)
    return sum(out) / len(out)


def dit_inputs(W, H, F, T=256, dev="cuda"):
    lf = (F - 5) // 17 * 5 + 2
    P = (H // 32) * (W // 32)
    A = (5 * F + 1) // 3
    Nv, Na, S = lf * P, 2 * A, T + 2 * A + lf * P
    g = torch.Generator(device="cpu").manual_seed(0)
    tags = torch.cat([torch.ones(T), torch.full((Na,), 2.0), torch.zeros(Nv)]).long()
    tidx = torch.cat([torch.zeros(T + Na), torch.ones(Nv)]).long()  # audio at t=0.5, video at 0.75
    pos = torch.rand(S, 3, generator=g, dtype=torch.float64) * 64
    inp = {
        "hidden_states": torch.randn(1, Nv, 96, generator=g),
        "audio_hidden_states": torch.randn(1, Na, 32, generator=g),
        "encoder_hidden_states": torch.randn(1, T, 5120, generator=g).to(torch.bfloat16),
        "timestep": torch.tensor([0.5, 0.75]),
        "timestep_indices": tidx,
        "token_tags": tags,
        "position_ids": pos,
        "video_indices": torch.arange(T + Na, S),
        "audio_indices": torch.arange(T, T + Na),
        "text_indices": torch.arange(T),
    }
    return {k: v.to(dev) for k, v in inp.items()}, S, lf


def main():
    sys.path.insert(0, sys.argv[1])
    skel = sys.argv[2]
    shapes = [tuple(int(x) for x in s.split("x")) for s in (sys.argv[3:] or ["544x960x124"])]
    from diffusers.models.transformers.transformer_minimax_h3 import MiniMaxH3Transformer3DModel
    from diffusers.models.autoencoders.autoencoder_kl_minimax_h3 import AutoencoderKLMiniMaxH3

    print(f"# torch {torch.__version__}, {torch.cuda.get_device_name()}", flush=True)
    t0 = time.time()
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        dit = MiniMaxH3Transformer3DModel(**load_cfg(os.path.join(skel, "transformer", "config.json"))).eval()
    torch.set_default_dtype(torch.float32)
    for name in ("proj_in", "audio_proj_in", "time_embedder", "proj_out", "audio_proj_out"):
        getattr(dit, name).float()  # the release's fp32 tensors (docs/model/dit.md 2.2)
    print(f"# dit built in {time.time() - t0:.1f} s, {torch.cuda.memory_allocated() / 2**30:.1f} GiB", flush=True)
    for W, H, F in shapes:
        inp, S, lf = dit_inputs(W, H, F)
        try:
            with torch.no_grad():
                s = timed(lambda: dit(**inp, return_dict=True), 2)
        except Exception as ex:  # mixed fp32/bf16 refused: the all-bf16 model instead
            print(f"# mixed-precision forward failed ({ex}); timing the all-bf16 model", flush=True)
            dit = dit.to(torch.bfloat16)
            inp = {k: (v.to(torch.bfloat16) if v.dtype == torch.float32 and v.dim() == 3 else v) for k, v in inp.items()}
            with torch.no_grad():
                s = timed(lambda: dit(**inp, return_dict=True), 2)
        peak = torch.cuda.max_memory_allocated() / 2**30
        print(f"BASELINE what=dit shape={W}x{H}x{F} S={S} seconds={s:.4f} peak_gib={peak:.1f}", flush=True)
    del dit, inp
    torch.cuda.empty_cache()
    with torch.device("cuda"):
        vae = AutoencoderKLMiniMaxH3(**load_cfg(os.path.join(skel, "vae", "config.json"))).eval()
    vae.enable_tiling()
    for W, H, F in shapes:
        lf = (F - 5) // 17 * 5 + 2
        z = torch.randn(1, 24, lf, H // 16, W // 16, device="cuda")
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.float16):
            s = timed(lambda: vae.decode(z).sample, 1)
        print(f"BASELINE what=vae_decode_fp16_autocast shape={W}x{H}x{F} seconds={s:.4f}", flush=True)


if __name__ == "__main__":
    main()
