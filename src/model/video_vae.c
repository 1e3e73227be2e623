/* MiniMax-H3 video VAE: weights, decoder and the chunking drivers (docs/model/video_vae.md; section numbers below
 * refer to it). The config and tensor lists are in video_vae_config.c, the encoder in video_vae_encoder.c, the tile
 * plans and stitching in video_vae_tiling.c; all share the structures of video_vae_internal.h. */
#include "video_vae.h"
#include "video_vae_internal.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../backend/backend_bench.h"
#include "../io/config.h"
#include "../backend/ops.h"
#include "../io/safetensors.h"


/* ------------------------------------------------------------------------------------------------
 * Model and weights
 * ---------------------------------------------------------------------------------------------- */

static h3_tensor *find_w(video_vae *v, const char *fmt, ...) {
    char name[192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    for (int i = 0; i < v->names.n; i++)
        if (!strcmp(v->names.v[i].name, name)) return v->w[i];
    return NULL; /* unreachable for names from expect_parts */
}

static const float *fw(video_vae *v, const char *fmt, ...) {
    char name[192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    h3_tensor *t = find_w(v, "%s", name);
    return t ? (const float *)t->data : NULL;
}

/* A 2-D (rows x cols) view starting `row0` rows into t (same dtype). */
static h3_tensor view2d(const h3_tensor *t, int64_t row0, int64_t rows, int64_t cols) {
    h3_tensor r;
    memset(&r, 0, sizeof r);
    r.dtype = t->dtype;
    r.ndim = cols > 0 ? 2 : 1;
    r.shape[0] = rows;
    r.shape[1] = cols;
    r.data = (uint8_t *)t->data + (size_t)(row0 * (cols > 0 ? cols : 1)) * h3_dtype_size(t->dtype);
    return r;
}

/* bf16 mode: the weights and biases of the decoder block linears that run as bf16 GEMMs (docs/model/video_vae.md 11: the reference's
 * fp16 linears; autocast casts a linear's bias to the half type too, and cuBLASLt's bf16-output epilogue takes a
 * bf16 bias, added to the fp32 accumulator before the one rounding). */
static int is_bf16_matrix(const char *name) {
    static const char *const tails[] = {".attn.to_q.weight", ".attn.to_k.weight", ".attn.to_v.weight",
                                        ".attn.to_out.0.weight", ".ff.net.0.proj.weight", ".ff.net.2.weight",
                                        ".attn.to_q.bias", ".attn.to_k.bias", ".attn.to_v.bias",
                                        ".attn.to_out.0.bias", ".ff.net.0.proj.bias", ".ff.net.2.bias"};
    if (strncmp(name, "decoder.transformer_blocks.", 27) != 0) return 0;
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
        size_t m = strlen(tails[i]);
        if (n > m && !strcmp(name + n - m, tails[i])) return 1;
    }
    return 0;
}

/* bf16 mode: the dtype a decoder tensor is kept in. The block linears are bf16 GEMMs; proj_out (2048 -> 3072 pixel
 * values per token) runs with the input rounding the reference's fp16-autocast linear has, as an fp16 GEMM
 * (h3_matmul's H3_F16_IN: F16 weights and bias, the input rounded to fp16, fp32 accumulation; docs/model/video_vae.md 11) instead of an
 * fp32 SGEMM. Its output stays fp32 (the reference rounds it to fp16 for its fp16 blends, which h3 runs in fp32).
 * Everything else keeps its stored dtype. */
static h3_dtype bf16_mode_dtype(const video_vae *v, const char *name, h3_dtype stored) {
    if (is_bf16_matrix(name)) return H3_BF16;
    if (v->proj_out_f16 && (!strcmp(name, "decoder.proj_out.weight") || !strcmp(name, "decoder.proj_out.bias")))
        return H3_F16;
    return stored;
}

static void wire(video_vae *v) {
    const video_vae_config *c = &v->cfg;
    if (v->parts & VIDEO_VAE_ENCODER) {
        v->conv_in_w = fw(v, "encoder.conv_in.weight");
        v->conv_in_b = fw(v, "encoder.conv_in.bias");
        for (int L = 0; L < c->num_levels; L++) {
            vv_level *lv = &v->levels[L];
            int co = c->block_out_channels[L], cin = L ? c->block_out_channels[L - 1] : c->block_out_channels[0];
            for (int r = 0; r < c->layers_per_block; r++) {
                vv_resnet *rs = &lv->res[r];
                const char *p = "encoder.down_blocks.%d.resnets.%d.%s";
                rs->cin = r ? co : cin;
                rs->cout = co;
                rs->n1w = fw(v, p, L, r, "norm1.weight");
                rs->n1b = fw(v, p, L, r, "norm1.bias");
                rs->c1w = fw(v, p, L, r, "conv1.weight");
                rs->c1b = fw(v, p, L, r, "conv1.bias");
                rs->n2w = fw(v, p, L, r, "norm2.weight");
                rs->n2b = fw(v, p, L, r, "norm2.bias");
                rs->c2w = fw(v, p, L, r, "conv2.weight");
                rs->c2b = fw(v, p, L, r, "conv2.bias");
                if (rs->cin != rs->cout) {
                    rs->scw = fw(v, p, L, r, "conv_shortcut.weight");
                    rs->scb = fw(v, p, L, r, "conv_shortcut.bias");
                }
            }
            if (c->spatial_factors[L] * c->temporal_factors[L] > 1) {
                lv->dw = fw(v, "encoder.down_blocks.%d.downsamplers.0.conv.weight", L);
                lv->db = fw(v, "encoder.down_blocks.%d.downsamplers.0.conv.bias", L);
            }
        }
        v->norm_out_w = fw(v, "encoder.norm_out.weight");
        v->norm_out_b = fw(v, "encoder.norm_out.bias");
        v->conv_out_w = fw(v, "encoder.conv_out.weight");
        v->conv_out_b = fw(v, "encoder.conv_out.bias");
        v->quant_w = fw(v, "quant_conv.weight");
        v->quant_b = fw(v, "quant_conv.bias");
    }
    if (v->parts & VIDEO_VAE_DECODER) {
        int64_t z = c->latent_channels, D = c->dim, F = c->ffn_inner;
        v->pq = view2d(find_w(v, "post_quant_conv.weight"), 0, z, z);
        v->pqb = view2d(find_w(v, "post_quant_conv.bias"), 0, z, 0);
        v->proj_in = *find_w(v, "decoder.proj_in.weight");
        v->proj_in_b = *find_w(v, "decoder.proj_in.bias");
        v->proj_out = *find_w(v, "decoder.proj_out.weight");
        v->proj_out_b = *find_w(v, "decoder.proj_out.bias");
        v->registers = fw(v, "decoder.register_tokens");
        v->dnorm_w = fw(v, "decoder.norm_out.weight");
        v->dnorm_b = fw(v, "decoder.norm_out.bias");
        for (int i = 0; i < c->dec_layers; i++) {
            vv_block *b = &v->blocks[i];
            const char *p = "decoder.transformer_blocks.%d.%s";
            b->norm1 = fw(v, p, i, "norm1.weight");
            b->norm2 = fw(v, p, i, "norm2.weight");
            b->scale1 = fw(v, p, i, "scale1");
            b->scale2 = fw(v, p, i, "scale2");
            b->q = *find_w(v, p, i, "attn.to_q.weight");
            b->qb = *find_w(v, p, i, "attn.to_q.bias");
            b->k = *find_w(v, p, i, "attn.to_k.weight");
            b->kb = *find_w(v, p, i, "attn.to_k.bias");
            b->v = *find_w(v, p, i, "attn.to_v.weight");
            b->vb = *find_w(v, p, i, "attn.to_v.bias");
            b->o = *find_w(v, p, i, "attn.to_out.0.weight");
            b->ob = *find_w(v, p, i, "attn.to_out.0.bias");
            /* diffusers stores [value; gate] (docs/model/video_vae.md 15, trap 1) */
            h3_tensor *w1 = find_w(v, p, i, "ff.net.0.proj.weight"), *b1 = find_w(v, p, i, "ff.net.0.proj.bias");
            b->ffv = view2d(w1, 0, F, D);
            b->ffg = view2d(w1, F, F, D);
            b->ffvb = view2d(b1, 0, F, 0);
            b->ffgb = view2d(b1, F, F, 0);
            b->ff1 = *w1;
            b->ff1b = *b1;
            b->ff2 = *find_w(v, p, i, "ff.net.2.weight");
            b->ff2b = *find_w(v, p, i, "ff.net.2.bias");
        }
    }
}

/* H3_VAE_BATCH: video_vae_set_decode_batch's default (1: the per-tile path; 0: by the output budget) */
int vv_env_decode_batch(void) {
    const int vb = h3_knob_int(H3_KNOB_VAE_BATCH, 0);
    return vb > 0 ? vb : 0;
}

/* The part of construction shared by video_vae_new and video_vae_new_random: the model with its
 * parts, config, expected tensor list and an empty weight table (NULL on error). */
static video_vae *start_model(h3_backend *be, const video_vae_config *cfg, int parts, h3_err *e) {
    video_vae *v = calloc(1, sizeof *v);
    if (!v) {
        h3_fail(e, "out of memory");
        return NULL;
    }
    v->be = be;
    v->fp8 = (parts & VIDEO_VAE_FP8) && (parts & VIDEO_VAE_DECODER);
    v->bf16 = ((parts & VIDEO_VAE_BF16) || v->fp8) && (parts & VIDEO_VAE_DECODER);
    v->parts = parts & (VIDEO_VAE_ENCODER | VIDEO_VAE_DECODER);
    v->cfg = *cfg;
    v->batch = vv_env_decode_batch();
    v->small_tail = !h3_knob_is(H3_KNOB_VAE_TAIL, "0");
    v->proj_out_f16 = !h3_knob_is(H3_KNOB_VAE_PROJ_OUT, "fp32"); /* "fp32": proj_out as the fp32 SGEMM in bf16 mode (A/B runs) */
    if ((v->parts & VIDEO_VAE_ENCODER) && !h3_ops_supported(be)) {
        h3_fail(e, "video VAE encoder: the %s backend has no convolution ops in this build", h3_backend_name(be));
        goto fail;
    }
    if (video_vae_expect_parts(&v->cfg, v->parts, &v->names, e) != 0) goto fail;
    v->w = calloc((size_t)v->names.n, sizeof *v->w);
    if (!v->w) {
        h3_fail(e, "out of memory");
        goto fail;
    }
    return v;
fail:
    video_vae_free(v);
    return NULL;
}

/* A tensor in backend memory owned by the model (freed with h3_weight_free). */
static h3_tensor *backend_tensor(h3_backend *be, h3_dtype dt, int ndim, const int64_t *shape, h3_err *e) {
    h3_tensor *t = be->kind == H3_BACKEND_CPU ? h3_tensor_new(dt, ndim, shape, e) : h3_tensor_view(dt, ndim, shape, NULL, e);
    if (!t) return NULL;
    if (be->kind != H3_BACKEND_CPU && !(t->data = h3_alloc(be, h3_tensor_nbytes(t)))) {
        h3_tensor_free(t);
        h3_fail(e, "video VAE: out of backend memory for a %zu-byte weight", h3_tensor_nbytes(t));
        return NULL;
    }
    return t;
}

/* bf16 mode: every block's to_q / to_k / to_v weights and biases copied into one [3D, D] matrix and one [3D] bias
 * (one GEMM per block instead of three; the same products), the separate tensors freed and q/k/v re-pointed at
 * row slices of the fused ones. */
static int fuse_qkv(video_vae *v, h3_err *e) {
    const int64_t D = v->cfg.dim;
    for (int i = 0; i < v->cfg.dec_layers; i++) {
        vv_block *b = &v->blocks[i];
        const h3_tensor *parts[3] = {&b->q, &b->k, &b->v}, *biases[3] = {&b->qb, &b->kb, &b->vb};
        b->qkv = backend_tensor(v->be, parts[0]->dtype, 2, (int64_t[]){3 * D, D}, e);
        b->qkvb = backend_tensor(v->be, biases[0]->dtype, 1, (int64_t[]){3 * D}, e);
        if (!b->qkv || !b->qkvb) return -1;
        size_t wb = (size_t)(D * D) * h3_dtype_size(parts[0]->dtype), bb = (size_t)D * h3_dtype_size(biases[0]->dtype);
        for (int j = 0; j < 3; j++) {
            h3_copy(v->be, (uint8_t *)b->qkv->data + j * wb, parts[j]->data, wb);
            h3_copy(v->be, (uint8_t *)b->qkvb->data + j * bb, biases[j]->data, bb);
        }
        static const char *const names[6] = {"attn.to_q.weight", "attn.to_k.weight", "attn.to_v.weight",
                                              "attn.to_q.bias", "attn.to_k.bias", "attn.to_v.bias"};
        for (int j = 0; j < 6; j++) {
            char name[192];
            snprintf(name, sizeof name, "decoder.transformer_blocks.%d.%s", i, names[j]);
            for (int n = 0; n < v->names.n; n++)
                if (v->w[n] && !strcmp(v->names.v[n].name, name)) {
                    h3_weight_free(v->be, v->w[n]);
                    v->w[n] = NULL;
                }
        }
        b->q = view2d(b->qkv, 0, D, D), b->k = view2d(b->qkv, D, D, D), b->v = view2d(b->qkv, 2 * D, D, D);
        b->qb = view2d(b->qkvb, 0, D, 0), b->kb = view2d(b->qkvb, D, D, 0), b->vb = view2d(b->qkvb, 2 * D, D, 0);
    }
    return 0;
}

/* VIDEO_VAE_FP8: an FP8 copy of each block GEMM's BF16 weight (the bf16 one stays, for the per-tile path and the
 * probe), its bf16 bias attached for the GEMM's epilogue. */
static int quantize_fp8(video_vae *v, h3_err *e) {
    for (int i = 0; i < v->cfg.dec_layers; i++) {
        vv_block *b = &v->blocks[i];
        struct { h3_fp8_linear *l; const h3_tensor *w, *b; } job[4] = {
            {&b->qkv8, b->qkv, b->qkvb}, {&b->o8, &b->o, &b->ob}, {&b->ff18, &b->ff1, &b->ff1b}, {&b->ff28, &b->ff2, &b->ff2b}};
        for (int j = 0; j < 4; j++) {
            if (job[j].b->dtype != H3_BF16)
                return h3_fail(e, "video VAE: --vae-quant fp8: block %d's biases must be BF16 (the bf16 mode's)", i);
            if (h3_fp8_linear_new(v->be, job[j].l, job[j].w, e) != 0) return -1;
            job[j].l->bias = job[j].b->data;
        }
    }
    return h3_backend_check(v->be, e);
}

/* After the weights: per-level and per-block structs, then the named views into the weights. */
static int finish_model(video_vae *v, h3_err *e) {
    for (int L = 0; L < v->cfg.num_levels; L++) {
        v->levels[L].res = calloc((size_t)v->cfg.layers_per_block, sizeof(vv_resnet));
        if (!v->levels[L].res) return h3_fail(e, "out of memory");
    }
    v->blocks = calloc((size_t)(v->cfg.dec_layers ? v->cfg.dec_layers : 1), sizeof(vv_block));
    if (!v->blocks) return h3_fail(e, "out of memory");
    wire(v);
    if (v->bf16 && fuse_qkv(v, e) != 0) return -1;
    return v->fp8 ? quantize_fp8(v, e) : 0;
}

video_vae *video_vae_new(h3_backend *be, const char *vae_dir, int parts, h3_err *e) {
    video_vae_config cfg;
    if (video_vae_config_load(vae_dir, &cfg, e) != 0) return NULL;
    video_vae *v = start_model(be, &cfg, parts, e);
    if (!v) return NULL;
    v->set = st_set_open(vae_dir, e);
    if (!v->set) goto fail;
    for (int i = 0; i < v->names.n; i++) {
        const h3_expect *x = &v->names.v[i];
        h3_tensor view;
        if (st_set_get(v->set, x->name, &view, e) != 0) goto fail;
        if (h3_expect_check(x, view.dtype, view.ndim, view.shape, st_set_path(v->set), e) != 0) goto fail;
        const h3_dtype kept = v->bf16 ? bf16_mode_dtype(v, x->name, view.dtype) : view.dtype;
        if (kept != view.dtype) {
            /* bf16 mode: an owned BF16 / F16 copy (round to nearest even); CPU keeps it, CUDA uploads it */
            h3_tensor *t = h3_tensor_new(kept, view.ndim, view.shape, e);
            if (!t) goto fail;
            h3_convert_from_f32(t->data, kept, view.data, (size_t)h3_tensor_numel(t));
            if (be->kind == H3_BACKEND_CPU) {
                v->w[i] = t;
            } else {
                v->w[i] = h3_weight_upload(be, t, e);
                h3_tensor_free(t);
            }
        } else {
            v->w[i] = h3_weight_upload(be, &view, e);
        }
        if (!v->w[i]) goto fail;
    }
    if (finish_model(v, e) == 0) return v;
fail:
    video_vae_free(v);
    return NULL;
}

video_vae *video_vae_new_random(h3_backend *be, const video_vae_config *cfg, int parts, uint64_t seed, h3_err *e) {
    video_vae *v = start_model(be, cfg, parts, e);
    if (!v) return NULL;
    for (int i = 0; i < v->names.n; i++) {
        const h3_expect *x = &v->names.v[i];
        /* uniform with the variance of N(0, 1/fan_in) for matrices/kernels; norm gains near 1 */
        int64_t numel = 1;
        for (int d = 0; d < x->ndim; d++) numel *= x->shape[d];
        int is_norm = x->ndim == 1 && strstr(x->name, "norm") != NULL;
        float scale = x->ndim >= 2 ? sqrtf(3.0f * (float)x->shape[0] / (float)numel) : is_norm ? 0.2f : 0.1f;
        float offset = is_norm ? 1.0f : 0.0f;
        uint64_t base = seed ^ ((uint64_t)i * 0x9e3779b97f4a7c15ull);
        /* the shape h3_weight_upload would give; CPU: owning host tensor, else backend memory */
        h3_dtype dt = v->bf16 ? bf16_mode_dtype(v, x->name, x->dtype) : x->dtype;
        h3_tensor *t = be->kind == H3_BACKEND_CPU ? h3_tensor_new(dt, x->ndim, x->shape, e)
                                                  : h3_tensor_view(dt, x->ndim, x->shape, NULL, e);
        if (!t) goto fail;
        v->w[i] = t;
        if (be->kind != H3_BACKEND_CPU && !(t->data = h3_alloc(be, h3_tensor_nbytes(t)))) {
            h3_fail(e, "random video VAE weights: out of device memory for '%s'", x->name);
            goto fail;
        }
        if (h3_fill_random(be, t->data, t->dtype, numel, base, scale, offset) != 0) {
            h3_fail(e, "random video VAE weights: tensor '%s' has dtype %s", x->name, h3_dtype_name(t->dtype));
            goto fail;
        }
    }
    if (finish_model(v, e) == 0) return v;
fail:
    video_vae_free(v);
    return NULL;
}

void video_vae_set_log(video_vae *v, void (*log)(void *user, int kind, const char *line), void *user) {
    v->log = log, v->log_user = user;
}

void video_vae_free(video_vae *v) {
    if (!v) return;
    if (v->w)
        for (int i = 0; i < v->names.n; i++)
            if (v->w[i]) h3_weight_free(v->be, v->w[i]);
    free(v->w);
    for (int L = 0; L < VVAE_MAX_LEVELS; L++) free(v->levels[L].res);
    if (v->blocks)
        for (int i = 0; i < v->cfg.dec_layers; i++) {
            vv_block *b = &v->blocks[i];
            h3_weight_free(v->be, b->qkv);
            h3_weight_free(v->be, b->qkvb);
            h3_fp8_linear_free(v->be, &b->qkv8);
            h3_fp8_linear_free(v->be, &b->o8);
            h3_fp8_linear_free(v->be, &b->ff18);
            h3_fp8_linear_free(v->be, &b->ff28);
        }
    for (int s = 0; s < 2; s++) h3_host_free(v->be, v->pin[s]);
    free(v->blocks);
    h3_expect_list_free(&v->names);
    st_set_free(v->set);
    free(v);
}

const video_vae_config *video_vae_get_config(const video_vae *v) { return &v->cfg; }

/* ------------------------------------------------------------------------------------------------
 * Decoder (docs/model/video_vae.md 4.7, 4.8, 7)
 * ---------------------------------------------------------------------------------------------- */



void vv_dec_ws_free(h3_backend *be, vv_dec_ws *w) {
    float *dev[] = {w->tok, w->pq, w->x, w->a, w->q, w->k, w->v, w->o, w->fv, w->fg, w->cos, w->sin, w->out};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) h3_free(be, dev[i]);
    h3_free(be, w->rowidx);
    free(w->h_tok);
    free(w->h_out);
    free(w->h_cos);
    free(w->h_sin);
    free(w->h_zero);
    free(w->h_idx);
    memset(w, 0, sizeof *w);
}

int64_t vv_dec_tokens(const video_vae_config *c, int64_t np) { return np + c->dec_registers + 1; }

/* ffn_rows: FFN_ROWS, or 0 for the whole tile at once (bf16 mode: bigger GEMMs, ~60 MB more per tile). */
int vv_dec_ws_new(h3_backend *be, const video_vae_config *c, int64_t np, int64_t ffn_rows, vv_dec_ws *w,
                      h3_err *e) {
    memset(w, 0, sizeof *w);
    w->np_cap = np;
    const int64_t N = vv_dec_tokens(c, np), D = c->dim, fr = ffn_rows > 0 && N > ffn_rows ? ffn_rows : N;
    w->ffn_rows = fr;
    size_t f = sizeof(float);
    w->tok = h3_alloc(be, (size_t)(np * c->latent_channels) * f);
    w->pq = h3_alloc(be, (size_t)(np * c->latent_channels) * f);
    w->x = h3_alloc(be, (size_t)(N * D) * f);
    w->a = h3_alloc(be, (size_t)(N * D) * f);
    w->q = h3_alloc(be, (size_t)(N * D) * f);
    w->k = h3_alloc(be, (size_t)(N * D) * f);
    w->v = h3_alloc(be, (size_t)(N * D) * f);
    w->o = h3_alloc(be, (size_t)(N * D) * f);
    w->fv = h3_alloc(be, (size_t)(fr * c->ffn_inner) * f);
    w->fg = h3_alloc(be, (size_t)(fr * c->ffn_inner) * f);
    w->cos = h3_alloc(be, (size_t)(N * c->rope_dim) * f);
    w->sin = h3_alloc(be, (size_t)(N * c->rope_dim) * f);
    w->out = h3_alloc(be, (size_t)(np * c->patch_dim) * f);
    w->rowidx = h3_alloc(be, (size_t)N * sizeof(int32_t));
    w->h_tok = malloc((size_t)(np * c->latent_channels) * f);
    w->h_out = malloc((size_t)(np * c->patch_dim) * f);
    w->h_cos = malloc((size_t)(N * c->rope_dim) * f);
    w->h_sin = malloc((size_t)(N * c->rope_dim) * f);
    w->h_zero = calloc((size_t)D, f);
    w->h_idx = calloc((size_t)N, sizeof(int32_t));
    if (!w->tok || !w->pq || !w->x || !w->a || !w->q || !w->k || !w->v || !w->o || !w->fv || !w->fg || !w->cos ||
        !w->sin || !w->out || !w->rowidx || !w->h_tok || !w->h_out || !w->h_cos || !w->h_sin || !w->h_zero ||
        !w->h_idx) {
        vv_dec_ws_free(be, w);
        return h3_fail(e, "video VAE decoder: out of memory for a %lld-token tile", (long long)N);
    }
    h3_upload(be, w->rowidx, w->h_idx, (size_t)N * sizeof(int32_t));
    return 0;
}

/* cos/sin [N, rope_dim] for a Tl x h x w grid plus the zero-position suffix (docs/model/video_vae.md 4.8, 7 step 5). */
static void rope_tables(const video_vae_config *c, int64_t Tl, int64_t h, int64_t w, float *cs, float *sn) {
    const int nf = c->rope_dim / 6, half = c->rope_dim / 2;
    float inv[64];
    for (int k = 0; k < nf; k++) {
        float ex = (float)((double)k * (6.0 / (double)c->rope_dim)); /* torch.arange(0, 1, 6/rope_dim) */
        inv[k] = 1.0f / powf(c->rope_theta, ex);
    }
    const float two_pi = (float)(2.0 * M_PI);
    const int64_t np = Tl * h * w, N = vv_dec_tokens(c, np);
    for (int64_t n = 0; n < N; n++) {
        float pos[3] = {0.0f, 0.0f, 0.0f};
        if (n < np) {
            int64_t t = n / (h * w), y = n / w % h, x = n % w, sz[3] = {Tl, h, w}, id[3] = {t, y, x};
            for (int a = 0; a < 3; a++) pos[a] = 2.0f * ((0.5f + (float)id[a]) / (float)sz[a]) - 1.0f;
        }
        float *cr = cs + n * c->rope_dim, *sr = sn + n * c->rope_dim;
        for (int a = 0; a < 3; a++)
            for (int k = 0; k < nf; k++) {
                float ang = (two_pi * pos[a]) * inv[k];
                cr[a * nf + k] = cr[half + a * nf + k] = cosf(ang);
                sr[a * nf + k] = sr[half + a * nf + k] = sinf(ang);
            }
    }
}

/* One decoder tile (docs/model/video_vae.md 7 steps 1-8): host tokens ws->h_tok [np, C] in (t, y, x) order -> backend ws->out
 * [np, patch_dim]. Only queues the work on an asynchronous backend (CUDA): vv_decode_tile_finish fetches it, so
 * the host can stitch the previous tile meanwhile. */
void vv_decode_tile(video_vae *v, vv_dec_ws *ws, int64_t Tl, int64_t h, int64_t w) {
    h3_backend *be = v->be;
    const video_vae_config *c = &v->cfg;
    const int64_t np = Tl * h * w, N = vv_dec_tokens(c, np), D = c->dim, F = c->ffn_inner;
    const int H = c->dec_heads, hd = c->dec_head_dim;
    const float eps = c->dec_norm_eps, scale = 1.0f / sqrtf((float)hd);
    h3_upload(be, ws->tok, ws->h_tok, (size_t)(np * c->latent_channels) * sizeof(float));
    h3_matmul(be, ws->pq, ws->tok, np, &v->pq, &v->pqb, 0); /* post_quant_conv (pointwise) */
    h3_matmul(be, ws->x, ws->pq, np, &v->proj_in, &v->proj_in_b, 0);
    h3_copy(be, ws->x + np * D, v->registers, (size_t)(c->dec_registers * D) * sizeof(float));
    h3_upload(be, ws->x + (N - 1) * D, ws->h_zero, (size_t)D * sizeof(float)); /* the zero token (trap 3) */
    if (ws->rope_Tl != Tl || ws->rope_h != h || ws->rope_w != w) { /* tables depend on the tile shape only */
        rope_tables(c, Tl, h, w, ws->h_cos, ws->h_sin);
        h3_upload(be, ws->cos, ws->h_cos, (size_t)(N * c->rope_dim) * sizeof(float));
        h3_upload(be, ws->sin, ws->h_sin, (size_t)(N * c->rope_dim) * sizeof(float));
        ws->rope_Tl = Tl, ws->rope_h = h, ws->rope_w = w;
    }
    /* bf16 mode (docs/model/video_vae.md 11): the GEMM inputs are rounded to bf16 where the reference casts them to its
     * half type (norm outputs, q/k after RoPE, the attention output, the SwiGLU product), the block
     * linears and the attention write bf16; norms, q/k norms, RoPE, softmax and the fp32 residual
     * updates (x + branch * scale) compute in fp32. Flags 0 everywhere: the exact fp32 path. */
    const int bf = v->bf16 ? H3_BF16_OUT : 0;
    for (int i = 0; i < c->dec_layers; i++) {
        const vv_block *b = &v->blocks[i];
        h3_rmsnorm(be, ws->a, ws->x, N, D, b->norm1, eps, bf);
        h3_matmul(be, ws->q, ws->a, N, &b->q, &b->qb, bf);
        h3_matmul(be, ws->k, ws->a, N, &b->k, &b->kb, bf);
        h3_matmul(be, ws->v, ws->a, N, &b->v, &b->vb, bf);
        h3_rmsnorm(be, ws->q, ws->q, N * H, hd, NULL, eps, 0);
        h3_rmsnorm(be, ws->k, ws->k, N * H, hd, NULL, eps, 0);
        h3_rope_half(be, ws->q, N, D, H, hd, c->rope_dim, ws->cos, ws->sin, 0);
        h3_rope_half(be, ws->k, N, D, H, hd, c->rope_dim, ws->cos, ws->sin, 0);
        if (bf) { /* the attention's bf16 inputs (CUDA rounds them too; the CPU twin does not) */
            h3_round_bf16_buf(be, ws->q, N * D);
            h3_round_bf16_buf(be, ws->k, N * D);
        }
        h3_attention(be, ws->o, D, ws->q, D, ws->k, D, ws->v, D, N, N, H, H, hd, scale, 0, bf);
        h3_matmul(be, ws->a, ws->o, N, &b->o, &b->ob, bf);
        h3_gated_residual(be, ws->x, ws->a, N, D, b->scale1, 0, ws->rowidx, 0, 0); /* x + attn * scale1 */
        h3_rmsnorm(be, ws->a, ws->x, N, D, b->norm2, eps, bf);
        const int64_t fr = ws->ffn_rows;
        for (int64_t r0 = 0; r0 < N; r0 += fr) {
            int64_t nr = N - r0 < fr ? N - r0 : fr;
            h3_matmul(be, ws->fv, ws->a + r0 * D, nr, &b->ffv, &b->ffvb, bf);
            h3_matmul(be, ws->fg, ws->a + r0 * D, nr, &b->ffg, &b->ffgb, bf);
            h3_swiglu(be, ws->fv, ws->fv, ws->fg, nr * F, bf);
            h3_matmul(be, ws->o + r0 * D, ws->fv, nr, &b->ff2, &b->ff2b, bf);
        }
        h3_gated_residual(be, ws->x, ws->o, N, D, b->scale2, 0, ws->rowidx, 0, 0);
    }
    /* norm_out and proj_out are per token: only the patch tokens are needed (step 8 drops the rest). */
    h3_layernorm(be, ws->a, ws->x, np, D, v->dnorm_w, v->dnorm_b, eps, 0);
    h3_matmul(be, ws->out, ws->a, np, &v->proj_out, &v->proj_out_b, v->proj_out.dtype == H3_F16 ? H3_F16_IN : 0);
}

/* Waits for the tile queued by vv_decode_tile and copies its output to ws->h_out. */
void vv_decode_tile_finish(video_vae *v, vv_dec_ws *ws, int64_t np) {
    h3_download(v->be, ws->h_out, ws->out, (size_t)(np * v->cfg.patch_dim) * sizeof(float));
}

int64_t video_vae_decoded_frames(const video_vae_config *c, int64_t L, h3_err *e) {
    const int64_t K = c->K, td = c->token_drop, R = c->R;
    int64_t tokens = L + td, pad = ((-tokens) % K + K) % K, chunks = (tokens + pad) / K - (td > 0);
    if (L < 1 || chunks <= 0) {
        int64_t need = 1; /* the smallest decodable length for this geometry */
        while ((need + td + ((-(need + td)) % K + K) % K) / K - (td > 0) <= 0) need++;
        return h3_fail(e, "latents: %lld latent frames cannot be decoded (the reference needs at least %lld)",
                       (long long)L, (long long)need);
    }
    int64_t tc = (K + c->O) * R, main_n = (tc < c->CF ? tc : c->CF) - c->P;
    int64_t tail_n = td > 0 ? (tc < 2 * c->CF ? tc : 2 * c->CF) - c->CF - c->P : 0;
    if (main_n < 0) main_n = 0;
    if (tail_n < 0) tail_n = 0;
    int64_t total = chunks * main_n + tail_n, intra = c->clip_length % R, cut = 0;
    for (int64_t k = 0; k < pad; k++) cut += (intra && (L + k) % K == 0) ? intra : R;
    total -= cut;
    if (total <= 0) return h3_fail(e, "latents: %lld latent frames decode to no frames", (long long)L);
    return total;
}

double vv_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- tile-batched bf16 decoder (docs/model/video_vae.md 13: the tiles of a clip are independent; attention stays per tile) ---- */

/* H3_VAE_PROFILE=1: vv_decode_batch syncs after each kind of op and adds up the wall time per kind (one line
 * through video_vae_set_log's callback after each decode); a diagnostic, it serializes host and device. */
static void vp_mark(video_vae *v, int kind) { /* kind < 0: start */
    if (v->vp_on <= 0) return;
    h3_sync(v->be);
    double t = vv_now();
    if (kind >= 0) v->vp_acc[kind] += t - v->vp_t0;
    v->vp_t0 = t;
}



void vv_bat_ws_free(h3_backend *be, vv_bat_ws *w) {
    void *dev[] = {w->tok, w->pq, w->x, w->out[0], w->out[1], w->cos, w->sin, w->zero,
                   w->a, w->qkv, w->o, w->br, w->g, w->z, w->xq, w->xs, w->xqa, w->xsa, w->qkv32, w->o32};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++) h3_free(be, dev[i]);
    free(w->h_cos);
    free(w->h_sin);
    memset(w, 0, sizeof *w);
}

int vv_bat_ws_new(h3_backend *be, const video_vae_config *c, int64_t B, int64_t np, int fp8, vv_bat_ws *w, h3_err *e) {
    memset(w, 0, sizeof *w);
    const int64_t N = vv_dec_tokens(c, np), M = B * N, D = c->dim, F = c->ffn_inner;
    w->B = B, w->np = np, w->N = N, w->fr = M;
    const size_t f = sizeof(float), hb = sizeof(h3_bf16);
    size_t zb = (size_t)(w->fr * 2 * F) * hb, lb = (size_t)(np * D) * f; /* the FFN's z doubles as lnf */
    w->tok = h3_alloc(be, (size_t)(B * np * c->latent_channels) * f);
    w->pq = h3_alloc(be, (size_t)(B * np * c->latent_channels) * f);
    w->x = h3_alloc(be, (size_t)(M * D) * f);
    for (int s = 0; s < 2; s++) w->out[s] = h3_alloc(be, (size_t)(B * np * c->patch_dim) * f);
    w->cos = h3_alloc(be, (size_t)(N * c->rope_dim) * f);
    w->sin = h3_alloc(be, (size_t)(N * c->rope_dim) * f);
    w->zero = h3_alloc(be, (size_t)D * f);
    w->a = h3_alloc(be, (size_t)(M * D) * hb);
    w->qkv = h3_alloc(be, (size_t)(M * 3 * D) * hb);
    w->o = h3_alloc(be, (size_t)(M * D) * hb);
    w->br = h3_alloc(be, (size_t)(M * D) * hb);
    w->g = h3_alloc(be, (size_t)(w->fr * F) * hb);
    w->z = h3_alloc(be, zb > lb ? zb : lb);
    w->lnf = (float *)w->z;
    if (fp8) {
        w->xq = h3_alloc(be, (size_t)(M * (D > F ? D : F)));
        w->xs = h3_alloc(be, (size_t)M * f);
        w->xqa = h3_alloc(be, (size_t)(M * D));
        w->xsa = h3_alloc(be, (size_t)M * f);
        if (!w->xq || !w->xs || !w->xqa || !w->xsa) w->z = NULL; /* reported below */
    }
    if (c->dec_head_dim != 64 && c->dec_head_dim != 128) { /* tiny configs: h3_bf16_attention takes 64 / 128 */
        w->qkv32 = h3_alloc(be, (size_t)(N * 3 * D) * f);
        w->o32 = h3_alloc(be, (size_t)(N * D) * f);
        if (!w->qkv32 || !w->o32) w->z = NULL; /* reported below */
    }
    w->h_cos = malloc((size_t)(N * c->rope_dim) * f);
    w->h_sin = malloc((size_t)(N * c->rope_dim) * f);
    if (!w->tok || !w->pq || !w->x || !w->out[0] || !w->out[1] || !w->cos || !w->sin || !w->zero || !w->a ||
        !w->qkv || !w->o || !w->br || !w->g || !w->z || !w->h_cos || !w->h_sin) {
        vv_bat_ws_free(be, w);
        return h3_fail(e, "video VAE decoder: out of memory for a batch of %lld tiles of %lld tokens", (long long)B,
                       (long long)N);
    }
    return 0;
}

/* One block GEMM of the batched decoder: y [rows][N] (stride ldy) = x W^T + b, x bf16 [rows][K] (stride ldx):
 * the BF16 GEMM, or with VIDEO_VAE_FP8 the input's per-row quantization and the FP8 GEMM (bias in its epilogue);
 * xq != NULL: x's codes and scales, written by the kernel that produced x (docs/fast.md "Fused quantization"). */
static void bat_linear(video_vae *v, vv_bat_ws *w, h3_bf16 *y, int64_t ldy, const h3_bf16 *x, int64_t ldx, int64_t rows,
                       const h3_tensor *wt, const h3_tensor *bias, const h3_fp8_linear *q, const uint8_t *xq,
                       const float *xs) {
    if (!v->fp8) {
        h3_bf16_matmul(v->be, y, ldy, x, ldx, rows, wt, bias);
        return;
    }
    if (!xq) h3_fp8_quant_rows(v->be, w->xq, w->xs, x, rows, q->K, ldx);
    h3_fp8_matmul(v->be, y, ldy, xq ? xq : w->xq, xq ? xs : w->xs, rows, q);
}

/* h3_vae_residual_rmsnorm into w->a; fq: also its rows' FP8 codes into w->xqa / w->xsa (the same bits as
 * bat_linear's own quantization of w->a) */
static void bat_norm(video_vae *v, vv_bat_ws *w, const h3_bf16 *branch, const float *scale, int64_t M, int64_t D,
                     const float *norm, float eps, int fq) {
    h3_rowq rq = {H3_ROWQ_FP8, w->xqa, w->xsa, 0};
    if (fq) h3_vae_residual_rmsnorm_q(v->be, w->x, w->a, branch, scale, M, D, norm, eps, &rq);
    else h3_vae_residual_rmsnorm(v->be, w->x, w->a, branch, scale, M, D, norm, eps);
}

/* B tiles of Tl x h x w latents (host tokens h_tok [B][np][C], a h3_host_alloc buffer) through docs/model/video_vae.md 7 steps 1-8 as one stack of
 * B * N rows -> backend w->out[slot] [B][np][patch_dim]. The same roundings as vv_decode_tile's bf16 mode; only
 * queues the work on an asynchronous backend. */
void vv_decode_batch(video_vae *v, vv_bat_ws *w, const float *h_tok, int64_t B, int64_t Tl, int64_t h, int64_t wd,
                         int slot) {
    h3_backend *be = v->be;
    const video_vae_config *c = &v->cfg;
    const int64_t np = Tl * h * wd, N = vv_dec_tokens(c, np), M = B * N, D = c->dim, F = c->ffn_inner, Cz = c->latent_channels;
    const int H = c->dec_heads, hd = c->dec_head_dim;
    const float eps = c->dec_norm_eps, scale = 1.0f / sqrtf((float)hd);
    vp_mark(v, -1);
    h3_upload(be, w->tok, h_tok, (size_t)(B * np * Cz) * sizeof(float));
    for (int64_t t = 0; t < B; t++) {
        float *xt = w->x + t * N * D;
        h3_matmul(be, w->pq + t * np * Cz, w->tok + t * np * Cz, np, &v->pq, &v->pqb, 0); /* post_quant_conv */
        h3_matmul(be, xt, w->pq + t * np * Cz, np, &v->proj_in, &v->proj_in_b, 0);
        h3_copy(be, xt + np * D, v->registers, (size_t)(c->dec_registers * D) * sizeof(float));
        h3_copy(be, xt + (N - 1) * D, w->zero, (size_t)D * sizeof(float)); /* the zero token (trap 3) */
    }
    if (w->rope_Tl != Tl || w->rope_h != h || w->rope_w != wd) { /* every tile of the batch: the same positions */
        rope_tables(c, Tl, h, wd, w->h_cos, w->h_sin);
        h3_upload(be, w->cos, w->h_cos, (size_t)(N * c->rope_dim) * sizeof(float));
        h3_upload(be, w->sin, w->h_sin, (size_t)(N * c->rope_dim) * sizeof(float));
        w->rope_Tl = Tl, w->rope_h = h, w->rope_w = wd;
    }
    const int fq = v->fp8 && h3_knob_int(H3_KNOB_FUSED_QUANT, 1); /* the norms write the q|k|v and FFN-in codes */
    const uint8_t *aq = fq ? w->xqa : NULL;
    if (c->dec_layers > 0) bat_norm(v, w, NULL, NULL, M, D, v->blocks[0].norm1, eps, fq);
    vp_mark(v, VP_IN);
    for (int i = 0; i < c->dec_layers; i++) {
        const vv_block *b = &v->blocks[i];
        bat_linear(v, w, w->qkv, 3 * D, w->a, D, M, b->qkv, b->qkvb, &b->qkv8, aq, w->xsa); /* [q | k | v] rows */
        vp_mark(v, VP_QKV);
        h3_vae_qk_norm_rope(be, w->qkv, M, 3 * D, N, 2 * H, hd, eps, c->rope_dim, w->cos, w->sin);
        vp_mark(v, VP_QK);
        if (!w->qkv32) {
            h3_vae_tile_attention(be, w->o, w->qkv, B, N, H, hd, scale); /* one batched call over the tiles */
        } else {
            for (int64_t t = 0; t < B; t++) { /* vv_decode_tile's h3_attention on the same (bf16-exact) values */
                h3_bf16_unpack(be, w->qkv32, w->qkv + t * N * 3 * D, N * 3 * D);
                h3_attention(be, w->o32, D, w->qkv32, 3 * D, w->qkv32 + D, 3 * D, w->qkv32 + 2 * D, 3 * D, N, N, H, H,
                             hd, scale, 0, H3_BF16_OUT);
                h3_bf16_pack(be, w->o + t * N * D, w->o32, N * D);
            }
        }
        vp_mark(v, VP_ATTN);
        bat_linear(v, w, w->br, D, w->o, D, M, &b->o, &b->ob, &b->o8, NULL, NULL);
        vp_mark(v, VP_OUT);
        bat_norm(v, w, w->br, b->scale1, M, D, b->norm2, eps, fq); /* x += attn*scale1; norm2 */
        vp_mark(v, VP_NORM);
        for (int64_t r0 = 0; r0 < M; r0 += w->fr) {
            const int64_t nr = M - r0 < w->fr ? M - r0 : w->fr;
            bat_linear(v, w, w->z, 2 * F, w->a + r0 * D, D, nr, &b->ff1, &b->ff1b, &b->ff18, aq ? aq + r0 * D : NULL,
                       w->xsa + r0); /* [value | gate] */
            vp_mark(v, VP_FF1);
            h3_rowq gq = {H3_ROWQ_FP8, w->xq, w->xs, 0};
            if (fq) h3_bf16_swiglu_q(be, w->g, w->z, nr, F, 2 * F, 0, F, &gq);
            else h3_bf16_swiglu(be, w->g, w->z, nr, F, 2 * F, 0, F);
            vp_mark(v, VP_SWIGLU);
            bat_linear(v, w, w->br + r0 * D, D, w->g, F, nr, &b->ff2, &b->ff2b, &b->ff28, fq ? w->xq : NULL, w->xs);
            vp_mark(v, VP_FF2);
        }
        const float *next = i + 1 < c->dec_layers ? v->blocks[i + 1].norm1 : NULL; /* x += ffn*scale2; next norm1 */
        if (next) bat_norm(v, w, w->br, b->scale2, M, D, next, eps, fq);
        else h3_vae_residual_rmsnorm(be, w->x, NULL, w->br, b->scale2, M, D, NULL, eps);
        vp_mark(v, VP_NORM);
    }
    /* norm_out and proj_out per patch token (step 8 drops the registers and the zero token) */
    for (int64_t t = 0; t < B; t++) { /* per tile: a GEMM's rows can depend on M (OpenBLAS, cuBLASLt), keep vv_decode_tile's */
        h3_layernorm(be, w->lnf, w->x + t * N * D, np, D, v->dnorm_w, v->dnorm_b, eps, 0);
        h3_matmul(be, w->out[slot] + t * np * c->patch_dim, w->lnf, np, &v->proj_out, &v->proj_out_b,
                  v->proj_out.dtype == H3_F16 ? H3_F16_IN : 0);
    }
    vp_mark(v, VP_PROJ);
}

void video_vae_set_decode_batch(video_vae *v, int max_tiles) { v->batch = max_tiles < 0 ? 0 : max_tiles; }

int64_t video_vae_decode_workspace_bytes(const video_vae_config *c, int64_t h, int64_t w,
                                         const video_vae_tiling *tiling) {
    video_vae_tiling t;
    if (vv_resolve_tiling(tiling, c->S, &t, NULL) != 0) return -1;
    const int64_t S = c->S, H = h * S, W = w * S, cl = c->K + c->O;
    const int64_t th = t.enabled && t.tile_h < H ? t.tile_h : H, tw = t.enabled && t.tile_w < W ? t.tile_w : W;
    const int64_t np = cl * (th / S) * (tw / S), N = vv_dec_tokens(c, np), D = c->dim;
    const int64_t fr = N < FFN_ROWS ? N : FFN_ROWS, tc = cl * c->R;
    int64_t main_n = (tc < c->CF ? tc : c->CF) - c->P;
    int64_t tail_n = c->token_drop > 0 ? (tc < 2 * c->CF ? tc : 2 * c->CF) - c->CF - c->P : 0;
    if (tail_n < 0) tail_n = 0;
    const int64_t nsel = main_n + tail_n, frame = (int64_t)c->out_channels * H * W;
    int64_t ov = t.overlap_h + 4 * S; /* overlaps grow by round-robin steps; a generous bound */
    int64_t floats = 2 * np * c->latent_channels + 6 * N * D + 2 * fr * c->ffn_inner + 2 * N * c->rope_dim +
                     np * c->patch_dim                                          /* backend tile buffers */
                     + 128 * N                                                  /* CPU attention scores block */
                     + np * c->latent_channels + np * c->patch_dim + 2 * N * c->rope_dim /* host staging */
                     + nsel * c->out_channels * th * tw                         /* raw tile */
                     + nsel * frame + tail_n * frame                            /* chunk + pending tail */
                     + nsel * c->out_channels * (ov * W + th * ov);             /* stitch strips */
    return floats * (int64_t)sizeof(float) + N * (int64_t)sizeof(int32_t) * 2;
}

/* ------------------------------------------------------------------------------------------------
 * Posterior, latent and pixel normalization (docs/model/video_vae.md 9, 10)
 * ---------------------------------------------------------------------------------------------- */

void video_vae_posterior(const video_vae_config *c, const float *moments, int64_t n, float *mean, float *logvar) {
    const int64_t C = c->latent_channels;
    memcpy(mean, moments, (size_t)(C * n) * sizeof(float));
    for (int64_t i = 0; i < C * n; i++) {
        float lv = moments[C * n + i];
        logvar[i] = lv < -30.0f ? -30.0f : (lv > 20.0f ? 20.0f : lv);
    }
}

void video_vae_posterior_sample(const video_vae_config *c, const float *mean, const float *logvar, const float *eps,
                                int64_t n, float *z) {
    for (int64_t i = 0; i < c->latent_channels * n; i++) {
        float sd = expf(0.5f * logvar[i]);
        z[i] = mean[i] + sd * eps[i];
    }
}

void video_vae_normalize_latents(const video_vae_config *c, float *z, int64_t n) {
    for (int64_t ch = 0; ch < c->latent_channels; ch++)
        for (int64_t i = 0; i < n; i++) z[ch * n + i] = (z[ch * n + i] - c->latents_mean[ch]) / c->latents_std[ch];
}

void video_vae_denormalize_latents(const video_vae_config *c, float *z, int64_t n) {
    for (int64_t ch = 0; ch < c->latent_channels; ch++)
        for (int64_t i = 0; i < n; i++) z[ch * n + i] = z[ch * n + i] * c->latents_std[ch] + c->latents_mean[ch];
}

static const float pix_mean[3] = {0.485f, 0.456f, 0.406f};
static const float pix_std[3] = {0.229f, 0.224f, 0.225f};

void video_vae_normalize_pixels(float *x, int64_t n) {
    for (int ch = 0; ch < 3; ch++)
        for (int64_t i = 0; i < n; i++) x[ch * n + i] = (x[ch * n + i] - pix_mean[ch]) / pix_std[ch];
}

void video_vae_denormalize_pixels(float *x, int64_t n) {
    for (int ch = 0; ch < 3; ch++)
        for (int64_t i = 0; i < n; i++) {
            float v = x[ch * n + i] * pix_std[ch] + pix_mean[ch];
            x[ch * n + i] = v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v);
        }
}

void video_vae_pixels_to_hwc(const float *x, float *out, int64_t n) {
#pragma omp parallel for schedule(static) if (n >= 65536)
    for (int64_t i = 0; i < n; i++)
        for (int ch = 0; ch < 3; ch++) {
            float v = x[ch * n + i] * pix_std[ch] + pix_mean[ch];
            out[i * 3 + ch] = v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v);
        }
}

void video_vae_pixels_from_u8(const uint8_t *p, float *x, int64_t n) {
    for (int ch = 0; ch < 3; ch++)
        for (int64_t i = 0; i < n; i++) x[ch * n + i] = ((float)p[ch * n + i] / 255.0f - pix_mean[ch]) / pix_std[ch];
}
