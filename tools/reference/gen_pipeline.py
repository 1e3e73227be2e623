#!/usr/bin/env python3
"""Golden fixtures for the pipeline around the DiT (docs/model/dit.md sections 5-8), made with the
reference's own code: diffusers' MiniMaxH3Scheduler, the modular pipeline's layout builders and
row-timestep planner, torch.randn with a torch.Generator, and the reference pipeline's core denoise
steps (MiniMaxH3CoreDenoiseStep / FL2VACoreDenoiseStep / Ref2VACoreDenoiseStep) run on the tiny
random-weight DiT in tests/fixtures/tiny/{transformer,transformer_ref} (tools/reference/gen_dit.py).

Writes tests/fixtures/golden/pipeline/:
  sigmas.safetensors            sigmas_<N>_<k>, timesteps_<N>_<k> for many N and shifts (shift_<k> f64),
                                explicit_<j> sigma lists with explicit_ok_<j> (1 = accepted)
  sigmas_<case>.{in,out}        the `sigmas` probe op (PROBE.md)
  layout_<case>.{in,out}        the `layout` probe op (PROBE.md; ref2va cases add `references`)
  geometry.safetensors          frame alignment, latent frames, audio latents, duration rule, canvases
  plans.safetensors             row timestep plans (build_row_timesteps) for several (tv, ta)
  randn.safetensors             torch.randn for seeds x sizes, plus a sequence of draws from one generator
  noise_<case>.{in,out}         the `noise` probe op (docs/probe.md)
  bad_<case>.in                 inputs the probe ops must refuse (tests/cli/pipeline_probe.sh)
  euler.safetensors             MiniMaxH3Scheduler.step for every step of a few schedules
  denoise_<task>.{in,out}       the `denoise` probe op (docs/probe.md): 4 evaluations, fp32
  denoise_ref2va.bf16.out       the same loop with the DiT loaded in bf16 (the release's mixed precision)
Run: nice python3 tools/reference/gen_pipeline.py   (CPU, about a minute)
"""
import argparse
import os
from types import SimpleNamespace

import numpy as np
import torch
from safetensors.torch import save_file

from diffusers import MiniMaxH3Scheduler, MiniMaxH3Transformer3DModel
from diffusers.modular_pipelines.minimax_h3.before_denoise import (
    MiniMaxH3PrepareLayoutStep,
    MiniMaxH3Ref2VAPrepareLayoutStep,
    MiniMaxH3SetTimestepsStep,
)
from diffusers.modular_pipelines.minimax_h3.modular_blocks_minimax_h3 import (
    MiniMaxH3CoreDenoiseStep,
    MiniMaxH3FL2VACoreDenoiseStep,
    MiniMaxH3Ref2VACoreDenoiseStep,
)

ANCHOR = {"first": 0, "last": 1}
KIND = {"image": 0, "video": 1, "audio": 2}


def save(folder, name, tensors, meta=None):
    path = os.path.join(folder, name + ".safetensors")
    save_file({k: v.contiguous() for k, v in tensors.items()}, path + ".tmp", metadata=meta or {})
    os.replace(path + ".tmp", path)


def i64(x):
    return torch.as_tensor(x, dtype=torch.int64).reshape(-1)


# ---------------------------------------------------------------------------------------------------
# sigmas

SHIFTS = [12.0, 3.0, 6.0, 1.0, 0.5, 7.3]
NS = list(range(2, 41)) + [50, 51, 64, 100, 101, 257, 1000]
EXPLICIT = [
    [1.0, 0.5, 0.0], [1.0, 0.0], [0.9, 0.3, 0.1, 0.0], [1.0, 0.5, 0.5, 0.0], [1.0, 0.6, 0.7, 0.0],
    [1.0, 0.5, 1e-9], [0.0], [], [1.0, 0.5, -0.0], [2.0, 1.0, 0.25, 0.0],
]


def gen_sigmas(out):
    t = {}
    for k, s in enumerate(SHIFTS):
        t[f"shift_{k}"] = torch.tensor([s], dtype=torch.float64)
        for n in NS:
            if n > 200 and s not in (12.0, 3.0):
                continue
            sch = MiniMaxH3Scheduler(shift=s)
            sch.set_timesteps(n)
            t[f"sigmas_{n}_{k}"] = sch.sigmas.float()
            t[f"timesteps_{n}_{k}"] = sch.timesteps.float()
    for j, lst in enumerate(EXPLICIT):
        sch = MiniMaxH3Scheduler(shift=12.0)
        try:
            sch.set_timesteps(sigmas=lst)
            ok = 1
        except ValueError:
            ok = 0
        t[f"explicit_{j}"] = torch.tensor(lst if lst else [], dtype=torch.float32)
        t[f"explicit_ok_{j}"] = i64([ok])
        if ok:
            t[f"explicit_timesteps_{j}"] = sch.timesteps.float()
    # N < 2 and shift <= 0 raise in the reference: recorded so the C test checks the same rule.
    for bad_n in (0, 1):
        try:
            MiniMaxH3Scheduler(shift=12.0).set_timesteps(bad_n)
            raise SystemExit("reference accepted num_inference_steps < 2")
        except ValueError:
            pass
    for bad_s in (0.0, -1.0):
        try:
            MiniMaxH3Scheduler(shift=bad_s)
            raise SystemExit("reference accepted shift <= 0")
        except ValueError:
            pass
    save(out, "sigmas", t)
    for n, s, name in ((5, 12.0, "n5_video"), (5, 3.0, "n5_audio"), (21, 12.0, "n21_video"), (21, 3.0, "n21_audio"),
                       (30, 12.0, "n30_video")):
        sch = MiniMaxH3Scheduler(shift=s)
        sch.set_timesteps(n)
        save(out, f"sigmas_{name}.in", {"num_inference_steps": i64([n]), "shift": torch.tensor([s])})
        save(out, f"sigmas_{name}.out", {"sigmas": sch.sigmas.float(), "timesteps": sch.timesteps.float()})
    print(f"sigmas: {len(SHIFTS)} shifts x {len(NS)} grid sizes, {len(EXPLICIT)} explicit lists")


# ---------------------------------------------------------------------------------------------------
# layouts

def layout_t2va(tags, F, lh, lw, A, anchors):
    return MiniMaxH3PrepareLayoutStep.build_packed_sequence(
        torch.as_tensor(tags), num_latent_frames=F, latent_height=lh, latent_width=lw, num_audio_latents=A,
        patch_size=(1, 2, 2), audio_channels=2, audio_tag=2, video_tag=0, keyframe_anchors=tuple(anchors))


def layout_ref2va(tags, refs, F, lh, lw, A):
    """refs: (kind, frames, rh, rw, audio_latents) like the probe's `references` rows."""
    objs, cond, acond = [], [], []
    for kind, frames, rh, rw, ar in refs:
        name = [k for k, v in KIND.items() if v == kind][0]
        objs.append(SimpleNamespace(kind=name, has_audio=ar > 0))
        if name != "audio":
            cond.append(torch.zeros(1, 24, frames, rh, rw))
        if ar > 0:
            acond.append(torch.zeros(2 * ar, 32))
    return MiniMaxH3Ref2VAPrepareLayoutStep.build_ref2va_packed_sequence(
        torch.as_tensor(tags), objs, cond, acond, num_latent_frames=F, latent_height=lh, latent_width=lw,
        num_audio_latents=A, patch_size=(1, 2, 2), audio_channels=2, audio_tag=2, video_tag=0)


def layout_out(lay):
    pos, tags, vi, ai, ti, ncv, nca = lay
    return {"position_ids": pos.to(torch.float64), "token_tags": tags.to(torch.int64),
            "video_indices": vi.to(torch.int64), "audio_indices": ai.to(torch.int64),
            "text_indices": ti.to(torch.int64), "num_condition_rows": i64([ncv, nca])}


TINY_TAGS = [1, 1, 0, 0, 1]
# 256 text rows with a vision block (tag 0) inside, as an fl2va presentation has.
LONG_TAGS = [1] * 20 + [0] * 30 + [1] * 206
WORKED_REFS = [(0, 1, 4, 6, 0), (1, 7, 4, 4, 40), (2, 0, 0, 0, 30)]

LAYOUT_CASES = [
    # name, tags, (F, lh, lw, A), anchors or None, refs or None
    ("t2va", TINY_TAGS, (7, 4, 6, 37), [], None),
    ("fl2va_first", TINY_TAGS, (7, 4, 6, 37), ["first"], None),
    ("fl2va_last", TINY_TAGS, (7, 4, 6, 37), ["last"], None),
    ("fl2va_both", TINY_TAGS, (7, 4, 6, 37), ["first", "last"], None),
    # real canvases (1344x768 landscape and portrait, 960x544) with one latent frame to keep files small;
    # the temporal axis at real lengths (124 and 345 frames) on a tiny canvas
    ("t2va_1344x768", LONG_TAGS, (1, 48, 84, 8), [], None),
    ("t2va_768x1344", LONG_TAGS, (1, 84, 48, 8), [], None),
    ("fl2va_first_960x544", LONG_TAGS, (1, 34, 60, 8), ["first"], None),
    ("fl2va_last_124frames", LONG_TAGS, (37, 2, 2, 207), ["last"], None),
    ("fl2va_both_345frames", LONG_TAGS, (102, 2, 4, 5), ["first", "last"], None),
    ("fl2va_last_f16", [1] * 3, (16, 2, 2, 9), ["last"], None),
    ("fl2va_last_f200", [1] * 300, (200, 2, 2, 3), ["last", "first"], None),
    ("ref2va_worked", TINY_TAGS, (7, 4, 4, 37), None, WORKED_REFS),
    ("ref2va_mixed", [1, 0, 0, 1, 0, 0, 1], (12, 4, 6, 20),
     None, [(0, 1, 6, 4, 0), (1, 12, 2, 4, 10), (0, 1, 8, 8, 0), (1, 17, 4, 2, 0), (2, 0, 0, 0, 5)]),
    ("ref2va_real", LONG_TAGS, (1, 34, 60, 8), None, [(0, 1, 16, 28, 0), (1, 2, 20, 36, 5)]),
]

PLAN_TIMES = [(0.0, 0.0), (0.3, 0.6), (0.142857, 0.4), (0.9989999, 0.9995), (0.999, 0.5), (0.9995, 0.9999),
              (0.99900001, 1.0), (1.0, 0.999)]


def gen_layouts(out):
    plans = {}
    for name, tags, (F, lh, lw, A), anchors, refs in LAYOUT_CASES:
        inp = {"text_token_tags": i64(tags), "geometry": i64([F, lh, lw, A])}
        if refs is None:
            lay = layout_t2va(tags, F, lh, lw, A, anchors)
            inp["anchors"] = i64([ANCHOR[a] for a in anchors])
        else:
            lay = layout_ref2va(tags, refs, F, lh, lw, A)
            inp["references"] = torch.tensor(refs, dtype=torch.int64).reshape(-1, 5)
        save(out, f"layout_{name}.in", inp)
        save(out, f"layout_{name}.out", layout_out(lay))
        print(f"layout {name}: S={lay[0].shape[0]} ncv={lay[5]} nca={lay[6]}")
        if lay[0].shape[0] < 300:
            pos, tt, vi, ai, ti, ncv, nca = lay
            for j, (tv, ta) in enumerate(PLAN_TIMES):
                tv32, ta32 = float(np.float32(tv)), float(np.float32(ta))
                ts, idx = MiniMaxH3SetTimestepsStep.build_row_timesteps(
                    vi, ai, ncv, nca, ti.numel(), tv32, ta32, max(tv32, 0.999), 1.0)
                plans[f"{name}_{j}_tv"] = torch.tensor([tv32], dtype=torch.float32)
                plans[f"{name}_{j}_ta"] = torch.tensor([ta32], dtype=torch.float32)
                plans[f"{name}_{j}_timestep"] = ts.to(torch.float32)
                plans[f"{name}_{j}_timestep_indices"] = idx.to(torch.int64)
    save(out, "plans", plans)


# ---------------------------------------------------------------------------------------------------
# geometry helpers (modular_pipeline.py)

CANVAS_ASPECTS = [(16, 9), (9, 16), (1, 1), (4, 3), (3, 4), (4, 1), (1, 4), (49, 48), (51, 48), (48, 49), (21, 9),
                  (1920, 1080), (1080, 1920), (2.39, 1), (5, 1), (1, 5), (4.01, 1), (0, 1), (-1, 2), (1000, 999),
                  (3, 1), (7, 2), (100, 27)]


def gen_geometry(out):
    from diffusers.modular_pipelines.minimax_h3.modular_pipeline import (
        align_num_frames, audio_latent_num_frames, resolve_canvas_size, video_latent_num_frames)
    frames = list(range(-1, 401))
    aligned, latent, audio, ok = [], [], [], []
    for n in frames:
        try:
            a = align_num_frames(n, 17, 5)
        except ValueError:
            aligned.append(-1); latent.append(-1); audio.append(-1); ok.append(0)
            continue
        aligned.append(a)
        latent.append(video_latent_num_frames(a, 17, 5))
        audio.append(audio_latent_num_frames(a))
        ok.append(int(5.0 <= a / 24 <= 15.0))
    for bad in (6, 21, 123):
        try:
            video_latent_num_frames(bad, 17, 5)
            raise SystemExit("reference accepted an unaligned frame count")
        except ValueError:
            pass
    hw = []
    for aw, ah in CANVAS_ASPECTS:
        try:
            h, w = resolve_canvas_size(aw, ah, 32, 768, 768 * 1344)
        except ValueError:
            h, w = -1, -1
        hw.append([h, w])
    save(out, "geometry", {
        "num_frames": i64(frames), "aligned": i64(aligned), "latent_frames": i64(latent),
        "audio_latents": i64(audio), "duration_ok": i64(ok),
        "canvas_aspect": torch.tensor(CANVAS_ASPECTS, dtype=torch.float64), "canvas_hw": torch.tensor(hw)})


# ---------------------------------------------------------------------------------------------------
# randn, Euler

SEEDS = [0, 1, 42, 2**32 + 7, 123456789, 2**63 - 1]
SIZES = [1, 2, 5, 15, 16, 17, 31, 33, 96, 100, 576, 2368, 4097]
SEQUENCE = [5, 3, 20, 7, 1, 16, 9]


def gen_randn(out):
    t = {}
    for s in SEEDS:
        t[f"seed_{s}"] = i64([s])
        for n in SIZES:
            if n > 100 and s not in (42, 2**63 - 1):
                continue
            g = torch.Generator().manual_seed(s)
            t[f"randn_{s}_{n}"] = torch.randn(n, generator=g)
    g = torch.Generator().manual_seed(42)
    for k, n in enumerate(SEQUENCE):
        t[f"sequence_{k}"] = torch.randn(n, generator=g)
    # shapes do not matter, only the element count (contiguous tensors)
    g = torch.Generator().manual_seed(5)
    assert torch.equal(torch.randn(1, 24, 1, 4, 6, generator=g).reshape(-1),
                       torch.randn(576, generator=torch.Generator().manual_seed(5)))
    save(out, "randn", t)
    # the `noise` probe op (docs/probe.md): a condition-latent shape and a short (< 16) draw
    for seed, shape in ((42, (1, 24, 1, 4, 6)), (2**63 - 1, (2, 3))):
        name = f"noise_{seed}_{'x'.join(map(str, shape))}"
        save(out, name + ".in", {"seed": i64([seed]), "shape": i64(shape)})
        save(out, name + ".out", {"noise": torch.randn(*shape, generator=torch.Generator().manual_seed(seed))})


def gen_bad_inputs(out):
    """Inputs every probe op must refuse (exit 2, one line). The reference rejects the same requests."""
    try:
        MiniMaxH3Scheduler(shift=12.0).set_timesteps(1)
        raise SystemExit("reference accepted num_inference_steps 1")
    except ValueError:
        pass
    try:
        layout_t2va(TINY_TAGS, 7, 4, 6, 37, ["middle"])
        raise SystemExit("reference accepted a 'middle' anchor")
    except ValueError:
        pass
    save(out, "bad_sigmas_n1.in", {"num_inference_steps": i64([1]), "shift": torch.tensor([12.0])})
    save(out, "bad_sigmas_shift0.in", {"num_inference_steps": i64([5]), "shift": torch.tensor([0.0])})
    save(out, "bad_layout_anchor.in", {"text_token_tags": i64(TINY_TAGS), "geometry": i64([7, 4, 6, 37]),
                                       "anchors": i64([2])})
    save(out, "bad_layout_odd.in", {"text_token_tags": i64(TINY_TAGS), "geometry": i64([7, 3, 6, 37])})
    save(out, "bad_layout_refkind.in", {"text_token_tags": i64(TINY_TAGS), "geometry": i64([7, 4, 4, 37]),
                                        "references": torch.tensor([[5, 1, 4, 4, 0]])})
    save(out, "bad_noise_shape.in", {"seed": i64([1]), "shape": i64([-3])})


def gen_euler(out):
    t = {}
    g = torch.Generator().manual_seed(99)
    for n, s in ((5, 12.0), (5, 3.0), (21, 12.0), (21, 3.0), (2, 12.0), (30, 3.0)):
        sch = MiniMaxH3Scheduler(shift=s)
        sch.set_timesteps(n)
        steps = sch.timesteps.numel()
        x = torch.randn(steps, 32, generator=g) * 2
        v = torch.randn(steps, 32, generator=g)
        y = torch.empty_like(x)
        for i in range(steps):
            sch.set_begin_index(i)
            sch._step_index = None
            y[i] = sch.step(v[i].clone(), sch.timesteps[i], x[i].clone(), return_dict=False)[0]
        t[f"x_{n}_{int(s)}"], t[f"v_{n}_{int(s)}"], t[f"out_{n}_{int(s)}"] = x, v, y
    # the worked example of docs/model/dit.md 7.3
    sch = MiniMaxH3Scheduler(shift=12.0)
    sch.set_timesteps(5)
    t["spec_x"] = torch.tensor([0.5, -1.25, 2.0])
    t["spec_v"] = torch.tensor([0.1, 0.2, -0.3])
    t["spec_out"] = sch.step(t["spec_v"].clone(), sch.timesteps[0], t["spec_x"].clone(), return_dict=False)[0]
    save(out, "euler", t)


# ---------------------------------------------------------------------------------------------------
# denoise loops with the reference pipeline's core denoise steps

class Capture:
    """Records the transformer inputs of the first call (the packed starting rows) and counts calls."""

    def __init__(self, model):
        self.first, self.calls = None, 0
        model.register_forward_pre_hook(self.hook, with_kwargs=True)

    def hook(self, module, args, kwargs):
        if self.first is None:
            self.first = {k: (v.clone() if torch.is_tensor(v) else v) for k, v in kwargs.items()}
        self.calls += 1


def run_denoise(out, fixtures, task, steps=5, dtype=torch.float32):
    comp = "transformer_ref" if task == "ref2va" else "transformer"
    model = MiniMaxH3Transformer3DModel.from_pretrained(os.path.join(fixtures, "tiny", comp),
                                                        torch_dtype=dtype).eval()
    cap = Capture(model)
    gen = torch.Generator().manual_seed(1000 + len(task))
    seed = {"t2va": 2024, "fl2va": 77, "ref2va": 31337}[task]
    prompt = torch.randn(1, 5, model.config.text_dim, generator=gen)
    tags = torch.tensor(TINY_TAGS)
    extra = {}
    if task == "t2va":
        blocks = MiniMaxH3CoreDenoiseStep()
        kwargs = dict(height=64, width=64, num_frames=108)
    elif task == "fl2va":
        blocks = MiniMaxH3FL2VACoreDenoiseStep()
        conds = [torch.randn(1, 24, 1, 4, 4, generator=gen) for _ in range(2)]
        kwargs = dict(height=64, width=64, num_frames=124, keyframe_anchors=("first", "last"),
                      condition_latents=conds)
        extra = {"anchors": i64([0, 1]), "condition_latents_0": conds[0], "condition_latents_1": conds[1]}
    else:
        blocks = MiniMaxH3Ref2VACoreDenoiseStep()
        refs = [SimpleNamespace(kind="image", has_audio=False), SimpleNamespace(kind="video", has_audio=True),
                SimpleNamespace(kind="audio", has_audio=True)]
        conds = [torch.randn(1, 24, 1, 4, 6, generator=gen), torch.randn(1, 24, 7, 4, 4, generator=gen)]
        aconds = [torch.randn(80, 32, generator=gen), torch.randn(60, 32, generator=gen)]
        kwargs = dict(height=64, width=64, num_frames=22, normalized_references=refs, condition_latents=conds,
                      audio_condition_latents=aconds)
        extra = {"references": torch.tensor(WORKED_REFS, dtype=torch.int64), "condition_latents_0": conds[0],
                 "condition_latents_1": conds[1], "audio_condition_latents": torch.cat(aconds)}
    pipe = blocks.init_pipeline()
    pipe.update_components(**{comp: model}, scheduler=MiniMaxH3Scheduler(shift=12.0),
                           audio_scheduler=MiniMaxH3Scheduler(shift=3.0))
    state = pipe(text_token_tags=tags, prompt_embeds=prompt, generator=torch.Generator().manual_seed(seed),
                 num_inference_steps=steps, **kwargs)
    assert cap.calls == steps - 1, cap.calls
    first = cap.first
    F, lh, lw, A = (state.get(k) for k in ("num_latent_frames", "latent_height", "latent_width", "num_audio_latents"))
    inp = {
        "latents": first["hidden_states"][0].float(),
        "audio_latents": first["audio_hidden_states"][0].float(),
        "prompt_embeds": prompt,
        "position_ids": first["position_ids"].to(torch.float64),
        "token_tags": first["token_tags"].to(torch.int64),
        "video_indices": first["video_indices"].to(torch.int64),
        "audio_indices": first["audio_indices"].to(torch.int64),
        "text_indices": first["text_indices"].to(torch.int64),
        "num_condition_video_rows": i64([state.get("num_condition_video_rows")]),
        "num_condition_audio_rows": i64([state.get("num_condition_audio_rows")]),
        "geometry": i64([F, lh, lw, A]),
        "num_inference_steps": i64([steps]),
        # not read by the probe op: how the C test rebuilds the layout and the starting rows
        "seed": i64([seed]),
        "text_token_tags": tags.to(torch.int64),
        **extra,
    }
    outs = {"latents": state.get("latents").float(), "audio_latents": state.get("audio_latents").float()}
    if dtype == torch.bfloat16:  # the release's mixed precision: same inputs, bf16 DiT
        save(out, f"denoise_{task}.bf16.out", outs, {"component": comp, "precision": "bf16"})
        print(f"denoise {task} (bf16 DiT): evaluations={cap.calls}")
        return
    save(out, f"denoise_{task}.in", inp, {"component": comp})
    save(out, f"denoise_{task}.out", outs, {"component": comp})
    print(f"denoise {task}: S={inp['position_ids'].shape[0]} Nv={inp['latents'].shape[0]} "
          f"Na={inp['audio_latents'].shape[0]} F,lh,lw,A={F},{lh},{lw},{A} evaluations={cap.calls} ({comp})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures"))
    ap.add_argument("--only", default="", help="comma list of sigmas,layouts,geometry,randn,bad,euler,denoise")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    out = os.path.join(root, "golden", "pipeline")
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    only = set(filter(None, args.only.split(",")))
    want = lambda k: not only or k in only  # noqa: E731
    if want("sigmas"):
        gen_sigmas(out)
    if want("layouts"):
        gen_layouts(out)
    if want("geometry"):
        gen_geometry(out)
    if want("randn"):
        gen_randn(out)
    if want("bad"):
        gen_bad_inputs(out)
    if want("euler"):
        gen_euler(out)
    if want("denoise"):
        if not os.path.exists(os.path.join(root, "tiny", "transformer", "config.json")):
            raise SystemExit("tests/fixtures/tiny/transformer is missing: run tools/reference/gen_dit.py first")
        for task in ("t2va", "fl2va", "ref2va"):
            run_denoise(out, root, task)
        run_denoise(out, root, "ref2va", dtype=torch.bfloat16)


if __name__ == "__main__":
    main()
