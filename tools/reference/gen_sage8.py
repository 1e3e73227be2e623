#!/usr/bin/env python3
"""Reference fixtures for the 8-bit attention (`--attention sage8`; src/backend/ops_attention.h, docs/fast.md).

SageAttention2's scheme written out in torch on the CPU, one rule at a time (fp32 arithmetic; the integer Q K^T
exactly in int64; fma and exp2 in float64 rounded once to fp32, i.e. the correctly rounded fp32 operations):

* K smoothing: mean[hk, d] = fp32(fp64 sum_s k[s, hk, d] / Skv), ks = fp32(k) - mean;
* Q (blocks of 64 rows per head), K (blocks of 128 rows per kv head): INT8 symmetric,
  scale = max(amax, 1e-20) / 127, code = clamp(round_half_even(x / scale), -127, 127);
* V: E4M3 per (kv head, channel), scale = max(amax over the tokens, 1e-20) / 448, code = e4m3(v / scale),
  stored transposed [hk][d][token padded to 128] with each run of 32 tokens permuted (column 16a + 4t + i holds
  token 16a + 8(i >> 1) + 2t + (i & 1));
* per query row, key tiles of 128 in order, sl2 = fp32(scale * log2 e), fq = q_scale * sl2, fsc = fq * k_scale:
  f = fp32(exact int dot), mn = max(m, max(f) * fsc), corr = exp2(m - mn), p = exp2(fma(f, fsc, fp32(log2 448) - mn)),
  l = l * corr + sum p, pv = sum e4m3(p) * vcode (fp64 sum rounded to fp32), o = (o + pv_prev) * corr;
  out = bf16((o + pv_last) * (1 / l) * v_scale).

Writes tests/fixtures/sage8/attn.safetensors (about 20 KB): per case c in {a, b}: c.q c.k c.v (bf16 [S, H, D]),
c.meta (I64: Sq Skv Hq Hkv D), the codes c.qc c.kc (I8) c.vt (U8), c.qs c.ks c.vs c.km (F32) and c.out (bf16).
Case a: GQA 2/1, K channel outliers, two key tiles (128 + 8); case b: two Q blocks (64 + 6), one partial key tile.
Deterministic, CPU only:  nice python3 tools/reference/gen_sage8.py
"""
import argparse
import math
import os

import torch
from safetensors.torch import save_file

BQ, BK, MIN_AMAX = 64, 128, 1e-20
L448 = torch.tensor(math.log2(448.0), dtype=torch.float32)
LOG2E = torch.tensor(1.4426950408889634, dtype=torch.float32)


def f32(x):
    return torch.tensor(x, dtype=torch.float32) if not torch.is_tensor(x) else x.to(torch.float32)


def quant_blocks(x, rows):
    """x [S, D] fp32 -> int8 codes [S, D], scales [ceil(S / rows)]."""
    S = x.shape[0]
    codes = torch.empty(x.shape, dtype=torch.int8)
    scales = []
    for r0 in range(0, S, rows):
        blk = x[r0:r0 + rows]
        sc = blk.abs().amax().clamp(min=MIN_AMAX) / 127.0
        codes[r0:r0 + rows] = torch.round(blk / sc).clamp(-127, 127).to(torch.int8)
        scales.append(sc)
    return codes, torch.stack(scales)


def vt_token(c):
    return (c >> 4) * 16 + ((c >> 1) & 1) * 8 + ((c >> 2) & 3) * 2 + (c & 1)


def fma32(a, b, c):
    return (a.double() * b.double() + c.double()).float()


def exp2_32(x):
    return torch.exp2(x.double()).float()


def sage8(q, k, v, scale):
    Sq, Hq, D = q.shape
    Skv, Hkv, _ = k.shape
    g = Hq // Hkv
    pad = (Skv + BK - 1) // BK * BK
    kf, vf, qf = k.float(), v.float(), q.float()
    km = (k.double().sum(0) / Skv).float()  # [Hkv, D]; exact fp64 sums of bf16 values
    vs = vf.abs().amax(0).clamp(min=MIN_AMAX) / 448.0  # [Hkv, D]
    qc = torch.empty(Hq, Sq, D, dtype=torch.int8)
    kc = torch.empty(Hkv, Skv, D, dtype=torch.int8)
    qs = torch.empty(Hq, (Sq + BQ - 1) // BQ)
    ks = torch.empty(Hkv, (Skv + BK - 1) // BK)
    for h in range(Hq):
        qc[h], qs[h] = quant_blocks(qf[:, h], BQ)
    for h in range(Hkv):
        kc[h], ks[h] = quant_blocks(kf[:, h] - km[h], BK)
    vcode = (vf / vs).to(torch.float8_e4m3fn)  # [Skv, Hkv, D], round to nearest even (|x| <= 448)
    vt = torch.zeros(Hkv, D, pad, dtype=torch.uint8)
    cols = torch.arange(pad)
    tok = (cols & ~31) + torch.tensor([vt_token(int(c) & 31) for c in cols])
    valid = tok < Skv
    vbits = vcode.view(torch.uint8)
    for h in range(Hkv):
        vt[h][:, valid] = vbits[tok[valid], h].t()
    sl2 = f32(scale) * LOG2E
    out = torch.empty(Sq, Hq, D, dtype=torch.bfloat16)
    vcodef = vcode.float()
    for h in range(Hq):
        hk = h // g
        kq = kc[hk].long()
        for r in range(Sq):
            fq = qs[h, r // BQ] * sl2
            m = torch.tensor(-math.inf)
            l = torch.tensor(0.0)
            o = torch.zeros(D)
            pv = torch.zeros(D)
            for j in range(0, Skv, BK):
                fsc = fq * ks[hk, j // BK]
                f = (kq[j:j + BK] @ qc[h, r].long()).float()
                mn = torch.maximum(m, f.max() * fsc)
                corr = exp2_32(m - mn)
                m = mn
                p = exp2_32(fma32(f, fsc, L448 - mn))
                ps = p.double().sum().float()
                l = l * corr + ps
                pc = p.to(torch.float8_e4m3fn).float()
                o = (o + pv) * corr
                pv = (pc.double()[:, None] * vcodef[j:j + BK, hk].double()).sum(0).float()
            inv = 1.0 / l
            out[r, h] = (((o + pv) * inv) * vs[hk]).to(torch.bfloat16)
    return dict(qc=qc, kc=kc, vt=vt, qs=qs, ks=ks, vs=vs, km=km, out=out)


def case(gen, Sq, Skv, Hq, Hkv, D, outliers):
    q = (torch.rand(Sq, Hq, D, generator=gen) * 4 - 2).to(torch.bfloat16)
    k = torch.rand(Skv, Hkv, D, generator=gen) * 4 - 2
    if outliers:  # per-channel offsets of K (what the smoothing removes)
        k[:, :, 3::16] += 24.0 + torch.arange(Hkv * D).view(Hkv, D)[:, 3::16] % 5
    k = k.to(torch.bfloat16)
    v = (torch.rand(Skv, Hkv, D, generator=gen) * 2 - 1).to(torch.bfloat16)
    scale = 1.0 / math.sqrt(D)
    r = sage8(q, k, v, scale)
    r.update(q=q, k=k, v=v, meta=torch.tensor([Sq, Skv, Hq, Hkv, D], dtype=torch.int64))
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default="tests/fixtures")
    a = ap.parse_args()
    gen = torch.Generator().manual_seed(19)
    t = {}
    for name, shape in (("a", (24, 136, 2, 1, 16, 1)), ("b", (70, 20, 1, 1, 16, 0))):
        for key, val in case(gen, *shape).items():
            t[name + "." + key] = val.contiguous()
    os.makedirs(os.path.join(a.root, "sage8"), exist_ok=True)
    path = os.path.join(a.root, "sage8", "attn.safetensors")
    save_file(t, path)
    print(path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
