#!/usr/bin/env python3
"""PyTorch CPU timing of one full-width MiniMax-H3 DiT block, the counterpart of bench/bench_dit_block.c.

Same shapes as the C bench: hidden 5376, 56 heads x 128, ffn 14336, random bf16 weights, S packed rows
(default 2048), 256 text / 74 audio / rest video rows, K = 2 timesteps. Times
`MiniMaxH3TransformerBlock.forward` in bf16 (the release's dtype) and, with --fp32, with the weights
upcast to fp32 (the arithmetic the C CPU backend does). The PyTorch block also computes its AdaLN
projection (0.5 GFLOP, < 0.1 % of the block); the C bench uses precomputed tables. The C bench is run
in its bf16 mode for the bf16 ratio and in fp32 mode for the fp32 ratio.

    python3 tools/reference/bench_dit_block.py [--rows 2048] [--repeats 2] [--dtypes bf16,fp32]
        [--c-bench build-x/bench/bench_dit_block]   # also runs the C bench and prints the ratio
Not a test.
"""
import argparse
import os
import re
import subprocess
import time

import torch

from diffusers.models.transformers.transformer_minimax_h3 import MiniMaxH3RotaryPosEmbed, MiniMaxH3TransformerBlock

H, NH, D, FF, TD = 5376, 56, 128, 14336, 2688


def flops(S):
    I = NH * D
    return 2.0 * S * (H * 3 * I + I * H + H * 2 * FF + FF * H) + 4.0 * S * S * I


def make_inputs(S, dtype):
    g = torch.Generator().manual_seed(1)
    x = (torch.rand(1, S, H, generator=g) * 2 - 1).to(dtype)
    temb = torch.randn(2, TD, generator=g)
    tags = torch.tensor([1 if s < 256 else 2 if s < 330 else 0 for s in range(S)])
    tix = (tags == 2).long()
    pos = torch.zeros(S, 3, dtype=torch.float64)
    s = torch.arange(S)
    pos[:, 0] = torch.where(s < 256, s.double(), 256.0 + ((s - 256) // 256).double() * 5.0 / 3.0)
    pos[:, 1] = ((s // 16) % 16).double() * 2.0
    pos[:, 2] = (s % 16).double() * 2.0
    rope = MiniMaxH3RotaryPosEmbed(16, 10000.0)(pos)
    return x, temb, tix * 3 + tags, rope


def time_block(S, reps, dtype):
    torch.manual_seed(0)
    block = MiniMaxH3TransformerBlock(H, NH, D, FF, TD, 1e-5, 1e-5).eval()
    with torch.no_grad():
        for p in block.parameters():
            if p.ndim == 2:
                p.uniform_(-(3.0 / p.shape[1]) ** 0.5, (3.0 / p.shape[1]) ** 0.5)
            else:
                p.uniform_(0.9, 1.1)
    block = block.to(torch.bfloat16)  # bf16 weights as shipped
    if dtype == torch.float32:
        block = block.float()  # upcast, as the C fp32 path reads them
    x, temb, idx, rope = make_inputs(S, dtype)
    best, total = 1e30, 0.0
    with torch.no_grad():
        for r in range(reps + 1):  # r = 0: warm-up
            t0 = time.perf_counter()
            block(x, temb, idx, rope)
            dt = time.perf_counter() - t0
            if r:
                best, total = min(best, dt), total + dt
    return best, total / reps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2048)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--dtypes", default="bf16,fp32",
                    help="comma list: bf16 (weights as shipped) and/or fp32 (weights upcast, the C CPU arithmetic)")
    ap.add_argument("--c-bench", help="path of the C bench binary to run for the ratio")
    a = ap.parse_args()
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, rows {a.rows}, "
          f"load average {os.getloadavg()[0]:.2f}")
    res = {}
    for name, dt in (("bf16", torch.bfloat16), ("fp32", torch.float32)):
        if name not in a.dtypes.split(","):
            continue
        best, mean = time_block(a.rows, a.repeats, dt)
        res[name] = best
        print(f"pytorch {name}: best {best:.3f} s, mean {mean:.3f} s, {flops(a.rows) / best * 1e-9:.1f} GFLOP/s")
    if a.c_bench:
        for name in res:
            args = [a.c_bench, str(a.rows), str(a.repeats)] + (["fp32"] if name == "fp32" else [])
            env = dict(os.environ)
            env.setdefault("OMP_WAIT_POLICY", "passive")  # OpenMP loops + pthread OpenBLAS: no spinning
            out = subprocess.run(args, capture_output=True, text=True, check=True, env=env).stdout
            print(out.strip())
            c = float(re.search(r"RESULT_SECONDS ([0-9.]+)", out).group(1))
            print(f"ratio ({name}): C {c:.3f} s / PyTorch {res[name]:.3f} s = {c / res[name]:.2f}x "
                  f"(< 1: C faster); load average now {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
