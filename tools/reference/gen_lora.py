"""Fixtures for the LoRA tests (tests/test_lora.c, tests/cli/lora.sh; docs/lora.md): tiny LoRAs for the tiny
snapshot's DiT in every layout diffusers 0.42.1's MiniMax-H3 loader accepts, each loaded with diffusers'
MiniMaxH3LoraLoaderMixin.load_lora_weights + set_adapters + fuse_lora (peft's merge), and the merged weights,
forwards and a 4-evaluation denoise that h3 must reproduce.

Layouts (tests/fixtures/lora/<name>.safetensors):
  peft           diffusers names under transformer., lora_A/lora_B, BF16, mixed ranks (4, AdaLN 2)
  peft_default   the same unprefixed with peft's .default. infix, __metadata__ alpha "2" (alpha / rank per module)
  ai_toolkit     the original names under diffusion_model., fused qkv_proj ([q; k; v]) and fc1 ([gate; value]), BF16
  comfy          the original names with no prefix, F16 factors
  musubi         musubi-tuner's flattened lora_unet_ names, lora_down / lora_up with .alpha tensors (kohya)
  kohya          the original names, lora_down / lora_up, .alpha 3 on rank 4 (the fold rounds)
  ref            transformer_ref.-prefixed diffusers names, for the ref2va partition (tiny/transformer_ref)
  diffsynth_hd128  DiffSynth-Studio: original names with .default., F32 factors, per-head-interleaved qkv, for
                 lora/hd128/ (a tiny DiT with head_dim 128: diffusers de-interleaves with 128-wide heads only)
  peft_meta      written by diffusers' own MiniMaxH3LoraLoaderMixin.save_lora_weights with a peft LoraConfig as
                 transformer_lora_adapter_metadata (the __metadata__ lora_adapter_metadata): r 4, lora_alpha 6,
                 rank_pattern (AdaLN 2), alpha_pattern (AdaLN 3, one to_q 5.5, a "^"-anchored full name)
  peft_rslora    the same writer, use_rslora (scaling alpha / sqrt(r)), lora_alpha 3, the AdaLN ranks by pattern
Rejections (diffusers raises on the first two; h3 refuses all): bad_unknown (a key naming no module), bad_shape (a
LoRA for a pruned ffn), bad_dora (a dora_scale tensor: diffusers drops it with a warning, h3 refuses the file);
bad_meta_rank (lora_adapter_metadata r 8 over rank-4 factors: diffusers fails on the size mismatch), bad_meta_dora
(its LoraConfig says use_dora: a DoRA adapter, refused).

Expected values (tests/fixtures/lora/expect/):
  <case>.merged_bf16 / .merged_fp32   every weight the LoRA(s) touch, after fuse_lora, on the model loaded in its
                                       stored dtypes (from_pretrained bf16: the release's fp32 tensors stay fp32) and
                                       in fp32; cases: each layout at its scale, and peft:0.5 + kohya:1.25
  <case>.forward.out                  the fp32 forward on golden/dit/t2va.in (ref: ref2va.in) with the fused model
  denoise_t2va_<case>.out             golden/pipeline/denoise_t2va's loop (4 evaluations, fp32) with the fused model

  step_update                         diffusers' Euler step and LightX2V's training_euler rule on random values
                                      (written by every run, alone with --step-update)

Run: /work/venv/bin/python tools/reference/gen_lora.py [--step-update | --metadata]  (--metadata: only the
lora_adapter_metadata files and their expected values)   (torch, diffusers 0.42.1, peft,
safetensors; CPU)
"""

import importlib
import json
import os
import shutil
import sys
import tempfile

import torch
from safetensors.torch import load_file, save_file

from diffusers import MiniMaxH3Transformer3DModel
from diffusers.loaders.lora_pipeline import MiniMaxH3LoraLoaderMixin

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
FIX = os.path.join(ROOT, "tests", "fixtures")
TINY = os.path.join(FIX, "tiny")
OUT = os.path.join(FIX, "lora")
EXP = os.path.join(OUT, "expect")
sys.path.insert(0, HERE)


class Pipe(MiniMaxH3LoraLoaderMixin):
    """The loader mixin over bare models: what MiniMaxH3ModularPipeline holds, without the other components."""

    hf_device_map = None

    def __init__(self, transformer=None, transformer_ref=None):
        self.transformer, self.transformer_ref = transformer, transformer_ref

    @property
    def components(self):
        return {k: v for k, v in (("transformer", self.transformer), ("transformer_ref", self.transformer_ref)) if v}


def save(path, tensors, meta=None):
    save_file({k: v.contiguous() for k, v in tensors.items()}, path + ".tmp", metadata=meta)
    os.chmod(path + ".tmp", 0o644)
    os.replace(path + ".tmp", path)


# ---------------------------------------------------------------- the LoRA factors, in both name spaces

ORIG_STANDALONE = {"video_patch_proj": "proj_in", "audio_patch_proj": "audio_proj_in",
                   "condition_proj": "context_embedder", "time_embedder.proj_in": "time_embedder.linear_1",
                   "time_embedder.proj_out": "time_embedder.linear_2", "final_layer.adaln_proj.linear": "norm_out.linear",
                   "final_layer.video_out": "proj_out", "final_layer.audio_out": "audio_proj_out"}


def diffusers_modules(model):
    mods = list(ORIG_STANDALONE.values())
    for b in range(model.config.num_layers):
        mods += [f"transformer_blocks.{b}.{m}" for m in ("attn.to_q", "attn.to_k", "attn.to_v", "attn.to_out.0",
                                                        "ff.net.0.proj", "ff.net.2", "adaln_proj.linear")]
    mods += ["token_refiner.refiner_blocks.0.attn.to_v", "token_refiner.refiner_blocks.1.ff.net.2"]
    return mods


def original_modules(model):
    mods = list(ORIG_STANDALONE)
    for b in range(model.config.num_layers):
        mods += [f"blocks.{b}.{m}" for m in ("attn.qkv_proj", "attn.out_proj", "mlp.fc1", "mlp.fc2", "adaln_proj.linear")]
    mods += ["token_refiner.blocks.0.attn.qkv_proj", "token_refiner.blocks.1.mlp.fc2"]
    return mods


def orig_shape(model, name):
    """[out, in] of an original-name module (the fused qkv_proj and fc1 included)."""
    sd = model.state_dict()
    if name in ORIG_STANDALONE:
        return tuple(sd[ORIG_STANDALONE[name] + ".weight"].shape)
    pre, rest = ("token_refiner.refiner_blocks.", name[len("token_refiner.blocks."):]) if name.startswith(
        "token_refiner.") else ("transformer_blocks.", name[len("blocks."):])
    idx, sub = rest.split(".", 1)
    p = f"{pre}{idx}."
    if sub == "attn.qkv_proj":
        o, i = sd[p + "attn.to_q.weight"].shape
        return 3 * o, i
    d = {"attn.out_proj": "attn.to_out.0", "mlp.fc1": "ff.net.0.proj", "mlp.fc2": "ff.net.2",
         "adaln_proj.linear": "adaln_proj.linear"}[sub]
    return tuple(sd[p + d + ".weight"].shape)


def factors(shapes, seed, dtype, rank=4):
    """{module: (A [r, in], B [out, r])}: rank 4, AdaLN projections rank 2 (published H3 LoRAs are mixed-rank)."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, (o, i) in shapes.items():
        r = 2 if "adaln" in name else rank
        A = torch.randn(r, i, generator=g) * 0.3
        B = torch.randn(o, r, generator=g) * 0.3
        out[name] = (A.to(dtype), B.to(dtype))
    return out


def make_layouts(model, model128):
    dm = {n: tuple(model.get_submodule(n).weight.shape) for n in diffusers_modules(model)}
    om = {n: orig_shape(model, n) for n in original_modules(model)}
    files = {}
    f = factors(dm, 1, torch.bfloat16)
    files["peft"] = ({f"transformer.{n}.lora_{x}.weight": t for n, (A, B) in f.items() for x, t in (("A", A), ("B", B))}, None)
    f = factors(dm, 2, torch.bfloat16)
    files["peft_default"] = ({f"{n}.lora_{x}.default.weight": t for n, (A, B) in f.items() for x, t in (("A", A), ("B", B))},
                             {"alpha": "2"})
    f = factors(om, 3, torch.bfloat16)
    files["ai_toolkit"] = ({f"diffusion_model.{n}.lora_{x}.weight": t for n, (A, B) in f.items() for x, t in (("A", A), ("B", B))}, None)
    f = factors(om, 4, torch.float16)
    files["comfy"] = ({f"{n}.lora_{x}.weight": t for n, (A, B) in f.items() for x, t in (("A", A), ("B", B))}, None)
    f = factors(om, 5, torch.bfloat16)
    sd = {}
    for n, (A, B) in f.items():
        flat = "lora_unet_" + n.replace(".", "_")
        sd[f"{flat}.lora_down.weight"], sd[f"{flat}.lora_up.weight"] = A, B
        sd[f"{flat}.alpha"] = torch.tensor(1.0 if "adaln" in n else 2.0)
    files["musubi"] = (sd, None)
    f = factors(om, 6, torch.bfloat16)
    sd = {}
    for n, (A, B) in f.items():
        sd[f"{n}.lora_down.weight"], sd[f"{n}.lora_up.weight"] = A, B
        sd[f"{n}.alpha"] = torch.tensor(3.0, dtype=torch.bfloat16)
    files["kohya"] = (sd, None)
    f = factors(dm, 7, torch.bfloat16)
    files["ref"] = ({f"transformer_ref.{n}.lora_{x}.weight": t for n, (A, B) in f.items() for x, t in (("A", A), ("B", B))}, None)
    om128 = {n: orig_shape(model128, n) for n in original_modules(model128)}
    f = factors(om128, 8, torch.float32)
    files["diffsynth_hd128"] = ({f"{n}.lora_{x}.default.weight": t for n, (A, B) in f.items() for x, t in (("A", A), ("B", B))}, None)
    # rejections
    files["bad_unknown"] = ({"blocks.0.attn.bogus.lora_A.weight": torch.zeros(4, 48, dtype=torch.bfloat16),
                             "blocks.0.attn.bogus.lora_B.weight": torch.zeros(48, 4, dtype=torch.bfloat16)}, None)
    files["bad_shape"] = ({"transformer.transformer_blocks.0.ff.net.2.lora_A.weight": torch.zeros(4, 32, dtype=torch.bfloat16),
                           "transformer.transformer_blocks.0.ff.net.2.lora_B.weight": torch.zeros(48, 4, dtype=torch.bfloat16)}, None)
    files["bad_dora"] = ({"transformer.transformer_blocks.0.ff.net.2.lora_A.weight": torch.zeros(4, 64, dtype=torch.bfloat16),
                          "transformer.transformer_blocks.0.ff.net.2.lora_B.weight": torch.zeros(48, 4, dtype=torch.bfloat16),
                          "transformer.transformer_blocks.0.ff.net.2.lora_magnitude_vector": torch.ones(48, dtype=torch.bfloat16)}, None)
    return files


def make_metadata_layouts(model):
    """The lora_adapter_metadata files, written by diffusers' save_lora_weights from peft LoraConfigs."""
    from peft import LoraConfig
    dm = {n: tuple(model.get_submodule(n).weight.shape) for n in diffusers_modules(model)}
    out = {}
    specs = {
        "peft_meta": (11, dict(r=4, lora_alpha=6, rank_pattern={"adaln_proj.linear": 2},
                               alpha_pattern={"adaln_proj.linear": 3, "^transformer_blocks.1.attn.to_q": 5.5})),
        "peft_rslora": (12, dict(r=4, lora_alpha=3, use_rslora=True, rank_pattern={"adaln_proj.linear": 2})),
        "bad_meta_rank": (13, dict(r=8, lora_alpha=8, rank_pattern={"adaln_proj.linear": 2})),
        "bad_meta_dora": (14, dict(r=4, lora_alpha=4, use_dora=True, rank_pattern={"adaln_proj.linear": 2})),
    }
    for name, (seed, kw) in specs.items():
        f = factors(dm, seed, torch.bfloat16)
        layers = {f"{n}.lora_{x}.weight": t for n, (A, B) in f.items() for x, t in (("A", A), ("B", B))}
        cfg = LoraConfig(target_modules=sorted({n.rsplit(".", 1)[-1] for n in dm}), **kw).to_dict()
        cfg["target_modules"] = sorted(cfg["target_modules"])  # to_dict gives a set: its order varies run to run
        tmp = tempfile.mkdtemp()
        try:
            MiniMaxH3LoraLoaderMixin.save_lora_weights(tmp, transformer_lora_layers=layers,
                                                       transformer_lora_adapter_metadata=cfg, weight_name="l.safetensors")
            out[name] = os.path.join(OUT, f"{name}.safetensors")
            shutil.copyfile(os.path.join(tmp, "l.safetensors"), out[name] + ".tmp")
            os.chmod(out[name] + ".tmp", 0o644)
            os.replace(out[name] + ".tmp", out[name])
        finally:
            shutil.rmtree(tmp)
    return out


# ---------------------------------------------------------------- the tiny head_dim-128 DiT (DiffSynth's de-interleave)

def make_hd128():
    gen_dit = importlib.import_module("gen_dit")
    cfg = dict(gen_dit.CONFIG_B, num_attention_heads=1, attention_head_dim=128)
    torch.manual_seed(0)
    model = MiniMaxH3Transformer3DModel(**cfg).eval()
    sd = gen_dit.randomize(model, 4321)
    folder = os.path.join(OUT, "hd128")
    os.makedirs(folder, exist_ok=True)
    save(os.path.join(folder, "diffusion_pytorch_model.safetensors"), sd, {"format": "pt"})
    conf = dict(cfg, _class_name="MiniMaxH3Transformer3DModel", _diffusers_version="0.42.1", patch_size=list(cfg["patch_size"]))
    with open(os.path.join(folder, "config.json"), "w") as fh:
        json.dump(conf, fh, indent=2)
    return folder


# ---------------------------------------------------------------- diffusers' load + fuse

def load_model(folder, dtype):
    return MiniMaxH3Transformer3DModel.from_pretrained(folder, torch_dtype=dtype).eval()


def fused(folder, loras, dtype, ref=False):
    """The model of `folder` in dtype with the LoRAs [(path, scale)] loaded and fused; the base state dict too."""
    model = load_model(folder, dtype)
    base = {k: v.clone() for k, v in model.state_dict().items()}
    pipe = Pipe(transformer_ref=model) if ref else Pipe(transformer=model)
    names = []
    for i, (path, _) in enumerate(loras):
        pipe.load_lora_weights(path, adapter_name=f"l{i}")
        names.append(f"l{i}")
    pipe.set_adapters(names, [s for _, s in loras])
    pipe.fuse_lora(components=["transformer_ref" if ref else "transformer"], adapter_names=names)
    pipe.unload_lora_weights()  # drops the adapters, keeps the fused weights
    return model, base


def merged_weights(model, base):
    """Every weight fuse_lora changed (by name), as the model holds it."""
    out = {}
    for k, v in model.state_dict().items():
        assert k in base, k
        if not torch.equal(v, base[k]):
            out[k] = v.detach().clone()
    return out


def run_forward(model, path):
    inp = load_file(path)
    with torch.no_grad():
        o = model(**{k: v.clone() for k, v in inp.items()}, return_dict=True)
    return {"sample": o.sample.float(), "audio_sample": o.audio_sample.float()}


def denoise_t2va(loras):
    """gen_pipeline's denoise_t2va loop (the same seeds, so the same inputs) with the LoRAs fused into its DiT."""
    gp = importlib.import_module("gen_pipeline")
    real = gp.MiniMaxH3Transformer3DModel

    class WithLora:
        @staticmethod
        def from_pretrained(folder, torch_dtype=None):
            return fused(folder, loras, torch_dtype)[0]

    tmp = tempfile.mkdtemp()
    try:
        gp.MiniMaxH3Transformer3DModel = WithLora
        gp.run_denoise(tmp, FIX, "t2va")
        gp.MiniMaxH3Transformer3DModel = real
        mine, gold = load_file(os.path.join(tmp, "denoise_t2va.in.safetensors")), load_file(
            os.path.join(FIX, "golden", "pipeline", "denoise_t2va.in.safetensors"))
        for k in gold:
            assert torch.equal(mine[k], gold[k]), f"denoise input {k} differs from the golden's"
        return load_file(os.path.join(tmp, "denoise_t2va.out.safetensors"))
    finally:
        gp.MiniMaxH3Transformer3DModel = real
        shutil.rmtree(tmp)


def step_updates():
    """The two Euler forms on 4096 random (x, v), at every step of the Turbo grid (5 grid points, shift 6) and the
    release's (shift 12): diffusers' MiniMaxH3Scheduler.step (the reference blend) and LightX2V's training_euler rule
    (lightx2v/models/schedulers/minimax_h3/scheduler.py, _step: x.float() + (sigma - sigma_next) * v.float(), the
    sigmas fp32 tensors). Written to expect/step_update.safetensors; h3's sched_step must give each bit for bit."""
    from diffusers import MiniMaxH3Scheduler
    g = torch.Generator().manual_seed(99)
    x = torch.randn(4096, generator=g) * 2
    v = torch.randn(4096, generator=g) * 3
    out = {"x": x, "v": v}
    for shift in (6.0, 12.0):
        sch = MiniMaxH3Scheduler(shift=shift)
        sch.set_timesteps(5)
        out[f"sigmas_{shift:g}"] = sch.sigmas.float()
        for i, t in enumerate(sch.timesteps):
            sch._step_index = i
            ref = sch.step(v.clone(), t, x.clone(), return_dict=False)[0]
            sigma, sigma_next = sch.sigmas[i].float(), sch.sigmas[i + 1].float()
            te = x.float() + (sigma - sigma_next) * v.float()
            out[f"euler_{shift:g}_{i}"], out[f"training_euler_{shift:g}_{i}"] = ref, te
            print(f"shift {shift:g} step {i}: the two rules differ in {(ref != te).sum().item()} of 4096 values, "
                  f"max {(ref - te).abs().max().item():.3g}")
    save(os.path.join(EXP, "step_update.safetensors"), out)


def expect_rejected(folder, paths):
    """The files diffusers itself refuses: loading each must raise."""
    for path in paths:
        try:
            fused(folder, [(path, 1.0)], torch.float32)
        except (ValueError, RuntimeError) as ex:
            print(f"diffusers rejects {os.path.basename(path)}: {type(ex).__name__}: {str(ex)[:100]}")
        else:
            raise SystemExit(f"diffusers accepted {path}")


def write_merged(case, folder, paths, dtype, tag, ref=False, label=""):
    """expect/<case>.merged_<tag>: every weight fuse_lora changed; returns the fused model."""
    model, base = fused(folder, paths, dtype, ref)
    w = merged_weights(model, base)
    save(os.path.join(EXP, f"{case}.merged_{tag}.safetensors"), w,
         {"loras": label, "partition": "transformer_ref" if ref else "transformer"})
    print(f"{case} {tag}: {len(w)} weights merged")
    return model


def main():
    torch.set_num_threads(1)
    if sys.argv[1:] == ["--step-update"]:
        return step_updates()
    os.makedirs(EXP, exist_ok=True)
    tiny_t, tiny_r = os.path.join(TINY, "transformer"), os.path.join(TINY, "transformer_ref")
    lp = lambda n: os.path.join(OUT, f"{n}.safetensors")
    label = lambda loras: " ".join(f"{n}:{s}" for n, s in loras)
    dtypes = ((torch.bfloat16, "bf16"), (torch.float32, "fp32"))
    make_metadata_layouts(load_model(tiny_t, torch.float32))
    expect_rejected(tiny_t, [lp("bad_meta_rank")])
    for case, loras in (("peft_meta", [("peft_meta", 1.0)]), ("peft_rslora", [("peft_rslora", 0.7)])):
        for dtype, tag in dtypes:
            write_merged(case, tiny_t, [(lp(n), s) for n, s in loras], dtype, tag, label=label(loras))
    if sys.argv[1:] == ["--metadata"]:
        return
    step_updates()
    hd128 = make_hd128()
    files = make_layouts(load_model(tiny_t, torch.float32), load_model(hd128, torch.float32))
    for name, (sd, meta) in files.items():
        save(os.path.join(OUT, f"{name}.safetensors"), sd, meta)
    expect_rejected(tiny_t, [lp("bad_unknown"), lp("bad_shape")])

    cases = {  # case: (folder, [(lora, scale)], ref partition, forward input)
        "peft": (tiny_t, [("peft", 1.0)], False, "t2va"),
        "peft_default": (tiny_t, [("peft_default", 0.8)], False, None),
        "ai_toolkit": (tiny_t, [("ai_toolkit", 1.0)], False, "t2va"),
        "comfy": (tiny_t, [("comfy", 0.6)], False, None),
        "musubi": (tiny_t, [("musubi", 1.0)], False, None),
        "kohya": (tiny_t, [("kohya", 1.3)], False, None),
        "ref": (tiny_r, [("ref", 1.0)], True, "ref2va"),
        "diffsynth_hd128": (hd128, [("diffsynth_hd128", 1.0)], False, None),
        "peft+kohya": (tiny_t, [("peft", 0.5), ("kohya", 1.25)], False, "t2va"),
    }
    for case, (folder, loras, ref, fwd) in cases.items():
        paths = [(lp(n), s) for n, s in loras]
        for dtype, tag in dtypes:
            model = write_merged(case, folder, paths, dtype, tag, ref, label(loras))
            if fwd and dtype == torch.float32:
                o = run_forward(model, os.path.join(FIX, "golden", "dit", f"{fwd}.in.safetensors"))
                save(os.path.join(EXP, f"{case}.forward.out.safetensors"), o)
    for case, loras in (("ai_toolkit", [("ai_toolkit", 1.0)]), ("peft+kohya", [("peft", 0.5), ("kohya", 1.25)])):
        o = denoise_t2va([(lp(n), s) for n, s in loras])
        save(os.path.join(EXP, f"denoise_t2va_{case}.out.safetensors"), o)
        print(f"denoise t2va with {case}: done")


if __name__ == "__main__":
    main()
