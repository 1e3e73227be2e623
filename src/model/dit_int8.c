/* INT8 W8A8 in the DiT (docs/int8.md): the profiles' scopes, the scope-aware validation of a snapshot, the int8
 * linears taken from an int8 snapshot or quantized at load (--quant int8), and the int8 AdaLN projection of
 * profile `all`. The GEMMs themselves run in dit_block.c (linear) through ops_linear.h. */
#include "dit_int8.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../backend/ops.h"
#include "dit_internal.h"

typedef struct scope_name {
    const char *suffix;
    int         profile; /* the smallest profile that quantizes it */
} scope_name;

static const scope_name diffusers_scope[] = {
    {"ff.net.0.proj.weight", DIT_INT8_MLP},     {"ff.net.2.weight", DIT_INT8_MLP},
    {"attn.to_q.weight", DIT_INT8_DIT_PROJ},    {"attn.to_k.weight", DIT_INT8_DIT_PROJ},
    {"attn.to_v.weight", DIT_INT8_DIT_PROJ},    {"attn.to_out.0.weight", DIT_INT8_DIT_PROJ},
    {"adaln_proj.linear.weight", DIT_INT8_ALL},
};
static const scope_name original_scope[] = {
    {"mlp.fc1.weight", DIT_INT8_MLP},           {"mlp.fc2.weight", DIT_INT8_MLP},
    {"attn.qkv_proj.weight", DIT_INT8_DIT_PROJ}, {"attn.out_proj.weight", DIT_INT8_DIT_PROJ},
    {"adaln_proj.linear.weight", DIT_INT8_ALL},
};

const char *dit_int8_profile_name(int p) {
    return p == DIT_INT8_MLP ? "mlp" : p == DIT_INT8_DIT_PROJ ? "dit_proj" : p == DIT_INT8_ALL ? "all" : "none";
}

int dit_int8_profile_parse(const char *s) {
    if (!s) return -1;
    if (!strcmp(s, "mlp")) return DIT_INT8_MLP;
    if (!strcmp(s, "dit_proj")) return DIT_INT8_DIT_PROJ;
    if (!strcmp(s, "all")) return DIT_INT8_ALL;
    return -1;
}

/* The smallest profile whose scope holds the weight `name`, 0 when none does. */
static int scope_level(const dit_config *c, const char *name) {
    const char *prefix = c->original_layout ? "blocks." : "transformer_blocks.";
    size_t pl = strlen(prefix);
    if (strncmp(name, prefix, pl) != 0) return 0;
    const char *p = name + pl;
    char *end;
    long b = strtol(p, &end, 10);
    if (end == p || *end != '.' || b < 0 || b >= c->num_layers || (p[0] == '0' && end - p > 1)) return 0;
    const scope_name *v = c->original_layout ? original_scope : diffusers_scope;
    size_t n = c->original_layout ? sizeof original_scope / sizeof *v : sizeof diffusers_scope / sizeof *v;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(end + 1, v[i].suffix)) return v[i].profile;
    return 0;
}

int dit_int8_in_scope(const dit_config *c, const char *name, int profile) {
    int lvl = scope_level(c, name);
    return lvl > 0 && lvl <= profile;
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* The profile named by the shards' metadata (0 when none names one); -1 on a bad or contradicting value. */
static int metadata_profile(const st_set *s, h3_err *e) {
    const st_file *seen[64];
    int nseen = 0, prof = 0;
    for (int i = 0; i < st_set_count(s); i++) {
        const st_file *f = NULL;
        if (!st_set_entry(s, st_set_name(s, i), &f) || !f) continue;
        int dup = 0;
        for (int j = 0; j < nseen && !dup; j++) dup = seen[j] == f;
        if (dup) continue;
        if (nseen < 64) seen[nseen++] = f;
        if (!f->metadata_json) continue;
        json_t *root = json_loads(f->metadata_json, 0, NULL);
        json_t *v = root ? json_object_get(root, DIT_INT8_META_PROFILE) : NULL;
        if (v) {
            const char *txt = json_is_string(v) ? json_string_value(v) : NULL;
            int p = dit_int8_profile_parse(txt);
            if (p < 0) {
                json_decref(root);
                return h3_fail(e, "%s: metadata %s is not one of mlp, dit_proj, all", f->path, DIT_INT8_META_PROFILE);
            }
            if (prof && p != prof) {
                json_decref(root);
                return h3_fail(e, "%s: metadata %s '%s' contradicts another shard's '%s'", f->path,
                               DIT_INT8_META_PROFILE, txt, dit_int8_profile_name(prof));
            }
            prof = p;
        }
        json_decref(root);
    }
    return prof;
}

static int check_scale(const st_set *s, const char *wname, int64_t N, h3_expect_list *l, h3_err *e) {
    char sname[224];
    snprintf(sname, sizeof sname, "%s_scale", wname);
    const st_file *f = NULL;
    const st_entry *se = st_set_entry(s, sname, &f);
    if (!se)
        return h3_fail(e, "%s: tensor '%s' missing: every I8 weight needs its scale, F32 or BF16 [%lld, 1]",
                       st_set_path(s), sname, (long long)N);
    if ((se->dtype != H3_F32 && se->dtype != H3_BF16) || se->ndim != 2 || se->shape[0] != N || se->shape[1] != 1)
        return h3_fail(e, "%s: tensor '%s' is %s of rank %d: an int8 scale is F32 or BF16 [%lld, 1]", st_set_path(s),
                       sname, h3_dtype_name(se->dtype), se->ndim, (long long)N);
    if (f && f->map) {
        float *v = malloc((size_t)N * sizeof(float));
        if (!v) return h3_fail(e, "out of memory");
        h3_convert_to_f32(v, st_data(f, se), se->dtype, (size_t)N);
        for (int64_t i = 0; i < N; i++)
            if (!(isfinite(v[i]) && v[i] > 0.0f)) {
                double bad = v[i];
                free(v);
                return h3_fail(e, "%s: tensor '%s' row %lld: scale %g is not finite and positive", st_set_path(s), sname,
                               (long long)i, bad);
            }
        free(v);
    }
    if (l && h3_expect_add(l, se->dtype, 2, (int64_t[]){N, 1}, "%s", sname) != 0) return h3_expect_fail(l, "DiT", e);
    return 0;
}

int dit_int8_expect(const dit_config *c, const st_set *s, h3_expect_list *l, int *profile, h3_err *e) {
    *profile = DIT_INT8_NONE;
    if (!s) return 0;
    const char *src = st_set_path(s);
    int inferred = 0;
    const char *first_i8 = NULL;
    for (int i = 0; i < st_set_count(s); i++) {
        const char *name = st_set_name(s, i);
        const st_entry *ent = st_set_entry(s, name, NULL);
        if (!ent) continue;
        if (ent->dtype == H3_I8) {
            int lvl = scope_level(c, name);
            if (!lvl)
                return h3_fail(e, "%s: tensor '%s' is I8 but no int8 profile quantizes it (only the main blocks' "
                                  "attention, FFN and adaln_proj weights; docs/int8.md)", src, name);
            if (lvl > inferred) inferred = lvl;
            if (!first_i8) first_i8 = name;
        }
    }
    const int meta = metadata_profile(s, e);
    if (meta < 0) return -1;
    if (!inferred && !meta) { /* a plain snapshot: no scale may lie around */
        for (int i = 0; i < st_set_count(s); i++)
            if (ends_with(st_set_name(s, i), ".weight_scale"))
                return h3_fail(e, "%s: tensor '%s' is an int8 scale but no weight of this snapshot is I8", src,
                               st_set_name(s, i));
        return 0;
    }
    const int prof = meta ? meta : inferred;
    const char *how = meta ? "named by the metadata" : "inferred from the I8 tensors";
    h3_expect_list own = {0};
    const h3_expect_list *ex = l;
    if (!ex) {
        if (dit_expected_tensors(c, &own, e) != 0) return -1;
        ex = &own;
    }
    int rc = 0;
    const int n_ex = ex->n; /* scale entries appended below are not walked */
    for (int i = 0; i < n_ex && !rc; i++) {
        h3_expect *x = &ex->v[i];
        if (!dit_int8_in_scope(c, x->name, prof)) continue;
        const st_entry *ent = st_set_entry(s, x->name, NULL);
        if (!ent) continue; /* a missing tensor is the loader's / info's message */
        if (ent->dtype != H3_I8) {
            rc = h3_fail(e, "%s: tensor '%s' is %s, but int8 profile %s (%s) quantizes it: it must be I8", src, x->name,
                         h3_dtype_name(ent->dtype), dit_int8_profile_name(prof), how);
        } else if (ent->ndim != 2 || ent->shape[0] != x->shape[0] || ent->shape[1] != x->shape[1]) {
            rc = h3_fail(e, "%s: tensor '%s': I8 of rank %d, the config implies [%lld, %lld]", src, x->name, ent->ndim,
                         (long long)x->shape[0], (long long)x->shape[1]);
        } else if (check_scale(s, x->name, x->shape[0], l, e) != 0) {
            rc = -1;
        } else if (l) {
            l->v[i].dtype = H3_I8; /* (l == ex here: the append above may have moved the array) */
        }
    }
    /* nothing outside the profile is I8, and every scale belongs to one of its weights */
    for (int i = 0; i < st_set_count(s) && !rc; i++) {
        const char *name = st_set_name(s, i);
        const st_entry *ent = st_set_entry(s, name, NULL);
        if (ent && ent->dtype == H3_I8 && !dit_int8_in_scope(c, name, prof))
            rc = h3_fail(e, "%s: tensor '%s' is I8 but outside int8 profile %s (%s)", src, name,
                         dit_int8_profile_name(prof), how);
        if (!rc && ends_with(name, "_scale")) {
            char base[200];
            size_t n = strlen(name) - strlen("_scale");
            snprintf(base, sizeof base, "%.*s", (int)n, name);
            const st_entry *b = st_set_entry(s, base, NULL);
            if (!dit_int8_in_scope(c, base, prof) || !b || b->dtype != H3_I8)
                rc = h3_fail(e, "%s: tensor '%s' is a scale, but '%s' is not an I8 weight of int8 profile %s", src, name,
                             base, dit_int8_profile_name(prof));
        }
    }
    h3_expect_list_free(&own);
    if (!rc) *profile = prof;
    return rc;
}

int dit_int8_profile(const dit_model *m) { return m->int8_profile; }

/* ---------------------------------------------------------------- the model's int8 linears */

void dit_int8_block_free(h3_backend *be, dit_block_w *w) {
    h3_int8_linear *ls[] = {&w->attn.i8_qkv, &w->attn.i8_q, &w->attn.i8_k, &w->attn.i8_v, &w->attn.i8_out, &w->i8_in,
                            &w->i8_down};
    for (size_t i = 0; i < sizeof ls / sizeof ls[0]; i++) h3_int8_linear_free(be, ls[i]);
    h3_free(be, w->adaln_scale);
    w->adaln_scale = NULL;
}

static int usable_here(dit_model *m, const char *what, h3_err *e) {
    if (m->act != H3_BF16) return h3_fail(e, "%s runs in the bf16 mode (--precision bf16; the fp32 mode is the reference)", what);
    if (m->stream)
        return h3_fail(e, "--ssd-streaming cannot be combined with %s (the int8 blocks are made resident)", what);
    return 0;
}

/* The fp32 scales of the named stored tensors, concatenated (a [sum N] F32 host tensor). */
static h3_tensor *stacked_scales(dit_model *m, const char *const *names, int n, h3_err *e) {
    int64_t total = 0;
    h3_tensor v[3];
    for (int i = 0; i < n; i++) {
        if (st_set_get(m->st, names[i], &v[i], e) != 0) return NULL;
        total += h3_tensor_numel(&v[i]);
    }
    h3_tensor *t = h3_tensor_new(H3_F32, 1, (int64_t[]){total}, e);
    if (!t) return NULL;
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        h3_convert_to_f32((float *)t->data + off, v[i].data, v[i].dtype, (size_t)h3_tensor_numel(&v[i]));
        off += h3_tensor_numel(&v[i]);
    }
    return t;
}

static int adopt(dit_model *m, h3_tensor **src, h3_int8_linear *dst, const char *const *names, int n, h3_err *e) {
    if (!*src) return 0;
    char sn[3][224];
    const char *sp[3];
    for (int i = 0; i < n; i++) snprintf(sn[i], sizeof sn[i], "%s_scale", names[i]), sp[i] = sn[i];
    h3_tensor *sc = stacked_scales(m, sp, n, e);
    if (!sc) return -1;
    int rc = h3_int8_linear_from(m->be, dst, *src, sc, e);
    h3_tensor_free(sc);
    if (rc) return -1;
    dit_drop_tensor(m, *src);
    *src = NULL;
    return 0;
}

int dit_int8_adopt(dit_model *m, h3_err *e) {
    const dit_config *c = &m->cfg;
    if (m->int8_profile == DIT_INT8_NONE) return 0;
    char what[96];
    snprintf(what, sizeof what, "an int8 snapshot (profile %s)", dit_int8_profile_name(m->int8_profile));
    if (usable_here(m, what, e) != 0) return -1;
    const int orig = c->original_layout;
    for (int b = 0; b < c->num_layers; b++) {
        dit_block_w *w = &m->blocks[b];
        char p[64], q[200], k[200], v[200], o[200], f1[200], f2[200], ad[200];
        snprintf(p, sizeof p, orig ? "blocks.%d" : "transformer_blocks.%d", b);
        snprintf(q, sizeof q, "%s.%s", p, orig ? "attn.qkv_proj.weight" : "attn.to_q.weight");
        snprintf(k, sizeof k, "%s.attn.to_k.weight", p);
        snprintf(v, sizeof v, "%s.attn.to_v.weight", p);
        snprintf(o, sizeof o, "%s.%s", p, orig ? "attn.out_proj.weight" : "attn.to_out.0.weight");
        snprintf(f1, sizeof f1, "%s.%s", p, orig ? "mlp.fc1.weight" : "ff.net.0.proj.weight");
        snprintf(f2, sizeof f2, "%s.%s", p, orig ? "mlp.fc2.weight" : "ff.net.2.weight");
        snprintf(ad, sizeof ad, "%s.adaln_proj.linear.weight", p);
        const char *qkv[3] = {q, k, v}, *one_q[1] = {q}, *one_k[1] = {k}, *one_v[1] = {v}, *one_o[1] = {o},
                   *one_1[1] = {f1}, *one_2[1] = {f2};
        int rc = 0;
        if (m->int8_profile >= DIT_INT8_DIT_PROJ) {
            if (w->attn.qkv && w->attn.qkv->dtype == H3_I8) rc |= adopt(m, &w->attn.qkv, &w->attn.i8_qkv, one_q, 1, e);
            if (!rc && w->attn.qkv_planar && w->attn.qkv_planar->dtype == H3_I8)
                rc |= adopt(m, &w->attn.qkv_planar, &w->attn.i8_qkv, qkv, 3, e);
            if (!rc) rc |= adopt(m, &w->attn.to_q, &w->attn.i8_q, one_q, 1, e);
            if (!rc) rc |= adopt(m, &w->attn.to_k, &w->attn.i8_k, one_k, 1, e);
            if (!rc) rc |= adopt(m, &w->attn.to_v, &w->attn.i8_v, one_v, 1, e);
            if (!rc) rc |= adopt(m, &w->attn.to_out, &w->attn.i8_out, one_o, 1, e);
        }
        if (!rc) rc |= adopt(m, &w->ff_in, &w->i8_in, one_1, 1, e);
        if (!rc) rc |= adopt(m, &w->ff_down, &w->i8_down, one_2, 1, e);
        w->ff_value = w->ff_gate = NULL; /* row views of the dropped ff_in */
        if (!rc && m->int8_profile == DIT_INT8_ALL) { /* the codes stay where load_w put them; the scales go here */
            char sname[224];
            snprintf(sname, sizeof sname, "%s_scale", ad);
            const char *sa[1] = {sname};
            h3_tensor *sc = stacked_scales(m, sa, 1, e);
            if (!sc || !(w->adaln_scale = h3_alloc(m->be, h3_tensor_nbytes(sc)))) {
                h3_tensor_free(sc);
                return sc ? h3_fail(e, "out of memory") : -1;
            }
            h3_upload(m->be, w->adaln_scale, sc->data, h3_tensor_nbytes(sc));
            h3_tensor_free(sc);
        }
        if (rc) return -1;
    }
    return 0;
}

int dit_int8_set_fc2_groups(dit_model *m, int on, h3_err *e) {
    const int64_t FF = m->cfg.ffn_dim;
    if (on && FF % DIT_INT8_FC2_GROUP != 0)
        return h3_fail(e, "--int8-fc2-groups: the FFN width %lld is not a multiple of %d", (long long)FF,
                       DIT_INT8_FC2_GROUP);
    for (int b = 0; m->blocks && b < m->cfg.num_layers; b++)
        if (m->blocks[b].i8_down.q) m->blocks[b].i8_down.group = on ? DIT_INT8_FC2_GROUP : 0;
    m->int8_fc2_groups = on;
    return 0;
}

/* linear j of dit_quantize_blocks as INT8 W8A8 */
static int int8_copy(h3_backend *be, dit_block_w *w, int j, const h3_tensor *src, h3_err *e) {
    h3_int8_linear *dst[DIT_QUANT_LINEARS] = {&w->attn.i8_qkv, &w->attn.i8_qkv, &w->attn.i8_q, &w->attn.i8_k,
                                              &w->attn.i8_v, &w->attn.i8_out, &w->i8_in, &w->i8_down};
    return h3_int8_linear_new(be, dst[j], src, e);
}

int dit_quantize_int8(dit_model *m, int fc2_groups, h3_err *e) {
    if (m->fp8) return h3_fail(e, "--quant int8 cannot be combined with --quant fp8");
    if (m->int8_profile != DIT_INT8_NONE) /* an int8 snapshot: its codes are the ones to run */
        return m->int8_fc2_groups == fc2_groups ? 0 : dit_int8_set_fc2_groups(m, fc2_groups, e);
    if (usable_here(m, "--quant int8", e) != 0) return -1;
    if (fc2_groups && m->cfg.ffn_dim % DIT_INT8_FC2_GROUP != 0) return dit_int8_set_fc2_groups(m, 1, e);
    if (dit_quantize_blocks(m, "--quant int8", int8_copy, dit_int8_block_free, e) != 0) return -1;
    m->int8_profile = DIT_INT8_DIT_PROJ;
    return dit_int8_set_fc2_groups(m, fc2_groups, e);
}

/* Profile all: y [n, 18H] fp32 (bf16 values) = the W8A8 AdaLN projection of u [n, TD] (fp32 buffer holding bf16
 * values: the bf16 mode's cast, docs/model/dit.md 4.5 step 1) with its bias, per ops_linear.h. */
int dit_int8_adaln(dit_model *m, int64_t b, float *y, const float *u, int n, const h3_tensor *w, const h3_tensor *bias,
                   h3_err *e) {
    h3_backend *be = m->be;
    const int64_t N = w->shape[0], K = w->shape[1];
    if (!m->blocks[b].adaln_scale) return h3_fail(e, "internal: block %lld's int8 AdaLN projection has no scales", (long long)b);
    if (!bias || bias->dtype != H3_BF16) return h3_fail(e, "int8 AdaLN projection: the bias must be BF16");
    h3_int8_linear l = {.q = w->data, .scale = m->blocks[b].adaln_scale, .N = N, .K = K};
    h3_bf16 *u16 = h3_alloc(be, (size_t)(n * K) * 2), *y16 = h3_alloc(be, (size_t)(n * N) * 2);
    int8_t *xq = h3_alloc(be, (size_t)(n * K));
    float *xs = h3_alloc(be, (size_t)n * sizeof(float));
    int rc = 0;
    if (!u16 || !y16 || !xq || !xs) {
        rc = h3_fail(e, "out of memory for the int8 AdaLN projection");
    } else {
        h3_bf16_pack(be, u16, u, n * K);
        h3_int8_quant_rows(be, xq, xs, u16, n, K, K, 0);
        h3_int8_matmul(be, y16, N, xq, xs, n, &l, (const h3_bf16 *)bias->data);
        h3_bf16_unpack(be, y, y16, n * N);
    }
    h3_free(be, u16), h3_free(be, y16), h3_free(be, xq), h3_free(be, xs);
    return rc;
}
