/* A GGUF transformer kept quantized (docs/checkpoints.md "Quantized on the GPU"), on the CPU backend through the very
 * code path the GPU runs (H3_GGUF_RESIDENT=on: the blocks' linears stay in GGUF block form in backend memory and the
 * CPU twin of h3_gguf_dequant expands them into the two slots per block):
 *   - the tiny GGUF (tests/fixtures/single_file/tiny_transformer.gguf: Q8_0/Q4_0/Q5_0/Q4_1/Q5_1 and F16 block
 *     linears) gives the very bytes of the dequantize-at-load model, bf16 and fp32, over two forwards, and the slot
 *     fills carry the GGUF bytes (not the bf16 ones);
 *   - H3_GGUF_RESIDENT's refusal of a bad value; with two LoRAs, kept quantized (the pieces merged into each slot as
 *     it is expanded; fp32: the touched parts widened to F32) == dequantized at load + merged, bf16 and fp32, and auto
 *     with a LoRA keeps the blocks quantized where it would without one (GPU backends);
 *   - dit_new_random_gguf (h3 bench --gguf-type): random Q8_0 / Q4_K / Q6_K blocks at a 256-wide config run to finite
 *     outputs, the same bits twice, different per type; rows not of whole blocks are refused naming the tensor.
 * tests/cuda/test_cuda_gguf.c is this file on the CUDA backend (GGUF_DIT_CUDA): the same checks there (auto keeps
 * the blocks quantized on a GPU), and the random models' outputs against the CPU's (rel L2, bf16 GEMMs differ). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/gguf.h"
#include "io/safetensors.h"
#include "model/dit.h"
#include "model/dit_lora.h"
#include "pipeline/layout.h"
#include "test.h"

#ifdef GGUF_DIT_CUDA
#define BACKEND H3_BACKEND_CUDA
#else
#define BACKEND H3_BACKEND_CPU
#endif
#define FIX "tests/fixtures/"
#define GGUF_FILE FIX "single_file/tiny_transformer.gguf"

static const char *in_names[10] = {"hidden_states", "audio_hidden_states", "encoder_hidden_states", "timestep",
                                   "timestep_indices", "token_tags", "position_ids", "video_indices",
                                   "audio_indices", "text_indices"};

typedef struct golden {
    st_set    *set;
    h3_tensor *t[10];
    dit_tensors dt;
} golden;

static int golden_load(golden *g, h3_err *e) {
    memset(g, 0, sizeof *g);
    if (!(g->set = st_set_open(FIX "golden/dit/t2va.in.safetensors", e))) return -1;
    for (int i = 0; i < 10; i++) {
        h3_tensor v;
        if (st_set_get(g->set, in_names[i], &v, e) != 0) return -1;
        if (v.dtype == H3_F32 || v.dtype == H3_I64 || v.dtype == H3_F64) {
            if (!(g->t[i] = h3_tensor_new(v.dtype, v.ndim, v.shape, e))) return -1;
            memcpy(g->t[i]->data, v.data, h3_tensor_nbytes(&v));
        } else if (!(g->t[i] = h3_tensor_to_f32(&v, e))) {
            return -1;
        }
    }
    const h3_tensor **d = (const h3_tensor **)&g->dt;
    for (int i = 0; i < 10; i++) d[i] = g->t[i];
    return 0;
}

static void golden_free(golden *g) {
    for (int i = 0; i < 10; i++) h3_tensor_free(g->t[i]);
    st_set_free(g->set);
}

/* one forward of m on the golden inputs into v / a (malloc'd) */
static int forward(dit_model *m, golden *g, float **v, float **a, int64_t *nv, int64_t *na, h3_err *e) {
    dit_inputs in;
    if (dit_inputs_from_tensors(dit_get_config(m), &g->dt, 0, &in, e) != 0) return -1;
    const dit_config *c = dit_get_config(m);
    *nv = in.Nv * c->in_channels * c->patch_size[0] * c->patch_size[1] * c->patch_size[2];
    *na = in.Na * c->audio_in_channels;
    *v = malloc((size_t)*nv * sizeof(float)), *a = malloc((size_t)*na * sizeof(float));
    return dit_forward(m, &in, *v, *a, e);
}

/* the GGUF bytes of the tiny file's main-block linears (what each forward's fills expand) */
static double quantized_block_bytes(void) {
    h3_err e;
    gguf_file *f = gguf_open(GGUF_FILE, &e);
    if (!f) return -1;
    double bytes = 0;
    for (int64_t i = 0; i < f->n_tensors; i++) {
        const char *n = f->tensors[i].name;
        if (!strncmp(n, "blocks.", 7) && (strstr(n, ".attn.qkv_proj.weight") || strstr(n, ".attn.out_proj.weight") ||
                                          strstr(n, ".mlp.fc1.weight") || strstr(n, ".mlp.fc2.weight")))
            bytes += (double)f->tensors[i].bytes;
    }
    gguf_close(f);
    return bytes;
}

/* --lora on the GGUF kept quantized (docs/lora.md "With --ssd-streaming"): the pieces merged into each slot right after
 * the fill expands it give the dequantize-at-load + merge model's bytes, bf16 and fp32 (the fp32 mode's touched parts
 * widened to F32 in the slots), two LoRAs, two forwards; auto keeps the blocks quantized where it would without one. */
static void test_lora(h3_backend *be, golden *g) {
    h3_err e = {{0}};
    dit_lora_spec p[2] = {{FIX "lora/ai_toolkit.safetensors", 0.7, 0}, {FIX "lora/kohya.safetensors", 1.0, 0}};
    for (int mode = 0; mode <= DIT_BF16; mode += DIT_BF16) {
        const char *label = mode ? "bf16" : "fp32";
        setenv("H3_GGUF_RESIDENT", "off", 1);
        dit_model *a = dit_load_lora(be, FIX "tiny/transformer", GGUF_FILE, mode, p, 2, 0, &e);
        setenv("H3_GGUF_RESIDENT", "on", 1);
        dit_model *b = a ? dit_load_lora(be, FIX "tiny/transformer", GGUF_FILE, mode, p, 2, 0, &e) : NULL;
        dit_model *c = b ? dit_load_single_file(be, FIX "tiny/transformer", GGUF_FILE, mode, &e) : NULL;
        unsetenv("H3_GGUF_RESIDENT");
        CHECK(a && b && c, "%s + LoRA: load: %s", label, e.msg);
        if (!a || !b || !c) {
            dit_free(a), dit_free(b);
            continue;
        }
        int same = 1, differs = 0;
        for (int pass = 0; pass < 2; pass++) {
            float *va = NULL, *aa = NULL, *vb = NULL, *ab = NULL, *vc = NULL, *ac = NULL;
            int64_t nv, na;
            int rc = forward(a, g, &va, &aa, &nv, &na, &e);
            rc |= forward(b, g, &vb, &ab, &nv, &na, &e);
            rc |= forward(c, g, &vc, &ac, &nv, &na, &e);
            CHECK(rc == 0, "%s + LoRA: forward: %s", label, e.msg);
            same &= rc == 0 && !memcmp(va, vb, sizeof(float) * (size_t)nv) && !memcmp(aa, ab, sizeof(float) * (size_t)na);
            differs |= rc == 0 && memcmp(vb, vc, sizeof(float) * (size_t)nv);
            free(va), free(aa), free(vb), free(ab), free(vc), free(ac);
        }
        dit_stream_stats sa, sb;
        dit_get_stream_stats(a, &sa);
        dit_get_stream_stats(b, &sb);
        CHECK(same, "%s: the GGUF kept quantized + 2 LoRAs differs from dequantized at load + 2 LoRAs", label);
        CHECK(differs, "%s: the LoRAs change nothing on the GGUF kept quantized", label);
        CHECK(sa.fills == 0 && sb.fills > 0 && sb.gguf && sb.lora_merges > 0 && sb.lora_bytes > 0,
              "%s + LoRA: fills %lld / %lld, %lld pieces merged", label, (long long)sa.fills, (long long)sb.fills,
              (long long)sb.lora_merges);
        CHECK(mode ? sb.lora_f32_parts == 0 : sb.lora_f32_parts > 0, "%s: %lld parts held F32", label,
              (long long)sb.lora_f32_parts);
        printf("  %s + 2 LoRAs: kept quantized (merged at fill) == dequantized at load + merged, bit for bit (2 forwards); "
               "%lld fills, %lld pieces merged, %lld parts F32, %.0f factor bytes\n", label, (long long)sb.fills,
               (long long)sb.lora_merges, (long long)sb.lora_f32_parts, sb.lora_bytes);
        dit_free(a), dit_free(b), dit_free(c);
    }
    /* auto: kept quantized on a GPU (merged at fill), dequantized at load on the CPU, LoRA or not */
    setenv("H3_GGUF_RESIDENT", "auto", 1);
    dit_model *m = dit_load_lora(be, FIX "tiny/transformer", GGUF_FILE, DIT_BF16, p, 1, 0, &e);
    unsetenv("H3_GGUF_RESIDENT");
    dit_stream_stats st = {0};
    if (m) {
        float *v = NULL, *a = NULL;
        int64_t nv, na;
        CHECK(forward(m, g, &v, &a, &nv, &na, &e) == 0, "auto + LoRA forward: %s", e.msg);
        dit_get_stream_stats(m, &st);
        free(v), free(a);
    }
    const int gpu = BACKEND != H3_BACKEND_CPU;
    CHECK(m && (gpu ? st.fills > 0 && st.lora_merges > 0 : st.fills == 0), "auto + LoRA: %s (%lld fills)",
          m ? (gpu ? "kept quantized" : "dequantized at load") : e.msg, (long long)st.fills);
    dit_free(m);
}

static void test_file(h3_backend *be) {
    h3_err e = {{0}};
    golden g;
    if (golden_load(&g, &e) != 0) {
        CHECK(0, "golden inputs: %s", e.msg);
        golden_free(&g);
        return;
    }
    const double qbytes = quantized_block_bytes();
    for (int mode = 0; mode <= DIT_BF16; mode += DIT_BF16) {
        const char *label = mode ? "bf16" : "fp32";
        setenv("H3_GGUF_RESIDENT", "off", 1);
        dit_model *a = dit_load_single_file(be, FIX "tiny/transformer", GGUF_FILE, mode, &e);
        setenv("H3_GGUF_RESIDENT", "on", 1);
        dit_model *b = a ? dit_load_single_file(be, FIX "tiny/transformer", GGUF_FILE, mode, &e) : NULL;
        unsetenv("H3_GGUF_RESIDENT");
        CHECK(a && b, "%s: load: %s", label, e.msg);
        if (!a || !b) {
            dit_free(a);
            continue;
        }
        int same = 1;
        for (int pass = 0; pass < 2; pass++) {
            float *va = NULL, *aa = NULL, *vb = NULL, *ab = NULL;
            int64_t nv, na;
            int rc = forward(a, &g, &va, &aa, &nv, &na, &e);
            rc |= forward(b, &g, &vb, &ab, &nv, &na, &e);
            CHECK(rc == 0, "%s: forward: %s", label, e.msg);
            same &= rc == 0 && !memcmp(va, vb, sizeof(float) * (size_t)nv) && !memcmp(aa, ab, sizeof(float) * (size_t)na);
            free(va), free(aa), free(vb), free(ab);
        }
        CHECK(same, "%s: the GGUF kept quantized differs from the dequantize-at-load model", label);
        dit_stream_stats sa, sb;
        dit_get_stream_stats(a, &sa);
        dit_get_stream_stats(b, &sb);
        const int L = dit_get_config(b)->num_layers;
        /* two forwards of L blocks with two slots: L <= 2 stays in the slots after the first fill of each */
        const int64_t want = L <= 2 ? L : 2 * L + 1;
        CHECK(sa.fills == 0 && sb.fills == want, "%s: fills %lld / %lld (want 0 / %lld)", label, (long long)sa.fills,
              (long long)sb.fills, (long long)want);
        CHECK(fabs(sb.bytes - qbytes * (double)sb.fills / L) < 0.5, "%s: %g GGUF bytes expanded (want %g)", label,
              sb.bytes, qbytes * (double)sb.fills / L);
        CHECK(!(dit_get_mode(b) & DIT_STREAM), "%s: the kept-quantized model reports --ssd-streaming", label);
        printf("  %s: kept quantized == dequantized at load, bit for bit (2 forwards); %lld fills of %.0f GGUF bytes\n",
               label, (long long)sb.fills, qbytes / L);
        dit_free(a);
        dit_free(b);
    }
    /* refusals */
    setenv("H3_GGUF_RESIDENT", "yes", 1);
    dit_model *m = dit_load_single_file(be, FIX "tiny/transformer", GGUF_FILE, DIT_BF16, &e);
    CHECK(!m && strstr(e.msg, "H3_GGUF_RESIDENT must be auto, on or off"), "bad knob: %s", m ? "accepted" : e.msg);
    dit_free(m);
    unsetenv("H3_GGUF_RESIDENT"); /* --ssd-streaming: a safetensors single file streams, a GGUF is kept quantized */
    m = dit_load_single_file(be, FIX "tiny/transformer", GGUF_FILE, DIT_BF16 | DIT_STREAM, &e);
    CHECK(!m && strstr(e.msg, "--ssd-streaming cannot be combined with a GGUF transformer"), "GGUF + streaming: %s",
          m ? "accepted" : e.msg);
    dit_free(m);
    unsetenv("H3_GGUF_RESIDENT");
    test_lora(be, &g);
    golden_free(&g);
}

/* t2va inputs of a small layout (2 latent frames of 4 x 4, 5 audio latents, 3 text rows) for config c */
typedef struct small {
    layout *L;
    int64_t *tidx;
    float tv[LAYOUT_MAX_TIMESTEPS], *video, *audio, *text;
    int64_t nv, na;
    dit_inputs in;
} small;

static int small_make(const dit_config *c, small *r, h3_err *e) {
    memset(r, 0, sizeof *r);
    const int64_t tags[3] = {1, 1, 1};
    if (!(r->L = layout_new_t2va(tags, 3, 2, 4, 4, 5, NULL, 0, e))) return -1;
    const layout *L = r->L;
    int K;
    r->tidx = malloc(sizeof(int64_t) * (size_t)L->S);
    layout_row_timesteps(L, 0.75f, 0.5f, r->tv, &K, r->tidx);
    const int64_t pd = (int64_t)c->in_channels * c->patch_size[0] * c->patch_size[1] * c->patch_size[2];
    r->nv = L->Nv * pd, r->na = L->Na * c->audio_in_channels;
    r->video = malloc(sizeof(float) * (size_t)r->nv), r->audio = malloc(sizeof(float) * (size_t)r->na);
    r->text = malloc(sizeof(float) * (size_t)(3 * c->text_dim));
    for (int64_t i = 0; i < r->nv; i++) r->video[i] = sinf(0.37f * (float)i);
    for (int64_t i = 0; i < r->na; i++) r->audio[i] = cosf(0.11f * (float)i);
    for (int64_t i = 0; i < 3 * c->text_dim; i++) r->text[i] = 0.2f * sinf((float)i);
    r->in = (dit_inputs){.video = r->video, .Nv = L->Nv, .audio = r->audio, .Na = L->Na, .text = r->text, .Nt = L->T,
                         .timestep = r->tv, .K = K, .S = L->S, .timestep_indices = r->tidx, .token_tags = L->token_tags,
                         .position_ids = L->position_ids, .video_indices = L->video_indices,
                         .audio_indices = L->audio_indices, .text_indices = L->text_indices};
    return 0;
}

static void small_free(small *r) {
    layout_free(r->L);
    free(r->tidx), free(r->video), free(r->audio), free(r->text);
}

static void test_random(h3_backend *be) {
    h3_err e = {{0}};
    dit_config c;
    CHECK(dit_config_load(FIX "tiny/transformer", &c, &e) == 0, "config: %s", e.msg);
    /* rows of 48 values: Q8_0 takes them only where they are 32-multiples (the FFN down's 64 are, the 48 are not) */
    dit_model *m = dit_new_random_gguf(be, &c, DIT_BF16, 5, GGUF_Q8_0, &e);
    CHECK(!m && strstr(e.msg, "not whole Q8_0 blocks of 32"), "48-wide rows as Q8_0: %s", m ? "accepted" : e.msg);
    dit_free(m);
    m = dit_new_random_gguf(be, &c, DIT_BF16 | DIT_STREAM, 5, GGUF_F16, &e);
    CHECK(!m && strstr(e.msg, "--ssd-streaming"), "random GGUF + streaming: %s", m ? "accepted" : e.msg);
    dit_free(m);
    c.hidden_size = 256, c.attention_head_dim = 128, c.num_attention_heads = 2, c.ffn_dim = 256, c.num_layers = 3;
    small r;
    CHECK(small_make(&c, &r, &e) == 0, "inputs: %s", e.msg);
    static const uint32_t types[3] = {GGUF_Q8_0, GGUF_Q4_K, GGUF_Q6_K};
    float *first = NULL;
    for (int t = 0; t < 3; t++) {
        const char *name;
        int64_t bv, bb;
        gguf_type_block(types[t], &bv, &bb, &name);
        dit_model *a = dit_new_random_gguf(be, &c, DIT_BF16, 5, (int)types[t], &e);
        dit_model *b = a ? dit_new_random_gguf(be, &c, DIT_BF16, 5, (int)types[t], &e) : NULL;
        CHECK(a && b, "random %s: %s", name, e.msg);
        if (!a || !b) {
            dit_free(a);
            continue;
        }
        float *va = malloc(sizeof(float) * (size_t)r.nv), *aa = malloc(sizeof(float) * (size_t)r.na);
        float *vb = malloc(sizeof(float) * (size_t)r.nv), *ab = malloc(sizeof(float) * (size_t)r.na);
        const float ts[2] = {0.75f, 0.5f};
        int rc = dit_prepare_timesteps(a, ts, 2, &e) | dit_prepare_timesteps(b, ts, 2, &e);
        rc |= dit_forward(a, &r.in, va, aa, &e) | dit_forward(b, &r.in, vb, ab, &e);
        CHECK(rc == 0, "random %s forward: %s", name, e.msg);
        int finite = 1;
        double ss = 0;
        for (int64_t i = 0; i < r.nv; i++) finite &= isfinite(va[i]) != 0, ss += (double)va[i] * va[i];
        CHECK(finite && ss > 0, "random %s: outputs not finite or all zero", name);
        CHECK(!memcmp(va, vb, sizeof(float) * (size_t)r.nv) && !memcmp(aa, ab, sizeof(float) * (size_t)r.na),
              "random %s: two models of the same seed differ", name);
        dit_stream_stats st;
        dit_get_stream_stats(a, &st);
        const double I = 256, H = 256, FF = 256, want = (3 * I * H + H * I + 2 * FF * H + H * FF) / (double)bv * (double)bb;
        CHECK(st.fills > 0 && fabs(st.bytes / (double)st.fills - want) < 0.5, "random %s: %g bytes a fill (want %g)", name,
              st.fills ? st.bytes / (double)st.fills : 0.0, want);
        if (BACKEND != H3_BACKEND_CPU) { /* the same random model on the CPU: the blocks and their expansion agree */
            h3_backend *cpu = h3_backend_new(H3_BACKEND_CPU, 0, &e);
            dit_model *mc = cpu ? dit_new_random_gguf(cpu, &c, DIT_BF16, 5, (int)types[t], &e) : NULL;
            CHECK(mc && dit_prepare_timesteps(mc, ts, 2, &e) == 0 && dit_forward(mc, &r.in, vb, ab, &e) == 0,
                  "random %s on the CPU: %s", name, e.msg);
            const double rel = h3_rel_l2(va, vb, (size_t)r.nv), rela = h3_rel_l2(aa, ab, (size_t)r.na);
            printf("  random %s: CUDA vs CPU rel L2 video %.3e audio %.3e\n", name, rel, rela);
            CHECK(rel < 3e-2 && rela < 3e-2, "random %s: CUDA vs CPU rel L2 %.3e / %.3e", name, rel, rela);
            dit_free(mc);
            if (cpu) h3_backend_free(cpu);
        }
        if (!first) first = va, va = NULL;
        else CHECK(memcmp(first, va, sizeof(float) * (size_t)r.nv) != 0, "random %s: same outputs as Q8_0", name);
        printf("  random %s blocks: finite, deterministic, %lld fills of %.0f bytes; weights %.0f bytes\n", name,
               (long long)st.fills, want, (double)dit_weight_bytes(a));
        free(va), free(aa), free(vb), free(ab);
        dit_free(a);
        dit_free(b);
    }
    free(first);
    small_free(&r);
}

int main(void) {
    h3_err e;
    h3_backend *be = h3_backend_new(BACKEND, 0, &e);
    if (!be) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    test_file(be);
    test_random(be);
    h3_backend_free(be);
    TEST_END();
}
