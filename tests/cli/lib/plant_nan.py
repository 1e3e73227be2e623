# plant_nan.py TRANSFORMER_DIR: every value of block 1's FFN output weight set to a bf16 NaN, in place (the
# non-finite checks' test snapshot: tests/cli/numbers.sh, tests/cuda/run_hardening_device.sh)
import json, os, struct, sys

d = sys.argv[1]
for name in sorted(os.listdir(d)):
    if not name.endswith(".safetensors"):
        continue
    p = os.path.join(d, name)
    b = bytearray(open(p, "rb").read())
    n = struct.unpack("<Q", b[:8])[0]
    t = json.loads(b[8:8 + n]).get("transformer_blocks.1.ff.net.2.weight")
    if t:
        lo, hi = t["data_offsets"]
        b[8 + n + lo:8 + n + hi] = b"\xc0\x7f" * ((hi - lo) // 2)
        open(p, "wb").write(b)
