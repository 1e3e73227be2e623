#!/usr/bin/env python3
"""Tiny random-weight Qwen3-VL conditioner in the release layout, plus golden IN/OUT files.

Writes (relative to the repo root):
  tests/fixtures/tiny/text_encoder/   config.json (v4-style, like the release), sharded bf16 safetensors,
                                      model.safetensors.index.json
  tests/fixtures/tiny/tokenizer       -> ../skeleton/tokenizer (relative symlink)
  tests/fixtures/tiny/processor/      copies of the skeleton processor configs
  tests/fixtures/golden/text_encoder/ goldens (see docs/text_encoder.md)

Reference: transformers Qwen3VLForConditionalGeneration (eager attention) and the diffusers 0.42.1
modular_pipelines/minimax_h3 helpers for the presentation. Deterministic (fixed seeds), CPU only.
The Qwen3-VL video processor needs torchvision; put it on PYTHONPATH if the environment lacks it.

Spec: docs/model/text_encoder.md section 8, with text hidden_size 16 (= the tiny DiT's text_dim)
and 51 LM layers so hidden_states[50] is the raw output of layer index 49 (as in the release).
"""
import json
import os
import shutil
import sys
from types import SimpleNamespace

import numpy as np
import torch
from safetensors.torch import save_file

import transformers
from transformers import (AutoImageProcessor, AutoTokenizer, AutoVideoProcessor, Qwen3VLConfig,
                          Qwen3VLForConditionalGeneration, Qwen3VLProcessor)
import diffusers
from diffusers.modular_pipelines.minimax_h3.encoders import (MiniMaxH3Ref2VATextEncoderStep,
                                                             get_qwen3vl_prompt_embeds)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SKELETON = os.path.join(ROOT, "tests/fixtures/skeleton")
TINY = os.path.join(ROOT, "tests/fixtures/tiny")
TE_DIR = os.path.join(TINY, "text_encoder")
GOLDEN = os.path.join(ROOT, "tests/fixtures/golden/text_encoder")
LAYER = 50  # hidden_states[50], as diffusers' text_encoder_layer

# v4-style config, as the release writes it (rope_theta + rope_scaling).
CONFIG = {
    "architectures": ["Qwen3VLForConditionalGeneration"],
    "model_type": "qwen3_vl",
    "image_token_id": 151655,
    "video_token_id": 151656,
    "vision_start_token_id": 151652,
    "vision_end_token_id": 151653,
    "tie_word_embeddings": False,
    "text_config": {
        "model_type": "qwen3_vl_text",
        "vocab_size": 151936,
        "hidden_size": 16,
        "intermediate_size": 48,
        "num_hidden_layers": 51,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 32,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-06,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "max_position_embeddings": 4096,
        "rope_theta": 5000000,
        "rope_scaling": {"rope_type": "default", "mrope_section": [6, 5, 5], "mrope_interleaved": True},
        "dtype": "bfloat16",
    },
    "vision_config": {
        "model_type": "qwen3_vl",
        "depth": 6,
        "hidden_size": 32,
        "intermediate_size": 48,
        "num_heads": 2,
        "hidden_act": "gelu_pytorch_tanh",
        "in_channels": 3,
        "patch_size": 16,
        "temporal_patch_size": 2,
        "spatial_merge_size": 2,
        "out_hidden_size": 16,
        "num_position_embeddings": 16,
        "deepstack_visual_indexes": [1, 3, 4],
    },
    "transformers_version": "4.57.0.dev0",
}


def randomize(model):
    """Spec section 8: every parameter, values that are not tiny."""
    g = torch.Generator().manual_seed(1234)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if name.endswith("embed_tokens.weight"):
                v = torch.randn(p.shape, generator=g)
            elif name.endswith("pos_embed.weight"):
                v = torch.randn(p.shape, generator=g) * 0.5
            elif "norm" in name and name.endswith(".weight"):
                v = 1 + torch.randn(p.shape, generator=g) * 0.1
            elif name.endswith(".bias"):
                v = torch.randn(p.shape, generator=g) * 0.1
            else:  # weight matrices and the conv kernel: N(0, 1/fan_in)
                fan_in = int(np.prod(p.shape[1:]))
                v = torch.randn(p.shape, generator=g) / np.sqrt(fan_in)
            p.copy_(v)


def shard_and_save(model):
    """Release layout: model-0000i-of-0000n.safetensors + index, bf16, tensors in name order, a layer
    straddling two shards (the release's shard 1 ends inside layer 3)."""
    if os.path.isdir(TE_DIR):
        shutil.rmtree(TE_DIR)
    os.makedirs(TE_DIR)
    sd = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()}
    names = sorted(sd)
    # shard 1: embeddings + layers up to the middle of layer 3; shard 3: lm_head, norm, visual; rest in 2
    def shard_of(n):
        if n.startswith("model.language_model.embed_tokens"):
            return 0
        if n.startswith("model.language_model.layers."):
            i = int(n.split(".")[3])
            if i < 3 or (i == 3 and "self_attn" in n):
                return 0
            return 1
        return 2
    shards = [{}, {}, {}]
    for n in names:
        shards[shard_of(n)][n] = sd[n]
    total = sum(v.numel() * v.element_size() for v in sd.values())
    weight_map = {}
    for i, s in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(s, os.path.join(TE_DIR, fname), metadata={"format": "pt"})
        for n in s:
            weight_map[n] = fname
    with open(os.path.join(TE_DIR, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
    with open(os.path.join(TE_DIR, "config.json"), "w") as f:
        json.dump(CONFIG, f, indent=2)
    return len(names)


def setup_tokenizer_and_processor():
    link = os.path.join(TINY, "tokenizer")
    if os.path.islink(link) or os.path.exists(link):
        if os.path.islink(link):
            os.unlink(link)
        else:
            shutil.rmtree(link)
    os.symlink("../skeleton/tokenizer", link)
    pdir = os.path.join(TINY, "processor")
    os.makedirs(pdir, exist_ok=True)
    for fn in os.listdir(os.path.join(SKELETON, "processor")):
        shutil.copyfile(os.path.join(SKELETON, "processor", fn), os.path.join(pdir, fn))
    tok = AutoTokenizer.from_pretrained(link)
    ip = AutoImageProcessor.from_pretrained(pdir)
    vp = AutoVideoProcessor.from_pretrained(pdir)
    proc = Qwen3VLProcessor(image_processor=ip, tokenizer=tok, video_processor=vp)
    return tok, proc


def f32(t):
    return t.detach().to(torch.float32).contiguous()


def save(name, tensors):
    os.makedirs(GOLDEN, exist_ok=True)
    save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(GOLDEN, name))


def hidden(model, ids, vision=None, mm=None):
    kw = dict(vision or {})
    if mm is not None:
        kw["mm_token_type_ids"] = mm
    out = model.model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False,
                      output_hidden_states=True, **kw)
    hs = out.hidden_states
    assert len(hs) == model.config.text_config.num_hidden_layers + 1
    return hs


def text_cases(models, tok):
    prompts = {
        "fox": "A red fox walking through snow",
        "dialog": "(S1) says, <d>[English] Hey! Watch your dog!</d> She",
    }
    for case, prompt in prompts.items():
        ids = torch.tensor([tok(prompt, add_special_tokens=False)["input_ids"]], dtype=torch.long)
        save(f"text_encode_{case}.in.safetensors", {"input_ids": ids})
        for prec, m in models.items():
            hs = hidden(m, ids)
            save(f"text_encode_{case}.{prec}.out.safetensors", {"hidden_states": f32(hs[LAYER])})
        print(f"text_encode_{case}: L={ids.shape[1]}")


def vision_case(models):
    """Hand-built pixel_values: grids that resample the 4x4 position table exactly (4x4), down (2x4,
    2x2) and a two-block video grid (2,2,4), in one call (attention stays within blocks)."""
    g = torch.Generator().manual_seed(7)
    grid = torch.tensor([[1, 4, 4], [1, 2, 4], [1, 2, 2], [2, 2, 4]], dtype=torch.long)
    n = int(grid.prod(-1).sum())
    pv = torch.rand((n, 1536), generator=g) * 2 - 1
    save("vision.in.safetensors", {"pixel_values": pv, "grid_thw": grid})
    for prec, m in models.items():
        out = m.model.get_image_features(pv.to(m.dtype), grid)
        merged = torch.cat(out.pooler_output, 0)
        deep = torch.stack([torch.cat(d, 0) for d in out.deepstack_features], 0)
        save(f"vision.{prec}.out.safetensors", {"image_embeds": f32(merged), "deepstack_features": f32(deep)})
    print(f"vision: patches {n}, tokens {merged.shape[0]}")


def segments_of(tok, texts):
    return {t: tok(t, add_special_tokens=False)["input_ids"] for t in texts}


def fl2va_case(models, tok, proc):
    """diffusers MiniMaxH3FL2VATextEncoderStep.__call__, step by step (it has no standalone helper)."""
    rng = np.random.default_rng(11)
    keyframes = [rng.integers(0, 256, (256, 320, 3), dtype=np.uint8),
                 rng.integers(0, 256, (320, 256, 3), dtype=np.uint8)]
    prompt = "A red fox walking through snow"
    vision = proc.image_processor(images=keyframes, return_tensors="pt")
    grid = vision["image_grid_thw"]
    vision_inputs = {"pixel_values": vision["pixel_values"], "image_grid_thw": grid}
    merge = proc.image_processor.merge_size ** 2
    ids, tags, texts = [], [], []
    for i in range(len(keyframes)):
        n = int(grid[i].prod()) // merge
        label = f"<Picture {i + 1}>: "
        texts.append(label)
        lab = tok(label, add_special_tokens=False)["input_ids"]
        vis = ([tok.convert_tokens_to_ids("<|vision_start|>")] + [tok.convert_tokens_to_ids("<|image_pad|>")] * n
               + [tok.convert_tokens_to_ids("<|vision_end|>")])
        ids += lab + vis
        tags += [1] * len(lab) + [0] * len(vis)
    texts.append(prompt)
    p = tok(prompt, add_special_tokens=False)["input_ids"]
    ids += p
    tags += [1] * len(p)
    dump_presentation("fl2va", models, proc, ids, tags, vision_inputs,
                      {"image_0": torch.from_numpy(keyframes[0]), "image_1": torch.from_numpy(keyframes[1])},
                      {"prompt": prompt, "kinds": ["image", "image"], "has_audio": [False, False],
                       "segments": segments_of(tok, texts)})


def ref2va_case(models, tok, proc):
    """diffusers MiniMaxH3Ref2VATextEncoderStep: _gather_vision_features + _build_presentation."""
    rng = np.random.default_rng(12)
    step = MiniMaxH3Ref2VATextEncoderStep()
    image = rng.integers(0, 256, (256, 256, 3), dtype=np.uint8)
    # A 49-frame 24 fps reference at 64x64: samples 0,12,24,36,48 -> 3 blocks, the last duplicated.
    # (The video processor's budget is the whole clip: 4 x 64 x 64 >= 4096, so no resize.)
    frames = rng.integers(0, 256, (49, 64, 64, 3), dtype=np.uint8)
    refs = [SimpleNamespace(kind="image", has_audio=False, image=image),
            SimpleNamespace(kind="video", has_audio=True, frames=frames),
            SimpleNamespace(kind="audio", has_audio=True)]
    prompt = "The fox from <Picture 1> runs, <d>[English] Hi!</d>"
    vision_inputs, img_counts, vid_counts, vid_ts = step._gather_vision_features(proc, refs, 24.0)
    ids, tags = step._build_presentation(tok, prompt, refs, img_counts, vid_counts, vid_ts)
    sampled, ts = step._sample_video_condition_frames(frames, 24.0, 2.0, 2)
    idx = [int(np.argmax([np.array_equal(s, f) for f in frames])) for s in sampled]
    texts = ["<Audio 1>: ", "<Audio 2>: ", "<Picture 1>: ", "<Video 1>: "] + [f"<{t:.1f} seconds>" for t in ts] + [prompt]
    extra = {"image_0": torch.from_numpy(image), "video_0": torch.from_numpy(np.stack(sampled))}
    dump_presentation("ref2va", models, proc, ids, tags, vision_inputs, extra,
                      {"prompt": prompt, "kinds": ["image", "video", "audio"], "has_audio": [False, True, True],
                       "video_frames": 49, "video_fps": 24.0, "sample_indices": idx, "block_timestamps": ts,
                       "segments": segments_of(tok, texts)})


def dump_presentation(case, models, proc, ids, tags, vision_inputs, media, meta):
    ids_t = torch.tensor([ids], dtype=torch.long)
    mm = torch.tensor(proc.create_mm_token_type_ids([ids]), dtype=torch.long)
    m32 = models["fp32"]
    pos, _ = m32.model.get_rope_index(ids_t, mm, image_grid_thw=vision_inputs.get("image_grid_thw"),
                                      video_grid_thw=vision_inputs.get("video_grid_thw"))
    ins = {"input_ids": ids_t}
    ins.update({k: (v if k.endswith("grid_thw") else f32(v)) for k, v in vision_inputs.items()})
    # Pixel values are big; keep them only for the small video. Images are re-made from the uint8 media.
    ins.pop("pixel_values", None)
    ins.update(media)
    save(f"{case}.in.safetensors", ins)
    outs = {"input_ids": ids_t[0], "token_tags": torch.tensor(tags, dtype=torch.long), "position_ids": pos[:, 0, :]}
    for prec, m in models.items():
        hs = get_qwen3vl_prompt_embeds(m, proc, ids, vision_inputs, text_encoder_layer=LAYER, dtype=torch.float32)
        outs[f"hidden_states_{prec}"] = f32(hs)
        # hidden_states[2] (excludes layer 1's own deepstack add) and [4] (after all three adds)
        for k in (2, 4):
            hs = get_qwen3vl_prompt_embeds(m, proc, ids, vision_inputs, text_encoder_layer=k, dtype=torch.float32)
            outs[f"hidden_states_{k}_{prec}"] = f32(hs)
    if "pixel_values" in vision_inputs:
        o = m32.model.get_image_features(vision_inputs["pixel_values"], vision_inputs["image_grid_thw"])
        outs["image_embeds"] = f32(torch.cat(o.pooler_output, 0))
        outs["image_deepstack"] = f32(torch.stack([torch.cat(d, 0) for d in o.deepstack_features], 0))
        outs["image_pixel_checksum"] = f32(vision_inputs["pixel_values"]).sum(0)  # per-column sums
    if "pixel_values_videos" in vision_inputs:
        o = m32.model.get_video_features(vision_inputs["pixel_values_videos"], vision_inputs["video_grid_thw"])
        outs["video_embeds"] = f32(torch.cat(o.pooler_output, 0))
        outs["video_deepstack"] = f32(torch.stack([torch.cat(d, 0) for d in o.deepstack_features], 0))
    save(f"{case}.out.safetensors", outs)
    with open(os.path.join(GOLDEN, f"{case}.json"), "w") as f:
        json.dump(meta, f, indent=1, ensure_ascii=False)
    print(f"{case}: L={len(ids)}, grids {[(k, v.tolist()) for k, v in vision_inputs.items() if 'grid' in k]}")


def sampling_cases(step_cls=MiniMaxH3Ref2VATextEncoderStep):
    """Frame sampling + block timestamps for several clip lengths (no pixels needed)."""
    cases = []
    for n_frames, fps in [(13, 24.0), (24, 24.0), (25, 24.0), (49, 24.0), (120, 24.0), (61, 24.0), (30, 30.0)]:
        frames = np.arange(n_frames, dtype=np.int64).reshape(n_frames, 1, 1, 1)
        s, ts = step_cls._sample_video_condition_frames(frames, fps, 2.0, 2)
        cases.append({"frames": n_frames, "fps": fps, "indices": [int(x[0, 0, 0]) for x in s],
                      "block_timestamps": ts, "labels": [f"<{t:.1f} seconds>" for t in ts]})
    for n_frames in (1, 12):  # too short: diffusers raises
        try:
            step_cls._sample_video_condition_frames(np.zeros((n_frames, 1, 1, 1)), 24.0, 2.0, 2)
            cases.append({"frames": n_frames, "fps": 24.0, "error": False})
        except ValueError:
            cases.append({"frames": n_frames, "fps": 24.0, "error": True})
    with open(os.path.join(GOLDEN, "video_sampling.json"), "w") as f:
        json.dump(cases, f, indent=1)


def smart_resize_cases():
    """transformers' image (Qwen2-VL) and video (Qwen3-VL) smart_resize with the snapshot budgets."""
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize as image_resize
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import smart_resize as video_resize
    cases = []
    for h, w in [(256, 320), (768, 1344), (192, 192), (2048, 3648), (2048, 8192), (100, 3000), (1000, 1000),
                 (4000, 6000), (33, 47), (770, 1350)]:
        cases.append({"frames": 0, "h": h, "w": w, "out": list(image_resize(h, w, 32, 65536, 16777216))})
    for n, h, w in [(5, 64, 64), (10, 768, 1344), (29, 768, 1344), (2, 16, 16), (4, 20, 100), (3, 256, 256),
                    (60, 2048, 2048)]:
        cases.append({"frames": n, "h": h, "w": w, "out": list(video_resize(n, h, w, 2, 32, 4096, 25165824))})
    with open(os.path.join(GOLDEN, "smart_resize.json"), "w") as f:
        json.dump(cases, f, indent=1)


def main():
    torch.set_num_threads(2)
    print("transformers", transformers.__version__, "diffusers", diffusers.__version__, "torch", torch.__version__)
    cfg = Qwen3VLConfig(**{k: v for k, v in CONFIG.items() if k not in ("architectures", "transformers_version")})
    model = Qwen3VLForConditionalGeneration(cfg)
    randomize(model)
    n = shard_and_save(model)
    print("tensors", n, "bytes", sum(os.path.getsize(os.path.join(TE_DIR, f)) for f in os.listdir(TE_DIR)))
    del model
    tok, proc = setup_tokenizer_and_processor()
    models = {}
    for prec, dt in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        m = Qwen3VLForConditionalGeneration.from_pretrained(TE_DIR, dtype=dt, attn_implementation="eager")
        m.eval()
        models[prec] = m
    assert models["fp32"].config.text_config.rope_parameters["rope_theta"] == 5000000
    os.makedirs(GOLDEN, exist_ok=True)
    with torch.no_grad():
        text_cases(models, tok)
        vision_case(models)
        fl2va_case(models, tok, proc)
        ref2va_case(models, tok, proc)
    sampling_cases()
    smart_resize_cases()
    for d in (GOLDEN, TE_DIR):  # safetensors writes 0600; fixtures are plain files
        for fn in os.listdir(d):
            os.chmod(os.path.join(d, fn), 0o644)


if __name__ == "__main__":
    sys.exit(main())
