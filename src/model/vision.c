/* Qwen3-VL vision tower, preprocessing and reference-video sampling
 * (docs/model/text_encoder.md section 3; transformers 5.24 Qwen3VLVisionModel). See vision.h. */
#include "vision.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backend/ops.h"
#include "../io/config.h"
#include "../io/snapshot.h"
#include "../media/resize.h"

/* ---------------------------------------------------------------- config */

int vision_config_parse(const void *json_obj, vision_config *c, const char *path, h3_err *e) {
    const json_t *vc = json_obj;
    memset(c, 0, sizeof *c);
    /* defaults: transformers Qwen3VLVisionConfig; every field in a plausible range (docs/robustness.md) */
    h3_cfg g = h3_cfg_of(vc, path, "vision_config ", e);
    h3_cfg_int(&g, "depth", 27, 1, 1024, &c->depth);
    h3_cfg_int(&g, "hidden_size", 1152, 1, 1 << 16, &c->hidden_size);
    h3_cfg_int(&g, "intermediate_size", 4304, 1, 1 << 18, &c->intermediate_size);
    h3_cfg_int(&g, "num_heads", 16, 1, 1024, &c->num_heads);
    h3_cfg_int(&g, "in_channels", 3, 1, 64, &c->in_channels);
    h3_cfg_int(&g, "patch_size", 16, 1, 1024, &c->patch_size);
    h3_cfg_int(&g, "temporal_patch_size", 2, 1, 64, &c->temporal_patch_size);
    h3_cfg_int(&g, "spatial_merge_size", 2, 1, 64, &c->spatial_merge_size);
    h3_cfg_int(&g, "out_hidden_size", 3584, 1, 1 << 16, &c->out_hidden_size);
    h3_cfg_int(&g, "num_position_embeddings", 2304, 1, 1 << 22, &c->num_position_embeddings);
    c->n_deepstack = 3;
    c->deepstack_indexes[0] = 8, c->deepstack_indexes[1] = 16, c->deepstack_indexes[2] = 24;
    if (g.rc) return -1;
    h3_cfg_int_list(&g, "deepstack_visual_indexes", 0, 0, VISION_MAX_DEEPSTACK, 0, c->depth - 1, c->deepstack_indexes,
                    &c->n_deepstack);
    if (g.rc) return -1;
    if (c->hidden_size % c->num_heads || (c->hidden_size / c->num_heads) % 4)
        return h3_fail(e, "%s: vision hidden_size %d / num_heads %d must give a head dim divisible by 4", path,
                       c->hidden_size, c->num_heads);
    int side = (int)lround(sqrt((double)c->num_position_embeddings));
    if (side * side != c->num_position_embeddings)
        return h3_fail(e, "%s: vision num_position_embeddings %d is not a square", path, c->num_position_embeddings);
    json_t *act = json_object_get(vc, "hidden_act");
    if (act && (!json_is_string(act) || strcmp(json_string_value(act), "gelu_pytorch_tanh")))
        return h3_fail(e, "%s: vision hidden_act must be \"gelu_pytorch_tanh\"", path);
    c->rope_theta = 10000.0;
    json_t *rp = json_object_get(vc, "rope_parameters");
    if (json_is_object(rp)) {
        h3_cfg r = h3_cfg_of(rp, path, "vision_config rope_parameters ", e);
        if (h3_cfg_num(&r, "rope_theta", 10000.0, 1e-3, 1e12, &c->rope_theta)) return -1;
    }
    return 0;
}

#define VIS "model.visual."

int vision_expected_tensors(const vision_config *c, h3_expect_list *l, h3_err *e) {
    int64_t C = c->hidden_size, I = c->intermediate_size, M = (int64_t)C * c->spatial_merge_size * c->spatial_merge_size;
    int64_t O = c->out_hidden_size;
    int rc = 0;
    rc |= h3_expect_add(l, H3_BF16, 5,
                        (int64_t[]){C, c->in_channels, c->temporal_patch_size, c->patch_size, c->patch_size},
                        VIS "patch_embed.proj.weight");
    rc |= h3_expect_add(l, H3_BF16, 1, (int64_t[]){C}, VIS "patch_embed.proj.bias");
    rc |= h3_expect_add(l, H3_BF16, 2, (int64_t[]){c->num_position_embeddings, C}, VIS "pos_embed.weight");
    for (int j = 0; j < c->depth && !rc; j++) {
        rc |= h3_expect_add(l, H3_BF16, 1, (int64_t[]){C}, VIS "blocks.%d.norm1.weight", j);
        rc |= h3_expect_add(l, H3_BF16, 1, (int64_t[]){C}, VIS "blocks.%d.norm1.bias", j);
        rc |= h3_expect_add(l, H3_BF16, 2, (int64_t[]){3 * C, C}, VIS "blocks.%d.attn.qkv.weight", j);
        rc |= h3_expect_add(l, H3_BF16, 1, (int64_t[]){3 * C}, VIS "blocks.%d.attn.qkv.bias", j);
        rc |= h3_expect_add(l, H3_BF16, 2, (int64_t[]){C, C}, VIS "blocks.%d.attn.proj.weight", j);
        rc |= h3_expect_add(l, H3_BF16, 1, (int64_t[]){C}, VIS "blocks.%d.attn.proj.bias", j);
        rc |= h3_expect_add(l, H3_BF16, 1, (int64_t[]){C}, VIS "blocks.%d.norm2.weight", j);
        rc |= h3_expect_add(l, H3_BF16, 1, (int64_t[]){C}, VIS "blocks.%d.norm2.bias", j);
        rc |= h3_expect_add(l, H3_BF16, 2, (int64_t[]){I, C}, VIS "blocks.%d.mlp.linear_fc1.weight", j);
        rc |= h3_expect_add(l, H3_BF16, 1, (int64_t[]){I}, VIS "blocks.%d.mlp.linear_fc1.bias", j);
        rc |= h3_expect_add(l, H3_BF16, 2, (int64_t[]){C, I}, VIS "blocks.%d.mlp.linear_fc2.weight", j);
        rc |= h3_expect_add(l, H3_BF16, 1, (int64_t[]){C}, VIS "blocks.%d.mlp.linear_fc2.bias", j);
    }
    for (int k = -1; k < c->n_deepstack; k++) {
        char pre[64];
        if (k < 0) snprintf(pre, sizeof pre, VIS "merger.");
        else snprintf(pre, sizeof pre, VIS "deepstack_merger_list.%d.", k);
        int64_t nw = k < 0 ? C : M;
        rc |= h3_expect_add(l, H3_BF16, 1, (int64_t[]){nw}, "%snorm.weight", pre);
        rc |= h3_expect_add(l, H3_BF16, 1, (int64_t[]){nw}, "%snorm.bias", pre);
        rc |= h3_expect_add(l, H3_BF16, 2, (int64_t[]){M, M}, "%slinear_fc1.weight", pre);
        rc |= h3_expect_add(l, H3_BF16, 1, (int64_t[]){M}, "%slinear_fc1.bias", pre);
        rc |= h3_expect_add(l, H3_BF16, 2, (int64_t[]){O, M}, "%slinear_fc2.weight", pre);
        rc |= h3_expect_add(l, H3_BF16, 1, (int64_t[]){O}, "%slinear_fc2.bias", pre);
    }
    if (rc) return h3_expect_fail(l, "vision", e);
    return 0;
}

/* ---------------------------------------------------------------- preprocessing */

int vision_proc_config_load(const char *dir, int video, vision_proc_config *pc, h3_err *e) {
    char path[4096];
    snapshot_path(path, sizeof path, dir, video ? "video_preprocessor_config.json" : "preprocessor_config.json");
    json_t *root = h3_json_load_object(path, e);
    if (!root) return -1;
    int rc = -1;
    json_t *size = json_object_get(root, "size");
    json_t *se = size ? json_object_get(size, "shortest_edge") : NULL, *le = size ? json_object_get(size, "longest_edge") : NULL;
    if (!json_is_integer(se) || !json_is_integer(le) || json_integer_value(se) <= 0 ||
        json_integer_value(le) < json_integer_value(se) || json_integer_value(le) > ((json_int_t)1 << 28)) {
        h3_fail(e, "%s: size.shortest_edge / size.longest_edge must be pixel counts (min <= max <= 2^28)", path);
        goto done;
    }
    pc->min_pixels = json_integer_value(se);
    pc->max_pixels = json_integer_value(le);
    struct { const char *k; int *dst; } ints[] = {
        {"patch_size", &pc->patch_size}, {"temporal_patch_size", &pc->temporal_patch_size}, {"merge_size", &pc->merge_size}};
    for (int i = 0; i < 3; i++) {
        json_t *v = json_object_get(root, ints[i].k);
        if (!json_is_integer(v) || json_integer_value(v) <= 0 || json_integer_value(v) > 64) {
            h3_fail(e, "%s: \"%s\" must be a small positive integer", path, ints[i].k);
            goto done;
        }
        *ints[i].dst = (int)json_integer_value(v);
    }
    const char *ms[2] = {"image_mean", "image_std"};
    for (int i = 0; i < 2; i++) {
        json_t *a = json_object_get(root, ms[i]);
        if (!json_is_array(a) || json_array_size(a) != 3) {
            h3_fail(e, "%s: \"%s\" must be an array of 3 numbers", path, ms[i]);
            goto done;
        }
        for (int c = 0; c < 3; c++) {
            json_t *v = json_array_get(a, (size_t)c);
            if (!json_is_number(v)) {
                h3_fail(e, "%s: \"%s\"[%d] must be a number", path, ms[i], c);
                goto done;
            }
            (i ? pc->std : pc->mean)[c] = (float)json_number_value(v);
        }
    }
    for (int c = 0; c < 3; c++)
        if (!(pc->std[c] > 0)) {
            h3_fail(e, "%s: image_std must be positive", path);
            goto done;
        }
    rc = 0;
done:
    json_decref(root);
    return rc;
}

/* Python round(): half to even (nearbyint in the default rounding mode). */
static double py_round(double x) { return nearbyint(x); }

int vision_smart_resize(int64_t h, int64_t w, int num_frames, const vision_proc_config *pc, int64_t *oh, int64_t *ow,
                        h3_err *e) {
    const double f = (double)pc->patch_size * pc->merge_size;
    if (h <= 0 || w <= 0) return h3_fail(e, "image size %lldx%lld must be positive", (long long)w, (long long)h);
    double hh = (double)h, ww = (double)w;
    if (num_frames > 0) { /* Qwen3-VL video variant */
        if (num_frames < pc->temporal_patch_size)
            return h3_fail(e, "video of %d frames: at least %d needed", num_frames, pc->temporal_patch_size);
        if (hh < f || ww < f) { /* tiny frames are first scaled up (int() truncation) */
            double s = fmax(f / hh, f / ww);
            hh = trunc(hh * s), ww = trunc(ww * s);
        }
    }
    if (fmax(hh, ww) / fmin(hh, ww) > 200)
        return h3_fail(e, "image size %lldx%lld: aspect ratio must be at most 200", (long long)w, (long long)h);
    double hb = py_round(hh / f) * f, wb = py_round(ww / f) * f;
    double t = num_frames > 0 ? py_round((double)num_frames / pc->temporal_patch_size) * pc->temporal_patch_size : 1.0;
    double n = num_frames > 0 ? (double)num_frames : 1.0;
    if (t * hb * wb > (double)pc->max_pixels) {
        double beta = sqrt(n * hh * ww / (double)pc->max_pixels);
        hb = fmax(f, floor(hh / beta / f) * f);
        wb = fmax(f, floor(ww / beta / f) * f);
    } else if (t * hb * wb < (double)pc->min_pixels) {
        double beta = sqrt((double)pc->min_pixels / (n * hh * ww));
        hb = ceil(hh * beta / f) * f;
        wb = ceil(ww * beta / f) * f;
    }
    *oh = (int64_t)hb;
    *ow = (int64_t)wb;
    return 0;
}

int vision_preprocess(const uint8_t *frames, int n_frames, int h, int w, const vision_proc_config *pc,
                      float **pixel_values, int64_t grid_thw[3], h3_err *e) {
    *pixel_values = NULL;
    if (n_frames < 1) return h3_fail(e, "vision input: no frames");
    const int is_image = n_frames == 1;
    int64_t rh, rw;
    if (vision_smart_resize(h, w, is_image ? 0 : n_frames, pc, &rh, &rw, e)) return -1;
    uint8_t *resized = NULL;
    if (rh != h || rw != w) {
        /* The video processor exists only as a torchvision class (float bicubic-antialias, then
         * round): not implemented, so such clips are refused rather than approximated. */
        if (!is_image)
            return h3_fail(e, "vision input: video frames %dx%d: the video processor would resize them to %lldx%lld "
                              "(its torchvision bicubic resampling is not implemented; use fewer or smaller frames)",
                           w, h, (long long)rw, (long long)rh);
        /* Qwen2VLImageProcessorPil: PIL Image.resize((w, h), BICUBIC) of the uint8 RGB image */
        resized = malloc((size_t)rh * (size_t)rw * 3);
        if (!resized) return h3_fail(e, "vision input: out of memory resizing %dx%d to %lldx%lld", w, h, (long long)rw, (long long)rh);
        if (h3_resize_rgb(frames, w, h, resized, (int)rw, (int)rh, H3_RESAMPLE_BICUBIC, e)) {
            free(resized);
            return -1;
        }
        frames = resized, h = (int)rh, w = (int)rw;
    }
    const int P = pc->patch_size, TP = pc->temporal_patch_size, M = pc->merge_size;
    int64_t gt = (n_frames + TP - 1) / TP, gh = h / P, gw = w / P;
    int64_t vec = 3LL * TP * P * P, rows = gt * gh * gw;
    float *pv = malloc((size_t)(rows * vec) * sizeof(float));
    if (!pv) {
        free(resized);
        return h3_fail(e, "vision input: out of memory for %lld patches", (long long)rows);
    }
    /* Images (PIL processor): float32(x * (1/255) in double), then (v - mean) / std in fp32.
     * Videos (torchvision processor, rescale fused into normalize): (x - 255 mean) / (255 std) in fp32.
     * The two differ by one ulp for half of the 256 values. */
    float lut[3][256];
    for (int c = 0; c < 3; c++)
        for (int x = 0; x < 256; x++)
            lut[c][x] = is_image ? ((float)((double)x * (1.0 / 255.0)) - pc->mean[c]) / pc->std[c]
                                 : ((float)x - pc->mean[c] * 255.0f) / (pc->std[c] * 255.0f);
    int64_t r = 0;
    for (int64_t t = 0; t < gt; t++)
        for (int64_t bh = 0; bh < gh / M; bh++)
            for (int64_t bw = 0; bw < gw / M; bw++)
                for (int mh = 0; mh < M; mh++)
                    for (int mw = 0; mw < M; mw++, r++) {
                        int64_t prow = bh * M + mh, pcol = bw * M + mw;
                        float *v = pv + r * vec;
                        for (int c = 0; c < 3; c++)
                            for (int tau = 0; tau < TP; tau++) {
                                int64_t fr = t * TP + tau;
                                if (fr >= n_frames) fr = n_frames - 1; /* images duplicated, videos padded with the last */
                                const uint8_t *img = frames + (size_t)fr * (size_t)h * (size_t)w * 3;
                                for (int py = 0; py < P; py++)
                                    for (int px = 0; px < P; px++) {
                                        size_t at = ((size_t)(prow * P + py) * (size_t)w + (size_t)(pcol * P + px)) * 3 + (size_t)c;
                                        v[((c * TP + tau) * P + py) * P + px] = lut[c][img[at]];
                                    }
                            }
                    }
    free(resized);
    *pixel_values = pv;
    grid_thw[0] = gt, grid_thw[1] = gh, grid_thw[2] = gw;
    return 0;
}

int vision_sample_video(int n_frames, double fps, double sample_fps, int temporal_patch, int *indices, int *n_indices,
                        double *block_ts, int *n_blocks, h3_err *e) {
    if (!(fps > 0) || !(sample_fps > 0) || temporal_patch < 1)
        return h3_fail(e, "video sampling: fps, sample fps and temporal patch must be positive");
    double stride = fps / sample_fps, cursor = 0.0;
    int n = 0;
    while (py_round(cursor) < n_frames) {
        int idx = (int)py_round(cursor);
        if (n == 0 || idx > indices[n - 1]) indices[n++] = idx;
        cursor += stride;
    }
    if (n < temporal_patch) {
        int minimum = (int)py_round((temporal_patch - 1) * stride) + 1;
        return h3_fail(e, "a reference video is read at %g fps in groups of %d, so it must run at least %d frames at %g "
                          "fps, got %d", sample_fps, temporal_patch, minimum, fps, n_frames);
    }
    *n_indices = n;
    int nb = 0;
    for (int i = 0; i < n; i += temporal_patch) {
        int last = i + temporal_patch - 1;
        double t0 = i / sample_fps, t1 = (last < n ? last : n - 1) / sample_fps;
        block_ts[nb++] = (t0 + t1) / 2;
    }
    *n_blocks = nb;
    return 0;
}

/* ---------------------------------------------------------------- tower */

struct vision_model {
    h3_backend   *be;
    vision_config cfg;
    const st_set *w;
    int           bf16;
};

vision_model *vision_new(h3_backend *be, const vision_config *cfg, const st_set *weights, int bf16, h3_err *e) {
    h3_expect_list l = {0};
    if (vision_expected_tensors(cfg, &l, e)) return NULL;
    for (int i = 0; i < l.n; i++) {
        const st_entry *en = st_set_entry(weights, l.v[i].name, NULL);
        if (!en) {
            h3_fail(e, "%s: tensor '%s' not found (the vision tower is needed for images and videos)",
                    st_set_path(weights), l.v[i].name);
            h3_expect_list_free(&l);
            return NULL;
        }
        if (h3_expect_check(&l.v[i], en->dtype, en->ndim, en->shape, st_set_path(weights), e) != 0) {
            h3_expect_list_free(&l);
            return NULL;
        }
    }
    h3_expect_list_free(&l);
    vision_model *m = calloc(1, sizeof *m);
    if (!m) {
        h3_fail(e, "vision: out of memory");
        return NULL;
    }
    m->be = be, m->cfg = *cfg, m->w = weights, m->bf16 = bf16;
    return m;
}

void vision_free(vision_model *m) { free(m); }

/* A weight on the backend (matrix: flattened to 2-D [out, in]) or a small vector as fp32. */
static h3_tensor *get_matrix(vision_model *m, const char *name, h3_err *e) {
    h3_tensor v;
    if (st_set_get(m->w, name, &v, e)) return NULL;
    if (v.ndim > 2) { /* conv kernel [C, 3, tp, p, p] -> [C, 3*tp*p*p]: the patch-vector order */
        int64_t rest = 1;
        for (int d = 1; d < v.ndim; d++) rest *= v.shape[d];
        v.ndim = 2;
        v.shape[1] = rest;
    }
    return h3_weight_upload(m->be, &v, e);
}

static float *get_vector(vision_model *m, const char *name, h3_err *e) {
    h3_tensor v;
    if (st_set_get(m->w, name, &v, e)) return NULL;
    int64_t n = h3_tensor_numel(&v);
    float *host = malloc((size_t)n * sizeof(float));
    float *dev = h3_alloc(m->be, (size_t)n * sizeof(float));
    if (!host || !dev) {
        free(host);
        if (dev) h3_free(m->be, dev);
        h3_fail(e, "%s: out of memory", name);
        return NULL;
    }
    h3_convert_to_f32(host, v.data, v.dtype, (size_t)n);
    h3_upload(m->be, dev, host, (size_t)n * sizeof(float));
    free(host);
    return dev;
}

/* Linear layer: y = x W^T + b, from tensors prefix.weight / prefix.bias. */
static int linear(vision_model *m, float *y, const float *x, int64_t rows, const char *prefix, int flags, h3_err *e) {
    char wn[192], bn[192];
    snprintf(wn, sizeof wn, "%s.weight", prefix);
    snprintf(bn, sizeof bn, "%s.bias", prefix);
    h3_tensor *w = get_matrix(m, wn, e);
    if (!w) return -1;
    h3_tensor bview;
    if (st_set_get(m->w, bn, &bview, e)) {
        h3_weight_free(m->be, w);
        return -1;
    }
    h3_tensor *b = h3_weight_upload(m->be, &bview, e);
    if (!b) {
        h3_weight_free(m->be, w);
        return -1;
    }
    h3_matmul(m->be, y, x, rows, w, b, flags);
    h3_weight_free(m->be, w);
    h3_weight_free(m->be, b);
    return 0;
}

static int layernorm(vision_model *m, float *y, const float *x, int64_t rows, int64_t dim, const char *prefix, int flags,
                     h3_err *e) {
    char wn[192], bn[192];
    snprintf(wn, sizeof wn, "%s.weight", prefix);
    snprintf(bn, sizeof bn, "%s.bias", prefix);
    float *w = get_vector(m, wn, e);
    if (!w) return -1;
    float *b = get_vector(m, bn, e);
    if (!b) {
        h3_free(m->be, w);
        return -1;
    }
    h3_layernorm(m->be, y, x, rows, dim, w, b, 1e-6f, flags);
    h3_free(m->be, w);
    h3_free(m->be, b);
    return 0;
}

/* Patch merger (docs/model/text_encoder.md 3.5 steps 5-6): prefix.{norm, linear_fc1, linear_fc2}. postshuffle: the norm
 * runs over the 4C-wide concatenation (deepstack) instead of each C-wide patch (final merger). */
static int merger(vision_model *m, float *out, const float *x, int64_t N, const char *prefix, int postshuffle,
                  float *t1, float *t2, int flags, h3_err *e) {
    const int64_t C = m->cfg.hidden_size, U = (int64_t)m->cfg.spatial_merge_size * m->cfg.spatial_merge_size;
    const int64_t G = N / U, W = C * U;
    char name[192];
    snprintf(name, sizeof name, "%s.norm", prefix);
    if (postshuffle ? layernorm(m, t1, x, G, W, name, flags, e) : layernorm(m, t1, x, N, C, name, flags, e)) return -1;
    snprintf(name, sizeof name, "%s.linear_fc1", prefix);
    if (linear(m, t2, t1, G, name, flags, e)) return -1;
    h3_gelu_erf(m->be, t2, t2, G * W, flags);
    snprintf(name, sizeof name, "%s.linear_fc2", prefix);
    return linear(m, out, t2, G, name, flags, e);
}

/* Bilinear position-embedding resample (transformers 5.24 get_vision_interpolation_indices_and_weights
 * with align_corners): per patch 4 taps and fp32 weights; the weighted sum is formed in fp32
 * (bf16 table x fp32 weight promotes) and cast to the activation dtype once. Rows in the patch
 * order of the processor, repeated per temporal block. Host arrays. */
static int pos_embed(vision_model *m, const int64_t *grid, int n_items, float *pos /*[N][C]*/, h3_err *e) {
    h3_tensor tab;
    if (st_set_get(m->w, "model.visual.pos_embed.weight", &tab, e)) return -1;
    const int64_t C = m->cfg.hidden_size;
    const int side = (int)lround(sqrt((double)m->cfg.num_position_embeddings)), M = m->cfg.spatial_merge_size;
    size_t esz = h3_dtype_size(tab.dtype);
    float *rowbuf = malloc((size_t)(4 * C) * sizeof(float));
    if (!rowbuf) return h3_fail(e, "vision: out of memory");
    int64_t r = 0;
    for (int it = 0; it < n_items; it++) {
        int64_t gt = grid[3 * it], gh = grid[3 * it + 1], gw = grid[3 * it + 2];
        for (int64_t t = 0; t < gt; t++)
            for (int64_t within = 0; within < gh * gw; within++, r++) {
                int64_t bw_n = gw / M;
                int64_t in_col = within % M, in_row = (within / M) % M;
                int64_t block_col = (within / (M * M)) % bw_n, block_row = within / (M * M * bw_n);
                int64_t rc[2] = {block_row * M + in_row, block_col * M + in_col}, sz[2] = {gh, gw};
                int taps[2][2];
                float wts[2][2];
                for (int a = 0; a < 2; a++) {
                    float den = (float)(sz[a] - 1 > 1 ? sz[a] - 1 : 1);
                    float src = ((float)rc[a] * (float)(side - 1)) / den;
                    float fl = floorf(src);
                    for (int o = 0; o < 2; o++) {
                        int tp = (int)fl + o;
                        taps[a][o] = tp < 0 ? 0 : (tp > side - 1 ? side - 1 : tp);
                        float d = fabsf((src - fl) - (float)o);
                        float wv = 1.0f - d;
                        wts[a][o] = wv < 0 ? 0 : wv;
                    }
                }
                float *dst = pos + r * C;
                for (int k = 0; k < 4; k++) {
                    int i = k / 2, j = k % 2;
                    int64_t idx = (int64_t)taps[0][i] * side + taps[1][j];
                    h3_convert_to_f32(rowbuf + k * C, (const uint8_t *)tab.data + (size_t)(idx * C) * esz, tab.dtype,
                                      (size_t)C);
                    float wk = wts[0][i] * wts[1][j];
                    for (int64_t c = 0; c < C; c++) rowbuf[k * C + c] *= wk;
                }
                for (int64_t c = 0; c < C; c++) {
                    float s = rowbuf[c] + rowbuf[C + c];
                    s = s + rowbuf[2 * C + c];
                    s = s + rowbuf[3 * C + c];
                    dst[c] = m->bf16 ? h3_round_bf16(s) : s;
                }
            }
    }
    free(rowbuf);
    return 0;
}

/* 2-D rotary tables (docs/model/text_encoder.md 3.5 step 3): [N][head_dim] fp32, layout [h freqs, w freqs] twice. */
static void vision_rope(const vision_config *c, const int64_t *grid, int n_items, float *cosb, float *sinb) {
    const int hd = c->hidden_size / c->num_heads, sd = hd / 2, nf = sd / 2, M = c->spatial_merge_size;
    float inv[256];
    for (int j = 0; j < nf; j++) inv[j] = 1.0f / powf((float)c->rope_theta, (float)(2 * j) / (float)sd);
    int64_t r = 0;
    for (int it = 0; it < n_items; it++) {
        int64_t gt = grid[3 * it], gh = grid[3 * it + 1], gw = grid[3 * it + 2];
        for (int64_t t = 0; t < gt; t++)
            for (int64_t bh = 0; bh < gh / M; bh++)
                for (int64_t bw = 0; bw < gw / M; bw++)
                    for (int mh = 0; mh < M; mh++)
                        for (int mw = 0; mw < M; mw++, r++) {
                            float row = (float)(bh * M + mh), col = (float)(bw * M + mw);
                            float *cr = cosb + r * hd, *sr = sinb + r * hd;
                            for (int j = 0; j < nf; j++) {
                                float ph = row * inv[j], pw = col * inv[j];
                                cr[j] = cr[j + sd] = cosf(ph);
                                sr[j] = sr[j + sd] = sinf(ph);
                                cr[nf + j] = cr[nf + j + sd] = cosf(pw);
                                sr[nf + j] = sr[nf + j + sd] = sinf(pw);
                            }
                        }
    }
}

int vision_forward(vision_model *m, const float *pixel_values, int64_t N, const int64_t *grid, int n_items, float *merged,
                   float *deep, h3_err *e) {
    const vision_config *c = &m->cfg;
    h3_backend *be = m->be;
    const int flags = m->bf16 ? H3_BF16_OUT : 0;
    const int64_t C = c->hidden_size, I = c->intermediate_size, U = (int64_t)c->spatial_merge_size * c->spatial_merge_size;
    const int64_t O = c->out_hidden_size, vec = (int64_t)c->in_channels * c->temporal_patch_size * c->patch_size * c->patch_size;
    const int heads = c->num_heads, hd = (int)(C / heads);
    int64_t total = 0;
    for (int it = 0; it < n_items; it++) {
        int64_t gt = grid[3 * it], gh = grid[3 * it + 1], gw = grid[3 * it + 2];
        if (gt < 1 || gh < 1 || gw < 1 || gh % c->spatial_merge_size || gw % c->spatial_merge_size)
            return h3_fail(e, "grid_thw[%d] = (%lld, %lld, %lld): sizes must be positive and h, w multiples of %d", it,
                           (long long)gt, (long long)gh, (long long)gw, c->spatial_merge_size);
        total += gt * gh * gw;
    }
    if (total != N)
        return h3_fail(e, "pixel_values has %lld rows but grid_thw implies %lld patches", (long long)N, (long long)total);
    const int64_t G = N / U;
    int rc = -1;
    size_t fN = (size_t)N * sizeof(float);
    float *x = h3_alloc(be, fN * (size_t)(vec > C ? vec : C));
    float *y = h3_alloc(be, fN * (size_t)C);
    float *qkv = h3_alloc(be, fN * (size_t)(3 * C));
    float *att = h3_alloc(be, fN * (size_t)C);
    float *mlp = h3_alloc(be, fN * (size_t)(I > C ? I : C));
    float *cosd = h3_alloc(be, fN * (size_t)hd), *sind = h3_alloc(be, fN * (size_t)hd);
    float *pos = h3_alloc(be, fN * (size_t)C);
    float *host = malloc(fN * (size_t)(vec > C ? vec : C));
    float *host2 = malloc(fN * (size_t)hd);
    float *m_out = h3_alloc(be, (size_t)G * (size_t)O * sizeof(float));
    if (!x || !y || !qkv || !att || !mlp || !cosd || !sind || !pos || !host || !host2 || !m_out) {
        h3_fail(e, "vision: out of memory for %lld patches", (long long)N);
        goto done;
    }
    /* 1. patch embed (Conv3d with kernel = stride = a GEMM); the input is cast to the weight dtype */
    memcpy(host, pixel_values, fN * (size_t)vec);
    if (m->bf16)
        for (int64_t i = 0; i < N * vec; i++) host[i] = h3_round_bf16(host[i]);
    h3_upload(be, x, host, fN * (size_t)vec);
    if (linear(m, y, x, N, "model.visual.patch_embed.proj", flags, e)) goto done;
    /* 2. + resampled position table */
    if (pos_embed(m, grid, n_items, host, e)) goto done;
    h3_upload(be, pos, host, fN * (size_t)C);
    h3_add(be, x, y, pos, N * C, flags);
    /* 3. rotary tables */
    {
        float *sinh_ = host2, *cosh_ = host;
        vision_rope(c, grid, n_items, cosh_, sinh_);
        h3_upload(be, cosd, cosh_, fN * (size_t)hd);
        h3_upload(be, sind, sinh_, fN * (size_t)hd);
    }
    /* 4. blocks */
    const float scale = 1.0f / sqrtf((float)hd);
    for (int j = 0; j < c->depth; j++) {
        char pre[128], name[160];
        snprintf(pre, sizeof pre, "model.visual.blocks.%d", j);
        snprintf(name, sizeof name, "%s.norm1", pre);
        if (layernorm(m, y, x, N, C, name, flags, e)) goto done;
        snprintf(name, sizeof name, "%s.attn.qkv", pre);
        if (linear(m, qkv, y, N, name, flags, e)) goto done;
        /* q, k rotated in fp32 from the rounded projections, then rounded once */
        h3_rope_half(be, qkv, N, 3 * C, heads, hd, hd, cosd, sind, 0);
        h3_rope_half(be, qkv + C, N, 3 * C, heads, hd, hd, cosd, sind, 0);
        if (m->bf16)
            for (int64_t r = 0; r < N; r++) h3_round_bf16_buf(be, qkv + r * 3 * C, 2 * C);
        /* bidirectional attention inside each temporal block of each item */
        int64_t r0 = 0;
        for (int it = 0; it < n_items; it++) {
            int64_t seg = grid[3 * it + 1] * grid[3 * it + 2];
            for (int64_t t = 0; t < grid[3 * it]; t++, r0 += seg)
                h3_attention_eager(be, att + r0 * C, C, qkv + r0 * 3 * C, 3 * C, qkv + r0 * 3 * C + C, 3 * C,
                             qkv + r0 * 3 * C + 2 * C, 3 * C, seg, seg, heads, heads, hd, scale, 0, flags);
        }
        snprintf(name, sizeof name, "%s.attn.proj", pre);
        if (linear(m, y, att, N, name, flags, e)) goto done;
        h3_add(be, x, x, y, N * C, flags);
        snprintf(name, sizeof name, "%s.norm2", pre);
        if (layernorm(m, y, x, N, C, name, flags, e)) goto done;
        snprintf(name, sizeof name, "%s.mlp.linear_fc1", pre);
        if (linear(m, mlp, y, N, name, flags, e)) goto done;
        h3_gelu_tanh(be, mlp, mlp, N * I, flags);
        snprintf(name, sizeof name, "%s.mlp.linear_fc2", pre);
        if (linear(m, y, mlp, N, name, flags, e)) goto done;
        h3_add(be, x, x, y, N * C, flags);
        /* deepstack taps */
        for (int k = 0; k < c->n_deepstack; k++) {
            if (c->deepstack_indexes[k] != j) continue;
            if (deep) {
                snprintf(name, sizeof name, "model.visual.deepstack_merger_list.%d", k);
                if (merger(m, m_out, x, N, name, 1, y, mlp, flags, e)) goto done;
                h3_sync(be);
                h3_download(be, deep + (size_t)k * (size_t)G * (size_t)O, m_out, (size_t)G * (size_t)O * sizeof(float));
            }
        }
    }
    /* 5. final merger */
    if (merger(m, m_out, x, N, "model.visual.merger", 0, y, mlp, flags, e)) goto done;
    h3_sync(be);
    h3_download(be, merged, m_out, (size_t)G * (size_t)O * sizeof(float));
    rc = 0;
done:;
    float *bufs[] = {x, y, qkv, att, mlp, cosd, sind, pos, m_out};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) h3_free(be, bufs[i]);
    free(host);
    free(host2);
    return rc;
}
