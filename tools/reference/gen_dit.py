#!/usr/bin/env python3
"""Tiny MiniMax-H3 DiT fixtures (docs/model/dit.md section 14, Config B with text_dim 16) and golden files.

Writes, under tests/fixtures/:
  tiny/transformer/, tiny/transformer_ref/        diffusers layout, 2 shards + index + config.json
  tiny/FL2VA/transformer/, tiny/Ref2VA/transformer/  original layout (fused per-head qkv_proj,
                                                   fc1 = [gate; value], original names, rope.inv_freq)
  golden/dit/{t2va,fl2va,ref2va}.in.safetensors     inputs named as PROBE.md's `dit` op
  golden/dit/<case>.out.safetensors                 fp32 reference (bf16-stored weights upcast)
  golden/dit/<case>.bf16.out.safetensors            bf16 mixed reference (from_pretrained(dtype=bf16))

Every parameter is random (norm gains, biases, AdaLN). Deterministic (fixed seeds), CPU only.
Run: nice python3 tools/reference/gen_dit.py [--root tests/fixtures]
"""
import argparse
import json
import os
import shutil
import tempfile
from types import SimpleNamespace

import torch
from safetensors.torch import save_file, load_file

from diffusers import MiniMaxH3Transformer3DModel
from diffusers.modular_pipelines.minimax_h3.before_denoise import (
    MiniMaxH3PrepareLayoutStep,
    MiniMaxH3Ref2VAPrepareLayoutStep,
    MiniMaxH3SetTimestepsStep,
)

CONFIG_B = dict(
    num_attention_heads=2, attention_head_dim=32, hidden_size=48, num_layers=2, num_refiner_layers=2,
    ffn_dim=64, in_channels=24, audio_in_channels=32, patch_size=(1, 2, 2), text_dim=16, freq_dim=16,
    time_embed_hidden_dim=40, time_embed_dim=24, rope_freq_dim=4, rope_theta=10000.0,
    norm_eps=1e-5, qk_norm_eps=1e-5, final_norm_eps=1e-5,
)

# docs/model/dit.md 2.2: the fp32 tensors of the release; everything else is bf16.
FP32_NAMES = {
    "proj_in.weight", "proj_in.bias", "audio_proj_in.weight", "audio_proj_in.bias",
    "time_embedder.linear_1.weight", "time_embedder.linear_1.bias",
    "time_embedder.linear_2.weight", "time_embedder.linear_2.bias",
    "proj_out.weight", "proj_out.bias", "audio_proj_out.weight", "audio_proj_out.bias",
}


def randomize(model, seed):
    """Every parameter random: matrices ~ N(0, 1/fan_in), biases ~ N(0, 0.1^2), norm gains 1 + N(0, 0.2^2);
    AdaLN biases larger so shift/scale/gate differ clearly per (timestep, modality)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 2:
                p.copy_(torch.randn(p.shape, generator=g) / p.shape[1] ** 0.5)
            elif "norm" in name:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            elif "adaln_proj" in name or "norm_out.linear" in name:
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
    # release dtype rule: the stored values of bf16 tensors are bf16 (the fp32 reference upcasts them)
    sd = {}
    for name, p in model.state_dict().items():
        t = p.detach().clone().contiguous()
        sd[name] = t if name in FP32_NAMES else t.to(torch.bfloat16)
    return sd


def atomic_dir(final):
    """A temp dir next to `final`; caller renames it into place (nothing half-written)."""
    parent = os.path.dirname(final)
    os.makedirs(parent, exist_ok=True)
    return tempfile.mkdtemp(prefix=".tmp-", dir=parent)


def replace_dir(tmp, final):
    os.chmod(tmp, 0o755)
    for f in os.listdir(tmp):
        os.chmod(os.path.join(tmp, f), 0o644)
    if os.path.exists(final):
        shutil.rmtree(final)
    os.rename(tmp, final)


def write_sharded(folder, tensors, shard_fmt, index_name, nshards=2):
    names = sorted(tensors)
    per = (len(names) + nshards - 1) // nshards
    weight_map, total = {}, 0
    for s in range(nshards):
        fname = shard_fmt.format(s + 1, nshards)
        part = {n: tensors[n] for n in names[s * per:(s + 1) * per]}
        save_file(part, os.path.join(folder, fname), metadata={"format": "pt"})
        for n, t in part.items():
            weight_map[n] = fname
            total += t.numel() * t.element_size()
    with open(os.path.join(folder, index_name), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
        f.write("\n")


def write_diffusers(root, name, sd):
    final = os.path.join(root, "tiny", name)
    tmp = atomic_dir(final)
    write_sharded(tmp, sd, "diffusion_pytorch_model-{:05d}-of-{:05d}.safetensors",
                  "diffusion_pytorch_model.safetensors.index.json")
    cfg = {"_class_name": "MiniMaxH3Transformer3DModel", "_diffusers_version": "0.42.1"}
    cfg.update({k: (list(v) if isinstance(v, tuple) else v) for k, v in CONFIG_B.items()})
    with open(os.path.join(tmp, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    replace_dir(tmp, final)
    return final


def to_original(sd, cfg):
    """Inverse of docs/model/dit.md 2.4: rename, interleave q/k/v per head into qkv_proj, swap fc1 halves back."""
    NH, D, FF = cfg["num_attention_heads"], cfg["attention_head_dim"], cfg["ffn_dim"]
    out = {}
    ren = {
        "proj_in": "video_patch_proj", "audio_proj_in": "audio_patch_proj", "context_embedder": "condition_proj",
        "time_embedder.linear_1": "time_embedder.proj_in", "time_embedder.linear_2": "time_embedder.proj_out",
        "norm_out.norm": "final_layer.norm", "norm_out.linear": "final_layer.adaln_proj.linear",
        "proj_out": "final_layer.video_out", "audio_proj_out": "final_layer.audio_out",
    }
    for k, v in ren.items():
        for suf in ("weight", "bias"):
            if f"{k}.{suf}" in sd:
                out[f"{v}.{suf}"] = sd[f"{k}.{suf}"]

    def block(src, dst, adaln):
        for n in ("norm1.weight", "norm2.weight"):
            out[f"{dst}.{n}"] = sd[f"{src}.{n}"]
        q, k, v = (sd[f"{src}.attn.to_{x}.weight"] for x in "qkv")
        H = q.shape[1]
        qkv = torch.stack([q.view(NH, D, H), k.view(NH, D, H), v.view(NH, D, H)], dim=1)  # (NH, 3, D, H)
        out[f"{dst}.attn.qkv_proj.weight"] = qkv.reshape(NH * 3 * D, H).contiguous()
        out[f"{dst}.attn.q_norm.weight"] = sd[f"{src}.attn.norm_q.weight"]
        out[f"{dst}.attn.k_norm.weight"] = sd[f"{src}.attn.norm_k.weight"]
        out[f"{dst}.attn.out_proj.weight"] = sd[f"{src}.attn.to_out.0.weight"]
        w1 = sd[f"{src}.ff.net.0.proj.weight"]  # diffusers [value; gate]
        out[f"{dst}.mlp.fc1.weight"] = torch.cat([w1[FF:], w1[:FF]], dim=0).contiguous()  # original [gate; value]
        out[f"{dst}.mlp.fc2.weight"] = sd[f"{src}.ff.net.2.weight"]
        if adaln:
            out[f"{dst}.adaln_proj.linear.weight"] = sd[f"{src}.adaln_proj.linear.weight"]
            out[f"{dst}.adaln_proj.linear.bias"] = sd[f"{src}.adaln_proj.linear.bias"]

    for r in range(cfg["num_refiner_layers"]):
        block(f"token_refiner.refiner_blocks.{r}", f"token_refiner.blocks.{r}", False)
    out["token_refiner.final_norm.weight"] = sd["token_refiner.final_norm.weight"]
    for i in range(cfg["num_layers"]):
        block(f"transformer_blocks.{i}", f"blocks.{i}", True)
    F = cfg["rope_freq_dim"]
    out["rope.inv_freq"] = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, 2 * F, 2, dtype=torch.float32) / (2 * F)))
    return out


def from_original(osd, cfg):
    """Spec 2.4 forward mapping, used only to check the writer round-trips."""
    NH, D, FF = cfg["num_attention_heads"], cfg["attention_head_dim"], cfg["ffn_dim"]
    sd = {}
    for k, t in osd.items():
        if "qkv_proj" in k:
            raw = t.view(NH, 3, D, -1)
            base = k.replace("blocks.", "transformer_blocks.", 1) if k.startswith("blocks.") else \
                k.replace("token_refiner.blocks.", "token_refiner.refiner_blocks.")
            base = base.replace(".attn.qkv_proj.weight", ".attn.to_")
            for j, x in enumerate("qkv"):
                sd[base + x + ".weight"] = raw[:, j].reshape(NH * D, -1)
        elif "mlp.fc1" in k:
            base = k.replace("token_refiner.blocks.", "token_refiner.refiner_blocks.") if "token_refiner" in k \
                else k.replace("blocks.", "transformer_blocks.", 1)
            sd[base.replace("mlp.fc1", "ff.net.0.proj")] = torch.cat([t[FF:], t[:FF]], dim=0)
    return sd


def write_original(root, task_dir, sd, cfg):
    final = os.path.join(root, "tiny", task_dir, "transformer")
    tmp = atomic_dir(final)
    osd = to_original(sd, cfg)
    back = from_original(osd, cfg)
    for k, v in back.items():
        assert torch.equal(v, sd[k]), k
    write_sharded(tmp, osd, "model-{:05d}-of-{:05d}.safetensors", "model.safetensors.index.json")
    H = cfg["hidden_size"]
    ocfg = {
        "_class_name": "MiniMaxH3DiTModel", "_diffusers_version": "0.32.2",
        "hidden_size": H, "num_layers": cfg["num_layers"], "token_refiner_num_layers": cfg["num_refiner_layers"],
        "num_attention_heads": cfg["num_attention_heads"], "attention_head_dim": cfg["attention_head_dim"],
        "ffn_hidden_size": cfg["ffn_dim"], "latents_dim": cfg["in_channels"],
        "audio_latents_dim": cfg["audio_in_channels"], "patch_size": list(cfg["patch_size"]),
        "text_dim": cfg["text_dim"], "timestep_input_dim": cfg["freq_dim"],
        "time_embed_hidden_size": cfg["time_embed_hidden_dim"], "time_embed_dim": cfg["time_embed_dim"],
        "adaln_out_features": 18 * H, "final_adaln_out_features": 2 * H,
        "rope_inv_freq_len": cfg["rope_freq_dim"], "norm_eps": cfg["norm_eps"],
        "qk_norm_eps": cfg["qk_norm_eps"], "final_norm_eps": cfg["final_norm_eps"],
    }
    with open(os.path.join(tmp, "config.json"), "w") as f:
        json.dump(ocfg, f, indent=2)
        f.write("\n")
    replace_dir(tmp, final)
    print(f"wrote {final}: {len(osd)} tensors")


# ---- golden cases (layouts from diffusers' own builders) ----

def layout_t2va_fl2va(anchors):
    tags = torch.tensor([1, 1, 0, 0, 1])
    pos, tt, vi, ai, ti, ncv, nca = MiniMaxH3PrepareLayoutStep.build_packed_sequence(
        tags, num_latent_frames=7, latent_height=4, latent_width=6, num_audio_latents=37,
        patch_size=(1, 2, 2), audio_channels=2, audio_tag=2, video_tag=0, keyframe_anchors=anchors)
    return pos, tt, vi, ai, ti, ncv, nca


def layout_ref2va():
    tags = torch.tensor([1, 1, 0, 0, 1])
    refs = [SimpleNamespace(kind="image", has_audio=False), SimpleNamespace(kind="video", has_audio=True),
            SimpleNamespace(kind="audio", has_audio=True)]
    cond = [torch.zeros(1, 24, 1, 4, 6), torch.zeros(1, 24, 7, 4, 4)]
    acond = [torch.zeros(80, 32), torch.zeros(60, 32)]
    return MiniMaxH3Ref2VAPrepareLayoutStep.build_ref2va_packed_sequence(
        tags, refs, cond, acond, num_latent_frames=7, latent_height=4, latent_width=4, num_audio_latents=37,
        patch_size=(1, 2, 2), audio_channels=2, audio_tag=2, video_tag=0)


def make_inputs(layout, tv, ta, seed):
    pos, tags, vi, ai, ti, ncv, nca = layout
    t_steps, t_idx = MiniMaxH3SetTimestepsStep.build_row_timesteps(
        vi, ai, ncv, nca, ti.numel(), tv, ta, max(tv, 0.999), 1.0)
    g = torch.Generator().manual_seed(seed)
    return {
        "hidden_states": torch.randn(1, vi.numel(), 96, generator=g),
        "audio_hidden_states": torch.randn(1, ai.numel(), 32, generator=g),
        "encoder_hidden_states": torch.randn(1, ti.numel(), CONFIG_B["text_dim"], generator=g),
        "timestep": t_steps.to(torch.float32),
        "timestep_indices": t_idx.to(torch.int64),
        "token_tags": tags.to(torch.int64),
        "position_ids": pos.to(torch.float64),
        "video_indices": vi.to(torch.int64),
        "audio_indices": ai.to(torch.int64),
        "text_indices": ti.to(torch.int64),
    }


def run(model, inp):
    with torch.no_grad():
        out = model(**{k: v.clone() for k, v in inp.items()}, return_dict=True)
    return {"sample": out.sample.float().contiguous(), "audio_sample": out.audio_sample.float().contiguous()}


def check_reference_errors(model, inp, gold):
    """The error paths the C side rejects also raise in the reference (docs/model/dit.md 3); the bad inputs are saved
    as golden/dit/bad_<what>.in.safetensors for the CLI test."""
    bad = [
        ("position_ids_2col", "position_ids", inp["position_ids"][:, :2].contiguous()),
        ("token_tags_short", "token_tags", inp["token_tags"][:-1].contiguous()),
        ("timestep_2d", "timestep", inp["timestep"][None, :].contiguous()),
        ("timestep_indices_range", "timestep_indices", torch.full_like(inp["timestep_indices"], inp["timestep"].numel())),
        ("video_rows", "hidden_states", inp["hidden_states"][:, :-1].contiguous()),
    ]
    for what, name, value in bad:
        d = dict(inp)
        d[name] = value
        try:
            run(model, d)
        except (ValueError, AssertionError, IndexError, RuntimeError) as ex:
            print(f"  reference rejects bad {name}: {type(ex).__name__}")
        else:
            raise SystemExit(f"reference accepted bad {name}")
        path = os.path.join(gold, f"bad_{what}.in.safetensors")
        save_file({k: v.contiguous() for k, v in d.items()}, path + ".tmp")
        os.chmod(path + ".tmp", 0o644)
        os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures"))
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    torch.manual_seed(0)
    torch.set_num_threads(1)

    model = MiniMaxH3Transformer3DModel(**CONFIG_B).eval()
    dirs = {}
    for name, seed, orig in (("transformer", 1234, "FL2VA"), ("transformer_ref", 5678, "Ref2VA")):
        sd = randomize(model, seed)
        dirs[name] = write_diffusers(root, name, sd)
        print(f"wrote {dirs[name]}: {len(sd)} tensors, {sum(p.numel() for p in sd.values())} parameters")
        write_original(root, orig, sd, CONFIG_B)

    cases = [
        ("t2va", "transformer", layout_t2va_fl2va(()), 0.3, 0.6, 11),
        ("fl2va", "transformer", layout_t2va_fl2va(("first", "last")), 0.142857, 0.4, 12),
        ("ref2va", "transformer_ref", layout_ref2va(), 0.3, 0.6, 13),
    ]
    gold = os.path.join(root, "golden", "dit")
    os.makedirs(gold, exist_ok=True)
    models = {}
    for case, comp, layout, tv, ta, seed in cases:
        if comp not in models:
            m32 = MiniMaxH3Transformer3DModel.from_pretrained(dirs[comp], torch_dtype=torch.float32).eval()
            m16 = MiniMaxH3Transformer3DModel.from_pretrained(dirs[comp], torch_dtype=torch.bfloat16).eval()
            assert m16.proj_in.weight.dtype == torch.float32 and m16.transformer_blocks[0].norm1.weight.dtype == torch.bfloat16
            models[comp] = (m32, m16)
        m32, m16 = models[comp]
        inp = make_inputs(layout, tv, ta, seed)
        o32 = run(m32, inp)
        o16 = run(m16, inp)
        if case == "t2va":
            check_reference_errors(m32, inp, gold)
        rel = (o16["sample"] - o32["sample"]).norm() / o32["sample"].norm()
        arel = (o16["audio_sample"] - o32["audio_sample"]).norm() / o32["audio_sample"].norm()
        print(f"{case}: S={inp['position_ids'].shape[0]} K={inp['timestep'].numel()} "
              f"timestep={inp['timestep'].tolist()} ref bf16-vs-fp32 rel L2 video {rel:.3e} audio {arel:.3e}")
        for fname, tensors in ((f"{case}.in", inp), (f"{case}.out", o32), (f"{case}.bf16.out", o16)):
            path = os.path.join(gold, fname + ".safetensors")
            save_file({k: v.contiguous() for k, v in tensors.items()}, path + ".tmp", metadata={"component": comp})
            os.chmod(path + ".tmp", 0o644)
            os.replace(path + ".tmp", path)
        print(f"  wrote {gold}/{case}.{{in,out,bf16.out}}.safetensors (component {comp})")


if __name__ == "__main__":
    main()
