/* The DiT's timestep embedding and AdaLN tables (docs/model/dit.md 4.4, 4.5): the tables of a list of timestep
 * values computed in one pass over the AdaLN projections (on GPUs uploaded one block at a time: they stay host
 * tensors), the one-list cache, and the release of the projections' memory. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../backend/backend.h"
#include "dit_internal.h"


/* temb [n, time_embed_dim] (backend memory) for n timestep values. */
static float *time_embedding(dit_model *m, const float *t, int n) {
    const dit_config *c = &m->cfg;
    int half = c->freq_dim / 2;
    float *e_host = malloc((size_t)n * c->freq_dim * sizeof(float));
    float *freq = malloc((size_t)half * sizeof(float));
    float *e = h3_alloc(m->be, (size_t)n * c->freq_dim * sizeof(float));
    float *h = h3_alloc(m->be, (size_t)n * c->time_embed_hidden_dim * sizeof(float));
    float *temb = h3_alloc(m->be, (size_t)n * c->time_embed_dim * sizeof(float));
    if (!e_host || !freq || !e || !h || !temb) {
        free(e_host), free(freq), h3_free(m->be, e), h3_free(m->be, h), h3_free(m->be, temb);
        return NULL;
    }
    const float neg_log_period = (float)-log(10000.0); /* fp32(-ln 10000), docs/model/dit.md 4.4 step 1 */
    for (int i = 0; i < half; i++) freq[i] = expf((neg_log_period * (float)i) / (float)half);
    for (int k = 0; k < n; k++)
        for (int i = 0; i < half; i++) {
            float arg = t[k] * freq[i];
            e_host[(size_t)k * c->freq_dim + i] = cosf(arg); /* cos half first ("flip_sin_to_cos") */
            e_host[(size_t)k * c->freq_dim + half + i] = sinf(arg);
        }
    h3_upload(m->be, e, e_host, (size_t)n * c->freq_dim * sizeof(float));
    /* the time embedder is an fp32 module in both modes */
    h3_matmul(m->be, h, e, n, m->te1_w, m->te1_b, 0);
    h3_silu(m->be, h, h, (int64_t)n * c->time_embed_hidden_dim, 0);
    h3_matmul(m->be, temb, h, n, m->te2_w, m->te2_b, 0);
    free(e_host), free(freq);
    h3_free(m->be, e), h3_free(m->be, h);
    return temb;
}

/* Computes the AdaLN tables of n timestep values into entries out[0..n) (allocated here). */
int dit_compute_adaln(dit_model *m, const float *t, int n, dit_adaln_entry *out, h3_err *e) {
    const dit_config *c = &m->cfg;
    int64_t H = c->hidden_size, L = c->num_layers, row = (int64_t)MODALITIES * ADALN_SLOTS * H;
    int flags = m->act == H3_BF16 ? H3_BF16_OUT : 0;
    if (m->adaln_released)
        return h3_fail(e, "timestep %.9g has no precomputed AdaLN table and the AdaLN weights were released "
                          "(call dit_prepare_timesteps before dit_release_adaln)", (double)t[0]);
    for (int k = 0; k < n; k++) out[k] = (dit_adaln_entry){t[k], NULL, NULL};
    float *temb = time_embedding(m, t, n);
    float *u = h3_alloc(m->be, (size_t)n * c->time_embed_dim * sizeof(float));
    float *mm = h3_alloc(m->be, (size_t)n * row * sizeof(float));
    float *mf = h3_alloc(m->be, (size_t)n * 2 * H * sizeof(float));
    int rc = 0;
    for (int k = 0; k < n && temb && u && mm && mf; k++) {
        out[k].blocks = h3_alloc(m->be, (size_t)(L * row) * sizeof(float));
        out[k].final = h3_alloc(m->be, (size_t)(2 * H) * sizeof(float));
        if (!out[k].blocks || !out[k].final) rc = -1;
    }
    if (!temb || !u || !mm || !mf || rc) {
        for (int k = 0; k < n; k++) dit_free_cache_entry(m, &out[k]);
        rc = h3_fail(e, "out of memory computing AdaLN tables");
        goto done;
    }
    /* SiLU in fp32 on the fp32 temb, then the cast to the bf16 projections (docs/model/dit.md 4.5 step 1, trap 12) */
    h3_silu(m->be, u, temb, (int64_t)n * c->time_embed_dim, flags);
    for (int64_t b = 0; b <= L && rc == 0; b++) {
        if (b < L && m->skip && m->skip[b]) continue; /* --layers dropped it (and its projection): never run */
        /* host-resident projections (GPU backends): one block's copy on the backend at a time (docs/model/features.md 7.1) */
        const h3_tensor *w = b < L ? m->blocks[b].adaln_w : m->out_ada_w, *bias = b < L ? m->blocks[b].adaln_b : m->out_ada_b;
        h3_tensor *dw = NULL, *db = NULL;
        if (m->adaln_host && (!(dw = h3_weight_upload(m->be, w, e)) || !(db = h3_weight_upload(m->be, bias, e)))) {
            h3_weight_free(m->be, dw);
            for (int k = 0; k < n; k++) dit_free_cache_entry(m, &out[k]);
            rc = -1;
            break;
        }
        if (dw) w = dw, bias = db;
        if (w->dtype == H3_I8) { /* int8 profile all (docs/int8.md) */
            if (dit_int8_adaln(m, b, mm, u, n, w, bias, e) != 0) rc = -1;
        } else {
            h3_matmul(m->be, b < L ? mm : mf, u, n, w, bias, flags);
        }
        for (int k = 0; k < n && b < L; k++)
            h3_copy(m->be, out[k].blocks + b * row, mm + (int64_t)k * row, (size_t)row * sizeof(float));
        h3_weight_free(m->be, dw), h3_weight_free(m->be, db);
    }
    if (rc) goto done;
    for (int k = 0; k < n; k++) h3_copy(m->be, out[k].final, mf + (int64_t)k * 2 * H, (size_t)(2 * H) * sizeof(float));
done:
    h3_free(m->be, temb), h3_free(m->be, u), h3_free(m->be, mm), h3_free(m->be, mf);
    return rc;
}

/* The cache entry of value t, -1 when there is none. */
static int cache_index(const dit_model *m, float t) {
    for (int i = 0; i < m->n_cache; i++)
        if (m->cache[i].t == t) return i;
    return -1;
}

dit_adaln_entry *dit_find_cached(dit_model *m, float t) {
    const int i = cache_index(m, t);
    return i < 0 ? NULL : &m->cache[i];
}

/* t[0..n) without repeats, in order (into out, n room); the count. */
static int distinct_values(const float *t, int n, float *out) {
    int nf = 0;
    for (int i = 0; i < n; i++) {
        int dup = 0;
        for (int j = 0; j < nf && !dup; j++) dup = out[j] == t[i];
        if (!dup) out[nf++] = t[i];
    }
    return nf;
}

/* 1 when the cache holds exactly these distinct values in this order: the tables one dit_prepare_timesteps(t, n)
 * computed together. */
static int cache_is_list(const dit_model *m, const float *v, int nv) {
    if (nv != m->n_cache) return 0;
    for (int i = 0; i < nv; i++)
        if (m->cache[i].t != v[i]) return 0;
    return 1;
}

static int all_cached(const dit_model *m, const float *t, int n) {
    for (int i = 0; i < n; i++)
        if (cache_index(m, t[i]) < 0) return 0;
    return 1;
}

int dit_timesteps_available(const dit_model *m, const float *t, int n) {
    return !m->adaln_released || all_cached(m, t, n);
}

int dit_timesteps_cached(const dit_model *m, const float *t, int n) {
    float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (!v) return 0;
    const int ok = m->adaln_released ? all_cached(m, t, n) : cache_is_list(m, v, distinct_values(t, n, v));
    free(v);
    return ok;
}

/* The tables of a list are computed together, in one pass over the AdaLN weights (26 GB in the release), and the cache
 * holds one list: a GEMM's row may sum differently with another row count, so a value's table bits depend on the
 * list it was computed with, and a list computed again (a session's later generation with the same schedule) must be
 * the very one a one-shot run computes. Another list replaces the cached one; a model whose projections were released
 * (random weights) keeps its tables and takes any list they cover. */
int dit_prepare_timesteps(dit_model *m, const float *t, int n, h3_err *e) {
    for (int i = 0; i < n; i++)
        if (!isfinite(t[i])) return h3_fail(e, "dit_prepare_timesteps: timestep %d is not finite", i);
    float *v = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    dit_adaln_entry *fresh = calloc((size_t)(n > 0 ? n : 1), sizeof *fresh);
    if (!v || !fresh) {
        free(v), free(fresh);
        return h3_fail(e, "out of memory");
    }
    const int nv = distinct_values(t, n, v);
    int rc = 0;
    if (m->adaln_released) { /* no weights left: the cached tables must cover the list */
        for (int i = 0; i < nv && rc == 0; i++)
            if (!all_cached(m, &v[i], 1))
                rc = h3_fail(e, "timestep %.9g has no precomputed AdaLN table and the AdaLN weights were released "
                                "(call dit_prepare_timesteps before dit_release_adaln)", (double)v[i]);
    } else if (!cache_is_list(m, v, nv)) {
        rc = nv ? dit_compute_adaln(m, v, nv, fresh, e) : 0;
        if (rc == 0) {
            for (int i = 0; i < m->n_cache; i++) dit_free_cache_entry(m, &m->cache[i]);
            free(m->cache);
            m->cache = fresh, m->n_cache = m->cap_cache = nv;
            fresh = NULL;
        }
    }
    free(v), free(fresh);
    return rc;
}

/* Gives the AdaLN projections' memory back (docs/model/dit.md 1: 39% of the release's bytes). Where they are views of the file
 * mapping (the CPU's weights; on GPUs, where they are never resident, the host tensors) only the pages go back: the
 * views stay readable, so tables for other timesteps can still be built later (a session's new --steps). Random
 * weights (no file) are dropped for good: later forwards need prepared values. */
void dit_release_adaln(dit_model *m) {
    if (!m || m->adaln_released) return;
    const int readable = m->st && (m->be->kind == H3_BACKEND_CPU || m->adaln_host);
    h3_tensor *ws[4];
    for (int b = 0; b <= m->cfg.num_layers; b++) {
        int n = 0;
        if (b < m->cfg.num_layers) ws[n++] = m->blocks[b].adaln_w, ws[n++] = m->blocks[b].adaln_b;
        else ws[n++] = m->out_ada_w, ws[n++] = m->out_ada_b;
        for (int i = 0; i < n; i++) {
            if (readable) dit_give_back_pages(ws[i]);
            else dit_drop_tensor(m, ws[i]);
        }
        if (!readable && b < m->cfg.num_layers) m->blocks[b].adaln_w = m->blocks[b].adaln_b = NULL;
    }
    if (readable) return;
    m->out_ada_w = m->out_ada_b = NULL;
    m->adaln_released = 1;
}

size_t dit_adaln_weight_bytes(const dit_model *m) { return m->adaln_bytes; }
size_t dit_weight_bytes(const dit_model *m) { return m->total_bytes; }

const float *dit_adaln_block_table(const dit_model *m, float t, int block) {
    if (block < 0 || block >= m->cfg.num_layers) return NULL;
    const int i = cache_index(m, t);
    return i < 0 ? NULL : m->cache[i].blocks + (int64_t)block * MODALITIES * ADALN_SLOTS * m->cfg.hidden_size;
}

/* --layers' gate scores (docs/model/features.md 5.3): the mean |gate| of each block over the cached tables. */
int dit_gate_scores(dit_model *m, double *scores, h3_err *e) {
    const int64_t H = m->cfg.hidden_size, L = m->cfg.num_layers, row = (int64_t)MODALITIES * ADALN_SLOTS * H;
    if (m->n_cache == 0) return h3_fail(e, "dit: gate scores need the AdaLN tables (dit_prepare_timesteps first)");
    float *host = malloc(sizeof(float) * (size_t)(L * row));
    if (!host) return h3_fail(e, "out of memory");
    for (int64_t b = 0; b < L; b++) scores[b] = 0.0;
    for (int i = 0; i < m->n_cache; i++) {
        h3_download(m->be, host, m->cache[i].blocks, sizeof(float) * (size_t)(L * row));
        for (int64_t b = 0; b < L; b++)
            for (int mo = 0; mo < MODALITIES; mo++)
                for (int slot = 2; slot < ADALN_SLOTS; slot += 3) { /* gate_msa (2), gate_mlp (5) */
                    const float *g = host + b * row + ((int64_t)mo * ADALN_SLOTS + slot) * H;
                    for (int64_t c = 0; c < H; c++) scores[b] += fabs((double)g[c]);
                }
    }
    double n = (double)m->n_cache * MODALITIES * 2 * (double)H;
    for (int64_t b = 0; b < L; b++) scores[b] /= n;
    free(host);
    return 0;
}
