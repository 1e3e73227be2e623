#!/usr/bin/env python3
"""The Python peers of `h3 bench`, timed in the same GPU call (docs/cuda.md "Peers"). Never needed by the engine.

DiT: diffusers' MiniMaxH3Transformer3DModel built from the release config with random weights made on the device
(h3's `dit_new_random` distribution: matrices uniform with variance 1 / fan_in, norm gains 1 +- 0.2, the rest
+- 0.1; the release's fp32 modules kept fp32), fed one t2va forward built with the diffusers pipeline's own layout
code (MiniMaxH3PrepareLayoutStep.build_packed_sequence, MiniMaxH3SetTimestepsStep.build_row_timesteps,
patchify_video_latents) for T text rows (all tagged text, as `h3 bench --text T`), video at t = 0.75, audio at 0.5.
Modes:
  eager    the model as diffusers runs it (SDPA)
  compile  regional torch.compile: compile_repeated_blocks(fullgraph=True)
  fp8      torchao Float8DynamicActivationFloat8WeightConfig(PerRow) (dynamic per-token activations, per-channel
           weights, torchao's default fast accumulation) on the block linears, then the same compile
  int8     torchao Int8DynamicActivationInt8WeightConfig (dynamic symmetric per-token int8 activations,
           per-channel int8 weights) on the block linears, then the same compile
The block linears are h3's `--quant fp8` / `--quant int8` scope (docs/fp8.md, docs/int8.md profile dit_proj): in
each of the main blocks attn.to_q, to_k, to_v, to_out.0, ff.net.0.proj (value|gate), ff.net.2: 6 nn.Linear
modules, h3's 4 fused linears. Never the token refiner, adaln_proj or the input/time/output projections.
Each mode: one warm-up forward (compile included), then the best of --repeats forwards, each timed with
torch.cuda.synchronize() on both sides; peak = torch.cuda.max_memory_allocated since before the warm-up. Every mode
other than eager also gives its outputs' rel L2 against the bf16 eager forward on the same weights (the same seed
makes the same weights in every process: --ref-save / --ref-load carry the eager outputs between processes).

VAE (--what vae): AutoencoderKLMiniMaxH3 (fp32 weights, the released tiling 256 x 256 / overlap 64) decoding random
latents of the shape's size under torch.autocast(float16), as the reference pipeline decodes
(docs/model/video_vae.md 11); --vae-autocast bf16 / none for the others.

One line per measurement:
  PEER dit <mode> <shape> <best seconds> peak_gib <x> mean_s <s> warmup_s <s> S <rows> [rel_l2_video <x> rel_l2_audio <x>]
  PEER vae <autocast> <shape> <best seconds> peak_gib <x> mean_s <s> warmup_s <s> latents <CxLxHxW>
Progress lines start with "[peer HH:MM:SS]".

Usage (GPU machine, diffusers + torchao from tools/reference/peer_wheels.sh on PYTHONPATH):
  python3 tools/reference/peer_bench.py [--what dit|vae|dit,vae] [--modes eager,compile,fp8,int8]
      [--shapes 544x960x124[,512x512x22,1344x768x124]] [--text 256] [--repeats 3] [--vae-repeats 2]
      [--snapshot tests/fixtures/skeleton] [--ref-save F | --ref-load F] [--seed 42]
  CPU smoke run on a tiny snapshot (h3 make-tiny DIR): --device cpu --tiny DIR [--shapes 64x64x22]
"""
import argparse
import json
import math
import os
import sys
import time
import traceback

MODES = ("eager", "compile", "fp8", "int8")
QUANT_MODES = ("fp8", "int8")
SKELETON = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures", "skeleton")
VIDEO_TAG, TEXT_TAG, AUDIO_TAG, AUDIO_CHANNELS = 0, 1, 2, 2  # the pipeline's modality tags, stereo audio rows
VIDEO_T, AUDIO_T = 0.75, 0.5  # the timesteps h3 bench uses (tools/h3/cmd_bench.c)


def log(msg):
    print(f"[peer {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def die(msg):
    print(f"peer_bench: {msg}", file=sys.stderr, flush=True)
    sys.exit(2)


def load_cfg(path):
    try:
        with open(path) as f:
            return {k: v for k, v in json.load(f).items() if not k.startswith("_")}
    except (OSError, ValueError) as ex:
        die(f"cannot read config {path}: {ex}")


def parse_shapes(arg):
    out = []
    for s in arg.split(","):
        try:
            w, h, f = (int(x) for x in s.split("x"))
        except ValueError:
            die(f"--shapes: '{s}' is not WIDTHxHEIGHTxFRAMES")
        if min(w, h, f) <= 0:
            die(f"--shapes: '{s}' needs positive integers")
        out.append((s, w, h, f))
    return out


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--what", default="dit", help="dit, vae or dit,vae")
    ap.add_argument("--modes", default="eager,compile,fp8,int8", help="DiT modes, comma-separated: " + ", ".join(MODES))
    ap.add_argument("--shapes", default=None, help="WxHxF list (default 544x960x124; 64x64x22 with --tiny)")
    ap.add_argument("--text", type=int, default=256, help="text rows T (h3 bench --text)")
    ap.add_argument("--repeats", type=int, default=3, help="timed DiT forwards per mode and shape (best reported)")
    ap.add_argument("--vae-repeats", type=int, default=2, help="timed decodes per shape (best reported)")
    ap.add_argument("--vae-autocast", default="fp16", choices=("fp16", "bf16", "none"))
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--snapshot", default=SKELETON, help="snapshot dir with transformer/ and vae/ configs")
    ap.add_argument("--tiny", metavar="DIR", help="a tiny snapshot (h3 make-tiny DIR): its configs, CPU smoke runs")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--ref-save", metavar="FILE", help="save the eager outputs (for --ref-load in another process)")
    ap.add_argument("--ref-load", metavar="FILE", help="the eager outputs of an earlier process on the same weights")
    ap.add_argument("--no-ref", action="store_true", help="skip the rel L2 against eager (no reference forward)")
    ap.add_argument("--cache-limit", type=int, default=64, help="torch._dynamo recompile limit per code object")
    a = ap.parse_args(argv)
    a.what = set(a.what.split(","))
    if not a.what or a.what - {"dit", "vae"}:
        die(f"--what takes dit and/or vae, got '{','.join(sorted(a.what))}'")
    a.modes = [m for m in a.modes.split(",") if m]
    for m in a.modes:
        if m not in MODES:
            die(f"--modes: unknown mode '{m}' (known: {', '.join(MODES)})")
    if a.tiny:
        a.snapshot = a.tiny
    a.shapes = parse_shapes(a.shapes or ("64x64x22" if a.tiny else "544x960x124"))
    if a.text < 1 or a.repeats < 1 or a.vae_repeats < 1:
        die("--text, --repeats and --vae-repeats must be >= 1")
    if a.ref_save and a.ref_load:
        die("--ref-save and --ref-load exclude each other")
    for sub in ("transformer", "vae"):
        if not os.path.isfile(os.path.join(a.snapshot, sub, "config.json")):
            die(f"{a.snapshot}: no {sub}/config.json (want a snapshot dir: tests/fixtures/skeleton or h3 make-tiny DIR)")
    return a


def check_runtime(a):
    """One clear line instead of a traceback when a mode cannot run here."""
    try:
        import torch
    except ImportError as ex:
        die(f"torch is not importable ({ex})")
    if a.device == "cuda" and not torch.cuda.is_available():
        die("--device cuda: no CUDA device visible to torch (use --device cpu --tiny DIR for a CPU smoke run)")
    quant = [m for m in a.modes if m in QUANT_MODES] if "dit" in a.what else []
    if quant and a.device != "cuda":
        die(f"--modes {','.join(quant)}: torchao's FP8 / INT8 W8A8 GEMMs are the CUDA peers; they need --device cuda "
            "(drop them for a CPU run: --modes eager,compile)")
    if quant:
        try:
            import torchao  # noqa: F401
            from torchao.quantization import quantize_  # noqa: F401
        except Exception as ex:  # any import failure: one line
            die(f"--modes {','.join(quant)}: torchao is not importable ({type(ex).__name__}: {ex}); "
                "install the carried wheels (tools/reference/peer_wheels.sh) and set PYTHONPATH")
        if "fp8" in quant and torch.cuda.get_device_capability() < (8, 9):
            die("--modes fp8: torchao's FP8 rowwise GEMM needs compute capability >= 8.9")
    try:
        import diffusers  # noqa: F401
    except Exception as ex:
        die(f"diffusers is not importable ({type(ex).__name__}: {ex}); install the carried wheel and set PYTHONPATH")


# ---- DiT ----

def build_dit(cfg, device, seed):
    """The release model with h3's random-weight distribution, made on `device` without a CPU copy or a default
    init pass: built on the meta device, storage allocated with to_empty, every tensor filled in place."""
    import torch
    from diffusers.models.transformers.transformer_minimax_h3 import (
        MiniMaxH3RotaryPosEmbed, MiniMaxH3Transformer3DModel)

    t0 = time.time()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("meta"):
            dit = MiniMaxH3Transformer3DModel(**cfg)
    finally:
        torch.set_default_dtype(torch.float32)
    for name in MiniMaxH3Transformer3DModel._keep_in_fp32_modules:  # the release's fp32 tensors (docs/model/dit.md 2.2)
        getattr(dit, name).float()
    dit = dit.to_empty(device=device).eval().requires_grad_(False)
    buffers = [n for n, _ in dit.named_buffers()]
    if buffers != ["rope.inv_freq"]:
        die(f"unexpected DiT buffers {buffers}: this script only recomputes rope.inv_freq after to_empty")
    dit.rope.inv_freq.copy_(MiniMaxH3RotaryPosEmbed(cfg.get("rope_freq_dim", 16), cfg.get("rope_theta", 1e4)).inv_freq)
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    n = 0
    with torch.no_grad():
        for name, p in dit.named_parameters():
            if p.ndim == 2:
                a = math.sqrt(3.0 / p.shape[1])
                p.uniform_(-a, a, generator=g)
            elif "norm" in name:
                p.uniform_(0.8, 1.2, generator=g)
            else:
                p.uniform_(-0.1, 0.1, generator=g)
            n += p.numel()
    sync(device)
    log(f"dit: {n / 1e9:.2f} B parameters made on {device} in {time.time() - t0:.1f} s"
        + (f", {torch.cuda.memory_allocated() / 2**30:.1f} GiB" if device == "cuda" else ""))
    return dit


def fingerprint(dit):
    """A few weight sums: --ref-load refuses outputs of other weights."""
    import torch
    with torch.no_grad():
        return [float(t.float().sum()) for t in (dit.transformer_blocks[0].attn.to_q.weight, dit.proj_out.weight,
                                                 dit.transformer_blocks[-1].ff.net[2].weight)]


def geometry(w, h, f, vae_cfg):
    """Latent geometry as the pipeline resolves it (MiniMaxH3PrepareLayoutStep.__call__), from the VAE config."""
    from diffusers.modular_pipelines.minimax_h3.modular_pipeline import (
        align_num_frames, audio_latent_num_frames, video_latent_num_frames)

    ratio = math.prod(vae_cfg["spatial_downsample_factors"])
    clip = vae_cfg["clip_length"]
    per_chunk = math.ceil(clip / math.prod(vae_cfg["temporal_downsample_factors"]))  # the VAE's tokens_chunk_size
    if w % (2 * ratio) or h % (2 * ratio):
        die(f"--shapes: {w}x{h} is not a multiple of {2 * ratio} (VAE factor x patch)")
    frames = align_num_frames(f, clip, per_chunk)
    return (video_latent_num_frames(frames, clip, per_chunk), h // ratio, w // ratio,
            audio_latent_num_frames(frames), frames)


def dit_inputs(cfg, vae_cfg, shape, T, device, seed):
    """One t2va forward's inputs, made by the diffusers pipeline's own layout code."""
    import torch
    from diffusers.modular_pipelines.minimax_h3.before_denoise import (
        MiniMaxH3PrepareLayoutStep, MiniMaxH3SetTimestepsStep, patchify_video_latents)

    _, w, h, f = shape
    lf, lh, lw, A, _ = geometry(w, h, f, vae_cfg)
    patch = tuple(cfg.get("patch_size", (1, 2, 2)))
    pos, tags, vidx, aidx, tidx, ncv, nca = MiniMaxH3PrepareLayoutStep.build_packed_sequence(
        torch.full((T,), TEXT_TAG), lf, lh, lw, A, patch, AUDIO_CHANNELS, AUDIO_TAG, VIDEO_TAG, ())
    # the t2va plan of one step: no conditioning rows, so the two conditioning timesteps address no row
    ts, tix = MiniMaxH3SetTimestepsStep.build_row_timesteps(vidx, aidx, ncv, nca, T, VIDEO_T, AUDIO_T, 0.999, 1.0)
    g = torch.Generator().manual_seed(seed)
    latents = torch.randn(1, vae_cfg["latent_channels"], lf, lh, lw, generator=g)
    audio = torch.randn(A * AUDIO_CHANNELS, cfg.get("audio_in_channels", 32), generator=g)
    text = torch.randn(1, T, cfg.get("text_dim", 5120), generator=g).to(torch.bfloat16)  # the text encoder's bf16 rows
    inp = {"hidden_states": patchify_video_latents(latents, patch)[None], "audio_hidden_states": audio[None],
           "encoder_hidden_states": text, "timestep": ts, "timestep_indices": tix, "token_tags": tags,
           "position_ids": pos, "video_indices": vidx, "audio_indices": aidx, "text_indices": tidx}
    return {k: v.to(device) for k, v in inp.items()}, int(pos.shape[0])


def sync(device):
    import torch
    if device == "cuda":
        torch.cuda.synchronize()


def peak_gib(device):
    import torch
    return torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else 0.0


def reset_peak(device):
    import torch
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()


def timed(fn, repeats, device):
    """warm-up (compile), then `repeats` calls; returns best, mean, warm-up seconds and the last output."""
    sync(device)
    t0 = time.perf_counter()
    out = fn()
    sync(device)
    warm = time.perf_counter() - t0
    times = []
    for _ in range(repeats):
        sync(device)
        t0 = time.perf_counter()
        out = fn()
        sync(device)
        times.append(time.perf_counter() - t0)
    return min(times), sum(times) / len(times), warm, out


def rel_l2(got, ref):
    import torch
    got, ref = got.double().cpu(), ref.double().cpu()
    return float(torch.linalg.vector_norm(got - ref) / torch.linalg.vector_norm(ref).clamp_min(1e-300))


def forward_fn(dit, inp):
    import torch

    def run():
        with torch.no_grad():
            v, a = dit(**inp, return_dict=False)
        return v, a
    return run


def block_linear_filter(module, fqn):
    """h3's --quant scope (docs/fp8.md, docs/int8.md dit_proj): the main blocks' q, k, v, attention out, FFN up and
    down; not adaln_proj.linear, not the token refiner, not the input/time/output projections."""
    import torch
    return (isinstance(module, torch.nn.Linear) and fqn.startswith("transformer_blocks.")
            and ".adaln_proj." not in fqn)


def quantize(dit, mode):
    import torch
    from torchao.quantization import (Float8DynamicActivationFloat8WeightConfig,
                                      Int8DynamicActivationInt8WeightConfig, PerRow, quantize_)

    names = [n for n, m in dit.named_modules() if block_linear_filter(m, n)]
    want = 6 * len(dit.transformer_blocks)
    if len(names) != want:
        die(f"quantization scope: {len(names)} block linears found, want {want} (6 per block)")
    t0 = time.time()
    cfg = (Float8DynamicActivationFloat8WeightConfig(granularity=PerRow()) if mode == "fp8"
           else Int8DynamicActivationInt8WeightConfig())
    quantize_(dit, cfg, filter_fn=block_linear_filter)
    sync("cuda")
    torch.cuda.empty_cache()
    kinds = sorted({type(m.weight).__name__ for n, m in dit.named_modules() if n in names})
    log(f"dit {mode}: torchao {type(cfg).__name__} on {len(names)} block linears ({want // 6} blocks x to_q, to_k, "
        f"to_v, to_out.0, ff.net.0.proj, ff.net.2 = h3's 4 fused linears per block), weights {kinds}, "
        f"{time.time() - t0:.1f} s, {torch.cuda.memory_allocated() / 2**30:.1f} GiB resident")


def set_compile_limits(limit):
    import torch._dynamo as dynamo
    for key in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit", "accumulated_recompile_limit"):
        if hasattr(dynamo.config, key):
            setattr(dynamo.config, key, max(getattr(dynamo.config, key), limit * (8 if "accumulated" in key else 1)))


def run_dit(a):
    import torch
    cfg = load_cfg(os.path.join(a.snapshot, "transformer", "config.json"))
    vae_cfg = load_cfg(os.path.join(a.snapshot, "vae", "config.json"))
    set_compile_limits(a.cache_limit)
    log(f"torch {torch.__version__}, device {torch.cuda.get_device_name() if a.device == 'cuda' else 'cpu'}, "
        f"modes {','.join(a.modes)}, shapes {','.join(s[0] for s in a.shapes)}, text rows {a.text}, "
        f"repeats {a.repeats}")
    inputs = {}
    for shape in a.shapes:
        inputs[shape[0]] = dit_inputs(cfg, vae_cfg, shape, a.text, a.device, a.seed + 1)
        log(f"dit inputs {shape[0]}: S = {inputs[shape[0]][1]} (text {a.text}, audio "
            f"{inputs[shape[0]][0]['audio_indices'].numel()}, video {inputs[shape[0]][0]['video_indices'].numel()})")
    want_ref = not a.no_ref and (bool(a.ref_save) or any(m != "eager" for m in a.modes))
    refs, ref_fp = {}, None
    if a.ref_load and want_ref:
        try:
            blob = torch.load(a.ref_load, map_location="cpu")
        except Exception as ex:
            die(f"--ref-load {a.ref_load}: {type(ex).__name__}: {ex}")
        refs, ref_fp = blob["refs"], blob["fingerprint"]
        log(f"reference outputs of {sorted(refs)} loaded from {a.ref_load}")
    rc = 0
    groups = [[m for m in a.modes if m in ("eager", "compile")]] + [[m] for m in a.modes if m in QUANT_MODES]
    for gi, group in enumerate(g for g in groups if g):
        # a fresh bf16 model per group (quantization and compile change it in place): the same seed, the same weights
        dit = build_dit(cfg, a.device, a.seed)
        fp = fingerprint(dit)
        if ref_fp is not None and any(abs(x - y) > 1e-6 * max(1.0, abs(y)) for x, y in zip(fp, ref_fp)):
            die(f"--ref-load {a.ref_load}: made with other weights (fingerprint {ref_fp}, these {fp})")
        # the bf16 eager outputs on these weights, where a mode needs them and no eager run in this group gives them
        for name, (inp, S) in inputs.items():
            if want_ref and name not in refs and "eager" not in group:
                t0 = time.time()
                refs[name] = [t.float().cpu() for t in forward_fn(dit, inp)()]
                log(f"dit {name}: bf16 eager reference forward in {time.time() - t0:.1f} s")
        for mode in group:
            try:
                if mode in QUANT_MODES:
                    quantize(dit, mode)
                if mode != "eager":
                    dit.compile_repeated_blocks(fullgraph=True)
                for name, (inp, S) in inputs.items():
                    if mode != "eager":
                        torch._dynamo.reset()  # every shape its own static graphs, as a user compiling for it
                    reset_peak(a.device)
                    log(f"dit {mode} {name}: warm-up{' (compile)' if mode != 'eager' else ''} + {a.repeats} forwards")
                    best, mean, warm, (v, au) = timed(forward_fn(dit, inp), a.repeats, a.device)
                    line = (f"PEER dit {mode} {name} {best:.4f} peak_gib {peak_gib(a.device):.1f} mean_s {mean:.4f} "
                            f"warmup_s {warm:.1f} S {S}")
                    if not (torch.isfinite(v).all() and torch.isfinite(au).all()):
                        line += " nonfinite 1"
                    if mode == "eager" and want_ref:
                        refs[name] = [v.float().cpu(), au.float().cpu()]
                    elif name in refs and mode != "eager":
                        line += f" rel_l2_video {rel_l2(v, refs[name][0]):.3e} rel_l2_audio {rel_l2(au, refs[name][1]):.3e}"
                    print(line, flush=True)
            except Exception as ex:  # one mode failing (compile, torchao) leaves the others measured
                traceback.print_exc()  # to stderr (the device log), the one line below to stdout
                msg = str(ex).strip().splitlines()
                print(f"PEER dit {mode} failed: {type(ex).__name__}: {msg[0] if msg else ''}", flush=True)
                rc = 1
        del dit
        torch._dynamo.reset()
        if a.device == "cuda":
            torch.cuda.empty_cache()
        if a.ref_save and gi == 0 and refs:
            torch.save({"refs": refs, "fingerprint": fp, "seed": a.seed}, a.ref_save)
            log(f"reference outputs of {sorted(refs)} saved to {a.ref_save}")
    return rc


# ---- video VAE ----

def run_vae(a):
    import torch
    from diffusers.models.autoencoders.autoencoder_kl_minimax_h3 import AutoencoderKLMiniMaxH3

    vae_cfg = load_cfg(os.path.join(a.snapshot, "vae", "config.json"))
    t0 = time.time()
    torch.manual_seed(a.seed)
    with torch.device(a.device):
        vae = AutoencoderKLMiniMaxH3(**vae_cfg).eval().requires_grad_(False)  # fp32 weights, as diffusers pins them
    vae.enable_tiling(256, 256, 64, 64)  # the released tiling (docs/model/video_vae.md)
    sync(a.device)
    log(f"vae: {sum(p.numel() for p in vae.parameters()) / 1e9:.2f} B parameters made on {a.device} in "
        f"{time.time() - t0:.1f} s; decode under autocast {a.vae_autocast}")
    dt = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(a.vae_autocast)
    rc = 0
    for name, w, h, f in a.shapes:
        lf, lh, lw, _, frames = geometry(w, h, f, vae_cfg)
        z = torch.randn(1, vae_cfg["latent_channels"], lf, lh, lw, generator=torch.Generator().manual_seed(a.seed + 4))
        z = z.to(a.device)

        def decode():
            with torch.no_grad(), torch.autocast(a.device, dtype=dt, enabled=dt is not None):
                return vae.decode(z, return_dict=False)[0]
        try:
            reset_peak(a.device)
            log(f"vae {name}: warm-up + {a.vae_repeats} decodes of {lf} latent frames")
            best, mean, warm, out = timed(decode, a.vae_repeats, a.device)
            got = out.shape[2]
            print(f"PEER vae {a.vae_autocast}-autocast {name} {best:.4f} peak_gib {peak_gib(a.device):.1f} "
                  f"mean_s {mean:.4f} warmup_s {warm:.1f} latents {vae_cfg['latent_channels']}x{lf}x{lh}x{lw} "
                  f"frames {got}" + ("" if got == frames else f" want_frames {frames}"), flush=True)
        except Exception as ex:
            msg = str(ex).strip().splitlines()
            print(f"PEER vae {a.vae_autocast}-autocast failed: {type(ex).__name__}: {msg[0] if msg else ''}", flush=True)
            rc = 1
    return rc


def main(argv):
    a = parse_args(argv)
    check_runtime(a)
    rc = 0
    if "dit" in a.what:
        rc |= run_dit(a)
    if "vae" in a.what:
        rc |= run_vae(a)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
