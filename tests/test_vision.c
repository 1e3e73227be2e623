/* Vision tower, preprocessing and video sampling parity against transformers / diffusers goldens
 * (tools/reference/gen_text_encoder.py): fp32 relative L2 <= 1e-4, bf16 <= 3e-2, pixel values,
 * grids, sampled frames and timestamp labels exact. */
#include <math.h>

#include "text_encoder_golden.h"

static h3_backend *be;

/* Hand-built pixel values, grids (1,4,4) (1,2,4) (1,2,2) (2,2,4) in one call: the 4x4 position
 * table resampled exactly and down, a two-block video grid, attention kept per block. */
static void test_tower(void) {
    st_set *in = gold_open("vision.in.safetensors");
    h3_tensor *pv = gold_get(in, "pixel_values", H3_F32), *grid = gold_get(in, "grid_thw", H3_I64);
    h3_err e = {{0}};
    te_config cfg;
    CHECK(text_encoder_config_load(TE_TINY, &cfg, &e) == 0, "%s", e.msg);
    st_set *w = st_set_open(TE_TINY, &e);
    CHECK(w != NULL, "%s", e.msg);
    for (int bf16 = 0; bf16 <= 1 && pv && grid && w; bf16++) {
        st_set *out = gold_open(bf16 ? "vision.bf16.out.safetensors" : "vision.fp32.out.safetensors");
        h3_tensor *ge = gold_get(out, "image_embeds", H3_F32), *gd = gold_get(out, "deepstack_features", H3_F32);
        vision_model *vm = vision_new(be, &cfg.vision, w, bf16, &e);
        CHECK(vm != NULL, "%s", e.msg);
        int64_t N = pv->shape[0], G = N / 4, O = cfg.vision.out_hidden_size, nd = cfg.vision.n_deepstack;
        float *m = malloc((size_t)(G * O) * sizeof(float)), *d = malloc((size_t)(nd * G * O) * sizeof(float));
        int rc = vm ? vision_forward(vm, pv->data, N, grid->data, (int)grid->shape[0], m, d, &e) : -1;
        CHECK(rc == 0, "%s", e.msg);
        if (rc == 0 && ge && gd) {
            check_close(bf16 ? "vision merged bf16" : "vision merged fp32", m, ge->data, (size_t)(G * O), bf16 ? 3e-2 : 1e-4);
            for (int k = 0; k < nd; k++) {
                char what[64];
                snprintf(what, sizeof what, "vision deepstack[%d] %s", k, bf16 ? "bf16" : "fp32");
                check_close(what, d + k * G * O, (float *)gd->data + k * G * O, (size_t)(G * O), bf16 ? 3e-2 : 1e-4);
            }
        }
        /* inconsistent inputs are refused */
        int64_t badgrid[3] = {1, 3, 4};
        CHECK(vm && vision_forward(vm, pv->data, 12, badgrid, 1, m, d, &e) == -1 && strstr(e.msg, "multiples"),
              "odd grid accepted: %s", e.msg);
        free(m);
        free(d);
        vision_free(vm);
        h3_tensor_free(ge);
        h3_tensor_free(gd);
        st_set_free(out);
    }
    st_set_free(w);
    h3_tensor_free(pv);
    h3_tensor_free(grid);
    st_set_free(in);
}

/* Images from uint8: grid and per-column sums of the processor's pixel values. */
static void test_image_preprocess(void) {
    h3_err e = {{0}};
    vision_proc_config pc;
    CHECK(vision_proc_config_load(TE_PROC, 0, &pc, &e) == 0, "%s", e.msg);
    st_set *in = gold_open("fl2va.in.safetensors"), *out = gold_open("fl2va.out.safetensors");
    h3_tensor *ggrid = gold_get(in, "image_grid_thw", H3_I64), *sums = gold_get(out, "image_pixel_checksum", H3_F32);
    double *acc = calloc(1536, sizeof(double));
    for (int i = 0; i < 2 && ggrid; i++) {
        char tn[16];
        snprintf(tn, sizeof tn, "image_%d", i);
        h3_tensor *im = gold_get(in, tn, H3_U8);
        float *pv = NULL;
        int64_t g[3];
        int rc = im ? vision_preprocess(im->data, 1, (int)im->shape[0], (int)im->shape[1], &pc, &pv, g, &e) : -1;
        CHECK(rc == 0, "%s", e.msg);
        int64_t *gg = (int64_t *)ggrid->data + 3 * i;
        CHECK(rc == 0 && g[0] == gg[0] && g[1] == gg[1] && g[2] == gg[2], "image %d grid (%lld,%lld,%lld)", i,
              (long long)g[0], (long long)g[1], (long long)g[2]);
        for (int64_t r = 0; rc == 0 && r < g[0] * g[1] * g[2]; r++)
            for (int c = 0; c < 1536; c++) acc[c] += pv[r * 1536 + c];
        free(pv);
        h3_tensor_free(im);
    }
    if (sums) {
        float f[1536];
        for (int c = 0; c < 1536; c++) f[c] = (float)acc[c];
        check_close("image pixel_values column sums", f, sums->data, 1536, 1e-5);
    }
    /* video frames the (torchvision-only) video processor would resample are refused, not mangled */
    vision_proc_config vpc;
    CHECK(vision_proc_config_load(TE_PROC, 1, &vpc, &e) == 0, "%s", e.msg);
    static uint8_t clip[2 * 48 * 48 * 3];
    float *pv = NULL;
    int64_t g[3];
    CHECK(vision_preprocess(clip, 2, 48, 48, &vpc, &pv, g, &e) == -1 && strstr(e.msg, "64x64"),
          "48x48 video accepted: %s", e.msg);
    free(acc);
    h3_tensor_free(ggrid);
    h3_tensor_free(sums);
    st_set_free(in);
    st_set_free(out);
}

/* The golden's integer-hash noise image (tools/reference/gen_vision_resize.py hash_image). */
static uint8_t *hash_image(int h, int w, uint32_t seed) {
    uint8_t *im = malloc((size_t)h * w * 3);
    for (size_t i = 0; im && i < (size_t)h * w * 3; i++) {
        uint32_t x = (uint32_t)i + seed * 0x9E3779B9u;
        x ^= x >> 16, x *= 0x7FEB352Du, x ^= x >> 15, x *= 0x846CA68Bu, x ^= x >> 16;
        im[i] = (uint8_t)x;
    }
    return im;
}

/* sum_i bits(v[i]) * (2i + 1) mod 2^64: equal iff (barring collisions) every float is bit-identical */
static uint64_t bits_checksum(const float *v, size_t n) {
    uint64_t s = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, v + i, 4);
        s += (uint64_t)b * (2 * (uint64_t)i + 1);
    }
    return s;
}

/* Images the processor resizes (PIL BICUBIC in Qwen2VLImageProcessorPil): up by min_pixels
 * (96x128 -> 224x320), height down / width up and both down by the rounding to 32. Pixel values
 * bit for bit (checksum), then the tower on the three in one batch, fp32. */
static void test_image_resize(void) {
    h3_err e = {{0}};
    vision_proc_config pc;
    te_config cfg;
    CHECK(vision_proc_config_load(TE_PROC, 0, &pc, &e) == 0, "%s", e.msg);
    CHECK(text_encoder_config_load(TE_TINY, &cfg, &e) == 0, "%s", e.msg);
    json_t *meta = json_load_file(TE_GOLD "vision_resize.json", 0, NULL);
    json_t *cases = json_object_get(meta, "cases");
    CHECK(json_is_array(cases) && json_array_size(cases) == 3, "cannot read vision_resize.json");
    st_set *out = gold_open("vision_resize.out.safetensors");
    h3_tensor *ggrid = gold_get(out, "image_grid_thw", H3_I64), *ge = gold_get(out, "image_embeds", H3_F32),
              *gd = gold_get(out, "deepstack_features", H3_F32);
    if (!json_is_array(cases) || json_array_size(cases) != 3 || !ggrid || !ge || !gd) goto done;
    const int64_t vec = 1536;
    float *all = NULL;
    int64_t N = 0, grids[9];
    for (int k = 0; k < 3; k++) {
        json_t *c = json_array_get(cases, (size_t)k);
        int h = (int)json_integer_value(json_object_get(c, "height")), w = (int)json_integer_value(json_object_get(c, "width"));
        uint8_t *im = hash_image(h, w, (uint32_t)json_integer_value(json_object_get(c, "seed")));
        float *pv = NULL;
        int64_t *g = grids + 3 * k, *gg = (int64_t *)ggrid->data + 3 * k;
        int rc = vision_preprocess(im, 1, h, w, &pc, &pv, g, &e);
        free(im);
        CHECK(rc == 0, "%dx%d: %s", w, h, e.msg);
        if (rc) goto done_all;
        CHECK(g[0] == gg[0] && g[1] == gg[1] && g[2] == gg[2], "%dx%d: grid (%lld,%lld,%lld), reference (%lld,%lld,%lld)", w,
              h, (long long)g[0], (long long)g[1], (long long)g[2], (long long)gg[0], (long long)gg[1], (long long)gg[2]);
        int64_t n = g[0] * g[1] * g[2];
        uint64_t want = strtoull(json_string_value(json_object_get(c, "pixel_checksum")), NULL, 10);
        uint64_t got = bits_checksum(pv, (size_t)(n * vec));
        printf("  %dx%d -> %lldx%lld: pixel_values checksum %s\n", h, w, (long long)(g[1] * pc.patch_size),
               (long long)(g[2] * pc.patch_size), got == want ? "bit-identical" : "DIFFERS");
        CHECK(got == want, "%dx%d: pixel_values differ from the PIL processor's", h, w);
        char tn[32];
        snprintf(tn, sizeof tn, "pixel_column_sums_%d", k);
        h3_tensor *sums = gold_get(out, tn, H3_F32);
        if (sums) {
            double acc[1536] = {0};
            float f[1536];
            for (int64_t r = 0; r < n; r++)
                for (int c2 = 0; c2 < 1536; c2++) acc[c2] += pv[r * vec + c2];
            for (int c2 = 0; c2 < 1536; c2++) f[c2] = (float)acc[c2];
            check_close("resized pixel_values column sums", f, sums->data, 1536, 1e-6);
        }
        h3_tensor_free(sums);
        float *grown = realloc(all, sizeof(float) * (size_t)((N + n) * vec));
        if (!grown) {
            free(pv);
            goto done_all;
        }
        all = grown;
        memcpy(all + N * vec, pv, sizeof(float) * (size_t)(n * vec));
        N += n;
        free(pv);
    }
    st_set *w = st_set_open(TE_TINY, &e);
    CHECK(w != NULL, "%s", e.msg);
    vision_model *vm = w ? vision_new(be, &cfg.vision, w, 0, &e) : NULL;
    CHECK(vm != NULL, "%s", e.msg);
    int64_t G = N / 4, O = cfg.vision.out_hidden_size, nd = cfg.vision.n_deepstack;
    CHECK(ge->shape[0] == G, "merged rows %lld, reference %lld", (long long)G, (long long)ge->shape[0]);
    float *m = malloc((size_t)(G * O) * sizeof(float)), *d = malloc((size_t)(nd * G * O) * sizeof(float));
    if (vm && ge->shape[0] == G && vision_forward(vm, all, N, grids, 3, m, d, &e) == 0) {
        check_close("resized images merged fp32", m, ge->data, (size_t)(G * O), 1e-5);
        for (int k = 0; k < nd; k++) {
            char what[64];
            snprintf(what, sizeof what, "resized images deepstack[%d] fp32", k);
            check_close(what, d + k * G * O, (float *)gd->data + k * G * O, (size_t)(G * O), 1e-5);
        }
    } else {
        CHECK(0, "vision_forward on the resized images: %s", e.msg);
    }
    free(m);
    free(d);
    vision_free(vm);
    st_set_free(w);
done_all:
    free(all);
done:
    h3_tensor_free(ggrid);
    h3_tensor_free(ge);
    h3_tensor_free(gd);
    st_set_free(out);
    json_decref(meta);
}

/* diffusers _sample_video_condition_frames on several clip lengths, and the "%.1f" labels. */
static void test_video_sampling(void) {
    json_t *cases = json_load_file(TE_GOLD "video_sampling.json", 0, NULL);
    CHECK(json_is_array(cases), "cannot read video_sampling.json");
    size_t i;
    json_t *c;
    json_array_foreach(cases, i, c) {
        int nf = (int)json_integer_value(json_object_get(c, "frames"));
        double fps = json_number_value(json_object_get(c, "fps"));
        int idx[1024], n = 0, nb = 0;
        double ts[1024];
        h3_err e = {{0}};
        int rc = vision_sample_video(nf, fps, 2.0, 2, idx, &n, ts, &nb, &e);
        json_t *err = json_object_get(c, "error");
        if (err && json_is_true(err)) {
            CHECK(rc == -1, "%d frames: diffusers refuses, we accepted", nf);
            continue;
        }
        CHECK(rc == 0, "%d frames: %s", nf, e.msg);
        json_t *gi = json_object_get(c, "indices"), *gl = json_object_get(c, "labels");
        int same = n == (int)json_array_size(gi) && nb == (int)json_array_size(gl);
        for (int k = 0; same && k < n; k++) same = idx[k] == json_integer_value(json_array_get(gi, (size_t)k));
        for (int k = 0; same && k < nb; k++) {
            char lab[64];
            snprintf(lab, sizeof lab, "<%.1f seconds>", ts[k]);
            same = !strcmp(lab, json_string_value(json_array_get(gl, (size_t)k)));
        }
        CHECK(same, "%d frames at %g fps: indices or labels differ", nf, fps);
    }
    printf("  video sampling: %zu cases checked\n", json_array_size(cases));
    json_decref(cases);
}

/* transformers' smart_resize (image and video variants) with the snapshot's pixel budgets. */
static void test_smart_resize(void) {
    h3_err e = {{0}};
    vision_proc_config ipc, vpc;
    CHECK(vision_proc_config_load(TE_PROC, 0, &ipc, &e) == 0, "%s", e.msg);
    CHECK(vision_proc_config_load(TE_PROC, 1, &vpc, &e) == 0, "%s", e.msg);
    json_t *cases = json_load_file(TE_GOLD "smart_resize.json", 0, NULL);
    CHECK(json_is_array(cases), "cannot read smart_resize.json");
    size_t i;
    json_t *c;
    int n = 0;
    json_array_foreach(cases, i, c) {
        int frames = (int)json_integer_value(json_object_get(c, "frames"));
        int64_t h = json_integer_value(json_object_get(c, "h")), w = json_integer_value(json_object_get(c, "w")), oh, ow;
        json_t *o = json_object_get(c, "out");
        int rc = vision_smart_resize(h, w, frames, frames ? &vpc : &ipc, &oh, &ow, &e);
        CHECK(rc == 0 && oh == json_integer_value(json_array_get(o, 0)) && ow == json_integer_value(json_array_get(o, 1)),
              "smart_resize(%d frames, %lldx%lld) = %lldx%lld, transformers %lldx%lld", frames, (long long)h, (long long)w,
              (long long)oh, (long long)ow, (long long)json_integer_value(json_array_get(o, 0)),
              (long long)json_integer_value(json_array_get(o, 1)));
        n++;
    }
    printf("  smart_resize: %d cases checked\n", n);
    json_decref(cases);
}

int main(void) {
    h3_err e = {{0}};
    be = h3_backend_new(H3_BACKEND_CPU, 0, &e);
    if (!be) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    printf("vision tower\n");
    test_tower();
    printf("preprocessing\n");
    test_image_preprocess();
    test_image_resize();
    test_video_sampling();
    test_smart_resize();
    h3_backend_free(be);
    TEST_END();
}
