#!/usr/bin/env python3
"""Reference fixtures for W8A8 INT8 (`h3 quantize`, `--quant int8`; docs/int8.md).

The rules, in torch (fp32 arithmetic, exact integer products):

* weight row n (output channel), from the stored values widened to fp32:
  s[n] = max(absmax_k |W[n, k]|, 1e-5) / 127, q[n, k] = clamp(round_half_even(W[n, k] / s[n]), -127, 127);
* activation row m (token), at every GEMM: the same rule on x[m, :] (bf16 values widened to fp32);
  grouped (--int8-fc2-groups): the same rule on each run of G channels of a row, one scale per group;
* y[m, n] = bf16(fp32(acc[m, n]) * sx[m] * sw[n] [+ bias[n]]), acc = sum_k xq[m, k] * wq[n, k] exactly (int64 here,
  int32 in the engine); grouped: y = bf16((sum_g fp32(acc_g) * sx[m, g]) * sw[n]).

Writes (small: KBs), under --root (default tests/fixtures):
  int8/linear.safetensors          x, w (bf16), w32 (f32), their codes and scales, acc (I32), y, yg (grouped), yb (bias),
                                   and the LightX2V generic converter's codes / bf16 scales of w (wq_lx, ws_lx)
  golden/dit/t2va.int8.out.safetensors      the tiny DiT's t2va case, diffusers' bf16 model with the 100 main-block
                                            linears of profile dit_proj as W8A8 (our rule)
  golden/dit/t2va.int8all.out.safetensors   the same with profile all (each block's adaln_proj too, with its bias)
  golden/dit/t2va.int8lx.out.safetensors    profile all with LightX2V's codes and bf16 scales
                                            (tools/reference/lightx2v_int8.py writes that checkpoint)
Deterministic, CPU only:  nice python3 tools/reference/gen_int8.py
"""
import argparse
import os

import torch
from safetensors.torch import load_file, save_file

QMAX = 127.0


def quant_rows(t):
    """Our rule on the rows of t (any float dtype): codes int8, scales fp32 [rows]."""
    t = t.float()
    s = t.abs().amax(dim=1).clamp(min=1e-5) / QMAX
    q = torch.round(t / s[:, None]).clamp(-127, 127).to(torch.int8)
    return q, s


def quant_groups(t, G):
    """Our rule on each run of G channels of each row: codes [rows, K], scales [rows, K / G]."""
    rows, K = t.shape
    q, s = quant_rows(t.reshape(rows * (K // G), G))
    return q.reshape(rows, K), s.reshape(rows, K // G)


def quant_lightx2v(w):
    """LightX2V's generic converter (tools/convert/quant/quant.py, QuantWeightINT8.load_int8_weight) on a tensor as
    stored: absmax, the 1e-5 floor, the division by 127 and w / scale all in the tensor's own dtype (bf16 for the
    DiT's linears), torch.round, clamp [-128, 127]; the scale saved as [N, 1] in that dtype."""
    max_val = w.abs().amax(dim=1, keepdim=True).clamp(min=1e-5)
    scales = max_val / 127
    q = torch.clamp(torch.round(w / scales), -128, 127).to(torch.int8)
    return q, scales.view(w.shape[0], -1)


def int_acc(xq, wq):
    """Exact integer dot products (int64; every value fits int32 at the DiT's shapes)."""
    return xq.to(torch.int64) @ wq.to(torch.int64).t()


def w8a8(x, wq, ws, bias=None):
    """y = bf16(fp32(acc) * sx[m] * sw[n] [+ bias]) with x's rows quantized per token."""
    shape = x.shape
    x2 = x.reshape(-1, shape[-1])
    xq, xs = quant_rows(x2)
    acc = int_acc(xq, wq).to(torch.int32).float()
    y = acc * xs[:, None] * ws.float().reshape(1, -1)
    if bias is not None:
        y = y + bias.float()
    return y.to(torch.bfloat16).reshape(*shape[:-1], wq.shape[0])


def linear_fixture(path):
    g = torch.Generator().manual_seed(20261202)
    M, N, K, G = 40, 96, 256, 128
    x = (torch.randn(M, K, generator=g) * torch.logspace(-3, 1, M).unsqueeze(1)).to(torch.bfloat16)
    x[3] = 0                          # an all-zero row: scale 1e-5 / 127
    x[5] = x[5] * 1e-7                # a row below the absmax floor
    x[7, 11] = 3000.0                 # an outlier
    x[9] = torch.tensor([127.0, 2.5, -3.5, 0.5, -0.5, 1.5, 126.5, -126.5] * (K // 8))  # s = 1: ties to even
    x[10, :G] = x[10, :G] * 1e-3      # groups with very different ranges
    w = (torch.randn(N, K, generator=g) * 0.02).to(torch.bfloat16)
    w[9] = w[9] * 1e-6
    w[10] = torch.tensor([127.0, 0.5, -1.5, 2.5] * (K // 4))
    w32 = torch.randn(16, K, generator=g) * 0.05
    bias = (torch.randn(N, generator=g) * 0.1).to(torch.bfloat16)
    xq, xs = quant_rows(x)
    xqg, xsg = quant_groups(x, G)
    wq, ws = quant_rows(w)
    wq32, ws32 = quant_rows(w32)
    acc = int_acc(xq, wq)
    assert acc.abs().max() < 2**31
    acc = acc.to(torch.int32)
    y = (acc.float() * xs[:, None] * ws[None, :]).to(torch.bfloat16)
    yb = (acc.float() * xs[:, None] * ws[None, :] + bias.float()[None, :]).to(torch.bfloat16)
    yg = torch.zeros(M, N)
    for gi in range(K // G):
        a = int_acc(xqg[:, gi * G:(gi + 1) * G], wq[:, gi * G:(gi + 1) * G]).to(torch.int32).float()
        yg = yg + a * xsg[:, gi:gi + 1]
    yg = (yg * ws[None, :]).to(torch.bfloat16)
    wq_lx, ws_lx = quant_lightx2v(w)
    t = dict(x=x, w=w, w32=w32, bias=bias, xq=xq, xs=xs, xqg=xqg, xsg=xsg, wq=wq, ws=ws, wq32=wq32, ws32=ws32,
             acc=acc, y=y, yb=yb, yg=yg, wq_lx=wq_lx, ws_lx=ws_lx)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    save_file({k: v.contiguous() for k, v in t.items()}, path + ".tmp",
              metadata={"generator": "tools/reference/gen_int8.py", "torch": torch.__version__, "group": str(G)})
    os.chmod(path + ".tmp", 0o644)
    os.replace(path + ".tmp", path)
    lx_diff = (wq_lx.int() != wq.int()).sum().item()
    print(f"wrote {path}: M {M} N {N} K {K} G {G}; LightX2V codes differ from ours in {lx_diff} of {wq.numel()}")


class W8A8Linear(torch.nn.Module):
    def __init__(self, wq, ws, bias):
        super().__init__()
        self.wq, self.ws, self.bias = wq, ws, bias
        # the AdaLN module casts its input to its linear's parameter dtype (bf16): keep one bf16 buffer to read
        self.register_buffer("dtype_anchor", torch.zeros(1, dtype=torch.bfloat16))

    def forward(self, x):
        return w8a8(x, self.wq, self.ws, self.bias)


def scope(model, profile):
    """(module path, module) of the profile's linears: the main blocks' q, k, v, out, FFN up, FFN down (dit_proj),
    plus adaln_proj.linear (all)."""
    out = []
    for b, blk in enumerate(model.transformer_blocks):
        p = f"transformer_blocks.{b}"
        out += [(f"{p}.attn.to_q", blk.attn.to_q), (f"{p}.attn.to_k", blk.attn.to_k), (f"{p}.attn.to_v", blk.attn.to_v),
                (f"{p}.attn.to_out.0", blk.attn.to_out[0]), (f"{p}.ff.net.0.proj", blk.ff.net[0].proj),
                (f"{p}.ff.net.2", blk.ff.net[2])]
        if profile == "all":
            out.append((f"{p}.adaln_proj.linear", blk.adaln_proj.linear))
    return out


def replace_module(model, path, new):
    parent = model
    parts = path.split(".")
    for name in parts[:-1]:
        parent = parent[int(name)] if name.isdigit() else getattr(parent, name)
    if parts[-1].isdigit():
        parent[int(parts[-1])] = new
    else:
        setattr(parent, parts[-1], new)


def dit_fixtures(root):
    from diffusers import MiniMaxH3Transformer3DModel
    tdir = os.path.join(root, "tiny", "transformer")
    gold = os.path.join(root, "golden", "dit")
    inp = load_file(os.path.join(gold, "t2va.in.safetensors"))
    lx_dir = os.path.join(root, "int8", "lightx2v")
    lx = {}
    if os.path.isdir(lx_dir):
        for f in sorted(os.listdir(lx_dir)):
            if f.endswith(".safetensors"):
                lx.update(load_file(os.path.join(lx_dir, f)))
    ref16 = load_file(os.path.join(gold, "t2va.bf16.out.safetensors"))
    cases = [("int8", "dit_proj", None), ("int8all", "all", None)]
    if lx:
        cases.append(("int8lx", "all", lx))
    else:
        print(f"  {lx_dir} missing: run tools/reference/lightx2v_int8.py first for t2va.int8lx")
    for case, profile, codes in cases:
        m = MiniMaxH3Transformer3DModel.from_pretrained(tdir, torch_dtype=torch.bfloat16).eval()
        for path, lin in scope(m, profile):
            if codes is None:
                wq, ws = quant_rows(lin.weight.detach())
            else:
                wq, ws = codes[path + ".weight"], codes[path + ".weight_scale"].float().reshape(-1)
            replace_module(m, path, W8A8Linear(wq, ws, None if lin.bias is None else lin.bias.detach()))
        with torch.no_grad():
            out = m(**{k: v.clone() for k, v in inp.items()}, return_dict=True)
        o = {"sample": out.sample.float().contiguous(), "audio_sample": out.audio_sample.float().contiguous()}
        rel = (o["sample"] - ref16["sample"]).norm() / ref16["sample"].norm()
        arel = (o["audio_sample"] - ref16["audio_sample"]).norm() / ref16["audio_sample"].norm()
        path = os.path.join(gold, f"t2va.{case}.out.safetensors")
        save_file(o, path + ".tmp", metadata={"component": "transformer", "profile": profile})
        os.chmod(path + ".tmp", 0o644)
        os.replace(path + ".tmp", path)
        print(f"wrote {path}: W8A8 ({profile}) vs the bf16 reference: rel L2 video {rel:.3e} audio {arel:.3e}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures"))
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    linear_fixture(os.path.join(root, "int8", "linear.safetensors"))
    dit_fixtures(root)


if __name__ == "__main__":
    main()
