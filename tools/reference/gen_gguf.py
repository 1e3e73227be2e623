"""Fixtures for tests/test_gguf.c: a small GGUF file holding one tensor of every ggml type h3 reads, with random
blocks (every code pattern; the fp16 block scales random but finite), written with the `gguf` package from PyPI
(llama.cpp's own Python writer), and what the package's reference dequantizers (gguf.quants.dequantize, ggml's
arithmetic in numpy) make of each, for a bit-exact comparison.

Run: /work/venv/bin/python tools/reference/gen_gguf.py   (pip install gguf numpy safetensors)
Writes tests/fixtures/gguf/types.gguf and types.expected.safetensors (key = the tensor's name, fp32, row-major
[rows, cols] as h3 presents the tensor).
"""

import os

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures", "gguf")
rng = np.random.default_rng(20261202)

# byte offsets of each block's fp16 scales (d, and dmin / m where the type has them)
SCALES = {T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0], T.Q4_K: [0, 2], T.Q5_K: [0, 2],
          T.Q6_K: [208]}


def random_blocks(qtype, rows, cols):
    block, size = GGML_QUANT_SIZES[qtype]
    nb = rows * cols // block
    raw = rng.integers(0, 256, (nb, size), dtype=np.uint8)
    for off in SCALES[qtype]:
        scale = (rng.standard_normal(nb) * 0.01).astype(np.float16)  # finite, both signs, some subnormal-ish
        raw[:, off:off + 2] = scale.view(np.uint8).reshape(nb, 2)
    return raw.reshape(rows, cols // block * size)


def main():
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "types.gguf")
    w = gguf.GGUFWriter(path + ".tmp", arch="minimax_h3")
    w.add_string("general.name", "h3 gguf reader fixture")
    w.add_uint32("h3.test.u32", 4000000000)
    w.add_int32("h3.test.i32", -7)
    w.add_float32("h3.test.f32", 0.5)
    w.add_bool("h3.test.bool", True)
    w.add_array("h3.test.strings", ["a", "bc", ""])
    w.add_array("h3.test.ints", [1, 2, 3])
    expected = {}
    rows, cols = 3, 512  # two k-quant blocks per row, sixteen 32-blocks
    f32 = rng.standard_normal((rows, cols)).astype(np.float32)
    f16 = (rng.standard_normal((rows, cols)) * 4).astype(np.float16)
    bf16 = (rng.standard_normal((rows, cols)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    w.add_tensor("t.f32", f32)
    expected["t.f32"] = f32
    w.add_tensor("t.f16", f16)
    expected["t.f16"] = f16.astype(np.float32)
    w.add_tensor("t.bf16", bf16.view(np.uint8).reshape(rows, cols * 2), raw_dtype=T.BF16)
    expected["t.bf16"] = (bf16.astype(np.uint32) << 16).view(np.float32)
    for qtype in [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q4_K, T.Q5_K, T.Q6_K]:
        raw = random_blocks(qtype, rows, cols)
        name = "t." + qtype.name.lower()
        w.add_tensor(name, raw, raw_dtype=qtype)
        expected[name] = np.ascontiguousarray(gguf.quants.dequantize(raw, qtype).astype(np.float32))
        assert expected[name].shape == (rows, cols), expected[name].shape
    # a 3-d tensor, to check the dimension order (GGUF lists the innermost first)
    cube = rng.standard_normal((2, 3, 32)).astype(np.float32)
    w.add_tensor("t.cube", cube)
    expected["t.cube"] = cube
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(path + ".tmp", path)
    save_file(expected, os.path.join(OUT, "types.expected.safetensors"), metadata={"gguf": gguf.__version__ if hasattr(gguf, "__version__") else "0.19.0"})
    print(path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
