"""Reference fixture for the FP8 W8A8 linears of `--quant fp8` (src/backend/ops_linear.h, docs/fp8.md).

Quantization follows LightX2V's per-channel FP8 rule (lightx2v/utils/quant_utils.py `quant_naive_inplace`:
absmax per row clamped to >= 1e-5, scale = absmax / 448, x / scale clamped to +-448, cast to
torch.float8_e4m3fn), applied to weight rows (output channels) and activation rows (tokens) alike, in fp32.
The GEMM is PyTorch's FP8 rowwise GEMM `torch._scaled_mm` (fp32 accumulation, per-row / per-column scales,
bf16 out), which needs a CUDA device: run this on the GPU machine (torch is there; diffusers is not needed):

    python3 tools/reference/gen_fp8.py tests/fixtures/fp8/linear.safetensors

Writes x, w (bf16), torch's codes / scales (xq, xs, wq, ws; codes as uint8) and y = _scaled_mm(...) (bf16),
plus y64: the same product in float64 from the dequantized codes (rounded to bf16), a check independent
of the GEMM's summation order.
"""
import sys

import torch
from safetensors.torch import save_file

FP8_MAX = 448.0


def quant_rows(t):
    t = t.float()
    s = t.abs().amax(dim=1, keepdim=True).clamp(min=1e-5) / FP8_MAX
    q = (t / s).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q, s.reshape(-1)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "linear.safetensors"
    g = torch.Generator().manual_seed(20261201)
    M, N, K = 48, 80, 512
    x = (torch.randn(M, K, generator=g) * torch.logspace(-3, 1, M).unsqueeze(1)).to(torch.bfloat16)
    x[3] = 0                      # an all-zero row: scale = 1e-5 / 448
    x[5] = x[5] * 1e-7            # a row below the absmax floor
    x[7, 11] = 3000.0             # an outlier
    w = (torch.randn(N, K, generator=g) * 0.02).to(torch.bfloat16)
    w[9] = w[9] * 1e-6
    xq, xs = quant_rows(x)
    wq, ws = quant_rows(w)
    dev = "cuda"
    y = torch._scaled_mm(xq.to(dev), wq.to(dev).t(), scale_a=xs.reshape(M, 1).to(dev), scale_b=ws.reshape(1, N).to(dev),
                         out_dtype=torch.bfloat16, use_fast_accum=False).cpu()
    y64 = ((xq.double() * xs.double().reshape(M, 1)) @ (wq.double() * ws.double().reshape(N, 1)).t()).to(torch.bfloat16)
    save_file({"x": x.contiguous(), "w": w.contiguous(), "xq": xq.view(torch.uint8).contiguous(), "xs": xs.contiguous(),
               "wq": wq.view(torch.uint8).contiguous(), "ws": ws.contiguous(), "y": y.contiguous(),
               "y64": y64.contiguous()}, out,
              metadata={"generator": "tools/reference/gen_fp8.py", "torch": torch.__version__})
    rel = ((y.float() - y64.float()).norm() / y64.float().norm()).item()
    print(f"wrote {out}: M {M} N {N} K {K}; _scaled_mm vs float64 product: rel L2 {rel:.3g}")


if __name__ == "__main__":
    main()
