#!/usr/bin/env python3
"""The ratio table of tests/cuda/run_peer_device.sh (docs/cuda.md "Peers"): reads the logs of one device call
(h3_bf16.log, h3_fp8.log, h3_int8.log, h3_int8_sage8.log, h3_fast.log: `h3 bench` DIT / VAE lines; peer_*.log: peer_bench.py's PEER
lines) and prints a markdown table plus one `RATIO <name> <peer s / h3 s>` line per row (above 1: h3 faster).
h3's DiT time is its best forward (`best=`), the peers' is their best (peer_bench.py); the video decode's is
h3 bench's mean of --vae-repeats against the peer's best.
Usage: python3 tools/reference/peer_table.py LOGDIR [SHAPE]"""
import os
import re
import sys


def kv(line):
    return dict(re.findall(r"(\w+)=(\S+)", line))


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read().splitlines()
    except OSError:
        return []


def h3_lines(d, name, shape):
    dit = vae = None
    for line in read(os.path.join(d, name + ".log")):
        if line.startswith("DIT ") and kv(line).get("shape") == shape:
            dit = kv(line)
        elif line.startswith("VAE ") and kv(line).get("shape") == shape:
            vae = kv(line)
    return dit, vae


def peer_lines(d, shape):
    out = {}
    for f in sorted(os.listdir(d)):
        if not (f.startswith("peer_") and f.endswith(".log")):
            continue
        for line in read(os.path.join(d, f)):
            t = line.split()
            if len(t) >= 6 and t[0] == "PEER" and t[3] == shape and t[5] == "peak_gib":
                rest = dict(zip(t[5::2], t[6::2]))
                out[(t[1], t[2])] = {"s": float(t[4]), "peak": rest["peak_gib"], **rest}
    return out


def fmt(x, spec=".3f"):
    return "-" if x is None else format(x, spec)


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: peer_table.py LOGDIR [SHAPE]")
    d, shape = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "544x960x124"
    runs = {k: h3_lines(d, "h3_" + k, shape) for k in ("bf16", "fp8", "int8", "int8_sage8", "fast")}
    peers = peer_lines(d, shape)

    def h3_dit(k):
        r = runs[k][0]
        return (float(r["best"]), r.get("vs_bf16_video_rel_l2"), r.get("peak_gib")) if r else (None, None, None)

    def h3_vae(k):
        r = runs[k][1]
        return (float(r["seconds"]), None, r.get("peak_gib")) if r else (None, None, None)

    def peer(what, mode):
        p = peers.get((what, mode))
        return (p["s"], p.get("rel_l2_video"), p["peak"]) if p else (None, None, None)

    rows = [  # name, label of h3, h3 result, label of the peer, peer result
        ("dit_bf16_vs_compile", "DiT bf16", h3_dit("bf16"), "diffusers + regional torch.compile", peer("dit", "compile")),
        ("dit_bf16_vs_eager", "DiT bf16", h3_dit("bf16"), "diffusers eager (SDPA)", peer("dit", "eager")),
        ("dit_fp8", "DiT --quant fp8", h3_dit("fp8"), "diffusers + torchao FP8 rowwise + compile", peer("dit", "fp8")),
        ("dit_int8", "DiT --quant int8", h3_dit("int8"), "diffusers + torchao INT8 W8A8 + compile", peer("dit", "int8")),
        ("dit_int8_sage8", "DiT --quant int8 --attention sage8", h3_dit("int8_sage8"),
         "diffusers + torchao INT8 W8A8 + compile", peer("dit", "int8")),
        ("dit_fast", "DiT fast (fp8 + sage8)", h3_dit("fast"), "diffusers + torchao FP8 rowwise + compile",
         peer("dit", "fp8")),
        ("vae_bf16", "video decode bf16", h3_vae("bf16"), "diffusers fp16 autocast", peer("vae", "fp16-autocast")),
        ("vae_fast", "video decode fast (--vae-quant fp8)", h3_vae("fast"), "diffusers fp16 autocast",
         peer("vae", "fp16-autocast")),
    ]
    print(f"\n## h3 vs the Python peers, {shape}, one device call (ratio = peer s / h3 s; above 1: h3 faster)\n")
    print("| what | h3 s | h3 rel L2 vs its bf16 | h3 peak GiB | peer | peer s | peer rel L2 vs eager | peer peak GiB | ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, hl, (hs, hrel, hpk), pl, (ps, prel, ppk) in rows:
        ratio = ps / hs if hs and ps else None
        print(f"| {hl} | {fmt(hs)} | {hrel or '-'} | {hpk or '-'} | {pl} | {fmt(ps)} | {prel or '-'} | {ppk or '-'} | "
              f"{fmt(ratio, '.2f') + 'x' if ratio else '-'} |")
    print()
    for name, _, (hs, _, _), _, (ps, _, _) in rows:
        print(f"RATIO {name} {fmt(ps / hs, '.3f') if hs and ps else 'missing'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
