#!/usr/bin/env python3
"""End-to-end goldens: diffusers' MiniMax-H3 modular pipeline (MiniMaxH3Blocks, diffusers 0.42.1,
modular_pipelines/minimax_h3) run on the tiny snapshot tests/fixtures/tiny, CPU, fp32, for t2va,
fl2va (first + last keyframe; at 256x256 and, as fl2va_small, at 96x64) and ref2va (an image reference + an
audio reference).

The whole request goes through the public pipeline exactly as a user calls it:
    pipe(prompt=..., height=, width=, num_frames=, num_inference_steps=N + 1,
         generator=torch.Generator().manual_seed(seed), output_type="pt",
         [image=, last_image=] | [references=[MiniMaxH3ImageReference, MiniMaxH3AudioReference]])
with every component loaded from the snapshot in fp32 (the DiT's bf16 weights upcast, as
`h3 generate --precision fp32` does).

What is recorded (names as the probe contract, docs/probe.md, `--dump-latents`):
  video_latents f32 [1,24,F,h,w]  the state's `latents` after MiniMaxH3AfterDenoiseStep (normalized;
                                  the decode step reads but never rewrites them)
  audio_latents f32 [2,32,A]      the state's `audio_latents` likewise
  frames        f32 [k,H',W',3]   decoded frames in [0, 1] before any 8-bit quantization: the
                                  pipeline's output_type="pt" video (VideoDecodeStep's
                                  (x * pixel_std + pixel_mean).clamp(0, 1); postprocess_video with
                                  do_normalize=False leaves "pt" untouched), permuted to HWC,
                                  reduced to frames[frames_index][:, ::step, ::step] (see below)
  frames_index  i64 [k]           which of the T decoded frames `frames` holds
  frames_pixel_step i64 [2]       (step, step): the row and column stride of `frames`
  audio         f32 [2,N]         the pipeline's `audio` (1,2,N) waveform, all of it
The fixture budget (2 MB for all cases) cannot hold 124 full frames per case in f32, so `frames`
keeps every 13th frame plus the last one (13 is odd, so the kept frames visit every phase of the
(1,4,4,4,4) latent pattern and every 17-frame decoder chunk) and, for the 256x256 fl2va canvas,
every 8th row and column (fl2va_small: every 31st frame plus the last, every 2nd row and column); the
test gathers the same samples from h3's full dump. The latents and the waveform are stored whole.

Inputs written next to the goldens (deterministic, small): fl2va_first.png (80x40, stretched onto
the canvas), fl2va_last.png (48x32, cover-cropped), fl2va_small_first.png (120x80, Lanczos-resized onto
the 96x64 canvas), fl2va_small_last.png (96x64, taken as it is), ref2va_image.png (32x32, encoded at its
2048-px short edge), ref2va_audio.wav (2.0 s, 16-bit mono 32 kHz). The WAV is decoded here exactly as
PyAV/FFmpeg decode s16 (x / 32768) since PyAV is not installed; the image through diffusers'
load_image (MiniMaxH3ImageReference.from_file).

Writes tests/fixtures/golden/e2e/<task>.out.safetensors and <task>.json (the settings, and the
`h3 generate` arguments that reproduce them, which tests/test_e2e.c runs).
Run: nice python3 tools/reference/gen_e2e.py [--debug DIR] [--only t2va,...]
  --debug DIR  also writes DIR/<case>.debug.safetensors: prompt embeddings, token tags, the prepared
               keyframes (condition.<i>.pixels, uint8 HWC), the image processor's pixel_values and
               image_grid_thw, condition latents, the packed rows / timesteps / velocities of every
               transformer call.
"""
import argparse
import json
import os
import re
import sys
import wave

import numpy as np
import PIL
import torch
from PIL import Image
from safetensors.torch import save_file

import diffusers
import transformers
from diffusers import (AutoencoderKLMiniMaxH3, AutoencoderKLMiniMaxH3Audio, MiniMaxH3Blocks,
                       MiniMaxH3ModularPipeline, MiniMaxH3Scheduler, MiniMaxH3Transformer3DModel)
from diffusers.modular_pipelines.minimax_h3 import MiniMaxH3AudioReference, MiniMaxH3ImageReference
from transformers import AutoImageProcessor, AutoTokenizer, Qwen3VLForConditionalGeneration, Qwen3VLProcessor

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TINY = os.path.join(ROOT, "tests", "fixtures", "tiny")
OUT = os.path.join(ROOT, "tests", "fixtures", "golden", "e2e")
REL_OUT = "tests/fixtures/golden/e2e"

COMMON = dict(num_frames=124, evaluations=4)
# Per case: canvas, and which decoded frames the golden keeps (every `frame_stride`-th frame plus the
# last; every `pixel_step`-th row and column). fl2va uses 256x256 so its keyframes reach Qwen3-VL
# without a processor resize (h3 reproduces that bicubic resize too; tests/test_vision.c covers it).
# fl2va_small is the small-canvas fl2va: its first keyframe is resized onto the 96x64 canvas (Lanczos),
# its last is at the canvas size, and the processor upscales both to 320x224 (bicubic) for Qwen3-VL.
# `task` names the request kind when it differs from the case name; `first`/`last` are the keyframes'
# (width, height) and pattern seeds.
CASES = {
    "t2va": dict(seed=20260, height=32, width=64, frame_stride=13, pixel_step=1,
                 prompt="A red fox trots across fresh snow at dawn; wind hisses through the pines."),
    "fl2va": dict(seed=77, height=256, width=256, frame_stride=13, pixel_step=8,
                  prompt="The lantern flickers, then the room fades to blue as rain starts outside.",
                  first=(80, 40, 1), last=(48, 32, 2)),
    "fl2va_small": dict(task="fl2va", seed=77, height=64, width=96, frame_stride=31, pixel_step=2,
                        prompt="The lantern flickers, then the room fades to blue as rain starts outside.",
                        first=(120, 80, 5), last=(96, 64, 6)),
    # fl2va_jpeg: fl2va_small's request with its keyframes saved as JPEG (q90, 4:2:0), the form users' keyframes
    # mostly have: h3 decodes them with libjpeg as PIL does (docs/media.md)
    "fl2va_jpeg": dict(task="fl2va", seed=77, height=64, width=96, frame_stride=31, pixel_step=2, ext="jpg",
                       prompt="The lantern flickers, then the room fades to blue as rain starts outside.",
                       first=(120, 80, 5), last=(96, 64, 6)),
    "ref2va": dict(seed=31337, height=32, width=64, frame_stride=13, pixel_step=1,
                   prompt="<Picture 1> sings along with <Audio 1> on a small stage, warm spotlight."),
}


# ---------------------------------------------------------------------------------------------------
# deterministic input media

def write_png(path, rgb):
    Image.fromarray(rgb, "RGB").save(path + ".tmp.png", optimize=True)
    os.replace(path + ".tmp.png", path)


def write_jpeg(path, rgb):
    Image.fromarray(rgb, "RGB").save(path + ".tmp.jpg", quality=90, subsampling=2)
    os.replace(path + ".tmp.jpg", path)


def keyframe(name, which):
    return f"{name}_{which}.{CASES[name].get('ext', 'png')}"


def pattern_image(width, height, seed):
    """Smooth colour ramps plus a few hard edges and a little noise: content that survives the
    Lanczos resizes and the VAE with distinct values everywhere."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    r = 128 + 100 * np.sin(x / width * 2 * np.pi + seed)
    g = 128 + 100 * np.cos(y / height * 3 * np.pi - seed)
    b = np.where((x // 8 + y // 8) % 2 == 0, 200.0, 40.0)
    img = np.stack([r, g, b], -1) + rng.normal(0, 12, (height, width, 3))
    return np.clip(np.round(img), 0, 255).astype(np.uint8)


def write_wav_s16(path, samples):
    """samples: int16 [channels, n] -> interleaved 16-bit PCM WAV at 32 kHz."""
    with wave.open(path + ".tmp", "wb") as w:
        w.setnchannels(samples.shape[0])
        w.setsampwidth(2)
        w.setframerate(32000)
        w.writeframes(np.ascontiguousarray(samples.T).astype("<i2").tobytes())
    os.replace(path + ".tmp", path)


def read_wav_s16(path):
    """As FFmpeg's pcm_s16le decoder + a planar-float conversion (PyAV AudioResampler fltp): x / 32768."""
    with wave.open(path, "rb") as w:
        assert w.getsampwidth() == 2
        ch, rate, n = w.getnchannels(), w.getframerate(), w.getnframes()
        data = np.frombuffer(w.readframes(n), dtype="<i2").reshape(n, ch).T
    return torch.from_numpy(data.astype(np.float32) / 32768.0), rate


def make_inputs():
    os.makedirs(OUT, exist_ok=True)
    for name, case in CASES.items():
        for which in ("first", "last"):
            if which in case:
                w, h, seed = case[which]
                if case.get("ext", "png") == "jpg":
                    write_jpeg(os.path.join(OUT, f"{name}_{which}.jpg"), pattern_image(w, h, seed))
                else:
                    write_png(os.path.join(OUT, f"{name}_{which}.png"), pattern_image(w, h, seed))
    # Square, so its 2048-px short edge gives the smallest reference (2048x2048: 4096 DiT rows).
    write_png(os.path.join(OUT, "ref2va_image.png"), pattern_image(32, 32, 3))
    # 2.0 s (h3's minimum reference clip, docs/model/features.md 1.3) of a two-tone chord with a slow chirp and
    # a little noise, mono 16-bit: both implementations duplicate mono onto the two channels.
    n = 64000
    t = np.arange(n) / 32000.0
    rng = np.random.default_rng(4)
    mono = (0.35 * np.sin(2 * np.pi * 440 * t) + 0.2 * np.sin(2 * np.pi * (200 + 300 * t) * t)
            + rng.normal(0, 0.02, n))
    pcm = np.clip(np.round(mono * 32767), -32768, 32767).astype(np.int16)
    write_wav_s16(os.path.join(OUT, "ref2va_audio.wav"), pcm[None])


# ---------------------------------------------------------------------------------------------------
# the pipeline

def load_pipeline():
    dt = torch.float32
    tok = AutoTokenizer.from_pretrained(os.path.join(TINY, "tokenizer"))
    pdir = os.path.join(TINY, "processor")
    # Qwen3-VL's video processor needs torchvision, which is not installed; no case here has a video
    # reference (the only user of processor.video_processor), so the processor is built without one.
    check = Qwen3VLProcessor.check_argument_for_proper_class
    Qwen3VLProcessor.check_argument_for_proper_class = lambda self, name, arg: (
        type(arg) if arg is None else check(self, name, arg))
    try:
        proc = Qwen3VLProcessor(image_processor=AutoImageProcessor.from_pretrained(pdir), tokenizer=tok,
                                video_processor=None)
    finally:
        Qwen3VLProcessor.check_argument_for_proper_class = check
    te = Qwen3VLForConditionalGeneration.from_pretrained(os.path.join(TINY, "text_encoder"), dtype=dt).eval()
    comps = dict(
        tokenizer=tok, processor=proc, text_encoder=te,
        transformer=MiniMaxH3Transformer3DModel.from_pretrained(os.path.join(TINY, "transformer"),
                                                                torch_dtype=dt).eval(),
        transformer_ref=MiniMaxH3Transformer3DModel.from_pretrained(os.path.join(TINY, "transformer_ref"),
                                                                    torch_dtype=dt).eval(),
        vae=AutoencoderKLMiniMaxH3.from_pretrained(os.path.join(TINY, "vae"), torch_dtype=dt).eval(),
        audio_vae=AutoencoderKLMiniMaxH3Audio.from_pretrained(os.path.join(TINY, "audio_vae"), torch_dtype=dt).eval(),
        scheduler=MiniMaxH3Scheduler.from_pretrained(os.path.join(TINY, "scheduler")),
        audio_scheduler=MiniMaxH3Scheduler.from_pretrained(os.path.join(TINY, "audio_scheduler")),
    )
    for name in ("transformer", "transformer_ref", "vae", "audio_vae", "text_encoder"):
        for p in comps[name].parameters():
            assert p.dtype == torch.float32, (name, p.dtype)
    pipe = MiniMaxH3ModularPipeline(blocks=MiniMaxH3Blocks())
    pipe.update_components(**comps)
    return pipe


class CallLog:
    """Records every transformer call's packed inputs and outputs (for --debug)."""

    def __init__(self, models):
        self.calls = []
        self.handles = [m.register_forward_hook(self.hook, with_kwargs=True) for m in models]

    def hook(self, module, args, kwargs, output):
        rec = {k: v.detach().clone() for k, v in kwargs.items() if torch.is_tensor(v)}
        out = output if isinstance(output, (tuple, list)) else (output.sample, output.audio_sample)
        rec["out_sample"], rec["out_audio_sample"] = out[0].detach().clone(), out[1].detach().clone()
        self.calls.append(rec)

    def remove(self):
        for h in self.handles:
            h.remove()


def task_of(name):
    return CASES[name].get("task", name)


def h3_args(name, case):
    """The `h3 generate` arguments of the same request (paths relative to the repository root)."""
    args = ["-d", "tests/fixtures/tiny", "-p", case["prompt"], "--seed", str(case["seed"]),
            "--width", str(case["width"]), "--height", str(case["height"]),
            "--frames", str(COMMON["num_frames"]), "--steps", str(COMMON["evaluations"]), "--precision", "fp32"]
    if case["width"] == 256 and case["height"] == 256:  # h3 halves the spatial RoPE there (docs/model/features.md 5.7)
        args += ["--use-reference-rope"]
    task = task_of(name)
    if task == "fl2va":
        args += ["--first-frame", f"{REL_OUT}/{keyframe(name, 'first')}", "--last-frame", f"{REL_OUT}/{keyframe(name, 'last')}"]
    elif task == "ref2va":
        args += ["--ref-image", f"{REL_OUT}/ref2va_image.png", "--ref-audio", f"{REL_OUT}/ref2va_audio.wav"]
    return args


def run_case(pipe, name, debug_dir):
    case, task = CASES[name], task_of(name)
    kwargs = dict(prompt=case["prompt"], height=case["height"], width=case["width"],
                  num_frames=COMMON["num_frames"], num_inference_steps=COMMON["evaluations"] + 1,
                  generator=torch.Generator().manual_seed(case["seed"]), output_type="pt")
    if task == "fl2va":
        kwargs["image"] = Image.open(os.path.join(OUT, keyframe(name, "first"))).convert("RGB")
        kwargs["last_image"] = Image.open(os.path.join(OUT, keyframe(name, "last"))).convert("RGB")
    elif task == "ref2va":
        wav, rate = read_wav_s16(os.path.join(OUT, "ref2va_audio.wav"))
        kwargs["references"] = [MiniMaxH3ImageReference.from_file(os.path.join(OUT, "ref2va_image.png")),
                                MiniMaxH3AudioReference(audio=wav, sample_rate=rate)]
    log = CallLog([pipe.transformer, pipe.transformer_ref])
    vision_in = []  # --debug: the image processor's outputs (what reaches the vision tower)
    improc = pipe.processor.image_processor
    if debug_dir:
        improc.preprocess = lambda *a, **k: vision_in.append(type(improc).preprocess(improc, *a, **k)) or vision_in[-1]
    try:
        with torch.no_grad():
            state = pipe(**kwargs)
    finally:
        log.remove()
        improc.__dict__.pop("preprocess", None)
    assert len(log.calls) == COMMON["evaluations"], len(log.calls)

    video_latents = state.get("latents").float().contiguous()
    audio_latents = state.get("audio_latents").float().contiguous()
    videos = state.get("videos")  # "pt": (1, T, 3, H, W) in [0, 1]
    frames_all = videos[0].permute(0, 2, 3, 1).float().contiguous()
    audio = state.get("audio")[0].float().contiguous()  # (2, N)
    T = frames_all.shape[0]
    index = list(range(0, T, case["frame_stride"]))
    if index[-1] != T - 1:
        index.append(T - 1)
    step = case["pixel_step"]
    out = {
        "video_latents": video_latents,
        "audio_latents": audio_latents,
        "frames": frames_all[index][:, ::step, ::step].contiguous(),
        "frames_index": torch.tensor(index, dtype=torch.int64),
        "frames_pixel_step": torch.tensor([step, step], dtype=torch.int64),
        "audio": audio,
    }
    path = os.path.join(OUT, f"{name}.out.safetensors")
    save_file(out, path + ".tmp", metadata={"task": task})
    os.chmod(path + ".tmp", 0o644)
    os.replace(path + ".tmp", path)

    settings = {
        "task": task,
        **({"case": name} if name != task else {}),
        "prompt": case["prompt"],
        "seed": case["seed"],
        "height": case["height"],
        "width": case["width"],
        "num_frames": COMMON["num_frames"],
        "num_inference_steps": COMMON["evaluations"] + 1,
        "evaluations": COMMON["evaluations"],
        "generator": "torch.Generator('cpu').manual_seed(seed)",
        "dtype": "float32 (every component; the DiT's bf16 weights upcast)",
        "output_type": "pt",
        "frames_total": T,
        "frames_index": index,
        "frames_pixel_step": [step, step],
        "shapes": {k: list(v.shape) for k, v in out.items()},
        "token_count": int(state.get("prompt_embeds").shape[1]),
        "h3_args": h3_args(name, case),
        "versions": {"torch": torch.__version__, "diffusers": diffusers.__version__,
                     "transformers": transformers.__version__, "pillow": PIL.__version__},
    }
    if task == "fl2va":
        settings["image"] = f"{REL_OUT}/{keyframe(name, 'first')}"
        settings["last_image"] = f"{REL_OUT}/{keyframe(name, 'last')}"
    if task == "ref2va":
        settings["references"] = [
            {"kind": "image", "path": f"{REL_OUT}/ref2va_image.png", "loader": "MiniMaxH3ImageReference.from_file"},
            {"kind": "audio", "path": f"{REL_OUT}/ref2va_audio.wav",
             "loader": "MiniMaxH3AudioReference(audio=s16 / 32768 [channels, n], sample_rate=32000)"},
        ]
    text = json.dumps(settings, indent=1)
    text = re.sub(r"\[\s*([-0-9.,\s]+?)\s*\]", lambda m: "[" + ", ".join(m.group(1).split()).replace(",,", ",") + "]", text)
    with open(os.path.join(OUT, f"{name}.json.tmp"), "w") as f:
        f.write(text + "\n")
    os.replace(os.path.join(OUT, f"{name}.json.tmp"), os.path.join(OUT, f"{name}.json"))

    if debug_dir:
        dbg = {"prompt_embeds": state.get("prompt_embeds").float(),
               "text_token_tags": state.get("text_token_tags").to(torch.int64),
               "frames_all": frames_all}
        for i, im in enumerate(state.get("keyframes") or []):  # as h3's dump names them
            dbg[f"condition.{i}.pixels"] = torch.from_numpy(np.array(im, dtype=np.uint8))
        for i, v in enumerate(vision_in):
            dbg[f"image_pixel_values_{i}"] = v["pixel_values"].float()
            dbg[f"image_grid_thw_{i}"] = v["image_grid_thw"].to(torch.int64)
        for i, c in enumerate(state.get("condition_latents") or []):
            dbg[f"condition_latents_{i}"] = c.float()
        for i, c in enumerate(state.get("audio_condition_latents") or []):
            dbg[f"audio_condition_latents_{i}"] = c.float()
        for i, rec in enumerate(log.calls):
            for k in ("hidden_states", "audio_hidden_states", "timestep", "timestep_indices", "out_sample",
                      "out_audio_sample"):
                if k in rec:
                    dbg[f"step{i}_{k}"] = rec[k]
        if log.calls:
            for k in ("position_ids", "token_tags", "video_indices", "audio_indices", "text_indices"):
                if k in log.calls[0]:
                    dbg[k] = log.calls[0][k]
        os.makedirs(debug_dir, exist_ok=True)
        save_file({k: v.contiguous() for k, v in dbg.items()}, os.path.join(debug_dir, f"{name}.debug.safetensors"))

    print(f"{name}: T={T} tokens={settings['token_count']} "
          + " ".join(f"{k}{tuple(v.shape)}" for k, v in out.items()), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--debug", default=None)
    ap.add_argument("--only", default=",".join(CASES))
    a = ap.parse_args()
    torch.set_num_threads(2)
    print("torch", torch.__version__, "diffusers", diffusers.__version__, "transformers", transformers.__version__)
    make_inputs()
    pipe = load_pipeline()
    for task in a.only.split(","):
        run_case(pipe, task, a.debug)


if __name__ == "__main__":
    sys.exit(main())
