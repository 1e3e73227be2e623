/* --ssd-streaming on CUDA (backend_stream.h, dit_stream.c). Built with CUDA=1 (make cuda-tests), run on the GPU:
 *   - weight slots: bytes land where the pieces say (pieces larger than the 32 MiB staging buffers, odd sizes), and
 *     a fill queued right after a slow reader of the slot's old bytes waits for it (the reader sees the old bytes,
 *     the next reader the new ones);
 *   - a tiny-config DiT with 8 blocks, both layouts, bf16 and fp32: streamed = resident bit for bit over two
 *     forwards, with --layers, and one block alone; the streamed CUDA model against the CPU's (fp32: <= 1e-5);
 *   - the tiny checkpoint's files streamed through the mapping and with file reads (O_DIRECT) = resident;
 *   - release-width blocks (3 of them, 512x512x22 rows, bf16): streamed = resident bit for bit. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "backend/backend.h"
#include "backend/backend_bench.h"
#include "backend/backend_stream.h"
#include "core/tensor.h"
#include "model/dit.h"
#include "pipeline/layout.h"

static void pattern(uint8_t *p, size_t n, uint32_t seed) {
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) x = x * 1664525u + 1013904223u, p[i] = (uint8_t)(x >> 24);
}

static void test_slots(h3_backend *gpu) {
    h3_err e = {{0}};
    const size_t A = (70u << 20) + 12345, B = 3u << 20, off_b = (72u << 20), bytes = off_b + B + 777;
    uint8_t *src1 = malloc(A), *src2 = malloc(B), *src3 = malloc(A), *back = malloc(bytes), *back2 = malloc(A);
    pattern(src1, A, 1), pattern(src2, B, 2), pattern(src3, A, 3);
    h3_slot *s = h3_slot_new(gpu, bytes);
    void *copy1 = h3_alloc(gpu, A), *copy2 = h3_alloc(gpu, A), *busy = h3_alloc(gpu, 256u << 20), *busy2 = h3_alloc(gpu, 256u << 20);
    CHECK(s && copy1 && copy2 && busy && busy2, "allocations");
    if (!s || !copy1 || !copy2 || !busy || !busy2) return;
    h3_slot_piece p[2] = {{.src = src1, .bytes = A, .offset = 0}, {.src = src2, .bytes = B, .offset = off_b}};
    CHECK(h3_slot_fill(gpu, s, p, 2, &e) == 0, "fill: %s", e.msg);
    h3_slot_acquire(gpu, s);
    for (int i = 0; i < 40; i++) h3_copy(gpu, busy2, busy, 256u << 20); /* ~0.1 s of copies before the reader */
    h3_copy(gpu, copy1, h3_slot_data(s), A);
    h3_slot_release(gpu, s);
    h3_slot_piece q = {.src = src3, .bytes = A, .offset = 0};
    CHECK(h3_slot_fill(gpu, s, &q, 1, &e) == 0, "second fill: %s", e.msg); /* must wait for the reader above */
    h3_slot_acquire(gpu, s);
    h3_copy(gpu, copy2, h3_slot_data(s), A);
    h3_download(gpu, back2, copy1, A);
    CHECK(!memcmp(back2, src1, A), "the reader queued before the second fill saw its bytes");
    h3_download(gpu, back2, copy2, A);
    CHECK(!memcmp(back2, src3, A), "the reader after the second fill did not see them");
    h3_download(gpu, back, h3_slot_data(s), bytes);
    CHECK(!memcmp(back + off_b, src2, B), "the second piece of the first fill is not at its offset");
    h3_slot_piece bad = {.src = src2, .bytes = B, .offset = bytes - 10};
    CHECK(h3_slot_fill(gpu, s, &bad, 1, &e) == -1 && strstr(e.msg, "ends past"), "piece past the end: '%s'", e.msg);
    printf("  slots: pieces of 70 MiB + 3 MiB in place; a fill waits for the slot's last reader\n");
    h3_slot_free(gpu, s);
    h3_free(gpu, copy1), h3_free(gpu, copy2), h3_free(gpu, busy), h3_free(gpu, busy2);
    free(src1), free(src2), free(src3), free(back), free(back2);
}

typedef struct inputs {
    layout  *L;
    float   *video, *audio, *text, tv[LAYOUT_MAX_TIMESTEPS];
    int64_t *tix;
    dit_inputs in;
} inputs;

static int inputs_make(const dit_config *c, int64_t T, int F, int lh, int lw, int A, inputs *x, h3_err *e) {
    int64_t tags[512];
    for (int64_t i = 0; i < T; i++) tags[i] = 1;
    if (!(x->L = layout_new_t2va(tags, T, F, lh, lw, A, NULL, 0, e))) return -1;
    const layout *L = x->L;
    const int64_t pd = (int64_t)c->in_channels * 4;
    x->video = malloc(sizeof(float) * (size_t)(L->Nv * pd));
    x->audio = malloc(sizeof(float) * (size_t)(L->Na * c->audio_in_channels + 1));
    x->text = malloc(sizeof(float) * (size_t)(T * c->text_dim));
    x->tix = malloc(sizeof(int64_t) * (size_t)L->S);
    h3_fill_random_host(x->video, H3_F32, L->Nv * pd, 1, 1.0f, 0.0f);
    h3_fill_random_host(x->audio, H3_F32, L->Na * c->audio_in_channels, 2, 1.0f, 0.0f);
    h3_fill_random_host(x->text, H3_F32, T * c->text_dim, 3, 1.0f, 0.0f);
    int K;
    layout_row_timesteps(L, 0.75f, 0.5f, x->tv, &K, x->tix);
    x->in = (dit_inputs){.video = x->video, .Nv = L->Nv, .audio = x->audio, .Na = L->Na, .text = x->text, .Nt = T,
                         .timestep = x->tv, .K = K, .S = L->S, .timestep_indices = x->tix, .token_tags = L->token_tags,
                         .position_ids = L->position_ids, .video_indices = L->video_indices,
                         .audio_indices = L->audio_indices, .text_indices = L->text_indices};
    return 0;
}

static void inputs_free(inputs *x) {
    layout_free(x->L);
    free(x->video), free(x->audio), free(x->text), free(x->tix);
}

/* resident vs streamed on the GPU (and the streamed GPU model vs the CPU's when cpu is given) */
static void compare(h3_backend *gpu, h3_backend *cpu, const char *label, dit_config c, int mode, int layers,
                    int64_t T, int F, int lh, int lw, int A) {
    h3_err e = {{0}};
    inputs x;
    CHECK(inputs_make(&c, T, F, lh, lw, A, &x, &e) == 0, "inputs: %s", e.msg);
    dit_model *a = dit_new_random(gpu, &c, mode, 5, &e), *b = a ? dit_new_random(gpu, &c, mode | DIT_STREAM, 5, &e) : NULL;
    dit_model *h = cpu && b ? dit_new_random(cpu, &c, mode | DIT_STREAM, 5, &e) : NULL;
    CHECK(a && b && (!cpu || h), "%s: models: %s", label, e.msg);
    const size_t nv = (size_t)(x.in.Nv * c.in_channels * 4), na = (size_t)(x.in.Na * c.audio_in_channels);
    float *va = malloc(4 * nv), *aa = malloc(4 * na + 4), *vb = malloc(4 * nv), *ab = malloc(4 * na + 4);
    float *vh = malloc(4 * nv), *ah = malloc(4 * na + 4);
    if (a && b) {
        const float ts[2] = {0.75f, 0.5f};
        CHECK(dit_prepare_timesteps(a, ts, 2, &e) == 0 && dit_prepare_timesteps(b, ts, 2, &e) == 0, "tables: %s", e.msg);
        if (h) CHECK(dit_prepare_timesteps(h, ts, 2, &e) == 0, "cpu tables: %s", e.msg);
        dit_release_adaln(a), dit_release_adaln(b);
        if (layers) {
            CHECK(dit_select_layers(a, layers, &e) == 0 && dit_select_layers(b, layers, &e) == 0, "--layers: %s", e.msg);
            if (h) CHECK(dit_select_layers(h, layers, &e) == 0, "--layers cpu: %s", e.msg);
        }
        int same = 1;
        for (int pass = 0; pass < 2; pass++) {
            CHECK(dit_forward(a, &x.in, va, aa, &e) == 0 && dit_forward(b, &x.in, vb, ab, &e) == 0, "forwards: %s", e.msg);
            same &= !memcmp(va, vb, 4 * nv) && !memcmp(aa, ab, 4 * na);
        }
        CHECK(same, "%s: streamed forwards differ from the resident model's", label);
        dit_stream_stats st;
        dit_get_stream_stats(b, &st);
        printf("  %-44s streamed = resident bit for bit (2 forwards, %lld block copies, %.3g GB)", label,
               (long long)st.fills, st.bytes / 1e9);
        if (h) {
            CHECK(dit_forward(h, &x.in, vh, ah, &e) == 0, "cpu forward: %s", e.msg);
            const double r = h3_rel_l2(vb, vh, nv);
            printf("; vs CPU %.3g", r);
            CHECK(r <= ((mode & DIT_BF16) ? 3e-2 : 1e-5), "%s: streamed CUDA vs CPU %g", label, r);
        }
        printf("\n");
    }
    free(va), free(aa), free(vb), free(ab), free(vh), free(ah);
    dit_free(a), dit_free(b), dit_free(h);
    inputs_free(&x);
}

/* The tiny checkpoint's files on the GPU: streamed through the mapping and with file reads (H3_STREAM_READ=direct:
 * O_DIRECT, or buffered where refused) = resident, bit for bit, two forwards. */
static void compare_files(h3_backend *gpu, const char *dir, int mode, const char *label) {
    h3_err e = {{0}};
    dit_config c;
    CHECK(dit_config_load(dir, &c, &e) == 0, "%s", e.msg);
    inputs x;
    CHECK(inputs_make(&c, 16, 7, 4, 6, 37, &x, &e) == 0, "inputs: %s", e.msg);
    const size_t nv = (size_t)(x.in.Nv * c.in_channels * 4), na = (size_t)(x.in.Na * c.audio_in_channels);
    float *va = malloc(4 * nv), *aa = malloc(4 * na + 4), *vb = malloc(4 * nv), *ab = malloc(4 * na + 4);
    dit_model *a = dit_load(gpu, dir, mode, &e);
    for (int reads = 0; reads < 2 && a; reads++) {
        setenv("H3_STREAM_READ", reads ? "direct" : "map", 1);
        dit_model *b = dit_load(gpu, dir, mode | DIT_STREAM, &e);
        unsetenv("H3_STREAM_READ");
        CHECK(b != NULL, "%s: streamed model: %s", label, e.msg);
        if (!b) continue;
        const float ts[2] = {0.75f, 0.5f};
        CHECK(dit_prepare_timesteps(a, ts, 2, &e) == 0 && dit_prepare_timesteps(b, ts, 2, &e) == 0, "tables: %s", e.msg);
        int same = 1;
        for (int pass = 0; pass < 2; pass++) {
            CHECK(dit_forward(a, &x.in, va, aa, &e) == 0 && dit_forward(b, &x.in, vb, ab, &e) == 0, "forwards: %s", e.msg);
            same &= !memcmp(va, vb, 4 * nv) && !memcmp(aa, ab, 4 * na);
        }
        dit_stream_stats st;
        dit_get_stream_stats(b, &st);
        CHECK(same, "%s (%s): streamed differs from resident", label, reads ? "file reads" : "mapping");
        CHECK(reads ? st.reads == 1 || st.reads == 2 : st.reads == 0, "%s: reads %d", label, st.reads);
        printf("  %-44s streamed = resident bit for bit (%s)\n", label,
               !reads ? "copies from the mapping" : st.reads == 1 ? "O_DIRECT reads" : "buffered reads");
        dit_free(b);
    }
    dit_free(a);
    free(va), free(aa), free(vb), free(ab);
    inputs_free(&x);
}

int main(void) {
    h3_err e = {{0}};
    h3_backend *gpu = h3_backend_new(H3_BACKEND_CUDA, 0, &e), *cpu = gpu ? h3_backend_new(H3_BACKEND_CPU, 0, &e) : NULL;
    if (!gpu || !cpu) {
        fprintf(stderr, "test_cuda_stream: %s\n", e.msg);
        return 2;
    }
    printf("weight slots:\n");
    test_slots(gpu);
    printf("DiT, tiny width, 8 blocks:\n");
    const char *dirs[2] = {"tests/fixtures/tiny/transformer", "tests/fixtures/tiny/FL2VA/transformer"};
    for (int d = 0; d < 2; d++)
        for (int mode = 0; mode < 2; mode++) {
            dit_config c;
            CHECK(dit_config_load(dirs[d], &c, &e) == 0, "%s", e.msg);
            c.num_layers = 8;
            char label[96];
            snprintf(label, sizeof label, "%s, %s", d ? "original layout" : "diffusers layout", mode ? "bf16" : "fp32");
            compare(gpu, cpu, label, c, mode ? DIT_BF16 : 0, 0, 16, 7, 4, 6, 37);
            snprintf(label, sizeof label, "%s, %s, --layers 5", d ? "original layout" : "diffusers layout",
                     mode ? "bf16" : "fp32");
            compare(gpu, cpu, label, c, mode ? DIT_BF16 : 0, 5, 16, 7, 4, 6, 37);
        }
    printf("DiT, the tiny checkpoint's files:\n");
    compare_files(gpu, "tests/fixtures/tiny/transformer", DIT_BF16, "diffusers layout, bf16");
    compare_files(gpu, "tests/fixtures/tiny/FL2VA/transformer", 0, "original layout, fp32");
    printf("DiT, release width, 3 blocks, 512x512x22:\n");
    dit_config r;
    CHECK(dit_config_load("tests/fixtures/skeleton/transformer", &r, &e) == 0, "%s", e.msg);
    r.num_layers = 3;
    compare(gpu, NULL, "release width, bf16", r, DIT_BF16, 0, 256, 6, 32, 32, 133);
    h3_backend_free(cpu);
    h3_backend_free(gpu);
    TEST_END();
}
