/* diffusers' lora_adapter_metadata: the peft LoraConfig of a LoRA file (dit_lora_peft.h, docs/lora.md "peft's
 * LoraConfig in the file"). The metadata is untrusted: every field read is type-checked (fuzz/fuzz_lora.c). */
#include "dit_lora_peft.h"

#include <jansson.h>
#include <math.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

typedef struct peft_pattern {
    regex_t re;    /* ^(.*\.)?(KEY)$: peft's get_pattern_key with re.match */
    double  value; /* a rank (integral) or an alpha */
    char   *key;
} peft_pattern;

struct lora_peft {
    int           r, rslora;
    double        alpha;
    peft_pattern *ranks, *alphas;
    int           n_ranks, n_alphas;
};

static void patterns_free(peft_pattern *p, int n) {
    for (int i = 0; i < n; i++) regfree(&p[i].re), free(p[i].key);
    free(p);
}

void lora_peft_free(lora_peft *p) {
    if (!p) return;
    patterns_free(p->ranks, p->n_ranks);
    patterns_free(p->alphas, p->n_alphas);
    free(p);
}

/* An integer field, or a real with an integral value (json.dumps writes Python ints as integers). */
static int get_int(json_t *v, long long *out) {
    if (json_is_integer(v)) return *out = json_integer_value(v), 1;
    if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) && fabs(json_real_value(v)) < 1e15)
        return *out = (long long)json_real_value(v), 1;
    return 0;
}

/* rank_pattern / alpha_pattern: an object of pattern -> number, in the file's order (peft takes the first match). */
static int get_patterns(json_t *cfg, const char *field, int ranks, peft_pattern **out, int *n, const char *path,
                        const char *pfx, h3_err *e) {
    json_t *o = json_object_get(cfg, field);
    *out = NULL, *n = 0;
    if (!o || json_is_null(o)) return 0;
    if (!json_is_object(o))
        return h3_fail(e, "%s: lora_adapter_metadata %s.%s is not an object (pattern -> %s)", path, pfx, field,
                       ranks ? "rank" : "alpha");
    size_t cap = json_object_size(o);
    if (!cap) return 0;
    if (!(*out = calloc(cap, sizeof **out))) return h3_fail(e, "out of memory");
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        peft_pattern *p = &(*out)[*n];
        long long iv = 0;
        if (ranks ? !get_int(v, &iv) || iv < 1 || iv > 65536 : !json_is_number(v))
            return h3_fail(e, "%s: lora_adapter_metadata %s.%s['%s'] is not %s", path, pfx, field, k,
                           ranks ? "a rank (an integer from 1 to 65536)" : "a number");
        p->value = ranks ? (double)iv : json_number_value(v);
        size_t kl = strlen(k);
        char *rx = malloc(kl + 16);
        if (!rx || !(p->key = strdup(k))) return free(rx), h3_fail(e, "out of memory");
        memcpy(rx, "^(.*\\.)?(", 9), memcpy(rx + 9, k, kl), memcpy(rx + 9 + kl, ")$", 3);
        int bad = regcomp(&p->re, rx, REG_EXTENDED | REG_NOSUB);
        free(rx);
        if (bad) {
            free(p->key);
            return h3_fail(e, "%s: lora_adapter_metadata %s.%s key '%s' is not a regular expression h3 evaluates "
                              "(POSIX extended syntax)", path, pfx, field, k);
        }
        (*n)++;
    }
    return 0;
}

static int flag_set(json_t *cfg, const char *field) {
    json_t *v = json_object_get(cfg, field);
    return v && !json_is_null(v) && !json_is_false(v) && !(json_is_array(v) && json_array_size(v) == 0) &&
           !(json_is_object(v) && json_object_size(v) == 0);
}

static int parse_config(json_t *cfg, const char *pfx, const char *path, lora_peft *p, h3_err *e) {
    json_t *v = json_object_get(cfg, "peft_type");
    if (v && !json_is_null(v) && !(json_is_string(v) && !strcmp(json_string_value(v), "LORA")))
        return h3_fail(e, "%s: lora_adapter_metadata %s.peft_type is not \"LORA\"", path, pfx);
    if (flag_set(cfg, "use_dora"))
        return h3_fail(e, "%s: lora_adapter_metadata %s.use_dora: a DoRA adapter (weight-decomposed LoRA), which h3 "
                          "does not merge", path, pfx);
    /* fields that change what the adapter computes beyond W + s * B A */
    static const char *const unsupported[] = {"layer_replication", "alora_invocation_tokens", "use_qalora"};
    for (size_t i = 0; i < sizeof unsupported / sizeof *unsupported; i++)
        if (flag_set(cfg, unsupported[i]))
            return h3_fail(e, "%s: lora_adapter_metadata %s.%s is set, which h3 does not apply (a plain LoRA only)",
                           path, pfx, unsupported[i]);
    long long r = 8; /* LoraConfig's defaults */
    p->alpha = 8;
    if ((v = json_object_get(cfg, "r")) && !(get_int(v, &r) && r >= 1 && r <= 65536))
        return h3_fail(e, "%s: lora_adapter_metadata %s.r is not a rank (an integer from 1 to 65536)", path, pfx);
    p->r = (int)r;
    if ((v = json_object_get(cfg, "lora_alpha"))) {
        if (!json_is_number(v)) return h3_fail(e, "%s: lora_adapter_metadata %s.lora_alpha is not a number", path, pfx);
        p->alpha = json_number_value(v);
    }
    if ((v = json_object_get(cfg, "use_rslora")) && !json_is_null(v)) {
        if (!json_is_boolean(v))
            return h3_fail(e, "%s: lora_adapter_metadata %s.use_rslora is not a boolean", path, pfx);
        p->rslora = json_is_true(v);
    }
    if (get_patterns(cfg, "rank_pattern", 1, &p->ranks, &p->n_ranks, path, pfx, e)) return -1;
    return get_patterns(cfg, "alpha_pattern", 0, &p->alphas, &p->n_alphas, path, pfx, e);
}

int lora_peft_parse(const char *metadata_json, const char *prefix, const char *path, lora_peft **out, h3_err *e) {
    *out = NULL;
    if (!metadata_json) return 0;
    json_error_t je;
    json_t *meta = json_loads(metadata_json, 0, &je);
    json_t *raw = meta ? json_object_get(meta, "lora_adapter_metadata") : NULL;
    if (!raw) return json_decref(meta), 0;
    json_t *all = NULL, *cfg = NULL;
    lora_peft *p = NULL;
    int rc = -1;
    if (!json_is_string(raw)) {
        h3_fail(e, "%s: __metadata__ lora_adapter_metadata is not a string (diffusers writes a JSON object as text)",
                path);
        goto done;
    }
    if (!(all = json_loads(json_string_value(raw), 0, &je)) || !json_is_object(all)) {
        h3_fail(e, "%s: __metadata__ lora_adapter_metadata is not a JSON object%s%s", path, all ? "" : ": ",
                all ? "" : je.text);
        goto done;
    }
    /* the entries under the component's prefix, the prefix removed (diffusers' load_lora_adapter) */
    if (!(cfg = json_object())) goto oom;
    const size_t pl = strlen(prefix);
    const char *k;
    json_t *v;
    json_object_foreach(all, k, v) {
        if (!strncmp(k, prefix, pl) && k[pl] == '.' && json_object_set(cfg, k + pl + 1, v)) goto oom;
    }
    if (json_object_size(cfg) == 0) {
        h3_fail(e, "%s: lora_adapter_metadata has no '%s.' entries for the partition the file's layers name (diffusers "
                   "builds its LoraConfig from them)", path, prefix);
        goto done;
    }
    if (!(p = calloc(1, sizeof *p))) goto oom;
    if (parse_config(cfg, prefix, path, p, e)) goto done;
    *out = p, p = NULL;
    rc = 0;
    goto done;
oom:
    h3_fail(e, "out of memory");
done:
    lora_peft_free(p);
    json_decref(cfg), json_decref(all), json_decref(meta);
    return rc;
}

static const peft_pattern *first_match(const peft_pattern *p, int n, const char *module) {
    for (int i = 0; i < n; i++)
        if (regexec(&p[i].re, module, 0, NULL, 0) == 0) return &p[i];
    return NULL;
}

int lora_peft_scaling(const lora_peft *p, const char *module, int rank, double scale, double *scaling,
                      const char *path, const char *key, h3_err *e) {
    const peft_pattern *rp = first_match(p->ranks, p->n_ranks, module);
    const peft_pattern *ap = first_match(p->alphas, p->n_alphas, module);
    const int r = rp ? (int)rp->value : p->r;
    const double alpha = ap ? ap->value : p->alpha;
    if (r != rank)
        return h3_fail(e, "%s: tensor '%s': rank %d, but lora_adapter_metadata gives module '%s' rank %d (%s%s%s)",
                       path, key, rank, module, r, rp ? "rank_pattern '" : "r", rp ? rp->key : "", rp ? "'" : "");
    *scaling = p->rslora ? scale * alpha / sqrt((double)r) : scale * alpha / (double)r;
    return 0;
}
