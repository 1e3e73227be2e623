/* LoRA files for the DiT (dit_lora.h, docs/lora.md). Conversion rules: diffusers 0.42.1's MiniMaxH3LoraLoaderMixin
 * (layout detection, alpha) and its non-diffusers conversion (prefixes, musubi's flattened names, kohya factors with
 * folded alphas, the fused QKV split and DiffSynth's per-head de-interleave, fc1's swapped halves); merge: peft's
 * Linear.merge on the CPU (docs/lora.md "Rounding"). The files are untrusted: every name and shape is checked. */
#include "dit_lora.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../io/expect.h"
#include "../backend/cpu/cpu_lora.h" /* the merge arithmetic */
#include "../io/safetensors.h"
#include "dit_lora_peft.h"

enum { NAME_CAP = 192 };

typedef struct lora_module {
    char     name[NAME_CAP]; /* diffusers module name, e.g. transformer_blocks.0.attn.to_q */
    char     key[NAME_CAP];  /* the file's key it came from (messages) */
    int      rank, in, out;
    h3_dtype dtype;          /* the factors' dtype: peft computes the delta in fp32 and rounds it to this */
    float   *A, *B;          /* [rank][in], [out][rank]: values exact in dtype */
    double   scaling;        /* scale * alpha / rank, as peft's set_scale computes it (double) */
    int      merged;         /* dit_lora_merge used it */
} lora_module;

typedef struct lora_file {
    char        *path;
    lora_module *m;
    int          n, cap;
} lora_file;

struct dit_lora_set {
    lora_file f[DIT_LORA_MAX];
    int       n;
};

/* ---------------------------------------------------------------- FILE[:SCALE] */

int dit_lora_parse_arg(char *arg, const char *flag, dit_lora_spec *out, h3_err *e) {
    out->path = arg, out->scale = 1.0, out->to_ref = 0;
    if (!arg || !arg[0]) return h3_fail(e, "%s: expects FILE[:SCALE]", flag);
    char *colon = strrchr(arg, ':');
    if (colon && !strchr(colon, '/')) { /* FILE:SCALE (a ':' inside a path is followed by a '/') */
        char *end;
        double s = strtod(colon + 1, &end);
        if (colon[1] == 0 || *end || !isfinite(s) || fabs(s) > DIT_LORA_MAX_SCALE)
            return h3_fail(e, "%s %s: the scale after ':' must be a finite number in [-%g, %g]", flag, arg,
                           DIT_LORA_MAX_SCALE, DIT_LORA_MAX_SCALE);
        *colon = 0;
        out->scale = s;
        if (!arg[0]) return h3_fail(e, "%s: expects FILE[:SCALE], the file is missing", flag);
    }
    return 0;
}

/* ---------------------------------------------------------------- key conversion */

typedef struct raw_key {
    char            *key; /* converted name */
    const char      *orig;
    const st_entry  *ent;
    int              used;
} raw_key;

typedef struct conv {
    const st_file *f;
    raw_key       *k;
    int            n;
    h3_err        *e;
} conv;

static int starts(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }
static int ends(const char *s, const char *p) {
    size_t a = strlen(s), b = strlen(p);
    return a >= b && !strcmp(s + a - b, p);
}

/* Replaces the first occurrence of `from` in *s by `to` (a new string). */
static int replace_first(char **s, const char *from, const char *to) {
    char *at = strstr(*s, from);
    if (!at) return 0;
    size_t pre = (size_t)(at - *s), fl = strlen(from), tl = strlen(to), rest = strlen(at + fl);
    char *n = malloc(pre + tl + rest + 1);
    if (!n) return -1;
    memcpy(n, *s, pre), memcpy(n + pre, to, tl), memcpy(n + pre + tl, at + fl, rest + 1);
    free(*s);
    *s = n;
    return 0;
}

/* Python's str.replace(from, to): every non-overlapping occurrence, left to right (to shorter than from). */
static int replace_all(char **s, const char *from, const char *to) {
    const size_t fl = strlen(from), tl = strlen(to);
    char *n = malloc(strlen(*s) + 1), *w = n;
    if (!n) return -1;
    for (const char *p = *s; *p;) {
        if (!strncmp(p, from, fl)) memcpy(w, to, tl), w += tl, p += fl;
        else *w++ = *p++;
    }
    *w = 0;
    free(*s);
    *s = n;
    return 0;
}

/* A run of decimal digits at *p (advanced past it), copied into out; 0 when none. */
static int digits(const char **p, char *out, size_t cap) {
    size_t n = 0;
    while ((*p)[n] >= '0' && (*p)[n] <= '9') n++;
    if (!n || n >= cap) return 0;
    memcpy(out, *p, n), out[n] = 0;
    *p += n;
    return 1;
}

/* musubi-tuner's flattened module name (after "lora_unet_") -> the dotted original name, as diffusers'
 * flattened_modules table does (whole-name matches, first pattern wins); 0 when it names no module. */
static int unflatten(const char *m, char *out, size_t cap) {
    char num[24];
    const char *p;
    static const char *const block_subs[][2] = {{"attn_qkv_proj", "attn.qkv_proj"}, {"attn_out_proj", "attn.out_proj"},
                                                {"mlp_fc1", "mlp.fc1"}, {"mlp_fc2", "mlp.fc2"},
                                                {"adaln_proj_linear", "adaln_proj.linear"}};
    const char *heads[2] = {"blocks_", "token_refiner_blocks_"}, *dotted[2] = {"blocks.", "token_refiner.blocks."};
    for (int h = 0; h < 2; h++) {
        if (!starts(m, heads[h])) continue;
        p = m + strlen(heads[h]);
        if (!digits(&p, num, sizeof num) || *p++ != '_') return 0;
        for (int i = 0; i < (h ? 4 : 5); i++)
            if (!strcmp(p, block_subs[i][0])) return snprintf(out, cap, "%s%s.%s", dotted[h], num, block_subs[i][1]) < (int)cap;
        return 0;
    }
    static const char *const flat[][2] = {
        {"video_patch_proj", "video_patch_proj"}, {"audio_patch_proj", "audio_patch_proj"},
        {"condition_proj", "condition_proj"}, {"time_embedder_proj_in", "time_embedder.proj_in"},
        {"time_embedder_proj_out", "time_embedder.proj_out"}, {"final_layer_adaln_proj_linear", "final_layer.adaln_proj.linear"},
        {"final_layer_video_out", "final_layer.video_out"}, {"final_layer_audio_out", "final_layer.audio_out"}};
    for (size_t i = 0; i < sizeof flat / sizeof flat[0]; i++)
        if (!strcmp(m, flat[i][0])) return snprintf(out, cap, "%s", flat[i][1]) < (int)cap;
    return 0;
}

/* What a converted (original-name) module base becomes: its diffusers name and how its lora_B rows are rearranged. */
enum { MAP_PLAIN, MAP_QKV, MAP_FC1 };

static int original_to_diffusers(const char *base, char *out, size_t cap, int *map) {
    static const char *const standalone[][2] = {
        {"video_patch_proj", "proj_in"}, {"audio_patch_proj", "audio_proj_in"}, {"condition_proj", "context_embedder"},
        {"time_embedder.proj_in", "time_embedder.linear_1"}, {"time_embedder.proj_out", "time_embedder.linear_2"},
        {"final_layer.adaln_proj.linear", "norm_out.linear"}, {"final_layer.video_out", "proj_out"},
        {"final_layer.audio_out", "audio_proj_out"}};
    *map = MAP_PLAIN;
    for (size_t i = 0; i < sizeof standalone / sizeof standalone[0]; i++)
        if (!strcmp(base, standalone[i][0])) return snprintf(out, cap, "%s", standalone[i][1]) < (int)cap;
    const char *heads[2] = {"blocks.", "token_refiner.blocks."};
    const char *targets[2] = {"transformer_blocks.", "token_refiner.refiner_blocks."};
    for (int h = 0; h < 2; h++) {
        if (!starts(base, heads[h])) continue;
        const char *p = base + strlen(heads[h]);
        char num[24];
        if (!digits(&p, num, sizeof num) || *p++ != '.') return 0;
        if (num[0] == '0' && num[1]) return 0; /* diffusers rebuilds the name from int(index) */
        static const char *const subs[][2] = {{"attn.qkv_proj", "attn.qkv"}, {"mlp.fc1", "ff.net.0.proj"},
                                              {"attn.out_proj", "attn.to_out.0"}, {"mlp.fc2", "ff.net.2"},
                                              {"adaln_proj.linear", "adaln_proj.linear"}};
        for (int i = 0; i < 5; i++)
            if (!strcmp(p, subs[i][0])) {
                *map = i == 0 ? MAP_QKV : i == 1 ? MAP_FC1 : MAP_PLAIN;
                return snprintf(out, cap, "%s%s.%s", targets[h], num, subs[i][1]) < (int)cap;
            }
        return 0;
    }
    return 0;
}

static raw_key *find_key(conv *c, const char *key) {
    for (int i = 0; i < c->n; i++)
        if (!c->k[i].used && !strcmp(c->k[i].key, key)) return &c->k[i];
    return NULL;
}

/* fp32 values of a factor (2-D, F32/BF16/F16). */
static float *factor_values(conv *c, const raw_key *k, int64_t *rows, int64_t *cols) {
    const st_entry *t = k->ent;
    if (t->ndim != 2 || t->shape[0] < 1 || t->shape[1] < 1) {
        char s[64];
        h3_fail(c->e, "%s: tensor '%s' is %s: a LoRA factor is a 2-D matrix", c->f->path, k->orig,
                h3_shape_str(t->shape, t->ndim, s, sizeof s));
        return NULL;
    }
    if (t->dtype != H3_F32 && t->dtype != H3_BF16 && t->dtype != H3_F16) {
        h3_fail(c->e, "%s: tensor '%s' is %s: LoRA factors are F32, BF16 or F16", c->f->path, k->orig,
                h3_dtype_name(t->dtype));
        return NULL;
    }
    *rows = t->shape[0], *cols = t->shape[1];
    size_t n = (size_t)(*rows * *cols);
    float *v = malloc(n * sizeof *v);
    if (!v) {
        h3_fail(c->e, "out of memory for '%s'", k->orig);
        return NULL;
    }
    h3_convert_to_f32(v, st_data(c->f, t), t->dtype, n);
    return v;
}

/* x * s, rounded to dtype: torch's tensor * Python float (the scalar taken as fp32, the product rounded). */
static void scale_round(float *v, size_t n, double s, h3_dtype dt) {
    const float sf = (float)s;
    for (size_t i = 0; i < n; i++) {
        float x = v[i] * sf;
        v[i] = dt == H3_BF16 ? h3_round_bf16(x) : dt == H3_F16 ? h3_f16_to_f32(h3_f32_to_f16(x)) : x;
    }
}

typedef struct file_rules {
    int    has_alpha_tensors; /* any key ends with ".alpha" */
    int    has_meta_alpha;
    double meta_alpha;        /* the __metadata__ "alpha" (a number), honored when no .alpha tensor exists */
    double scale;
    lora_peft *peft;          /* diffusers' lora_adapter_metadata: when present, each module's rank and alpha */
} file_rules;

static int add_module(lora_file *lf, conv *c, const char *name, const char *key, float *A, float *B, int rank, int in,
                      int out, h3_dtype dt, const file_rules *r) {
    if (lf->n == lf->cap) {
        int cap = lf->cap ? 2 * lf->cap : 64;
        lora_module *v = realloc(lf->m, (size_t)cap * sizeof *v);
        if (!v) {
            free(A), free(B);
            return h3_fail(c->e, "out of memory");
        }
        lf->m = v, lf->cap = cap;
    }
    for (int i = 0; i < lf->n; i++)
        if (!strcmp(lf->m[i].name, name)) {
            free(A), free(B);
            return h3_fail(c->e, "%s: tensor '%s': module '%s' appears twice", c->f->path, key, name);
        }
    lora_module *m = &lf->m[lf->n++];
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    snprintf(m->key, sizeof m->key, "%s", key);
    m->rank = rank, m->in = in, m->out = out, m->dtype = dt, m->A = A, m->B = B;
    /* peft: scaling = weight * lora_alpha / r (set_scale); with lora_adapter_metadata its LoraConfig gives them, else
     * alpha-less files have alpha == rank (diffusers pins it) */
    if (r->peft) return lora_peft_scaling(r->peft, name, rank, r->scale, &m->scaling, c->f->path, key, c->e);
    const double alpha = r->has_meta_alpha && !r->has_alpha_tensors ? r->meta_alpha : (double)rank;
    m->scaling = r->scale * alpha / (double)rank;
    return 0;
}

/* The diffusers module `name` of cfg's diffusers-layout tensor list: its [out, in], or 0 when the model has none. */
static int module_shape(const h3_expect_list *ex, const char *name, int *out, int *in) {
    char w[NAME_CAP + 16];
    snprintf(w, sizeof w, "%s.weight", name);
    const h3_expect *x = h3_expect_find(ex, w);
    if (!x || x->ndim != 2) return 0;
    *out = (int)x->shape[0], *in = (int)x->shape[1];
    return 1;
}

/* The model's weight `name` (a module of the expected list ex) against the [out, in] delta that ka / kb give it. */
static int check_delta(const conv *c, const h3_expect_list *ex, const raw_key *ka, const raw_key *kb, const char *name,
                       int64_t out, int64_t in) {
    int o, i;
    if (!module_shape(ex, name, &o, &i))
        return h3_fail(c->e, "%s: tensor '%s' maps to '%s', which this model does not have", c->f->path, kb->orig, name);
    if (o != out || i != in)
        return h3_fail(c->e, "%s: tensors '%s' / '%s' give '%s' a [%lld,%lld] delta, the model's weight is [%d,%d] "
                             "(a LoRA for another checkpoint, e.g. a pruned one)",
                       c->f->path, ka->orig, kb->orig, name, (long long)out, (long long)in, o, i);
    return 0;
}

/* One (A, B) pair on diffusers names after the layout's rules: checked against the model, split / rearranged. */
static int take_pair(lora_file *lf, conv *c, const h3_expect_list *ex, const char *dname, int map, int diffsynth,
                     int head_dim, raw_key *ka, raw_key *kb, raw_key *kalpha, const file_rules *r) {
    int64_t ar, ac, br, bc;
    float *A = factor_values(c, ka, &ar, &ac);
    if (!A) return -1;
    float *B = factor_values(c, kb, &br, &bc);
    if (!B) {
        free(A);
        return -1;
    }
    int rc = -1;
    const h3_dtype dt = kb->ent->dtype;
    if (ka->ent->dtype != dt) {
        h3_fail(c->e, "%s: tensor '%s' is %s but '%s' is %s: peft multiplies the two factors in one dtype", c->f->path,
                ka->orig, h3_dtype_name(ka->ent->dtype), kb->orig, h3_dtype_name(dt));
        goto done;
    }
    if (bc != ar) {
        h3_fail(c->e, "%s: tensors '%s' [%lld,%lld] and '%s' [%lld,%lld]: lora_B's columns must equal lora_A's rows (the rank)",
                c->f->path, ka->orig, (long long)ar, (long long)ac, kb->orig, (long long)br, (long long)bc);
        goto done;
    }
    const int rank = (int)ar;
    if (kalpha) { /* diffusers folds alpha / rank into the factors, doubling down until it is >= up / 2 */
        const st_entry *t = kalpha->ent;
        int64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) numel *= t->shape[d];
        if (numel != 1 || !h3_dtype_is_float(t->dtype)) {
            h3_fail(c->e, "%s: tensor '%s' must be a single float", c->f->path, kalpha->orig);
            goto done;
        }
        float a;
        h3_convert_to_f32(&a, st_data(c->f, t), t->dtype, 1);
        if (!isfinite(a) || a < 0) { /* diffusers' fold never ends for a negative alpha (found by fuzz_lora) */
            h3_fail(c->e, "%s: tensor '%s' is %g: an alpha is a finite number >= 0", c->f->path, kalpha->orig, (double)a);
            goto done;
        }
        double sd = (double)a / (double)rank, su = 1.0;
        while (sd * 2 < su) sd *= 2, su /= 2;
        scale_round(A, (size_t)(ar * ac), sd, dt);
        scale_round(B, (size_t)(br * bc), su, dt);
    }
    if (map == MAP_QKV) {
        if (br % 3) {
            h3_fail(c->e, "%s: tensor '%s' has %lld rows, not divisible by 3: not a fused MiniMax-H3 QKV projection",
                    c->f->path, kb->orig, (long long)br);
            goto done;
        }
        if (diffsynth) { /* [head: q k v]... -> [q_all; k_all; v_all] (docs/model/dit.md 2.4) */
            if (br % (3 * head_dim)) {
                h3_fail(c->e, "%s: tensor '%s' has %lld rows, not a multiple of 3 x %d: not a per-head-interleaved QKV",
                        c->f->path, kb->orig, (long long)br, head_dim);
                goto done;
            }
            float *t = malloc((size_t)(br * bc) * sizeof *t);
            if (!t) {
                h3_fail(c->e, "out of memory");
                goto done;
            }
            const int64_t heads = br / (3 * head_dim), I = br / 3;
            for (int64_t row = 0; row < br; row++) {
                int64_t h = row / (3 * head_dim), j = row % (3 * head_dim) / head_dim, d = row % head_dim;
                memcpy(t + (j * I + h * head_dim + d) * bc, B + row * bc, (size_t)bc * sizeof *t);
            }
            (void)heads;
            free(B);
            B = t;
        }
        const char *proj[3] = {"to_q", "to_k", "to_v"};
        const int64_t I = br / 3;
        for (int j = 0; j < 3; j++) {
            char name[NAME_CAP];
            snprintf(name, sizeof name, "%.*s%s", (int)(strlen(dname) - 3), dname, proj[j]); /* "...attn.qkv" */
            if (check_delta(c, ex, ka, kb, name, I, ac) != 0) goto done;
            float *Aj = malloc((size_t)(ar * ac) * sizeof *Aj), *Bj = malloc((size_t)(I * bc) * sizeof *Bj);
            if (!Aj || !Bj) {
                free(Aj), free(Bj);
                h3_fail(c->e, "out of memory");
                goto done;
            }
            memcpy(Aj, A, (size_t)(ar * ac) * sizeof *Aj);
            memcpy(Bj, B + j * I * bc, (size_t)(I * bc) * sizeof *Bj);
            if (add_module(lf, c, name, kb->orig, Aj, Bj, rank, (int)ac, (int)I, dt, r) != 0) goto done;
        }
        rc = 0;
        goto done;
    }
    if (check_delta(c, ex, ka, kb, dname, br, ac) != 0) goto done;
    if (map == MAP_FC1) { /* original [gate; value] -> diffusers [value; gate]: lora_B's row halves swap */
        if (br % 2) {
            h3_fail(c->e, "%s: tensor '%s' has %lld rows, not even: not a fused SwiGLU projection", c->f->path, kb->orig,
                    (long long)br);
            goto done;
        }
        float *t = malloc((size_t)(br * bc) * sizeof *t);
        if (!t) {
            h3_fail(c->e, "out of memory");
            goto done;
        }
        const size_t half = (size_t)(br / 2 * bc);
        memcpy(t, B + half, half * sizeof *t), memcpy(t + half, B, half * sizeof *t);
        free(B);
        B = t;
    }
    rc = add_module(lf, c, dname, kb->orig, A, B, rank, (int)ac, (int)br, dt, r);
    A = B = NULL; /* owned by the module (or freed by add_module) */
done:
    free(A), free(B);
    return rc;
}

/* The __metadata__ "alpha" entry: a number honored as the network alpha (diffusers' float(); non-numbers ignored). */
static void meta_alpha(const st_file *f, file_rules *r) {
    if (!f->metadata_json) return;
    json_error_t je;
    json_t *m = json_loads(f->metadata_json, 0, &je);
    const char *s = m ? json_string_value(json_object_get(m, "alpha")) : NULL;
    if (s) {
        char *end;
        while (*s == ' ' || *s == '\t' || *s == '\n') s++;
        double v = strtod(s, &end);
        while (*end == ' ' || *end == '\t' || *end == '\n') end++;
        if (end != s && !*end) r->has_meta_alpha = 1, r->meta_alpha = v;
    }
    json_decref(m);
}

/* Converts one parsed file into lf (diffusers module names), for the partition `ref`. */
static int convert_file(const st_file *f, const dit_config *cfg, int ref, int to_ref, double scale, lora_file *lf,
                        h3_err *e) {
    conv c = {.f = f, .e = e};
    h3_expect_list ex = {0};
    dit_config dcfg = *cfg;
    dcfg.original_layout = 0, dcfg.qkv_stacked = 0;
    int rc = -1;
    file_rules rules = {.scale = scale};
    if (dit_expected_tensors(&dcfg, &ex, e) != 0) goto done;
    if (f->n == 0) {
        h3_fail(e, "%s: holds no tensor: not a LoRA", f->path);
        goto done;
    }
    meta_alpha(f, &rules);
    c.k = calloc((size_t)f->n, sizeof *c.k);
    if (!c.k) {
        h3_fail(e, "out of memory");
        goto done;
    }
    c.n = f->n;
    int non_diffusers = 0, default_infix = 0, prefixed = 0, has_ref = 0, has_main = 0;
    for (int i = 0; i < f->n; i++) {
        const char *k = f->entries[i].name;
        c.k[i].orig = k, c.k[i].ent = &f->entries[i];
        if (!(c.k[i].key = strdup(k))) {
            h3_fail(e, "out of memory");
            goto done;
        }
        if (strstr(k, "dora_scale") || strstr(k, "lora_magnitude_vector")) {
            h3_fail(e, "%s: tensor '%s': a DoRA file (weight-decomposed LoRA), which h3 does not merge", f->path, k);
            goto done;
        }
        if (ends(k, ".alpha")) rules.has_alpha_tensors = 1;
        if (starts(k, "diffusion_model.") || starts(k, "blocks.") || starts(k, "token_refiner.blocks.") ||
            starts(k, "final_layer.") || starts(k, "lora_unet_"))
            non_diffusers = 1;
        if (strstr(k, ".default.weight")) default_infix = 1;
        if (starts(k, "transformer.")) prefixed = 1, has_main = 1;
        if (starts(k, "transformer_ref.")) prefixed = 1, has_ref = 1;
    }
    /* diffusers' own files: the LoraConfig under the prefix the (converted) keys carry */
    if (lora_peft_parse(f->metadata_json, has_ref && !non_diffusers ? "transformer_ref" : "transformer", f->path,
                        &rules.peft, e) != 0)
        goto done;
    int file_ref = 0; /* the file names the ref2va partition */
    if (non_diffusers) {
        int diffsynth = 0, musubi = 0, kohya = 0;
        for (int i = 0; i < c.n; i++) {
            if (starts(c.k[i].key, "diffusion_model.") && replace_first(&c.k[i].key, "diffusion_model.", "") != 0) goto oom;
            if (strstr(c.k[i].key, ".lora_A.default.weight") || strstr(c.k[i].key, ".lora_B.default.weight")) diffsynth = 1;
            if (starts(c.k[i].key, "lora_unet_")) musubi = 1;
        }
        for (int i = 0; diffsynth && i < c.n; i++)
            if (replace_first(&c.k[i].key, ".lora_A.default.", ".lora_A.") || replace_first(&c.k[i].key, ".lora_B.default.", ".lora_B."))
                goto oom;
        for (int i = 0; musubi && i < c.n; i++) { /* every key must be a flattened module name */
            const char *k = c.k[i].key;
            const char *dot = strchr(k, '.');
            char mod[NAME_CAP], dotted[NAME_CAP];
            size_t ml = dot ? (size_t)(dot - k) : strlen(k);
            if (!starts(k, "lora_unet_") || ml - 10 >= sizeof mod) {
                h3_fail(e, "%s: tensor '%s' does not name a MiniMax-H3 module in musubi-tuner's flattened lora_unet_ layout",
                        f->path, c.k[i].orig);
                goto done;
            }
            memcpy(mod, k + 10, ml - 10), mod[ml - 10] = 0;
            if (!unflatten(mod, dotted, sizeof dotted)) {
                h3_fail(e, "%s: tensor '%s' does not name a MiniMax-H3 module in musubi-tuner's flattened lora_unet_ layout",
                        f->path, c.k[i].orig);
                goto done;
            }
            char *n = malloc(strlen(dotted) + strlen(dot ? dot : "") + 1);
            if (!n) goto oom;
            sprintf(n, "%s%s", dotted, dot ? dot : "");
            free(c.k[i].key);
            c.k[i].key = n;
        }
        for (int i = 0; i < c.n; i++)
            if (ends(c.k[i].key, ".lora_down.weight")) kohya = 1;
        const char *down = kohya ? ".lora_down.weight" : ".lora_A.weight", *up = kohya ? ".lora_up.weight" : ".lora_B.weight";
        for (int i = 0; i < c.n; i++) {
            raw_key *ka = &c.k[i];
            if (ka->used || !ends(ka->key, down)) continue;
            char base[NAME_CAP], dname[NAME_CAP], kk[NAME_CAP + 24];
            size_t bl = strlen(ka->key) - strlen(down);
            if (bl >= sizeof base) continue; /* left over: reported below */
            memcpy(base, ka->key, bl), base[bl] = 0;
            int map;
            if (!original_to_diffusers(base, dname, sizeof dname, &map)) continue;
            snprintf(kk, sizeof kk, "%s%s", base, up);
            raw_key *kb = find_key(&c, kk);
            if (!kb) {
                h3_fail(e, "%s: tensor '%s' has no '%s%s' beside it", f->path, ka->orig, base, up);
                goto done;
            }
            snprintf(kk, sizeof kk, "%s.alpha", base);
            raw_key *kal = find_key(&c, kk);
            ka->used = kb->used = 1;
            if (kal) kal->used = 1;
            if (take_pair(lf, &c, &ex, dname, map, diffsynth, cfg->attention_head_dim, ka, kb, kal, &rules) != 0) goto done;
        }
    } else {
        const int unprefixed_peft = default_infix && !prefixed;
        if (has_ref && has_main) {
            h3_fail(e, "%s: holds both transformer. and transformer_ref. layers; h3 loads one partition at a time", f->path);
            goto done;
        }
        file_ref = has_ref;
        const char *pfx = has_ref ? "transformer_ref." : "transformer.";
        for (int i = 0; unprefixed_peft && i < c.n; i++) /* a peft dump: diffusers names with peft's infix */
            if (replace_all(&c.k[i].key, ".default.", ".")) goto oom;
        for (int i = 0; i < c.n; i++) {
            raw_key *ka = &c.k[i];
            if (ka->used || (!unprefixed_peft && !starts(ka->key, pfx))) continue;
            const char *k = ka->key + (unprefixed_peft ? 0 : strlen(pfx));
            if (!ends(k, ".lora_A.weight")) continue;
            char mod[NAME_CAP], kk[NAME_CAP + 32];
            size_t ml = strlen(k) - strlen(".lora_A.weight");
            if (ml >= sizeof mod) continue;
            memcpy(mod, k, ml), mod[ml] = 0;
            snprintf(kk, sizeof kk, "%s%s.lora_B.weight", unprefixed_peft ? "" : pfx, mod);
            raw_key *kb = find_key(&c, kk);
            if (!kb) {
                h3_fail(e, "%s: tensor '%s' has no '%s' beside it", f->path, ka->orig, kk);
                goto done;
            }
            ka->used = kb->used = 1;
            if (take_pair(lf, &c, &ex, mod, MAP_PLAIN, 0, cfg->attention_head_dim, ka, kb, NULL, &rules) != 0) goto done;
        }
    }
    for (int i = 0; i < c.n; i++)
        if (!c.k[i].used) {
            h3_fail(e, "%s: tensor '%s' maps to no MiniMax-H3 DiT weight (diffusers' MiniMax-H3 LoRA layouts, docs/lora.md)",
                    f->path, c.k[i].orig);
            goto done;
        }
    if (lf->n == 0) {
        h3_fail(e, "%s: no LoRA layer in it", f->path);
        goto done;
    }
    if ((file_ref || to_ref) && !ref) {
        h3_fail(e, "%s: %s the transformer_ref partition, which only ref2va runs", f->path,
                file_ref ? "its layers are transformer_ref.-prefixed: it targets" : "--lora-ref routes it to");
        goto done;
    }
    rc = 0;
    goto done;
oom:
    h3_fail(e, "out of memory");
done:
    lora_peft_free(rules.peft);
    for (int i = 0; c.k && i < c.n; i++) free(c.k[i].key);
    free(c.k);
    h3_expect_list_free(&ex);
    return rc;
}

static void lora_file_clear(lora_file *lf) {
    for (int i = 0; i < lf->n; i++) free(lf->m[i].A), free(lf->m[i].B);
    free(lf->m);
    free(lf->path);
    memset(lf, 0, sizeof *lf);
}

int dit_lora_check_file(const st_file *f, const dit_config *cfg, int ref, int to_ref, h3_err *e) {
    lora_file lf = {0};
    int rc = convert_file(f, cfg, ref, to_ref, 1.0, &lf, e);
    lora_file_clear(&lf);
    return rc;
}

dit_lora_set *dit_lora_set_new(const dit_lora_spec *specs, int n, const dit_config *cfg, int ref, h3_err *e) {
    if (n > DIT_LORA_MAX) {
        h3_fail(e, "--lora: %d LoRAs given, at most %d", n, DIT_LORA_MAX);
        return NULL;
    }
    dit_lora_set *s = calloc(1, sizeof *s);
    if (!s) {
        h3_fail(e, "out of memory");
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        st_file *f = st_open(specs[i].path, e);
        if (!f) goto fail;
        lora_file *lf = &s->f[s->n++];
        int rc = (lf->path = strdup(specs[i].path)) ? convert_file(f, cfg, ref, specs[i].to_ref, specs[i].scale, lf, e)
                                                    : h3_fail(e, "out of memory");
        st_close(f);
        if (rc != 0) goto fail;
    }
    return s;
fail:
    dit_lora_set_free(s);
    return NULL;
}

void dit_lora_set_free(dit_lora_set *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) lora_file_clear(&s->f[i]);
    free(s);
}

/* ---------------------------------------------------------------- merge */

/* A stored weight's parts: the diffusers module each row range comes from and how its rows land. */
enum { ROWS_SAME, ROWS_QKV_STACKED, ROWS_QKV_HEADS, ROWS_FC1_SWAP };
typedef struct segment {
    char name[NAME_CAP];
    int  rows, j; /* rows: ROWS_*; j: 0 q, 1 k, 2 v */
} segment;

/* The segments of stored weight `name` in cfg's layout (0 when it is no LoRA-able linear). */
static int segments(const dit_config *cfg, const char *name, segment *seg) {
    char base[NAME_CAP];
    size_t l = strlen(name);
    if (l < 8 || l - 7 >= sizeof base || !ends(name, ".weight")) return 0;
    memcpy(base, name, l - 7), base[l - 7] = 0;
    if (!cfg->original_layout) {
        snprintf(seg[0].name, sizeof seg[0].name, "%s", base);
        seg[0].rows = ROWS_SAME, seg[0].j = 0;
        return 1;
    }
    char d[NAME_CAP];
    int map;
    if (!original_to_diffusers(base, d, sizeof d, &map)) return 0;
    if (map == MAP_QKV) {
        const char *proj[3] = {"to_q", "to_k", "to_v"};
        for (int j = 0; j < 3; j++) {
            snprintf(seg[j].name, sizeof seg[j].name, "%.*s%s", (int)(strlen(d) - 3), d, proj[j]);
            seg[j].rows = cfg->qkv_stacked ? ROWS_QKV_STACKED : ROWS_QKV_HEADS, seg[j].j = j;
        }
        return 3;
    }
    snprintf(seg[0].name, sizeof seg[0].name, "%s", d);
    seg[0].rows = map == MAP_FC1 ? ROWS_FC1_SWAP : ROWS_SAME, seg[0].j = 0;
    return 1;
}

static lora_module *find_module(lora_file *lf, const char *name) {
    for (int i = 0; i < lf->n; i++)
        if (!strcmp(lf->m[i].name, name)) return &lf->m[i];
    return NULL;
}

static float round_to(float x, h3_dtype dt) {
    return dt == H3_BF16 ? h3_round_bf16(x) : dt == H3_F16 ? h3_f16_to_f32(h3_f32_to_f16(x)) : x;
}

/* A module's merge as pieces (dit_lora.h): where its rows land in the stored weight, the factors in the weight's
 * dtype (peft's adapter layers take the base layer's dtype, docs/lora.md "The merge and its rounding"). */
static int module_pieces(const dit_config *cfg, const segment *sg, const lora_module *m, h3_dtype out,
                         dit_lora_piece *p, int *np) {
    const int64_t hd = cfg->attention_head_dim, half = m->out / 2;
    int64_t row0[2] = {0, 0}, b0[2] = {0, 0}, n[2] = {m->out, 0}, group = m->out, stride = m->out;
    switch (sg->rows) {
    case ROWS_QKV_STACKED: row0[0] = sg->j * (int64_t)m->out; break;
    case ROWS_QKV_HEADS: row0[0] = sg->j * hd, group = hd, stride = 3 * hd; break; /* [head: q k v] rows */
    case ROWS_FC1_SWAP: /* the module's [value; gate] onto the stored [gate; value] */
        row0[0] = half, n[0] = half, row0[1] = 0, b0[1] = half, n[1] = m->out - half, group = stride = m->out;
        break;
    default: break;
    }
    for (int h = 0; h < 2 && n[h] > 0; h++) {
        dit_lora_piece *q = &p[(*np)++];
        *q = (dit_lora_piece){.n = n[h], .k = m->in, .row0 = row0[h], .row_group = group, .group_stride = stride,
                              .rank = m->rank, .scaling = (float)m->scaling};
        q->A = malloc((size_t)m->rank * (size_t)m->in * sizeof *q->A);
        q->B = malloc((size_t)m->rank * (size_t)n[h] * sizeof *q->B);
        if (!q->A || !q->B) return -1;
        for (int64_t i = 0; i < (int64_t)m->rank * m->in; i++) q->A[i] = round_to(m->A[i], out);
        for (int64_t i = 0; i < (int64_t)m->rank * n[h]; i++) q->B[i] = round_to(m->B[b0[h] * m->rank + i], out);
    }
    return 0;
}

void dit_lora_pieces_free(dit_lora_piece *p, int n) {
    for (int i = 0; p && i < n; i++) free(p[i].A), free(p[i].B);
    free(p);
}

int dit_lora_pieces(dit_lora_set *s, const dit_config *cfg, const char *name, const h3_tensor *base, h3_dtype out_dtype,
                    dit_lora_piece **pieces, int *np, h3_err *e) {
    *pieces = NULL, *np = 0;
    if (!s || base->ndim != 2) return 0;
    segment seg[3];
    const int ns = segments(cfg, name, seg);
    int any = 0;
    for (int f = 0; f < s->n && !any; f++)
        for (int j = 0; j < ns && !any; j++) any = find_module(&s->f[f], seg[j].name) != NULL;
    if (!any) return 0;
    if (base->dtype != H3_F32 && base->dtype != H3_BF16 && base->dtype != H3_F16)
        return h3_fail(e, "'%s' is %s: a LoRA merges into F32/BF16/F16 weights only (not an int8 snapshot's)", name,
                       h3_dtype_name(base->dtype));
    if (out_dtype != H3_F32 && out_dtype != H3_BF16 && out_dtype != H3_F16)
        return h3_fail(e, "'%s': a LoRA merge writes F32/BF16/F16 weights only", name);
    const int64_t rows = base->shape[0], cols = base->shape[1];
    dit_lora_piece *p = calloc((size_t)s->n * 3 * 2, sizeof *p); /* at most 2 pieces a segment */
    int n = 0;
    if (!p) return h3_fail(e, "out of memory merging a LoRA into '%s'", name);
    for (int f = 0; f < s->n; f++)
        for (int j = 0; j < ns; j++) {
            lora_module *m = find_module(&s->f[f], seg[j].name);
            if (!m) continue;
            if (m->in != cols || (seg[j].rows == ROWS_SAME ? m->out != rows : m->out * (ns == 3 ? 3 : 1) != rows)) {
                dit_lora_pieces_free(p, n);
                return h3_fail(e, "%s: '%s' [%d,%d] does not fit the stored '%s' [%lld,%lld]", s->f[f].path, m->name,
                               m->out, m->in, name, (long long)rows, (long long)cols);
            }
            if (module_pieces(cfg, &seg[j], m, out_dtype, p, &n) != 0) {
                dit_lora_pieces_free(p, n);
                return h3_fail(e, "out of memory merging a LoRA into '%s'", name);
            }
            m->merged = 1;
        }
    *pieces = p, *np = n;
    return 0;
}

int dit_lora_merge(dit_lora_set *s, const dit_config *cfg, const char *name, const h3_tensor *base, h3_dtype out_dtype,
                   void **merged, h3_err *e) {
    *merged = NULL;
    dit_lora_piece *p;
    int np;
    if (dit_lora_pieces(s, cfg, name, base, out_dtype, &p, &np, e) != 0) return -1;
    if (!np) return 0;
    const int64_t rows = base->shape[0], cols = base->shape[1];
    const size_t n = (size_t)(rows * cols), esz = h3_dtype_size(out_dtype);
    void *W = malloc(n * esz);
    if (!W) {
        dit_lora_pieces_free(p, np);
        return h3_fail(e, "out of memory merging a LoRA into '%s'", name);
    }
    /* the base weight in the output dtype: the same bytes when the dtypes agree, else through fp32 in chunks */
    enum { CHUNK = 4096 };
#pragma omp parallel for schedule(static) if (n >= (1 << 22))
    for (int64_t c0 = 0; c0 < (int64_t)n; c0 += CHUNK) {
        const size_t k = n - (size_t)c0 < CHUNK ? n - (size_t)c0 : CHUNK;
        if (base->dtype == out_dtype) {
            memcpy((uint8_t *)W + (size_t)c0 * esz, (const uint8_t *)base->data + (size_t)c0 * esz, k * esz);
        } else {
            float tmp[CHUNK];
            h3_convert_to_f32(tmp, (const uint8_t *)base->data + (size_t)c0 * h3_dtype_size(base->dtype), base->dtype, k);
            h3_convert_from_f32((uint8_t *)W + (size_t)c0 * esz, out_dtype, tmp, k);
        }
    }
    /* each piece in order: the arithmetic of h3_lora_merge_into's CPU twin (the streamed slots' merge) */
    for (int i = 0; i < np; i++)
        cpu_lora_merge_rows((uint8_t *)W + (size_t)(p[i].row0 * cols) * esz, out_dtype, p[i].n, p[i].k, p[i].row_group,
                            p[i].group_stride, p[i].B, p[i].A, p[i].rank, p[i].scaling);
    dit_lora_pieces_free(p, np);
    *merged = W;
    return 0;
}

int dit_lora_touches(const dit_lora_set *s, const dit_config *cfg, const char *name) {
    segment seg[3];
    const int ns = s ? segments(cfg, name, seg) : 0;
    for (int f = 0; f < (s ? s->n : 0); f++)
        for (int j = 0; j < ns; j++)
            if (find_module((lora_file *)&s->f[f], seg[j].name)) return 1;
    return 0;
}

int dit_lora_check_all_merged(const dit_lora_set *s, h3_err *e) {
    for (int f = 0; s && f < s->n; f++)
        for (int i = 0; i < s->f[f].n; i++)
            if (!s->f[f].m[i].merged)
                return h3_fail(e, "%s: tensor '%s' (module '%s') met no weight of the loaded model", s->f[f].path,
                               s->f[f].m[i].key, s->f[f].m[i].name);
    return 0;
}
