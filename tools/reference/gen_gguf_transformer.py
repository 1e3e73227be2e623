"""Fixtures for tests/cli/dit_probe.sh's GGUF case: the tiny single-file transformer (gen_single_file.py) as a GGUF
file of mixed types, written with the `gguf` package (llama.cpp's writer; how the community GGUFs of MiniMax-H3 are
made from the Comfy-Org single file): the 2-D weights whose rows are whole 32-blocks quantized (Q8_0, Q4_0, Q5_0,
Q4_1, Q5_1 in turn, gguf.quants.quantize), the other 2-D bf16 weights as F16, the rest as stored (BF16, F32).
Beside it, the reference for h3's load: the same file's tensors dequantized by gguf.quants.dequantize (ggml's
arithmetic) and cast to the snapshot's dtypes (torch's round-to-nearest-even for bf16, which is what a bf16 compute
dtype does to a dequantized weight), written as a safetensors single file. h3 must run both to the same bytes.

Run: /work/venv/bin/python tools/reference/gen_gguf_transformer.py   (after gen_single_file.py; gguf, torch)
Writes tests/fixtures/single_file/tiny_transformer.gguf and tiny_transformer_from_gguf.safetensors.
"""

import os

import gguf
import numpy as np
import torch
from gguf import GGMLQuantizationType as T
from safetensors.torch import load_file, save_file

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures", "single_file")
QUANTS = [T.Q8_0, T.Q4_0, T.Q5_0, T.Q4_1, T.Q5_1]


def main():
    sd = load_file(os.path.join(OUT, "tiny_transformer.safetensors"))
    path = os.path.join(OUT, "tiny_transformer.gguf")
    w = gguf.GGUFWriter(path + ".tmp", arch="minimax_h3")
    ref, counts, qi = {}, {}, 0
    for name in sorted(sd):
        t = sd[name]
        f32 = t.float().numpy()
        if t.ndim == 2 and t.shape[1] % 32 == 0:
            qtype = QUANTS[qi % len(QUANTS)]
            qi += 1
            raw = gguf.quants.quantize(f32, qtype)
            w.add_tensor(name, raw, raw_dtype=qtype)
            deq = torch.from_numpy(gguf.quants.dequantize(raw, qtype).astype(np.float32))
        elif t.ndim == 2 and t.dtype == torch.bfloat16:
            qtype = T.F16
            h = f32.astype(np.float16)
            w.add_tensor(name, h)
            deq = torch.from_numpy(h.astype(np.float32))
        elif t.dtype == torch.bfloat16:
            qtype = T.BF16
            w.add_tensor(name, t.view(torch.int16).numpy().view(np.uint8).reshape(*t.shape[:-1], -1), raw_dtype=T.BF16)
            deq = t.float()
        else:
            qtype = T.F32
            w.add_tensor(name, f32)
            deq = torch.from_numpy(f32)
        assert tuple(deq.shape) == tuple(t.shape), (name, deq.shape, t.shape)
        ref[name] = deq.to(t.dtype).contiguous()
        counts[qtype.name] = counts.get(qtype.name, 0) + 1
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(path + ".tmp", path)
    save_file(ref, os.path.join(OUT, "tiny_transformer_from_gguf.safetensors"), metadata={"format": "pt"})
    print(path, os.path.getsize(path), "bytes;", counts)


if __name__ == "__main__":
    main()
