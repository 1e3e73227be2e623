/* Probe ops of the pipeline (the probe contract and the project's own ops: docs/probe.md):
 *   sigmas  — the scheduler's grid for num_inference_steps (diffusers' count) and a shift
 *   layout  — the packed layout of t2va / fl2va (anchors) or ref2va (references)
 *   noise   — torch.randn(shape, generator=torch.Generator().manual_seed(seed))
 *   denoise — the whole denoising loop from given starting rows to the final latents */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/snapshot.h"
#include "model/dit.h"
#include "pipeline/denoise.h"
#include "pipeline/layout.h"
#include "pipeline/noise.h"
#include "pipeline/sched.h"
#include "probe.h"

static int out_i64(probe_ctx *p, const char *name, const int64_t *data, int64_t n, h3_err *e) {
    return st_writer_add(p->out, name, H3_I64, 1, (int64_t[]){n}, data, e);
}

/* A scalar input of exactly one element. */
static int input_scalar_i64(probe_ctx *p, const char *name, int64_t *v, h3_err *e) {
    h3_tensor *t;
    if (probe_input(p, name, H3_I64, -1, &t, e)) return -1;
    int ok = h3_tensor_numel(t) == 1;
    if (ok) *v = ((int64_t *)t->data)[0];
    h3_tensor_free(t);
    return ok ? 0 : h3_fail(e, "input '%s': expected a single value", name);
}

static int input_scalar_f32(probe_ctx *p, const char *name, float *v, h3_err *e) {
    h3_tensor *t;
    if (probe_input(p, name, H3_F32, -1, &t, e)) return -1;
    int ok = h3_tensor_numel(t) == 1;
    if (ok) *v = ((float *)t->data)[0];
    h3_tensor_free(t);
    return ok ? 0 : h3_fail(e, "input '%s': expected a single value", name);
}

/* ---- sigmas ---- */

int probe_sigmas(probe_ctx *p, h3_err *e) {
    int64_t n;
    float shift;
    if (input_scalar_i64(p, "num_inference_steps", &n, e) || input_scalar_f32(p, "shift", &shift, e)) return -1;
    if (n < 2 || n > 10000000)
        return h3_fail(e, "input 'num_inference_steps': must be >= 2 (grid points incl. the terminal 0), got %lld",
                       (long long)n);
    sched s;
    if (sched_init(&s, (int)n, (double)shift, e)) return h3_fail_prefix(e, "input 'shift'");
    int rc = probe_output_f32(p, "sigmas", s.sigmas, 1, (int64_t[]){s.num_sigmas}, e);
    if (!rc) rc = probe_output_f32(p, "timesteps", s.timesteps, 1, (int64_t[]){s.num_sigmas - 1}, e);
    sched_free(&s);
    return rc;
}

/* ---- layout ---- */

/* geometry i64 [4] = (latent frames, latent h, latent w, audio latents). */
static int input_geometry(probe_ctx *p, int g[4], h3_err *e) {
    h3_tensor *t;
    if (probe_input(p, "geometry", H3_I64, 1, &t, e)) return -1;
    int rc = 0;
    if (t->shape[0] != 4) rc = h3_fail(e, "input 'geometry': expected 4 values (F, lh, lw, A), got %lld",
                                       (long long)t->shape[0]);
    for (int i = 0; !rc && i < 4; i++) {
        int64_t v = ((int64_t *)t->data)[i];
        if (v < 1 || v > (1 << 24)) rc = h3_fail(e, "input 'geometry': value %d (%lld) out of range", i, (long long)v);
        g[i] = (int)v;
    }
    h3_tensor_free(t);
    return rc;
}

/* references i64 [R, 5] rows (kind 0 image / 1 video / 2 audio, latent frames, latent h, latent w,
 * audio latents). */
static int input_references(probe_ctx *p, layout_ref **refs, int *n, h3_err *e) {
    h3_tensor *t;
    *refs = NULL;
    if (probe_input(p, "references", H3_I64, 2, &t, e)) return -1;
    if (t->shape[1] != 5 || t->shape[0] < 1 || t->shape[0] > 64) {
        h3_tensor_free(t);
        return h3_fail(e, "input 'references': expected [R, 5] rows (kind, frames, lh, lw, audio latents), 1 <= R");
    }
    *n = (int)t->shape[0];
    *refs = calloc((size_t)*n, sizeof **refs);
    const int64_t *d = t->data;
    for (int r = 0; r < *n; r++) {
        for (int k = 0; k < 5; k++)
            if (d[r * 5 + k] < 0 || d[r * 5 + k] > (1 << 24)) {
                h3_tensor_free(t);
                free(*refs);
                *refs = NULL;
                return h3_fail(e, "input 'references': row %d column %d out of range", r, k);
            }
        (*refs)[r] = (layout_ref){(layout_ref_kind)d[r * 5], (int)d[r * 5 + 1], (int)d[r * 5 + 2], (int)d[r * 5 + 3],
                                  (int)d[r * 5 + 4]};
    }
    h3_tensor_free(t);
    return 0;
}

/* Builds the layout from text_token_tags + geometry + (anchors | references). */
static layout *probe_build_layout(probe_ctx *p, h3_err *e) {
    h3_tensor *tags = NULL, *anchors = NULL;
    layout_ref *refs = NULL;
    layout *L = NULL;
    int g[4], nrefs = 0;
    if (probe_input(p, "text_token_tags", H3_I64, 1, &tags, e) || input_geometry(p, g, e)) goto done;
    if (probe_has_input(p, "references")) {
        if (probe_has_input(p, "anchors")) {
            h3_fail(e, "inputs 'anchors' and 'references': give one (fl2va anchors or ref2va references)");
            goto done;
        }
        if (input_references(p, &refs, &nrefs, e)) goto done;
        L = layout_new_ref2va(tags->data, tags->shape[0], refs, nrefs, g[0], g[1], g[2], g[3], e);
    } else {
        int a[2] = {0, 0}, na = 0;
        if (probe_has_input(p, "anchors")) {
            if (probe_input(p, "anchors", H3_I64, 1, &anchors, e)) goto done;
            if (anchors->shape[0] > 2) {
                h3_fail(e, "input 'anchors': at most two keyframe anchors, got %lld", (long long)anchors->shape[0]);
                goto done;
            }
            na = (int)anchors->shape[0];
            for (int k = 0; k < na; k++) {
                int64_t v = ((int64_t *)anchors->data)[k];
                a[k] = v < -1000 || v > 1000 ? -1000 : (int)v; /* the layout names a bad value */
            }
        }
        L = layout_new_t2va(tags->data, tags->shape[0], g[0], g[1], g[2], g[3], a, na, e);
    }
    if (!L) h3_fail_prefix(e, "layout");
done:
    h3_tensor_free(tags);
    h3_tensor_free(anchors);
    free(refs);
    return L;
}

int probe_layout(probe_ctx *p, h3_err *e) {
    layout *L = probe_build_layout(p, e);
    if (!L) return -1;
    const int64_t ncond[2] = {L->num_condition_video_rows, L->num_condition_audio_rows};
    int rc = st_writer_add(p->out, "position_ids", H3_F64, 2, (int64_t[]){L->S, 3}, L->position_ids, e);
    if (!rc) rc = out_i64(p, "token_tags", L->token_tags, L->S, e);
    if (!rc) rc = out_i64(p, "video_indices", L->video_indices, L->Nv, e);
    if (!rc) rc = out_i64(p, "audio_indices", L->audio_indices, L->Na, e);
    if (!rc) rc = out_i64(p, "text_indices", L->text_indices, L->T, e);
    if (!rc) rc = out_i64(p, "num_condition_rows", ncond, 2, e);
    layout_free(L);
    return rc;
}

/* ---- noise ---- */

int probe_noise(probe_ctx *p, h3_err *e) {
    int64_t seed;
    h3_tensor *shape = NULL;
    if (input_scalar_i64(p, "seed", &seed, e) || probe_input(p, "shape", H3_I64, 1, &shape, e)) {
        h3_tensor_free(shape);
        return -1;
    }
    int nd = (int)shape->shape[0];
    int64_t dims[H3_MAX_DIMS], n = 1;
    int rc = 0;
    if (nd < 1 || nd > H3_MAX_DIMS) rc = h3_fail(e, "input 'shape': 1..%d dimensions, got %d", H3_MAX_DIMS, nd);
    for (int i = 0; !rc && i < nd; i++) {
        dims[i] = ((int64_t *)shape->data)[i];
        if (dims[i] < 0 || (dims[i] > 0 && n > ((int64_t)1 << 31) / dims[i]))
            rc = h3_fail(e, "input 'shape': dimension %d (%lld) is negative or too large", i, (long long)dims[i]);
        else n *= dims[i];
    }
    h3_tensor_free(shape);
    if (rc) return rc;
    float *out = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    if (!out) return h3_fail(e, "noise: out of memory");
    torch_rng g;
    torch_rng_seed(&g, (uint64_t)seed); /* torch takes the seed as an unsigned 64-bit value */
    torch_randn(&g, out, n);
    rc = probe_output_f32(p, "noise", out, nd, dims, e);
    free(out);
    return rc;
}

/* ---- denoise ---- */

static int resolve_transformer_dir(probe_ctx *p, char *out, size_t cap, h3_err *e) {
    if (!p->model) return h3_fail(e, "--model is required (a snapshot root or a transformer folder)");
    char t[4096];
    if (snapshot_exists(snapshot_path(t, sizeof t, p->model, "config.json")) &&
        !snapshot_exists(snapshot_path(t, sizeof t, p->model, "model_index.json"))) {
        snprintf(out, cap, "%s", p->model);
        return 0;
    }
    int ref = p->component && !strcmp(p->component, "transformer_ref");
    /* a diffusers root (model_index.json optional, as in the tiny fixtures): <root>/<component> */
    snapshot_path(out, cap, p->model, ref ? "transformer_ref" : "transformer");
    if (snapshot_exists(snapshot_path(t, sizeof t, out, "config.json"))) return 0;
    if (snapshot_dit_dir(p->model, ref, out, cap, e)) return h3_fail_prefix(e, "--model");
    return 0;
}

int probe_denoise(probe_ctx *p, h3_err *e) {
    enum { N_IN = 8 };
    static const char *names[N_IN] = {"latents", "audio_latents", "prompt_embeds", "position_ids",
                                      "token_tags", "video_indices", "audio_indices", "text_indices"};
    static const h3_dtype types[N_IN] = {H3_F32, H3_F32, H3_F32, H3_F64, H3_I64, H3_I64, H3_I64, H3_I64};
    static const int ndims[N_IN] = {2, 2, 3, 2, 1, 1, 1, 1};
    h3_tensor *t[N_IN] = {0};
    layout *L = NULL;
    dit_model *m = NULL;
    sched sv = {0}, sa = {0};
    float *vlat = NULL, *alat = NULL;
    int rc = -1, g[4];
    int64_t steps, ncv, nca;
    float shift = (float)SCHED_VIDEO_SHIFT, audio_shift = (float)SCHED_AUDIO_SHIFT;
    for (int i = 0; i < N_IN; i++)
        if (probe_input(p, names[i], types[i], ndims[i], &t[i], e)) goto done;
    if (input_geometry(p, g, e) || input_scalar_i64(p, "num_inference_steps", &steps, e) ||
        input_scalar_i64(p, "num_condition_video_rows", &ncv, e) ||
        input_scalar_i64(p, "num_condition_audio_rows", &nca, e))
        goto done;
    if (probe_has_input(p, "shift") && input_scalar_f32(p, "shift", &shift, e)) goto done;
    if (probe_has_input(p, "audio_shift") && input_scalar_f32(p, "audio_shift", &audio_shift, e)) goto done;

    char dir[4096];
    dit_config cfg;
    if (resolve_transformer_dir(p, dir, sizeof dir, e) || dit_config_load(dir, &cfg, e)) goto done;
    const int64_t S = t[3]->shape[0], Nv = t[0]->shape[0], Na = t[1]->shape[0], T = t[2]->shape[1];
    const int64_t Q = (int64_t)cfg.in_channels * 4, Ca = cfg.audio_in_channels;
    if (t[3]->shape[1] != 3) { h3_fail(e, "input 'position_ids': must be [S, 3]"); goto done; }
    if (t[0]->shape[1] != Q) { h3_fail(e, "input 'latents': rows must be %lld wide", (long long)Q); goto done; }
    if (t[1]->shape[1] != Ca) { h3_fail(e, "input 'audio_latents': rows must be %lld wide", (long long)Ca); goto done; }
    if (t[2]->shape[0] != 1 || t[2]->shape[2] != cfg.text_dim) {
        h3_fail(e, "input 'prompt_embeds': must be [1, Nt, %d]", cfg.text_dim);
        goto done;
    }
    if (t[4]->shape[0] != S || t[5]->shape[0] != Nv || t[6]->shape[0] != Na || t[7]->shape[0] != T) {
        h3_fail(e, "inputs 'token_tags'/'video_indices'/'audio_indices'/'text_indices': lengths must be S, Nv, Na, Nt");
        goto done;
    }
    if (!(L = layout_new_from_tensors(S, t[3]->data, t[4]->data, t[5]->data, Nv, t[6]->data, Na, t[7]->data, T, ncv,
                                      nca, g[0], g[1], g[2], g[3], e)))
        goto done;
    if (steps < 2 || steps > 100000) {
        h3_fail(e, "input 'num_inference_steps': must be in 2..100000, got %lld", (long long)steps);
        goto done;
    }
    if (sched_init(&sv, (int)steps, shift, e) || sched_init(&sa, (int)steps, audio_shift, e)) goto done;
    const int ref = p->component && !strcmp(p->component, "transformer_ref");
    if (!(m = dit_load_lora(p->be, dir, NULL, p->bf16, p->loras, p->n_loras, ref, e))) goto done;
    denoise_args a = {.L = L, .text = t[2]->data, .video_sched = &sv, .audio_sched = &sa,
                      .video_rows = t[0]->data, .audio_rows = t[1]->data};
    if (denoise_run(m, &a, e)) goto done;
    const int C = cfg.in_channels;
    vlat = malloc(sizeof(float) * (size_t)((int64_t)C * g[0] * g[1] * g[2]));
    alat = malloc(sizeof(float) * (size_t)(2 * Ca * g[3]));
    if (!vlat || !alat) { h3_fail(e, "denoise: out of memory"); goto done; }
    if (denoise_unpack(L, C, (int)Ca, t[0]->data, t[1]->data, vlat, alat, e)) goto done;
    if (probe_output_f32(p, "latents", vlat, 5, (int64_t[]){1, C, g[0], g[1], g[2]}, e) ||
        probe_output_f32(p, "audio_latents", alat, 3, (int64_t[]){2, Ca, g[3]}, e) ||
        probe_output_f32(p, "video_rows", t[0]->data, 2, (int64_t[]){Nv, Q}, e) ||
        probe_output_f32(p, "audio_rows", t[1]->data, 2, (int64_t[]){Na, Ca}, e))
        goto done;
    rc = 0;
done:
    free(vlat);
    free(alat);
    dit_free(m);
    sched_free(&sv);
    sched_free(&sa);
    layout_free(L);
    for (int i = 0; i < N_IN; i++) h3_tensor_free(t[i]);
    return rc;
}
