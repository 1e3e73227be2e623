"""Goldens for src/media/resize.c and src/pipeline/condition.c (tests/test_condition.c).

Everything is computed by the official code: Pillow's Image.resize for the resampler, and the
diffusers 0.42.1 minimax_h3 blocks themselves (MiniMaxH3ResizeStep, MiniMaxH3Ref2VASetupStep,
encode_vae_condition, MiniMaxH3Ref2VAReferenceEncoderStep) run on a stub `components` object that
carries the released constants, with the tiny VAEs of tests/fixtures/tiny.

  nice python3 tools/reference/gen_condition.py   (from the repository root; about a minute on CPU)

Writes tests/fixtures/golden/condition/{resize,keyframes,references,encode}.safetensors.
"""
import os
from types import SimpleNamespace

import numpy as np
import torch
from PIL import Image
from safetensors.numpy import save_file

from diffusers import AutoencoderKLMiniMaxH3, AutoencoderKLMiniMaxH3Audio
from diffusers.image_processor import VaeImageProcessor
from diffusers.modular_pipelines.minimax_h3.before_encoder import MiniMaxH3Ref2VASetupStep, MiniMaxH3ResizeStep
from diffusers.modular_pipelines.minimax_h3.encoders import MiniMaxH3Ref2VAReferenceEncoderStep, encode_vae_condition
from diffusers.modular_pipelines.minimax_h3.references import (
    MiniMaxH3AudioReference,
    MiniMaxH3ImageReference,
    MiniMaxH3VideoReference,
)
from diffusers.modular_pipelines.modular_pipeline import PipelineState

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
OUT = os.path.join(ROOT, "tests", "fixtures", "golden", "condition")
TINY = os.path.join(ROOT, "tests", "fixtures", "tiny")
rng = np.random.default_rng(1234)


def rand_image(w, h):
    # smooth + noisy content so both flat and sharp regions are resampled
    yy, xx = np.mgrid[0:h, 0:w]
    base = np.stack([(xx * 255 // max(w - 1, 1)), (yy * 255 // max(h - 1, 1)), ((xx + yy) * 7) % 256], -1)
    noise = rng.integers(-60, 61, (h, w, 3))
    return np.clip(base + noise, 0, 255).astype(np.uint8)


def components(**extra):
    c = SimpleNamespace(
        image_processor=VaeImageProcessor(vae_scale_factor=16),
        canvas_multiple=32,
        config=SimpleNamespace(canvas_short_edge=768, canvas_max_pixels=768 * 1344, reference_image_short_edge=2048),
        fps=24, audio_sampling_rate=32000, vae_frames_per_chunk=17, vae_latents_per_chunk=5,
        min_duration=5.0, max_duration=15.0, pixel_mean=(0.485, 0.456, 0.406), pixel_std=(0.229, 0.224, 0.225),
        keyframe_encode_seed=42, _execution_device=torch.device("cpu"), audio_latent_channels=32)
    for k, v in extra.items():
        setattr(c, k, v)
    return c


def run_block(block, comp, **inputs):
    st = PipelineState()
    for k, v in inputs.items():
        st.set(k, v)
    _, st = block(comp, st)
    return st


# ---- 1. Pillow resampling --------------------------------------------------------------------
FILTERS = {"bilinear": (0, Image.Resampling.BILINEAR), "bicubic": (1, Image.Resampling.BICUBIC),
           "lanczos": (2, Image.Resampling.LANCZOS)}
resize_cases = [  # (sw, sh, dw, dh, filter)
    (37, 23, 64, 32, "lanczos"), (61, 47, 32, 40, "lanczos"), (200, 120, 64, 64, "lanczos"),
    (50, 30, 50, 64, "lanczos"), (30, 50, 70, 50, "lanczos"), (97, 33, 13, 91, "lanczos"),
    (45, 33, 32, 96, "bicubic"), (45, 33, 100, 20, "bilinear"), (1, 1, 5, 3, "lanczos"), (640, 8, 96, 3, "lanczos"),
    (40, 60, 41, 59, "lanczos"), (40, 30, 150, 29, "lanczos"), (100, 100, 101, 10, "bicubic"), (60, 40, 59, 41, "lanczos"),
    (33, 90, 96, 64, "lanczos"), (64, 7, 64, 3, "bilinear"),
]
t = {}
for i, (sw, sh, dw, dh, f) in enumerate(resize_cases):
    src = rand_image(sw, sh)
    dst = np.asarray(Image.fromarray(src).resize((dw, dh), FILTERS[f][1]))
    t[f"case{i}.params"] = np.array([sw, sh, dw, dh, FILTERS[f][0]], dtype=np.int64)
    t[f"case{i}.src"] = src
    t[f"case{i}.dst"] = np.ascontiguousarray(dst)
save_file(t, os.path.join(OUT, "resize.safetensors"))

# ---- 2. fl2va keyframes (MiniMaxH3ResizeStep) ------------------------------------------------
keyframe_cases = [  # (first (w, h) or None, last (w, h) or None, canvas (H, W) or None)
    ((80, 50), None, (64, 96)), ((80, 50), (45, 70), (64, 96)), (None, (45, 70), (64, 96)),
    ((96, 64), (151, 85), (64, 96)), ((33, 97), None, None), ((1920, 1080), None, None), ((70, 45), (30, 90), (96, 64)),
]
t = {}
for i, (first, last, canvas) in enumerate(keyframe_cases):
    ims = {}
    for name, size in (("first", first), ("last", last)):
        if size is not None:
            ims[name] = rand_image(*size)
            if canvas:  # the default-canvas cases are checked by size only (no pixels stored)
                t[f"case{i}.{name}"] = ims[name]
            t[f"case{i}.{name}_size"] = np.array(size, dtype=np.int64)
    st = run_block(MiniMaxH3ResizeStep(), components(),
                   image=Image.fromarray(ims["first"]) if "first" in ims else None,
                   last_image=Image.fromarray(ims["last"]) if "last" in ims else None,
                   height=canvas[0] if canvas else None, width=canvas[1] if canvas else None)
    H, W = st.get("height"), st.get("width")
    t[f"case{i}.canvas"] = np.array([H, W, 1 if canvas else 0], dtype=np.int64)
    if canvas:  # the default canvases (768 short edge) are checked by size only
        for j, k in enumerate(st.get("keyframes")):
            t[f"case{i}.keyframe{j}"] = np.ascontiguousarray(np.asarray(k))
save_file(t, os.path.join(OUT, "keyframes.safetensors"))

# ---- 3. ref2va setup: image sizes, video frames -----------------------------------------------
t = {}
image_sizes = [(100, 60), (60, 100), (1920, 1080), (2048, 2048), (640, 480), (400, 101), (101, 400), (3000, 2999)]
refs = [MiniMaxH3ImageReference(image=Image.fromarray(rand_image(w, h))) for w, h in image_sizes]
st = run_block(MiniMaxH3Ref2VASetupStep(max_images=len(refs), max_references=len(refs)), components(),
               references=refs, height=None, width=None, num_frames=124)
t["image_sizes.in"] = np.array(image_sizes, dtype=np.int64)
t["image_sizes.out"] = np.array([r.image.size for r in st.get("normalized_references")], dtype=np.int64)
# A video on the 24 fps grid: truncation to the target count, canvas of its own aspect, LANCZOS per
# frame. A small canvas rule (short edge 32) keeps the fixture small; the C side takes the rule too.
video = np.stack([rand_image(40, 24) for _ in range(12)])
frames = MiniMaxH3Ref2VASetupStep._normalize_video_condition(video, 24.0, 8, 32, 32, 32 * 64, 24.0)
t["video.in"] = video
t["video.params"] = np.array([8, 32, 32 * 64], dtype=np.int64)  # num_frames, short edge, max pixels
t["video.out"] = np.ascontiguousarray(frames)
save_file(t, os.path.join(OUT, "references.safetensors"))

# ---- 4. encode_vae_condition and reference audio rows on the tiny VAEs -------------------------
vae = AutoencoderKLMiniMaxH3.from_pretrained(os.path.join(TINY, "vae")).eval()
audio_vae = AutoencoderKLMiniMaxH3Audio.from_pretrained(os.path.join(TINY, "audio_vae")).eval()
t = {}
with torch.no_grad():
    # a keyframe-like single frame wide enough for two 256-px tiles
    image = rand_image(320, 64)
    pix = torch.from_numpy(image).permute(2, 0, 1)[None, :, None]
    t["image.pixels"] = image
    t["image.latents"] = encode_vae_condition(vae, pix, (0.485, 0.456, 0.406), (0.229, 0.224, 0.225), 42).numpy()
    # the steps inside, for an exact check of the arithmetic after encode()
    x = (pix.float().div(255.0) - torch.tensor((0.485, 0.456, 0.406)).view(1, -1, 1, 1, 1)) / torch.tensor(
        (0.229, 0.224, 0.225)).view(1, -1, 1, 1, 1)
    posterior = vae.encode(x, return_dict=False)[0]
    t["image.moments"] = posterior.parameters.numpy()
    t["image.eps"] = torch.randn(posterior.mean.shape, generator=torch.Generator().manual_seed(42)).numpy()

    # the reference encoder block: an image, a 25-frame video (snapped down to 22) with a soundtrack,
    # and an audio clip, as the setup step hands them over
    ref_image = rand_image(64, 32)
    ref_video = np.stack([rand_image(64, 32) for _ in range(25)])
    sound = (torch.rand(2, 1234, generator=torch.Generator().manual_seed(7)) * 1.6 - 0.8).float()
    clip = (torch.rand(2, 777, generator=torch.Generator().manual_seed(8)) * 1.6 - 0.8).float()
    normalized = [MiniMaxH3ImageReference(image=Image.fromarray(ref_image)),
                  MiniMaxH3VideoReference(frames=ref_video, fps=24.0, audio=sound, sample_rate=32000),
                  MiniMaxH3AudioReference(audio=clip, sample_rate=32000)]
    st = run_block(MiniMaxH3Ref2VAReferenceEncoderStep(), components(vae=vae, audio_vae=audio_vae),
                   normalized_references=normalized)
    cl, al = st.get("condition_latents"), st.get("audio_condition_latents")
    t["ref_image.pixels"] = ref_image
    t["ref_image.latents"] = cl[0].numpy()
    t["ref_video.frames"] = ref_video
    t["ref_video.latents"] = cl[1].numpy()
    t["ref_video.sound"] = sound.numpy()
    t["ref_video.rows"] = al[0].numpy()
    t["ref_audio.wave"] = clip.numpy()
    t["ref_audio.rows"] = al[1].numpy()
save_file(t, os.path.join(OUT, "encode.safetensors"))
for f in sorted(os.listdir(OUT)):
    print(f, os.path.getsize(os.path.join(OUT, f)))
