# st_int8.py: the int8 CLI test's safetensors helper (tests/cli/int8.sh), standard library only.
#   check SRC_TREE DST_TREE   DST is SRC converted by `h3 quantize` (docs/int8.md): every I8 tensor's codes and
#                             F32 [N, 1] scale follow the rule (recomputed here from SRC's bf16 values in fp32),
#                             every other tensor has SRC's dtype, shape and bytes, the index lists every tensor
#                             and total_size is the tensors' bytes. Prints "ok: I8 n, copied n" or the first breach.
#   meta TREE KEY VALUE       sets a "__metadata__" key in every shard; "-" as VALUE removes it
#   retype TREE NAME DTYPE SHAPE   rewrites one header entry (same byte size: SHAPE as JSON)
#   rename TREE OLD NEW       renames a tensor (header and index)
#   fill TREE NAME HEXBYTE    sets every byte of a tensor
import json, os, struct, sys


def shards(d):
    return sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))


def read(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]


def write(p, hdr, data):
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    open(p, "wb").write(struct.pack("<Q", len(h)) + h + data)


def tensors(d):
    out = {}
    for f in shards(d):
        h, data = read(os.path.join(d, f))
        for k, v in h.items():
            if k != "__metadata__":
                lo, hi = v["data_offsets"]
                out[k] = (v["dtype"], v["shape"], data[lo:hi], f)
    return out


f32 = lambda x: struct.unpack("<f", struct.pack("<f", x))[0]


def to_floats(dtype, raw):
    if dtype == "BF16":
        return [struct.unpack("<f", b"\0\0" + raw[i:i + 2])[0] for i in range(0, len(raw), 2)]
    if dtype == "F32":
        return list(struct.unpack("<%df" % (len(raw) // 4), raw))
    raise SystemExit("unsupported dtype " + dtype)


def check(src, dst):
    s, d = tensors(src), tensors(dst)
    n8 = ncopy = 0
    for k, (dt, shape, raw, _) in d.items():
        if k.endswith("_scale"):
            continue
        if dt == "I8":
            sdt, sshape, sraw, _ = s[k]
            N, K = sshape
            sc = d.get(k + "_scale")
            if not sc or sc[0] != "F32" or sc[1] != [N, 1]:
                return "%s: scale missing or not F32 [N, 1]" % k
            w = to_floats(sdt, sraw)
            scales = struct.unpack("<%df" % N, sc[2])
            codes = struct.unpack("<%db" % (N * K), raw)
            for n in range(N):
                row = w[n * K:(n + 1) * K]
                sv = f32(max(f32(max(abs(x) for x in row)), f32(1e-5)) / 127.0)
                if struct.pack("<f", sv) != struct.pack("<f", scales[n]):
                    return "%s row %d: scale %r, the rule gives %r" % (k, n, scales[n], sv)
                for c in range(K):
                    q = max(-127, min(127, round(f32(row[c] / sv))))
                    if q != codes[n * K + c]:
                        return "%s [%d, %d]: code %d, the rule gives %d" % (k, n, c, codes[n * K + c], q)
            n8 += 1
        else:
            if k not in s or s[k][:3] != (dt, shape, raw):
                return "%s: not a byte copy of the source tensor" % k
            ncopy += 1
    missing = [k for k in s if k not in d]
    if missing:
        return "tensor %s of the source is not in the output" % missing[0]
    idx = [f for f in os.listdir(dst) if f.endswith(".safetensors.index.json")]
    if idx:
        ix = json.load(open(os.path.join(dst, idx[0])))
        if set(ix["weight_map"]) != set(d) or any(ix["weight_map"][k] != d[k][3] for k in d):
            return "index weight_map does not list every tensor with its shard"
        if ix["metadata"]["total_size"] != sum(len(v[2]) for v in d.values()):
            return "index total_size is not the tensors' bytes"
    return "ok: I8 %d, copied %d" % (n8, ncopy)


def edit(d, fn):
    for f in shards(d):
        p = os.path.join(d, f)
        h, data = read(p)
        if fn(h, data, f) is not False:
            write(p, h, data)


def main():
    cmd, d = sys.argv[1], sys.argv[2]
    if cmd == "check":
        print(check(d, sys.argv[3]))
    elif cmd == "meta":
        key, val = sys.argv[3], sys.argv[4]
        def fn(h, data, f):
            m = h.setdefault("__metadata__", {})
            if val == "-":
                m.pop(key, None)
            else:
                m[key] = val
        edit(d, fn)
    elif cmd == "retype":
        name, dt, shape = sys.argv[3], sys.argv[4], json.loads(sys.argv[5])
        def fn(h, data, f):
            if name not in h:
                return False
            h[name]["dtype"], h[name]["shape"] = dt, shape
        edit(d, fn)
    elif cmd == "rename":
        old, new = sys.argv[3], sys.argv[4]
        def fn(h, data, f):
            if old not in h:
                return False
            h[new] = h.pop(old)
        edit(d, fn)
        for f in os.listdir(d):
            if f.endswith(".index.json"):
                p = os.path.join(d, f)
                ix = json.load(open(p))
                ix["weight_map"][new] = ix["weight_map"].pop(old)
                json.dump(ix, open(p, "w"))
    elif cmd == "fill":
        name, byte = sys.argv[3], bytes([int(sys.argv[4], 16)])
        for f in shards(d):
            p = os.path.join(d, f)
            h, data = read(p)
            if name in h:
                lo, hi = h[name]["data_offsets"]
                data = data[:lo] + byte * (hi - lo) + data[hi:]
                write(p, h, data)


main()
