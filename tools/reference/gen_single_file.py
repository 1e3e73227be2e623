"""Fixtures for tests/cli/single_file.sh: the tiny snapshot's transformer as a single-file checkpoint in the layout
of the published single files (Comfy-Org/MiniMax-H3 and the GGUFs derived from them): the original module names,
qkv_proj stacked [q; k; v], mlp.fc1 = [gate; value], rope.inv_freq included. Checked against the reference before
it is written: diffusers 0.42.1's MiniMaxH3Transformer3DModel.from_single_file (convert_minimax_h3_transformer_
checkpoint_to_diffusers, qkv_layout="stacked") must give back every tensor of the tiny snapshot bit for bit.

Run: /work/venv/bin/python tools/reference/gen_single_file.py   (torch, diffusers 0.42.1, safetensors)
Writes tests/fixtures/single_file/tiny_transformer.safetensors (no prefix), tiny_transformer_prefixed.safetensors
(every name under "model.diffusion_model.", a ComfyUI save) and pruned.safetensors (a pruned file's marker tensor).
"""

import os

import torch
from safetensors.torch import load_file, save_file

from diffusers import MiniMaxH3Transformer3DModel

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
TINY = os.path.join(ROOT, "tests", "fixtures", "tiny", "transformer")
OUT = os.path.join(ROOT, "tests", "fixtures", "single_file")

TOP = {  # diffusers name prefix -> original name prefix, for names that start with it
    "proj_in.": "video_patch_proj.", "audio_proj_in.": "audio_patch_proj.", "context_embedder.": "condition_proj.",
    "time_embedder.linear_1.": "time_embedder.proj_in.", "time_embedder.linear_2.": "time_embedder.proj_out.",
    "norm_out.norm.": "final_layer.norm.", "norm_out.linear.": "final_layer.adaln_proj.linear.",
    "proj_out.": "final_layer.video_out.", "audio_proj_out.": "final_layer.audio_out.",
    "token_refiner.refiner_blocks.": "token_refiner.blocks.", "transformer_blocks.": "blocks.",
}
INNER = {".attn.norm_q.": ".attn.q_norm.", ".attn.norm_k.": ".attn.k_norm.", ".attn.to_out.0.": ".attn.out_proj.",
         ".ff.net.0.proj.": ".mlp.fc1.", ".ff.net.2.": ".mlp.fc2."}


def load_snapshot():
    sd = {}
    for f in sorted(os.listdir(TINY)):
        if f.endswith(".safetensors"):
            sd.update(load_file(os.path.join(TINY, f)))
    return sd


def to_single_file(sd, inv_freq):
    out = {}
    for k, v in sd.items():
        if ".attn.to_k." in k or ".attn.to_v." in k:
            continue
        n = k
        for a, b in TOP.items():
            if n.startswith(a):
                n = b + n[len(a):]
                break
        for a, b in INNER.items():
            n = n.replace(a, b)
        if ".attn.to_q." in k:  # [q; k; v] stacked
            n = n.replace(".attn.to_q.", ".attn.qkv_proj.")
            v = torch.cat([v, sd[k.replace("to_q", "to_k")], sd[k.replace("to_q", "to_v")]], 0)
        if ".ff.net.0.proj." in k:  # diffusers [value; gate] -> original [gate; value]
            value, gate = torch.chunk(v, 2, 0)
            v = torch.cat([gate, value], 0)
        out[n] = v.contiguous()
    out["rope.inv_freq"] = inv_freq
    return out


def main():
    os.makedirs(OUT, exist_ok=True)
    sd = load_snapshot()
    cfg = MiniMaxH3Transformer3DModel.load_config(TINY)
    F = cfg["rope_freq_dim"]
    # a table that is NOT the config's (diffusers drops the file's table and recomputes it; so must h3)
    inv_freq = torch.linspace(0.5, 0.001, F, dtype=torch.float32)
    single = to_single_file(sd, inv_freq)
    path = os.path.join(OUT, "tiny_transformer.safetensors")
    save_file(single, path, metadata={"format": "pt"})
    model = MiniMaxH3Transformer3DModel.from_single_file(path, config=TINY, torch_dtype=None)
    got = model.state_dict()
    for k, v in sd.items():
        assert k in got, k
        # from_single_file loads in fp32 by default: the bf16 values widened, so compare in the stored dtype
        assert torch.equal(got[k].to(v.dtype), v) and torch.equal(got[k], v.to(got[k].dtype)), f"{k}: differs"
    print(f"{path}: {len(single)} tensors; diffusers from_single_file gives back all {len(sd)} snapshot tensors exactly")
    save_file({"model.diffusion_model." + k: v for k, v in single.items()},
              os.path.join(OUT, "tiny_transformer_prefixed.safetensors"), metadata={"format": "pt"})
    # a pruned file needs only its marker (and the key that names the model) to be told apart
    pruned = {"token_refiner.blocks.0.attn.qkv_proj.weight": single["token_refiner.blocks.0.attn.qkv_proj.weight"],
              "adaln_t_table": torch.zeros(4, 8, dtype=torch.bfloat16)}
    save_file(pruned, os.path.join(OUT, "pruned.safetensors"), metadata={"format": "pt"})


if __name__ == "__main__":
    main()
