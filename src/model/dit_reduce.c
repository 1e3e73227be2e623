/* --token-reduction (docs/model/features.md 5.5): the reduced sequence of one forward. The rows before the target video
 * (text, keyframe conditions, audio) stay one to one; the target video's 2x2-patch tokens of each latent row of
 * each frame are paired horizontally (columns 2j and 2j+1; an odd width leaves its last column alone), so the
 * reduced video has frames x h x ceil(w / 2) rows. A reduced row's rotary position is the mean of its sources'
 * (fp64, as the packed positions; then the usual fp32 tables) and its AdaLN row is its first source's (both
 * sources are target video: tag 0, the video timestep). The pooling and the restore are backend ops
 * (h3_bf16_rows_pool_pairs / h3_bf16_rows_expand_delta); this file only builds the tables. The pairing, the
 * mean positions and the restore rule follow the Metal engine (h3.c), the one implementation of the feature. */
#include <stdlib.h>
#include <string.h>

#include "dit_internal.h"

void dit_reduce_free(dit_model *m, dit_reduction *r) {
    h3_backend *be = m->be;
    h3_free(be, r->pairs), h3_free(be, r->parent), h3_free(be, r->X), h3_free(be, r->base);
    h3_free(be, r->ada_idx), h3_free(be, r->cos), h3_free(be, r->sin);
    memset(r, 0, sizeof *r);
}

int dit_reduce_new(dit_model *m, const dit_inputs *in, const fwd_ctx *x, dit_reduction *r, h3_err *e) {
    memset(r, 0, sizeof *r);
    if (m->act != H3_BF16) return h3_fail(e, "--token-reduction needs the bf16 mode (--precision bf16)");
    const int64_t S = in->S, F = in->reduce_frames, gh = in->reduce_h, gw = in->reduce_w, H = m->cfg.hidden_size;
    const int64_t nv = F * gh * gw, gwr = (gw + 1) / 2, P = S - nv;
    if (F < 1 || gh < 1 || gw < 1 || nv > in->Nv || P < 0)
        return h3_fail(e, "--token-reduction: the target video grid %lld x %lld x %lld does not fit the %lld video rows",
                       (long long)F, (long long)gh, (long long)gw, (long long)in->Nv);
    for (int64_t i = 0; i < nv; i++) /* the target video must be the packed sequence's tail, in grid order */
        if (in->video_indices[in->Nv - nv + i] != P + i)
            return h3_fail(e, "--token-reduction requires the target video to end the packed layout");
    if (in->reduce_begin < 0 || in->reduce_end > m->cfg.num_layers)
        return h3_fail(e, "--token-reduction: blocks %d..%d outside 0..%d", in->reduce_begin, in->reduce_end,
                       m->cfg.num_layers);
    const int64_t Sr = P + F * gh * gwr, R = 6 * m->cfg.rope_freq_dim;
    r->S_full = S, r->S_red = Sr, r->prefix = P;
    int32_t *pairs = malloc(sizeof(int32_t) * (size_t)(2 * Sr)), *parent = malloc(sizeof(int32_t) * (size_t)S);
    int32_t *ada = malloc(sizeof(int32_t) * (size_t)Sr);
    double *pos = malloc(sizeof(double) * (size_t)(3 * Sr));
    float *cos_h = malloc(sizeof(float) * (size_t)(Sr * R)), *sin_h = malloc(sizeof(float) * (size_t)(Sr * R));
    int rc = -1;
    if (!pairs || !parent || !ada || !pos || !cos_h || !sin_h) goto oom;
    for (int64_t i = 0; i < Sr; i++) {
        int64_t a = i, b = i;
        if (i >= P) {
            const int64_t local = i - P, line = local / gwr, col = 2 * (local % gwr);
            a = P + line * gw + col;
            b = col + 1 < gw ? a + 1 : a;
        }
        pairs[2 * i] = (int32_t)a, pairs[2 * i + 1] = (int32_t)b;
        ada[i] = (int32_t)(in->timestep_indices[a] * MODALITIES + in->token_tags[a]);
        for (int k = 0; k < 3; k++) pos[3 * i + k] = (in->position_ids[3 * a + k] + in->position_ids[3 * b + k]) * 0.5;
    }
    for (int64_t s = 0; s < S; s++) {
        if (s < P) {
            parent[s] = (int32_t)s;
        } else {
            const int64_t local = s - P;
            parent[s] = (int32_t)(P + (local / gw) * gwr + (local % gw) / 2);
        }
    }
    dit_rope_tables(m, pos, Sr, cos_h, sin_h);
    h3_backend *be = m->be;
    r->pairs = h3_alloc(be, sizeof(int32_t) * (size_t)(2 * Sr));
    r->parent = h3_alloc(be, sizeof(int32_t) * (size_t)S);
    r->ada_idx = h3_alloc(be, sizeof(int32_t) * (size_t)Sr);
    r->cos = h3_alloc(be, sizeof(float) * (size_t)(Sr * R));
    r->sin = h3_alloc(be, sizeof(float) * (size_t)(Sr * R));
    r->X = h3_alloc(be, (size_t)(Sr * H) * 2);
    r->base = h3_alloc(be, (size_t)(Sr * H) * 2);
    if (!r->pairs || !r->parent || !r->ada_idx || !r->cos || !r->sin || !r->X || !r->base) goto oom;
    h3_upload(be, r->pairs, pairs, sizeof(int32_t) * (size_t)(2 * Sr));
    h3_upload(be, r->parent, parent, sizeof(int32_t) * (size_t)S);
    h3_upload(be, r->ada_idx, ada, sizeof(int32_t) * (size_t)Sr);
    h3_upload(be, r->cos, cos_h, sizeof(float) * (size_t)(Sr * R));
    h3_upload(be, r->sin, sin_h, sizeof(float) * (size_t)(Sr * R));
    r->ctx = *x; /* the tables and the scratch (sized for S >= Sr) are the full context's */
    r->ctx.S = Sr, r->ctx.ada_idx = r->ada_idx, r->ctx.cos = r->cos, r->ctx.sin = r->sin;
    rc = 0;
    goto out;
oom:
    h3_fail(e, "--token-reduction: out of memory (S = %lld)", (long long)S);
    dit_reduce_free(m, r);
out:
    free(pairs), free(parent), free(ada), free(pos), free(cos_h), free(sin_h);
    return rc;
}
