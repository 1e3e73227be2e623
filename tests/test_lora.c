/* LoRA parity (docs/lora.md; fixtures from tools/reference/gen_lora.py): for every layout diffusers' MiniMax-H3 loader
 * accepts, the weights dit_lora_merge gives equal diffusers' load_lora_weights + set_adapters + fuse_lora bit for bit
 * (the model in its stored dtypes = h3's bf16 mode, and in fp32), and no other weight is touched; `h3 probe dit` /
 * `h3 probe denoise` with --lora against diffusers' fused model (fp32, rel L2 <= 1e-5); and the rejections: a key
 * that maps to no weight, a wrong shape, DoRA, a ref2va LoRA on the transformer partition, too many LoRAs, bad scales;
 * --ssd-streaming with LoRAs (bf16 and fp32) against the resident model. Run from the repo root. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/safetensors.h"
#include "model/dit.h"
#include "model/dit_lora.h"
#include "pipeline/sched.h"
#include "test.h"

#define LF "tests/fixtures/lora/"
#define TT "tests/fixtures/tiny/transformer"

typedef struct lcase {
    const char *name, *folder;
    const char *loras[2];
    double      scales[2];
    int         n, ref;
} lcase;

static const lcase cases[] = {
    {"peft", TT, {"peft"}, {1.0}, 1, 0},
    {"peft_default", TT, {"peft_default"}, {0.8}, 1, 0},
    {"ai_toolkit", TT, {"ai_toolkit"}, {1.0}, 1, 0},
    {"comfy", TT, {"comfy"}, {0.6}, 1, 0},
    {"musubi", TT, {"musubi"}, {1.0}, 1, 0},
    {"kohya", TT, {"kohya"}, {1.3}, 1, 0},
    {"ref", "tests/fixtures/tiny/transformer_ref", {"ref"}, {1.0}, 1, 1},
    {"diffsynth_hd128", LF "hd128", {"diffsynth_hd128"}, {1.0}, 1, 0},
    {"peft+kohya", TT, {"peft", "kohya"}, {0.5, 1.25}, 2, 0},
    {"peft_meta", TT, {"peft_meta"}, {1.0}, 1, 0},     /* lora_adapter_metadata: rank / alpha patterns */
    {"peft_rslora", TT, {"peft_rslora"}, {0.7}, 1, 0}, /* lora_adapter_metadata: use_rslora */
};

static int specs_of(const lcase *c, dit_lora_spec *s, char paths[][256]) {
    for (int i = 0; i < c->n; i++) {
        snprintf(paths[i], 256, LF "%s.safetensors", c->loras[i]);
        s[i] = (dit_lora_spec){paths[i], c->scales[i], 0};
    }
    return c->n;
}

/* Every weight of the case's expected file, merged by h3, bit for bit; every other weight untouched. */
static void test_merged(const lcase *c, int bf16) {
    char path[256], paths[2][256];
    snprintf(path, sizeof path, LF "expect/%s.merged_%s.safetensors", c->name, bf16 ? "bf16" : "fp32");
    h3_err e = {{0}};
    st_file *want = st_open(path, &e);
    dit_config cfg;
    st_set *base = want && dit_config_load(c->folder, &cfg, &e) == 0 ? st_set_open(c->folder, &e) : NULL;
    dit_lora_spec specs[2];
    dit_lora_set *s = base ? dit_lora_set_new(specs, specs_of(c, specs, paths), &cfg, c->ref, &e) : NULL;
    CHECK(s != NULL, "%s: %s", c->name, e.msg);
    if (!s) goto done;
    int64_t bad = 0, total = 0, merged = 0, stray = 0;
    for (int i = 0; i < st_set_count(base); i++) {
        const char *name = st_set_name(base, i);
        h3_tensor v;
        if (st_set_get(base, name, &v, &e) != 0) continue;
        void *buf = NULL;
        const h3_dtype out = bf16 ? v.dtype : H3_F32;
        if (dit_lora_merge(s, &cfg, name, &v, out, &buf, &e) != 0) {
            CHECK(0, "%s: merge %s: %s", c->name, name, e.msg);
            continue;
        }
        const st_entry *x = st_find(want, name);
        if (!x) {
            stray += buf != NULL;
            free(buf);
            continue;
        }
        merged++;
        const int64_t n = h3_tensor_numel(&v);
        total += n;
        if (!buf || x->dtype != out) {
            bad += n;
        } else {
            const size_t es = h3_dtype_size(out);
            const uint8_t *a = buf, *b = st_data(want, x);
            for (int64_t k = 0; k < n; k++) bad += memcmp(a + k * es, b + k * es, es) != 0;
        }
        free(buf);
    }
    printf("  %-20s %s: %lld weights merged, %lld values, %lld differ from diffusers' fuse_lora\n", c->name,
           bf16 ? "bf16" : "fp32", (long long)merged, (long long)total, (long long)bad);
    CHECK(merged == want->n && bad == 0 && stray == 0, "%s %s: %lld of %d weights, %lld values differ, %lld stray",
          c->name, bf16 ? "bf16" : "fp32", (long long)merged, want->n, (long long)bad, (long long)stray);
    CHECK(dit_lora_check_all_merged(s, &e) == 0, "%s: %s", c->name, e.msg);
done:
    dit_lora_set_free(s);
    st_set_free(base);
    if (want) st_close(want);
}

/* `h3 probe OP ARGS --out TMP` against the expected outputs: the worst rel L2 (1.0 when it failed). */
static double probe_vs(const char *args, const char *expect, double *max_abs) {
    char out[128], cmd[2048];
    const char *h3 = getenv("H3_BUILD");
    snprintf(out, sizeof out, "/tmp/h3_lora_probe_%d.safetensors", (int)getpid());
    snprintf(cmd, sizeof cmd, "%s/h3 probe %s --out %s", h3 && *h3 ? h3 : "build", args, out);
    int st = system(cmd);
    *max_abs = 0;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) return 1.0;
    h3_err e = {{0}};
    st_file *got = st_open(out, &e), *ref = st_open(expect, &e);
    unlink(out);
    double worst = (got && ref) ? 0 : 1.0;
    for (int i = 0; got && ref && i < ref->n; i++) {
        const st_entry *r = &ref->entries[i], *g = st_find(got, r->name);
        int64_t n = 1;
        for (int d = 0; d < r->ndim; d++) n *= r->shape[d];
        if (!g || g->dtype != H3_F32 || r->dtype != H3_F32 || (int64_t)((g->end - g->begin) / 4) != n) {
            worst = 1.0;
            continue;
        }
        worst = fmax(worst, h3_rel_l2(st_data(got, g), st_data(ref, r), (size_t)n));
        *max_abs = fmax(*max_abs, h3_max_abs(st_data(got, g), st_data(ref, r), (size_t)n));
    }
    if (got) st_close(got);
    if (ref) st_close(ref);
    return worst;
}

static void test_probes(void) {
    static const char *fwd[][3] = {
        {"peft", "--model tests/fixtures/tiny --lora " LF "peft.safetensors", "t2va"},
        {"ai_toolkit", "--model tests/fixtures/tiny --lora " LF "ai_toolkit.safetensors", "t2va"},
        {"ai_toolkit", "--model tests/fixtures/tiny/FL2VA --lora " LF "ai_toolkit.safetensors", "t2va"},
        {"ai_toolkit", "--model tests/fixtures/tiny --transformer tests/fixtures/single_file/tiny_transformer.safetensors "
                       "--lora " LF "ai_toolkit.safetensors", "t2va"},
        {"ref", "--model tests/fixtures/tiny --component transformer_ref --lora " LF "ref.safetensors", "ref2va"},
        {"peft+kohya", "--model tests/fixtures/tiny --lora " LF "peft.safetensors:0.5 --lora " LF "kohya.safetensors:1.25",
         "t2va"},
    };
    for (size_t i = 0; i < sizeof fwd / sizeof fwd[0]; i++) {
        char args[1024], exp[256], label[160];
        snprintf(args, sizeof args, "dit %s --in tests/fixtures/golden/dit/%s.in.safetensors", fwd[i][1], fwd[i][2]);
        snprintf(exp, sizeof exp, LF "expect/%s.forward.out.safetensors", fwd[i][0]);
        double ma, rel = probe_vs(args, exp, &ma);
        snprintf(label, sizeof label, "forward %s (%s)", fwd[i][0],
                 strstr(fwd[i][1], "FL2VA") ? "FL2VA tree" : strstr(fwd[i][1], "single_file") ? "single file" : "snapshot");
        CHECK_CLOSE(label, rel, 1e-5);
        printf("  %-48s max abs %.3g\n", label, ma);
    }
    static const char *den[][2] = {
        {"ai_toolkit", "--lora " LF "ai_toolkit.safetensors"},
        {"peft+kohya", "--lora " LF "peft.safetensors:0.5 --lora " LF "kohya.safetensors:1.25"},
    };
    for (size_t i = 0; i < sizeof den / sizeof den[0]; i++) {
        char args[1024], exp[256], label[160];
        snprintf(args, sizeof args, "denoise --model tests/fixtures/tiny %s --in tests/fixtures/golden/pipeline/"
                 "denoise_t2va.in.safetensors", den[i][1]);
        snprintf(exp, sizeof exp, LF "expect/denoise_t2va_%s.out.safetensors", den[i][0]);
        double ma, rel = probe_vs(args, exp, &ma);
        snprintf(label, sizeof label, "denoise t2va, 4 evaluations, %s", den[i][0]);
        CHECK_CLOSE(label, rel, 1e-5);
        printf("  %-48s max abs %.3g\n", label, ma);
    }
}

/* One-line refusals naming the file / key / rule. */
static void test_rejections(void) {
    h3_err e = {{0}};
    dit_config cfg;
    CHECK(dit_config_load(TT, &cfg, &e) == 0, "%s", e.msg);
    static const char *bad[][3] = {
        {LF "bad_unknown.safetensors", "blocks.0.attn.bogus.lora_A.weight", "maps to no MiniMax-H3 DiT weight"},
        {LF "bad_shape.safetensors", "ff.net.2", "model's weight is [48,64]"},
        {LF "bad_dora.safetensors", "lora_magnitude_vector", "DoRA"},
        {LF "bad_meta_rank.safetensors", "lora_adapter_metadata gives module", "rank 8 (r)"},
        {LF "bad_meta_dora.safetensors", "transformer.use_dora", "DoRA"},
        {LF "ref.safetensors", "transformer_ref", "only ref2va runs"},
        {LF "diffsynth_hd128.safetensors", "out_proj", "model's weight is [48,64]"},
        {"tests/fixtures/tiny/transformer/config.json", "config.json", "header"},
        {LF "missing.safetensors", "missing.safetensors", ""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dit_lora_spec s = {bad[i][0], 1.0, 0};
        dit_lora_set *set = dit_lora_set_new(&s, 1, &cfg, 0, &e);
        CHECK(!set && strstr(e.msg, bad[i][1]) && strstr(e.msg, bad[i][2]) && !strchr(e.msg, '\n'), "%s: '%s'",
              bad[i][0], set ? "accepted" : e.msg);
        dit_lora_set_free(set);
    }
    { /* a negative kohya alpha: diffusers' fold would never end; refused */
        char path[128];
        snprintf(path, sizeof path, "/tmp/h3_lora_neg_alpha_%d.safetensors", (int)getpid());
        st_writer *w = st_writer_new();
        static const uint16_t down[2 * 48], up[64 * 2];
        const float alpha = -2.0f;
        int rc = st_writer_add(w, "blocks.0.mlp.fc2.lora_down.weight", H3_BF16, 2, (int64_t[]){2, 64}, down, &e) ||
                 st_writer_add(w, "blocks.0.mlp.fc2.lora_up.weight", H3_BF16, 2, (int64_t[]){48, 2}, up, &e) ||
                 st_writer_add(w, "blocks.0.mlp.fc2.alpha", H3_F32, 0, NULL, &alpha, &e) ||
                 st_writer_save(w, path, NULL, &e);
        st_writer_free(w);
        dit_lora_spec s = {path, 1.0, 0};
        dit_lora_set *set = rc ? NULL : dit_lora_set_new(&s, 1, &cfg, 0, &e);
        CHECK(!rc && !set && strstr(e.msg, "blocks.0.mlp.fc2.alpha") && strstr(e.msg, ">= 0"), "negative alpha: %s",
              set ? "accepted" : e.msg);
        dit_lora_set_free(set);
        unlink(path);
    }
    { /* lora_adapter_metadata that diffusers could not build a LoraConfig from, or h3 does not apply */
        static const char *meta[][2] = { /* the LoraConfig JSON, then a piece of the refusal (NULL: accepted) */
            {"{\"transformer.r\": \"four\"}", "transformer.r is not a rank"},
            {"{\"transformer.r\": 2, \"transformer.rank_pattern\": {\"(\": 2}}", "is not a regular expression"},
            {"{\"transformer.r\": 2, \"transformer.alpha_pattern\": {\"ff\": \"x\"}}",
             "alpha_pattern['ff'] is not a number"},
            {"{\"transformer_ref.r\": 2}", "no 'transformer.' entries"},
            {"[2]", "is not a JSON object"},
            {"{\"transformer.r\": 2, \"transformer.layer_replication\": [[0, 1]]}", "layer_replication is set"},
            {"{\"transformer.r\": 2, \"transformer.lora_alpha\": 4, \"transformer.rank_pattern\": {\"^ff.net.2\": 3}}",
             NULL}, /* anchored: it does not match transformer_blocks.0.ff.net.2, so r = 2 holds */
        };
        char path[128];
        snprintf(path, sizeof path, "/tmp/h3_lora_meta_%d.safetensors", (int)getpid());
        static const uint16_t a2[2 * 64], b2[48 * 2];
        for (size_t i = 0; i < sizeof meta / sizeof meta[0]; i++) {
            /* the __metadata__ as diffusers writes it: the config as one JSON string */
            json_t *o = json_pack("{s:s}", "lora_adapter_metadata", meta[i][0]);
            char *header = json_dumps(o, 0);
            json_decref(o);
            st_writer *w = st_writer_new();
            int rc = st_writer_add(w, "transformer.transformer_blocks.0.ff.net.2.lora_A.weight", H3_BF16, 2,
                                   (int64_t[]){2, 64}, a2, &e) ||
                     st_writer_add(w, "transformer.transformer_blocks.0.ff.net.2.lora_B.weight", H3_BF16, 2,
                                   (int64_t[]){48, 2}, b2, &e) ||
                     st_writer_save(w, path, header, &e);
            st_writer_free(w);
            free(header);
            dit_lora_spec s = {path, 1.0, 0};
            dit_lora_set *set = rc ? NULL : dit_lora_set_new(&s, 1, &cfg, 0, &e);
            if (meta[i][1])
                CHECK(!rc && !set && strstr(e.msg, path) && strstr(e.msg, meta[i][1]) && !strchr(e.msg, '\n'),
                      "metadata %s: %s", meta[i][0], set ? "accepted" : e.msg);
            else
                CHECK(!rc && set, "metadata %s: %s", meta[i][0], set ? "" : e.msg);
            dit_lora_set_free(set);
        }
        unlink(path);
    }
    dit_lora_spec r = {LF "peft.safetensors", 1.0, 1}; /* --lora-ref on the transformer partition */
    dit_lora_set *set = dit_lora_set_new(&r, 1, &cfg, 0, &e);
    CHECK(!set && strstr(e.msg, "--lora-ref"), "--lora-ref on transformer: %s", set ? "accepted" : e.msg);
    dit_lora_set_free(set);
    dit_lora_spec many[DIT_LORA_MAX + 1];
    for (int i = 0; i <= DIT_LORA_MAX; i++) many[i] = (dit_lora_spec){LF "peft.safetensors", 0.1, 0};
    set = dit_lora_set_new(many, DIT_LORA_MAX + 1, &cfg, 0, &e);
    CHECK(!set && strstr(e.msg, "at most 8"), "9 LoRAs: %s", set ? "accepted" : e.msg);
    dit_lora_set_free(set);
    static const char *scales[] = {"a.safetensors:x", "a.safetensors:", "a.safetensors:nan", "a.safetensors:1e9",
                                   "a.safetensors:inf", ":1", ""};
    for (size_t i = 0; i < sizeof scales / sizeof scales[0]; i++) {
        char arg[64];
        snprintf(arg, sizeof arg, "%s", scales[i]);
        dit_lora_spec s;
        CHECK(dit_lora_parse_arg(arg, "--lora", &s, &e) != 0 && strstr(e.msg, "--lora"), "'%s' accepted", scales[i]);
    }
    static const char *good[][2] = {{"x.safetensors:0.5", "x.safetensors"}, {"x.safetensors", "x.safetensors"},
                                    {"/a:b/x.safetensors", "/a:b/x.safetensors"}, {"x.safetensors:-1", "x.safetensors"}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char arg[64];
        snprintf(arg, sizeof arg, "%s", good[i][0]);
        dit_lora_spec s;
        CHECK(dit_lora_parse_arg(arg, "--lora", &s, &e) == 0 && !strcmp(s.path, good[i][1]), "'%s': %s", good[i][0],
              e.msg);
    }
}

/* --step-update: h3's sched_step in both forms against diffusers' step and LightX2V's training_euler rule (gen_lora.py
 * step_updates), bit for bit, at every step of the Turbo grid (5 points, shift 6) and the release's (shift 12); the
 * two rules differ in a quarter to a half of the values at the inner steps (the fixture's print). */
static void test_step_update(void) {
    h3_err e = {{0}};
    st_file *f = st_open(LF "expect/step_update.safetensors", &e);
    CHECK(f != NULL, "%s", e.msg);
    if (!f) return;
    const st_entry *ex = st_find(f, "x"), *ev = st_find(f, "v");
    const int n = 4096;
    float *x = malloc(n * sizeof *x);
    for (int k = 0; k < 2; k++) {
        const double shift = k ? 12.0 : 6.0;
        sched s;
        CHECK(sched_init(&s, 5, shift, &e) == 0, "%s", e.msg);
        char name[64];
        snprintf(name, sizeof name, "sigmas_%g", shift);
        const st_entry *es = st_find(f, name);
        CHECK(es && !memcmp(st_data(f, es), s.sigmas, 5 * sizeof(float)), "shift %g: sigma grid differs", shift);
        for (int rule = 0; rule < 2; rule++) {
            s.training_euler = rule;
            int64_t bad = 0, differs = 0;
            for (int i = 0; i < 4; i++) {
                memcpy(x, st_data(f, ex), n * sizeof *x);
                sched_step(&s, i, st_data(f, ev), x, n);
                snprintf(name, sizeof name, "%s_%g_%d", rule ? "training_euler" : "euler", shift, i);
                const st_entry *w = st_find(f, name);
                snprintf(name, sizeof name, "%s_%g_%d", rule ? "euler" : "training_euler", shift, i);
                const st_entry *o = st_find(f, name);
                if (!w || !o) {
                    bad += n;
                    continue;
                }
                const float *want = st_data(f, w), *other = st_data(f, o);
                for (int j = 0; j < n; j++) bad += memcmp(&x[j], &want[j], 4) != 0, differs += memcmp(&x[j], &other[j], 4) != 0;
            }
            printf("  step update %-15s shift %-3g: %lld of %d values differ from the fixture, %lld from the other rule\n",
                   rule ? "training_euler" : "euler", shift, (long long)bad, 4 * n, (long long)differs);
            CHECK(bad == 0 && differs > 0, "%s shift %g: %lld values differ, %lld from the other rule",
                  rule ? "training_euler" : "euler", shift, (long long)bad, (long long)differs);
        }
        sched_free(&s);
    }
    free(x);
    st_close(f);
}

/* --ssd-streaming with a LoRA (bf16 and fp32): no merged host copies; each touched part's LoRA pieces are merged into
 * the slot as it is filled (h3_lora_merge_into, docs/lora.md), the parts read as stored (H3_STREAM_READ=direct reads
 * them from the files; fp32: widened to F32 in the slot, as the resident model's merged copies are F32): the resident
 * merged model's bits, on the diffusers snapshot and the FL2VA tree (the fused QKV's per-head rows, fc1's swapped
 * halves). */
static void test_streaming(int cuda) {
    h3_err e = {{0}};
    h3_backend *be = h3_backend_new(cuda ? H3_BACKEND_CUDA : H3_BACKEND_CPU, 0, &e);
    CHECK(be != NULL, "backend: %s", e.msg);
    st_set *in = st_set_open("tests/fixtures/golden/dit/t2va.in.safetensors", &e);
    static const char *names[10] = {"hidden_states", "audio_hidden_states", "encoder_hidden_states", "timestep",
                                    "timestep_indices", "token_tags", "position_ids", "video_indices",
                                    "audio_indices", "text_indices"};
    h3_tensor *t[10] = {0};
    for (int i = 0; in && i < 10; i++) {
        h3_tensor v;
        if (st_set_get(in, names[i], &v, &e) == 0 && (t[i] = h3_tensor_new(v.dtype, v.ndim, v.shape, &e)))
            memcpy(t[i]->data, v.data, h3_tensor_nbytes(&v));
    }
    dit_tensors dt = {t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9]};
    dit_lora_spec p[2] = {{LF "ai_toolkit.safetensors", 0.7, 0}, {LF "kohya.safetensors", 1.0, 0}};
    /* the snapshot, the FL2VA tree and a single file (prefixed names, stacked [q; k; v]: docs/checkpoints.md) */
    const char *reads[2] = {"map", "direct"}, *dirs[3] = {TT, "tests/fixtures/tiny/FL2VA/transformer", TT};
    const char *files[3] = {NULL, NULL, "tests/fixtures/single_file/tiny_transformer_prefixed.safetensors"};
    for (int l = 0; l < 6; l++) {
        const int bf16 = l < 3 ? DIT_BF16 : 0; /* fp32: the touched parts held F32 in the slots, widened as filled */
        const char *src = files[l % 3] ? files[l % 3] : dirs[l % 3];
        const char *prec = bf16 ? "bf16" : "fp32";
        float *out[3][2] = {{0}};
        int64_t nv = 0, na = 0;
        dit_stream_stats ss[3] = {{0}};
        for (int k = 0; k < 3; k++) {
            if (k) setenv("H3_STREAM_READ", reads[k - 1], 1);
            dit_model *m = be ? dit_load_lora(be, dirs[l % 3], files[l % 3], bf16 | (k ? DIT_STREAM : 0), p, 2, 0, &e) : NULL;
            dit_inputs x;
            if (m && dit_inputs_from_tensors(dit_get_config(m), &dt, 0, &x, &e) == 0) {
                nv = x.Nv * 96, na = x.Na * 32;
                out[k][0] = malloc(sizeof(float) * (size_t)nv), out[k][1] = malloc(sizeof(float) * (size_t)na);
                CHECK(dit_forward(m, &x, out[k][0], out[k][1], &e) == 0, "forward %d: %s", k, e.msg);
                dit_get_stream_stats(m, &ss[k]);
            } else {
                CHECK(0, "model %d: %s", k, e.msg);
            }
            dit_free(m);
        }
        unsetenv("H3_STREAM_READ");
        for (int k = 1; k < 3; k++) {
            const int same = out[0][0] && out[k][0] && !memcmp(out[0][0], out[k][0], sizeof(float) * (size_t)nv) &&
                             !memcmp(out[0][1], out[k][1], sizeof(float) * (size_t)na);
            CHECK(same, "--ssd-streaming (%s, %s, %s) with LoRAs differs from the resident model", reads[k - 1],
                  src, prec);
            /* the pieces were merged at fill time (2 files x the tiny DiT's streamed parts), none as a host copy */
            CHECK(ss[k].lora_merges > 0 && ss[k].lora_bytes > 0, "--ssd-streaming (%s, %s, %s): %lld LoRA pieces merged "
                  "into the slots, %.0f factor bytes", reads[k - 1], src, prec, (long long)ss[k].lora_merges,
                  ss[k].lora_bytes);
            CHECK(bf16 ? ss[k].lora_f32_parts == 0 : ss[k].lora_f32_parts > 0, "--ssd-streaming (%s, %s, %s): %lld parts "
                  "held F32", reads[k - 1], src, prec, (long long)ss[k].lora_f32_parts);
            printf("  [%s] --ssd-streaming (H3_STREAM_READ=%s) with 2 LoRAs, %s, %s: %s, %lld pieces merged at fill, "
                   "%lld parts F32, %.0f factor bytes\n", cuda ? "cuda" : "cpu", reads[k - 1], src, prec,
                   same ? "resident bits" : "DIFFERS", (long long)ss[k].lora_merges, (long long)ss[k].lora_f32_parts,
                   ss[k].lora_bytes);
        }
        CHECK(ss[0].lora_merges == 0, "the resident model merged %lld pieces into slots", (long long)ss[0].lora_merges);
        for (int k = 0; k < 3; k++) free(out[k][0]), free(out[k][1]);
    }
    for (int i = 0; i < 10; i++) h3_tensor_free(t[i]);
    st_set_free(in);
    h3_backend_free(be);
}

/* --stream-cuda: the streaming case alone on the CUDA backend (tests/cuda/run_lora_stream_device.sh) */
int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--stream-cuda")) {
        test_streaming(1);
        TEST_END();
    }
    test_streaming(0);
    test_step_update();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        test_merged(&cases[i], 1);
        test_merged(&cases[i], 0);
    }
    test_probes();
    test_rejections();
    TEST_END();
}
