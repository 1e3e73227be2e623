/* Qwen3-VL language-model prefix (docs/model/text_encoder.md section 2). See text_encoder.h. */
#include "text_encoder.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../backend/backend_bench.h"
#include "../backend/ops.h"
#include "../io/config.h"
#include "../io/snapshot.h"

/* A layer's weights, resident on the backend for the duration of one layer. */
typedef struct te_layer {
    h3_tensor *q, *k, *v, *o, *gate, *up, *down;
    float     *ln1, *ln2, *qn, *kn; /* host fp32 (small) */
    const st_entry *entries[11];
    const st_file  *files[11];
} te_layer;

struct text_encoder {
    h3_backend *be;
    te_config   cfg;
    st_set     *weights;
    int         bf16;
    char        dir[1024];
    text_encoder_progress_fn progress; /* optional: called after each streamed layer */
    void       *progress_user;
    /* text_encoder_new_random: every run layer resident (no streaming), embeddings made per row */
    te_layer   *resident; /* [TE_OUTPUT_LAYER] or NULL */
    int         random;
    int         keep_layers; /* text_encoder_keep_layers: streamed layers stay in resident[] after their first run */
    uint64_t    seed;
};

void text_encoder_keep_layers(text_encoder *te, int on) { te->keep_layers = on; }

void text_encoder_set_progress(text_encoder *te, text_encoder_progress_fn fn, void *user) {
    te->progress = fn;
    te->progress_user = user;
}

/* ---------------------------------------------------------------- config */

/* Rope fields: v4 style (rope_theta + rope_scaling) or v5 style (rope_parameters); trap 18. */
static int parse_text_rope(json_t *tc, te_text_config *t, const char *path, h3_err *e) {
    json_t *rp = json_object_get(tc, "rope_parameters");
    json_t *rs = json_object_get(tc, "rope_scaling");
    json_t *src = json_is_object(rp) ? rp : (json_is_object(rs) ? rs : NULL);
    double theta = 500000.0; /* the transformers config class default */
    h3_cfg g = h3_cfg_of(json_is_object(rp) && json_object_get(rp, "rope_theta") ? rp : tc, path,
                         json_is_object(rp) && json_object_get(rp, "rope_theta") ? "text_config rope_parameters " : "text_config ", e);
    if (h3_cfg_num(&g, "rope_theta", theta, 1e-3, 1e12, &theta)) return -1;
    t->rope_theta = theta;
    if (!src) return h3_fail(e, "%s: text_config needs rope_scaling or rope_parameters with mrope_section", path);
    json_t *type = json_object_get(src, "rope_type");
    if (type && (!json_is_string(type) || strcmp(json_string_value(type), "default")))
        return h3_fail(e, "%s: only rope_type \"default\" is supported", path);
    h3_cfg rs3 = h3_cfg_of(src, path, "text_config rope ", e);
    int nsec = 0;
    if (h3_cfg_int_list(&rs3, "mrope_section", 1, 3, 3, 0, 1024, t->mrope_section, &nsec)) return -1;
    int sum = t->mrope_section[0] + t->mrope_section[1] + t->mrope_section[2];
    if (sum != t->head_dim / 2)
        return h3_fail(e, "%s: mrope_section sums to %d, must be head_dim/2 = %d", path, sum, t->head_dim / 2);
    json_t *il = json_object_get(src, "mrope_interleaved");
    t->mrope_interleaved = il ? json_is_true(il) : 1;
    if (!t->mrope_interleaved) return h3_fail(e, "%s: only mrope_interleaved true (Qwen3-VL) is supported", path);
    return 0;
}

int text_encoder_config_parse(const json_t *root, const char *path, te_config *cfg, h3_err *e) {
    memset(cfg, 0, sizeof *cfg);
    int rc = -1;
    json_t *tc = json_object_get(root, "text_config"), *vc = json_object_get(root, "vision_config");
    if (!json_is_object(tc) || !json_is_object(vc)) {
        h3_fail(e, "%s: needs text_config and vision_config objects (Qwen3-VL)", path);
        goto done;
    }
    te_text_config *t = &cfg->text;
    double eps = 1e-6;
    /* every field in a plausible range (docs/robustness.md) */
    const int64_t R = H3_CFG_REQUIRED;
    h3_cfg g = h3_cfg_of(tc, path, "text_config ", e);
    h3_cfg_int(&g, "vocab_size", R, 1, 1 << 22, &t->vocab_size);
    h3_cfg_int(&g, "hidden_size", R, 1, 1 << 16, &t->hidden_size);
    h3_cfg_int(&g, "intermediate_size", R, 1, 1 << 18, &t->intermediate_size);
    h3_cfg_int(&g, "num_hidden_layers", R, 1, 1024, &t->num_layers);
    h3_cfg_int(&g, "num_attention_heads", R, 1, 1024, &t->num_heads);
    if (g.rc) goto done;
    h3_cfg_int(&g, "num_key_value_heads", t->num_heads, 1, 1024, &t->num_kv_heads);
    h3_cfg_num(&g, "rms_norm_eps", 1e-6, 1e-30, 1.0, &eps);
    h3_cfg_int(&g, "head_dim", t->hidden_size / t->num_heads > 0 ? t->hidden_size / t->num_heads : 1, 1, 1024,
               &t->head_dim);
    if (g.rc) goto done;
    t->rms_norm_eps = (float)eps;
    if (t->num_heads % t->num_kv_heads) {
        h3_fail(e, "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", path, t->num_heads,
                t->num_kv_heads);
        goto done;
    }
    if (t->head_dim % 2 || t->head_dim > 1024) {
        h3_fail(e, "%s: head_dim %d must be even and <= 1024", path, t->head_dim);
        goto done;
    }
    json_t *ab = json_object_get(tc, "attention_bias");
    if (ab && json_is_true(ab)) {
        h3_fail(e, "%s: attention_bias true is not supported (Qwen3-VL has none)", path);
        goto done;
    }
    json_t *act = json_object_get(tc, "hidden_act");
    if (act && (!json_is_string(act) || strcmp(json_string_value(act), "silu"))) {
        h3_fail(e, "%s: text hidden_act must be \"silu\"", path);
        goto done;
    }
    if (parse_text_rope(tc, t, path, e)) goto done;
    if (vision_config_parse(vc, &cfg->vision, path, e)) goto done;
    if (cfg->vision.out_hidden_size != t->hidden_size) {
        h3_fail(e, "%s: vision out_hidden_size %d must equal text hidden_size %d", path, cfg->vision.out_hidden_size,
                t->hidden_size);
        goto done;
    }
    struct { const char *k; int64_t def; int64_t *dst; } ids[] = {
        {"image_token_id", 151655, &cfg->image_token_id},
        {"video_token_id", 151656, &cfg->video_token_id},
        {"vision_start_token_id", 151652, &cfg->vision_start_token_id},
        {"vision_end_token_id", 151653, &cfg->vision_end_token_id},
    };
    h3_cfg top = h3_cfg_of(root, path, "", e);
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        if (h3_cfg_i64(&top, ids[i].k, ids[i].def, 0, INT32_MAX, ids[i].dst)) goto done;
        if (*ids[i].dst < 0 || *ids[i].dst >= t->vocab_size) {
            h3_fail(e, "%s: %s %lld outside the vocabulary", path, ids[i].k, (long long)*ids[i].dst);
            goto done;
        }
    }
    json_t *tie = json_object_get(root, "tie_word_embeddings");
    cfg->tie_word_embeddings = tie && json_is_true(tie);
    rc = 0;
done:
    return rc;
}

static int parse_untyped(const json_t *root, const char *path, void *cfg, h3_err *e) {
    return text_encoder_config_parse(root, path, cfg, e);
}

int text_encoder_config_load(const char *dir, te_config *cfg, h3_err *e) {
    return h3_json_parse_config_in(dir, parse_untyped, cfg, sizeof *cfg, e);
}

/* ---------------------------------------------------------------- tensors */

#define LM "model.language_model."

static int add_layer(const te_text_config *t, int i, h3_expect_list *l) {
    int64_t H = t->hidden_size, F = t->intermediate_size, D = t->head_dim;
    int64_t qw = (int64_t)t->num_heads * D, kw = (int64_t)t->num_kv_heads * D;
    int rc = 0;
    rc |= h3_expect_add(l, H3_BF16, 1, (int64_t[]){H}, LM "layers.%d.input_layernorm.weight", i);
    rc |= h3_expect_add(l, H3_BF16, 2, (int64_t[]){qw, H}, LM "layers.%d.self_attn.q_proj.weight", i);
    rc |= h3_expect_add(l, H3_BF16, 2, (int64_t[]){kw, H}, LM "layers.%d.self_attn.k_proj.weight", i);
    rc |= h3_expect_add(l, H3_BF16, 2, (int64_t[]){kw, H}, LM "layers.%d.self_attn.v_proj.weight", i);
    rc |= h3_expect_add(l, H3_BF16, 1, (int64_t[]){D}, LM "layers.%d.self_attn.q_norm.weight", i);
    rc |= h3_expect_add(l, H3_BF16, 1, (int64_t[]){D}, LM "layers.%d.self_attn.k_norm.weight", i);
    rc |= h3_expect_add(l, H3_BF16, 2, (int64_t[]){H, qw}, LM "layers.%d.self_attn.o_proj.weight", i);
    rc |= h3_expect_add(l, H3_BF16, 1, (int64_t[]){H}, LM "layers.%d.post_attention_layernorm.weight", i);
    rc |= h3_expect_add(l, H3_BF16, 2, (int64_t[]){F, H}, LM "layers.%d.mlp.gate_proj.weight", i);
    rc |= h3_expect_add(l, H3_BF16, 2, (int64_t[]){F, H}, LM "layers.%d.mlp.up_proj.weight", i);
    rc |= h3_expect_add(l, H3_BF16, 2, (int64_t[]){H, F}, LM "layers.%d.mlp.down_proj.weight", i);
    return rc;
}

int text_encoder_expected_tensors(const te_config *cfg, h3_expect_list *out, h3_err *e) {
    const te_text_config *t = &cfg->text;
    int rc = h3_expect_add(out, H3_BF16, 2, (int64_t[]){t->vocab_size, t->hidden_size}, LM "embed_tokens.weight");
    for (int i = 0; i < t->num_layers && !rc; i++) rc |= add_layer(t, i, out);
    rc |= h3_expect_add(out, H3_BF16, 1, (int64_t[]){t->hidden_size}, LM "norm.weight");
    if (!cfg->tie_word_embeddings)
        rc |= h3_expect_add(out, H3_BF16, 2, (int64_t[]){t->vocab_size, t->hidden_size}, "lm_head.weight");
    if (rc) return h3_expect_fail(out, "text encoder", e);
    return vision_expected_tensors(&cfg->vision, out, e);
}

int text_encoder_expected_dir(const char *dir, h3_expect_list *out, h3_err *e) {
    te_config cfg;
    if (text_encoder_config_load(dir, &cfg, e)) return -1;
    return text_encoder_expected_tensors(&cfg, out, e);
}

int64_t text_encoder_layer_bytes(const te_config *cfg) {
    const te_text_config *t = &cfg->text;
    int64_t H = t->hidden_size, F = t->intermediate_size, D = t->head_dim;
    int64_t qw = (int64_t)t->num_heads * D, kw = (int64_t)t->num_kv_heads * D;
    return 2 * (2 * H + 2 * D + 2 * qw * H + 2 * kw * H + 3 * F * H);
}

/* Buffers of text_encoder_forward: h, x, q, k, v, o [L,qw], g, u [L,F], rope tables, attention
 * scores (the CPU attention tiles 128 query rows). */
int64_t text_encoder_activation_bytes(const te_config *cfg, int64_t L) {
    const te_text_config *t = &cfg->text;
    int64_t H = t->hidden_size, F = t->intermediate_size, D = t->head_dim;
    int64_t qw = (int64_t)t->num_heads * D, kw = (int64_t)t->num_kv_heads * D;
    int64_t per_row = 2 * H + 2 * qw + 2 * kw + 2 * F + 2 * D;
    return 4 * (per_row * L + 128 * L);
}

/* ---------------------------------------------------------------- model */

text_encoder *text_encoder_load(h3_backend *be, const char *dir, int bf16, h3_err *e) {
    text_encoder *te = calloc(1, sizeof *te);
    if (!te) {
        h3_fail(e, "text encoder: out of memory");
        return NULL;
    }
    te->be = be;
    te->bf16 = bf16;
    snprintf(te->dir, sizeof te->dir, "%s", dir);
    if (text_encoder_config_load(dir, &te->cfg, e)) goto fail;
    te->weights = st_set_open(dir, e);
    if (!te->weights) goto fail;
    /* Validate what the prefix reads (embeddings + layers 0..min(49, L-1)) up front: a missing or
     * misshapen tensor is reported before any compute. */
    h3_expect_list l = {0};
    if (text_encoder_expected_tensors(&te->cfg, &l, e)) goto fail;
    for (int i = 0; i < l.n; i++) {
        const h3_expect *x = &l.v[i];
        if (strncmp(x->name, LM, strlen(LM))) continue; /* vision is checked by vision_new */
        const st_entry *en = st_set_entry(te->weights, x->name, NULL);
        int needed = !strcmp(x->name, LM "embed_tokens.weight");
        int layer;
        if (sscanf(x->name, LM "layers.%d.", &layer) == 1 && layer < TE_OUTPUT_LAYER) needed = 1;
        if (!en) {
            if (!needed) continue;
            h3_fail(e, "%s: tensor '%s' not found", dir, x->name);
            h3_expect_list_free(&l);
            goto fail;
        }
        if (h3_expect_check(x, en->dtype, en->ndim, en->shape, dir, e) != 0) {
            h3_expect_list_free(&l);
            goto fail;
        }
    }
    h3_expect_list_free(&l);
    return te;
fail:
    text_encoder_free(te);
    return NULL;
}

static void layer_release(text_encoder *te, te_layer *L);

void text_encoder_free(text_encoder *te) {
    if (!te) return;
    for (int i = 0; te->resident && i < TE_OUTPUT_LAYER; i++) {
        te_layer *L = &te->resident[i];
        h3_tensor *m[] = {L->q, L->k, L->v, L->o, L->gate, L->up, L->down};
        /* h3_weight_free leaves CPU data to its owner (a file mapping); random matrices are ours */
        for (int j = 0; j < 7 && te->be->kind == H3_BACKEND_CPU && te->random; j++)
            if (m[j]) h3_free(te->be, m[j]->data), m[j]->data = NULL;
        layer_release(te, L);
    }
    free(te->resident);
    st_set_free(te->weights);
    free(te);
}

const te_config *text_encoder_get_config(const text_encoder *te) { return &te->cfg; }
const st_set *text_encoder_weights(const text_encoder *te) { return te->weights; }


static float *tensor_f32(const h3_tensor *t) {
    int64_t n = h3_tensor_numel(t);
    float *f = malloc((size_t)n * sizeof(float));
    if (f) h3_convert_to_f32(f, t->data, t->dtype, (size_t)n);
    return f;
}

static int layer_get(text_encoder *te, int i, const char *what, int slot, te_layer *L, h3_tensor **dev, float **host,
                     h3_err *e) {
    char name[192];
    snprintf(name, sizeof name, LM "layers.%d.%s", i, what);
    h3_tensor view;
    if (st_set_get(te->weights, name, &view, e)) return -1;
    L->entries[slot] = st_set_entry(te->weights, name, &L->files[slot]);
    if (dev) {
        *dev = h3_weight_upload(te->be, &view, e);
        if (!*dev) return -1;
    } else {
        *host = tensor_f32(&view);
        if (!*host) return h3_fail(e, "%s: out of memory", name);
    }
    return 0;
}

static void layer_release(text_encoder *te, te_layer *L) {
    h3_tensor **dev[] = {&L->q, &L->k, &L->v, &L->o, &L->gate, &L->up, &L->down};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        if (*dev[i]) h3_weight_free(te->be, *dev[i]);
    free(L->ln1);
    free(L->ln2);
    free(L->qn);
    free(L->kn);
    /* Drop the layer's pages from the mapping: the next layer's are read on demand, so the
     * resident weights stay at about one layer (docs/model/text_encoder.md 5: streaming). */
    long page = sysconf(_SC_PAGESIZE);
    for (int s = 0; s < 11; s++) {
        const st_file *f = L->files[s];
        const st_entry *en = L->entries[s];
        if (!f || !en || !f->map) continue;
        uintptr_t a = (uintptr_t)(f->map + f->data_off + en->begin), b = (uintptr_t)(f->map + f->data_off + en->end);
        a = (a + (uintptr_t)page - 1) & ~((uintptr_t)page - 1); /* whole pages inside the tensor only */
        b &= ~((uintptr_t)page - 1);
        if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
    }
    memset(L, 0, sizeof *L);
}

static int layer_load(text_encoder *te, int i, te_layer *L, h3_err *e) {
    memset(L, 0, sizeof *L);
    if (layer_get(te, i, "input_layernorm.weight", 0, L, NULL, &L->ln1, e) ||
        layer_get(te, i, "self_attn.q_proj.weight", 1, L, &L->q, NULL, e) ||
        layer_get(te, i, "self_attn.k_proj.weight", 2, L, &L->k, NULL, e) ||
        layer_get(te, i, "self_attn.v_proj.weight", 3, L, &L->v, NULL, e) ||
        layer_get(te, i, "self_attn.q_norm.weight", 4, L, NULL, &L->qn, e) ||
        layer_get(te, i, "self_attn.k_norm.weight", 5, L, NULL, &L->kn, e) ||
        layer_get(te, i, "self_attn.o_proj.weight", 6, L, &L->o, NULL, e) ||
        layer_get(te, i, "post_attention_layernorm.weight", 7, L, NULL, &L->ln2, e) ||
        layer_get(te, i, "mlp.gate_proj.weight", 8, L, &L->gate, NULL, e) ||
        layer_get(te, i, "mlp.up_proj.weight", 9, L, &L->up, NULL, e) ||
        layer_get(te, i, "mlp.down_proj.weight", 10, L, &L->down, NULL, e)) {
        layer_release(te, L);
        return -1;
    }
    return 0;
}

/* A random matrix [rows, cols] in backend memory with the variance of N(0, 1/cols) (the fills of
 * backend_bench.h: the same bits on the CPU and on CUDA). */
static h3_tensor *random_matrix(h3_backend *be, int64_t rows, int64_t cols, uint64_t seed, h3_err *e) {
    int64_t shape[2] = {rows, cols};
    h3_tensor *t = h3_tensor_view(H3_BF16, 2, shape, NULL, e);
    if (!t) return NULL;
    if (!(t->data = h3_alloc(be, h3_tensor_nbytes(t)))) {
        h3_tensor_free(t);
        h3_fail(e, "text encoder (random weights): out of backend memory for a [%lld, %lld] matrix", (long long)rows,
                (long long)cols);
        return NULL;
    }
    h3_fill_random(be, t->data, H3_BF16, rows * cols, seed, sqrtf(3.0f / (float)cols), 0.0f);
    return t;
}

static float *random_gain(int64_t n, uint64_t seed) {
    float *g = malloc((size_t)n * sizeof(float));
    if (g) h3_fill_random_host(g, H3_F32, n, seed, 0.2f, 1.0f);
    return g;
}

text_encoder *text_encoder_new_random(h3_backend *be, const te_config *cfg, int bf16, uint64_t seed, h3_err *e) {
    text_encoder *te = calloc(1, sizeof *te);
    if (!te || !(te->resident = calloc(TE_OUTPUT_LAYER, sizeof *te->resident))) {
        free(te);
        h3_fail(e, "text encoder: out of memory");
        return NULL;
    }
    te->be = be, te->cfg = *cfg, te->bf16 = bf16, te->random = 1, te->seed = seed;
    snprintf(te->dir, sizeof te->dir, "random weights");
    const te_text_config *t = &cfg->text;
    int64_t H = t->hidden_size, F = t->intermediate_size, D = t->head_dim;
    int64_t qw = (int64_t)t->num_heads * D, kw = (int64_t)t->num_kv_heads * D;
    if (t->num_layers < TE_OUTPUT_LAYER + 1) {
        h3_fail(e, "text encoder (random weights): the config has %d layers, hidden_states[%d] needs %d",
                t->num_layers, TE_OUTPUT_LAYER, TE_OUTPUT_LAYER + 1);
        goto fail;
    }
    for (int i = 0; i < TE_OUTPUT_LAYER; i++) {
        te_layer *L = &te->resident[i];
        uint64_t b = seed ^ ((uint64_t)(i + 1) * 0x9e3779b97f4a7c15ull);
        if (!(L->q = random_matrix(be, qw, H, b + 1, e)) || !(L->k = random_matrix(be, kw, H, b + 2, e)) ||
            !(L->v = random_matrix(be, kw, H, b + 3, e)) || !(L->o = random_matrix(be, H, qw, b + 4, e)) ||
            !(L->gate = random_matrix(be, F, H, b + 5, e)) || !(L->up = random_matrix(be, F, H, b + 6, e)) ||
            !(L->down = random_matrix(be, H, F, b + 7, e)))
            goto fail;
        L->ln1 = random_gain(H, b + 8), L->ln2 = random_gain(H, b + 9);
        L->qn = random_gain(D, b + 10), L->kn = random_gain(D, b + 11);
        if (!L->ln1 || !L->ln2 || !L->qn || !L->kn) {
            h3_fail(e, "text encoder: out of memory");
            goto fail;
        }
    }
    return te;
fail:
    text_encoder_free(te);
    return NULL;
}

/* Interleaved mRoPE tables (docs/model/text_encoder.md 2.7): cos/sin [L][head_dim], fp32 (the backend rounds them to
 * bf16 in bf16 mode, as transformers casts them to the activation dtype). */
static void mrope_tables(const te_text_config *t, const int64_t *pos, int64_t L, float *cosb, float *sinb) {
    int D = t->head_dim, half = D / 2;
    float inv[512];
    for (int i = 0; i < half; i++) {
        float ex = (float)(2 * i) / (float)D;  /* arange(0, D, 2) / D in fp32 */
        float p = powf((float)t->rope_theta, ex);
        inv[i] = 1.0f / p;
    }
    for (int64_t r = 0; r < L; r++) {
        for (int i = 0; i < half; i++) {
            int axis = 0; /* T */
            if (i % 3 == 1 && i < 3 * t->mrope_section[1]) axis = 1;
            else if (i % 3 == 2 && i < 3 * t->mrope_section[2]) axis = 2;
            int64_t p = pos ? pos[(int64_t)axis * L + r] : r;
            float th = (float)p * inv[i];
            float c = cosf(th), s = sinf(th);
            cosb[r * D + i] = cosb[r * D + i + half] = c;
            sinb[r * D + i] = sinb[r * D + i + half] = s;
        }
    }
}

int text_encoder_forward(text_encoder *te, const int64_t *ids, int64_t L, const int64_t *positions,
                         const te_vision_rows *vis, int out_layer, float *out, h3_err *e) {
    const te_config *cfg = &te->cfg;
    const te_text_config *t = &cfg->text;
    h3_backend *be = te->be;
    const int flags = te->bf16 ? H3_BF16_OUT : 0;
    const int64_t H = t->hidden_size, F = t->intermediate_size, D = t->head_dim;
    const int64_t qw = (int64_t)t->num_heads * D, kw = (int64_t)t->num_kv_heads * D;
    if (L <= 0) return h3_fail(e, "text encoder: empty input (0 tokens)");
    if (out_layer < 1 || out_layer >= t->num_layers)
        return h3_fail(e, "text encoder: hidden_states[%d] needs more than %d decoder layers, the config has %d "
                          "(the last entry would be post-norm)", out_layer, out_layer, t->num_layers);
    /* Rows that receive vision features (docs/model/text_encoder.md 2.9) */
    int64_t n_img = 0, n_vid = 0;
    for (int64_t r = 0; r < L; r++) {
        if (ids[r] < 0 || ids[r] >= t->vocab_size)
            return h3_fail(e, "input_ids[%lld] = %lld outside the vocabulary [0, %d)", (long long)r, (long long)ids[r],
                           t->vocab_size);
        n_img += ids[r] == cfg->image_token_id;
        n_vid += ids[r] == cfg->video_token_id;
    }
    int64_t vi = vis ? vis->n_image : 0, vv = vis ? vis->n_video : 0;
    if (n_img != vi) return h3_fail(e, "image features and image tokens do not match: %lld <|image_pad|> rows, %lld feature rows",
                                    (long long)n_img, (long long)vi);
    if (n_vid != vv) return h3_fail(e, "video features and video tokens do not match: %lld <|video_pad|> rows, %lld feature rows",
                                    (long long)n_vid, (long long)vv);
    int n_deep = vis ? vis->n_deep : 0;

    int rc = -1;
    float *h = h3_alloc(be, (size_t)(L * H) * sizeof(float));
    float *x = h3_alloc(be, (size_t)(L * H) * sizeof(float));
    float *q = h3_alloc(be, (size_t)(L * qw) * sizeof(float));
    float *k = h3_alloc(be, (size_t)(L * kw) * sizeof(float));
    float *v = h3_alloc(be, (size_t)(L * kw) * sizeof(float));
    float *o = h3_alloc(be, (size_t)(L * qw) * sizeof(float));
    float *g = h3_alloc(be, (size_t)(L * F) * sizeof(float));
    float *u = h3_alloc(be, (size_t)(L * F) * sizeof(float));
    float *cosd = h3_alloc(be, (size_t)(L * D) * sizeof(float));
    float *sind = h3_alloc(be, (size_t)(L * D) * sizeof(float));
    float *gain = h3_alloc(be, (size_t)(H > D ? H : D) * sizeof(float) * 4);
    float *hosth = malloc((size_t)(L * H) * sizeof(float));
    float *cosh_ = malloc((size_t)(L * D) * sizeof(float)), *sinh_ = malloc((size_t)(L * D) * sizeof(float));
    /* deepstack rows, gathered in sequence order (image and video rows interleaved by position) */
    int64_t n_vis = n_img + n_vid;
    float *deep = NULL;
    int64_t *vis_rows = NULL;
    te_layer lay = {0};
    if (!h || !x || !q || !k || !v || !o || !g || !u || !cosd || !sind || !gain || !hosth || !cosh_ || !sinh_) {
        h3_fail(e, "text encoder: out of memory for %lld rows", (long long)L);
        goto done;
    }
    if (n_vis && n_deep) {
        deep = h3_alloc(be, (size_t)(n_deep * n_vis * H) * sizeof(float));
        float *hostdeep = malloc((size_t)(n_deep * n_vis * H) * sizeof(float));
        vis_rows = malloc((size_t)n_vis * sizeof(int64_t));
        if (!deep || !hostdeep || !vis_rows) {
            free(hostdeep);
            h3_fail(e, "text encoder: out of memory for deepstack rows");
            goto done;
        }
        int64_t a = 0, ii = 0, iv = 0;
        for (int64_t r = 0; r < L; r++) {
            int is_img = ids[r] == cfg->image_token_id, is_vid = ids[r] == cfg->video_token_id;
            if (!is_img && !is_vid) continue;
            vis_rows[a] = r;
            for (int l = 0; l < n_deep; l++) {
                const float *src = is_img ? (vis->image_deep ? vis->image_deep + ((int64_t)l * n_img + ii) * H : NULL)
                                          : (vis->video_deep ? vis->video_deep + ((int64_t)l * n_vid + iv) * H : NULL);
                float *dst = hostdeep + ((int64_t)l * n_vis + a) * H;
                if (src) memcpy(dst, src, (size_t)H * sizeof(float));
                else memset(dst, 0, (size_t)H * sizeof(float));
            }
            a++;
            ii += is_img;
            iv += is_vid;
        }
        h3_upload(be, deep, hostdeep, (size_t)(n_deep * n_vis * H) * sizeof(float));
        free(hostdeep);
    }

    /* 1. embeddings (only the rows used are read), vision rows scattered in */
    {
        h3_tensor emb = {0};
        if (!te->random && st_set_get(te->weights, LM "embed_tokens.weight", &emb, e)) goto done;
        size_t esz = te->random ? 2 : h3_dtype_size(emb.dtype);
        int64_t ii = 0, iv = 0;
        for (int64_t r = 0; r < L; r++) {
            float *dst = hosth + r * H;
            if (ids[r] == cfg->image_token_id) {
                memcpy(dst, vis->image_embeds + (ii++) * H, (size_t)H * sizeof(float));
            } else if (ids[r] == cfg->video_token_id) {
                memcpy(dst, vis->video_embeds + (iv++) * H, (size_t)H * sizeof(float));
            } else if (te->random) { /* the row of a random bf16 table, made from the token id */
                uint16_t row[8192];
                int64_t n = H < 8192 ? H : 8192;
                h3_fill_random_host(row, H3_BF16, n, te->seed ^ ((uint64_t)ids[r] * 0xD1B54A32D192ED03ull), 1.0f, 0.0f);
                h3_convert_to_f32(dst, row, H3_BF16, (size_t)n);
                for (int64_t c = n; c < H; c++) dst[c] = 0.0f;
            } else {
                h3_convert_to_f32(dst, (const uint8_t *)emb.data + (size_t)ids[r] * (size_t)H * esz, emb.dtype, (size_t)H);
            }
        }
        /* masked_scatter casts the vision rows to the embedding dtype */
        if (te->bf16)
            for (int64_t i = 0; i < L * H; i++) hosth[i] = h3_round_bf16(hosth[i]);
        h3_upload(be, h, hosth, (size_t)(L * H) * sizeof(float));
    }

    /* 2. RoPE tables, shared by all layers */
    mrope_tables(t, positions, L, cosh_, sinh_);
    h3_upload(be, cosd, cosh_, (size_t)(L * D) * sizeof(float));
    h3_upload(be, sind, sinh_, (size_t)(L * D) * sizeof(float));

    /* 3. layers 0 .. out_layer-1, streamed */
    const float scale = 1.0f / sqrtf((float)D);
    for (int layer = 0; layer < out_layer; layer++) {
        const te_layer *Lr = &lay;
        if (te->resident && layer < TE_OUTPUT_LAYER && te->resident[layer].q) {
            Lr = &te->resident[layer];
        } else if (te->random) {
            h3_fail(e, "text encoder (random weights): only layers below %d exist", TE_OUTPUT_LAYER);
            goto done;
        } else {
            if (layer_load(te, layer, &lay, e)) goto done;
            if (te->keep_layers && layer < TE_OUTPUT_LAYER &&
                (te->resident || (te->resident = calloc(TE_OUTPUT_LAYER, sizeof *te->resident)))) {
                te->resident[layer] = lay; /* kept: the next forwards read no weights (docs/session.md) */
                memset(&lay, 0, sizeof lay);
                Lr = &te->resident[layer];
            }
        }
        /* a. input norm */
        h3_upload(be, gain, Lr->ln1, (size_t)H * sizeof(float));
        h3_rmsnorm_qwen(be, x, h, L, H, gain, t->rms_norm_eps, flags);
        /* b. projections */
        h3_matmul(be, q, x, L, Lr->q, NULL, flags);
        h3_matmul(be, k, x, L, Lr->k, NULL, flags);
        h3_matmul(be, v, x, L, Lr->v, NULL, flags);
        /* c. per-head q/k RMSNorm (one 128-wide gain shared by the heads) */
        h3_upload(be, gain, Lr->qn, (size_t)D * sizeof(float));
        h3_rmsnorm_qwen(be, q, q, L * t->num_heads, D, gain, t->rms_norm_eps, flags);
        h3_upload(be, gain, Lr->kn, (size_t)D * sizeof(float));
        h3_rmsnorm_qwen(be, k, k, L * t->num_kv_heads, D, gain, t->rms_norm_eps, flags);
        /* d. rotate half with the interleaved mRoPE tables */
        h3_rope_half(be, q, L, qw, t->num_heads, (int)D, (int)D, cosd, sind, flags);
        h3_rope_half(be, k, L, kw, t->num_kv_heads, (int)D, (int)D, cosd, sind, flags);
        /* e. causal GQA (query head a reads kv head a / group) */
        h3_attention_eager(be, o, qw, q, qw, k, kw, v, kw, L, L, t->num_heads, t->num_kv_heads, (int)D, scale, 1, flags);
        /* f. output projection + residual */
        h3_matmul(be, x, o, L, Lr->o, NULL, flags);
        h3_add(be, h, h, x, L * H, flags);
        /* g, h. SwiGLU MLP + residual */
        h3_upload(be, gain, Lr->ln2, (size_t)H * sizeof(float));
        h3_rmsnorm_qwen(be, x, h, L, H, gain, t->rms_norm_eps, flags);
        h3_matmul(be, g, x, L, Lr->gate, NULL, flags);
        h3_matmul(be, u, x, L, Lr->up, NULL, flags);
        h3_silu(be, g, g, L * F, flags);
        h3_mul(be, g, g, u, L * F, flags);
        h3_matmul(be, x, g, L, Lr->down, NULL, flags);
        h3_add(be, h, h, x, L * H, flags);
        layer_release(te, &lay);
        /* i. deepstack after layers 0..n_deep-1 on the pad rows (docs/model/text_encoder.md 2.9). transformers records
         * hidden_states[layer+1] before this add, so the last layer run skips it. */
        if (deep && layer < n_deep && layer + 1 < out_layer)
            h3_rows_add(be, h, vis_rows, deep + (int64_t)layer * n_vis * H, n_vis, H, flags);
        if (te->progress) te->progress(te->progress_user, layer + 1, out_layer);
    }
    h3_sync(be);
    h3_download(be, out, h, (size_t)(L * H) * sizeof(float));
    rc = 0;
done:
    layer_release(te, &lay);
    float *bufs[] = {h, x, q, k, v, o, g, u, cosd, sind, gain, deep};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) h3_free(be, bufs[i]);
    free(hosth);
    free(cosh_);
    free(sinh_);
    free(vis_rows);
    return rc;
}
