/* Conditioner parity (language-model prefix, presentations, rope positions) against goldens that
 * transformers + diffusers computed on the tiny random Qwen3-VL (tools/reference/gen_text_encoder.py).
 * Targets: fp32 relative L2 <= 1e-4, bf16 <= 3e-2, ids / tags / positions bit for bit. */
#include <stdint.h>

#include "model/tokenizer.h"
#include "text_encoder_golden.h"

static h3_backend *be;

/* The release config implies the release index exactly: 1058 names, shapes summing to total_size. */
static void test_release_tensor_list(void) {
    h3_err e = {{0}};
    te_config cfg;
    CHECK(text_encoder_config_load("tests/fixtures/skeleton/text_encoder", &cfg, &e) == 0, "%s", e.msg);
    CHECK(cfg.text.rope_theta == 5000000.0, "rope_theta %g", cfg.text.rope_theta);
    CHECK(cfg.text.mrope_section[0] == 24 && cfg.text.mrope_section[1] == 20 && cfg.text.mrope_section[2] == 20,
          "mrope_section");
    CHECK(cfg.vision.n_deepstack == 3 && cfg.vision.deepstack_indexes[2] == 24, "deepstack indexes");
    h3_expect_list l = {0};
    CHECK(text_encoder_expected_tensors(&cfg, &l, &e) == 0, "%s", e.msg);
    CHECK(l.n == 1058, "expected 1058 tensors, got %d", l.n);
    json_t *idx = json_load_file("tests/fixtures/skeleton/text_encoder/model.safetensors.index.json", 0, NULL);
    json_t *wm = idx ? json_object_get(idx, "weight_map") : NULL;
    CHECK(wm && (int)json_object_size(wm) == l.n, "index has %d names", wm ? (int)json_object_size(wm) : -1);
    int64_t bytes = 0;
    int missing = 0;
    for (int i = 0; i < l.n; i++) {
        int64_t n = 2;
        for (int d = 0; d < l.v[i].ndim; d++) n *= l.v[i].shape[d];
        bytes += n;
        if (wm && !json_object_get(wm, l.v[i].name)) missing++;
    }
    int64_t total = idx ? json_integer_value(json_object_get(json_object_get(idx, "metadata"), "total_size")) : -1;
    CHECK(missing == 0, "%d expected names are not in the release index", missing);
    CHECK(bytes == total, "expected tensors sum to %lld bytes, index total_size %lld", (long long)bytes, (long long)total);
    printf("  release: %d tensors, %lld bytes; one layer %lld bytes; activations at L=256: %lld bytes\n", l.n,
           (long long)bytes, (long long)text_encoder_layer_bytes(&cfg), (long long)text_encoder_activation_bytes(&cfg, 256));
    json_decref(idx);
    h3_expect_list_free(&l);
}

/* The tiny fixture holds exactly what its config implies. */
static void test_tiny_tensor_list(void) {
    h3_err e = {{0}};
    h3_expect_list l = {0};
    CHECK(text_encoder_expected_dir(TE_TINY, &l, &e) == 0, "%s", e.msg);
    st_set *s = st_set_open(TE_TINY, &e);
    CHECK(s != NULL, "%s", e.msg);
    if (s) {
        CHECK(st_set_count(s) == l.n, "tiny has %d tensors, config implies %d", st_set_count(s), l.n);
        int bad = 0;
        for (int i = 0; i < l.n; i++) {
            const st_entry *en = st_set_entry(s, l.v[i].name, NULL);
            int ok = en && en->dtype == l.v[i].dtype && en->ndim == l.v[i].ndim;
            for (int d = 0; ok && d < en->ndim; d++) ok = en->shape[d] == l.v[i].shape[d];
            if (!ok && bad++ < 3) fprintf(stderr, "  mismatch: %s\n", l.v[i].name);
        }
        CHECK(bad == 0, "%d tensors differ from the expected list", bad);
        st_set_free(s);
    }
    h3_expect_list_free(&l);
}

static void run_text_case(const char *name) {
    char fn[256];
    snprintf(fn, sizeof fn, "text_encode_%s.in.safetensors", name);
    st_set *in = gold_open(fn);
    h3_tensor *ids = gold_get(in, "input_ids", H3_I64);
    for (int bf16 = 0; bf16 <= 1 && ids; bf16++) {
        snprintf(fn, sizeof fn, "text_encode_%s.%s.out.safetensors", name, bf16 ? "bf16" : "fp32");
        st_set *out = gold_open(fn);
        h3_tensor *ref = gold_get(out, "hidden_states", H3_F32);
        h3_err e = {{0}};
        text_encoder *te = text_encoder_load(be, TE_TINY, bf16, &e);
        CHECK(te != NULL, "%s", e.msg);
        if (te && ref) {
            int64_t L = ids->shape[1], H = text_encoder_get_config(te)->text.hidden_size;
            float *got = malloc((size_t)(L * H) * sizeof(float));
            int rc = text_encoder_forward(te, ids->data, L, NULL, NULL, TE_OUTPUT_LAYER, got, &e);
            CHECK(rc == 0, "%s", e.msg);
            char what[96];
            snprintf(what, sizeof what, "text-encode %s %s (L=%lld)", name, bf16 ? "bf16" : "fp32", (long long)L);
            if (rc == 0) check_close(what, got, ref->data, (size_t)(L * H), bf16 ? 3e-2 : 1e-4);
            free(got);
        }
        text_encoder_free(te);
        h3_tensor_free(ref);
        st_set_free(out);
    }
    h3_tensor_free(ids);
    st_set_free(in);
}

static void test_errors(void) {
    h3_err e = {{0}};
    text_encoder *te = text_encoder_load(be, TE_TINY, 0, &e);
    CHECK(te != NULL, "%s", e.msg);
    if (!te) return;
    float out[64];
    int64_t bad[2] = {5, 151936};
    CHECK(text_encoder_forward(te, bad, 2, NULL, NULL, TE_OUTPUT_LAYER, out, &e) == -1 && strstr(e.msg, "vocabulary"),
          "out-of-vocabulary id accepted: %s", e.msg);
    int64_t ok[1] = {5};
    CHECK(text_encoder_forward(te, ok, 1, NULL, NULL, 51, out, &e) == -1 && strstr(e.msg, "post-norm"),
          "hidden_states[51] of a 51-layer model accepted: %s", e.msg);
    int64_t pad[3] = {151652, 151655, 151653};
    CHECK(text_encoder_forward(te, pad, 3, NULL, NULL, TE_OUTPUT_LAYER, out, &e) == -1 && strstr(e.msg, "do not match"),
          "image pad without features accepted: %s", e.msg);
    text_encoder_free(te);
    CHECK(text_encoder_load(be, "tests/fixtures/skeleton/text_encoder", 0, &e) == NULL, "skeleton has no weights");
    printf("  error lines: %s\n", e.msg);
}

/* ids, tags and positions of a golden presentation vs ours; then the encoder on them. */
static void check_presentation(const char *name, const presentation *pr, const h3_tensor *gids, const h3_tensor *gtags,
                               const char *tok_label) {
    int same = pr->L == gids->shape[0];
    for (int64_t i = 0; same && i < pr->L; i++)
        same = pr->ids[i] == ((int64_t *)gids->data)[i] && pr->tags[i] == ((int64_t *)gtags->data)[i];
    printf("  %s presentation (%s): L=%lld %s\n", name, tok_label, (long long)pr->L, same ? "identical" : "DIFFERENT");
    CHECK(same, "%s presentation (%s) differs from diffusers", name, tok_label);
}

typedef struct case_media {
    float  *img_pv;  /* images preprocessed by us */
    int64_t img_grid[16][3];
    int     n_img;
    int64_t n_img_rows;
} case_media;

static void run_presentation_case(const char *name, const h3_tokenizer *tok) {
    char fn[256];
    snprintf(fn, sizeof fn, TE_GOLD "%s.json", name);
    json_t *meta = json_load_file(fn, 0, NULL);
    CHECK(meta != NULL, "cannot read %s", fn);
    snprintf(fn, sizeof fn, "%s.in.safetensors", name);
    st_set *in = gold_open(fn);
    snprintf(fn, sizeof fn, "%s.out.safetensors", name);
    st_set *out = gold_open(fn);
    if (!meta || !in || !out) goto done;
    h3_err e = {{0}};
    h3_tensor *gids = gold_get(out, "input_ids", H3_I64), *gtags = gold_get(out, "token_tags", H3_I64);
    h3_tensor *gpos = gold_get(out, "position_ids", H3_I64);
    const char *prompt = json_string_value(json_object_get(meta, "prompt"));
    /* vision inputs: images from uint8 media through our preprocessing; video pixel values likewise */
    vision_proc_config ipc, vpc;
    CHECK(vision_proc_config_load(TE_PROC, 0, &ipc, &e) == 0, "%s", e.msg);
    CHECK(vision_proc_config_load(TE_PROC, 1, &vpc, &e) == 0, "%s", e.msg);
    float *img_pv = NULL, *vid_pv = NULL;
    int64_t img_grid[8][3], vid_grid[3], n_img_rows = 0, n_vid_rows = 0;
    int n_img = 0;
    for (int i = 0; i < 8; i++) {
        char tn[32];
        snprintf(tn, sizeof tn, "image_%d", i);
        if (!st_set_entry(in, tn, NULL)) break;
        h3_tensor *im = gold_get(in, tn, H3_U8);
        float *pv;
        CHECK(vision_preprocess(im->data, 1, (int)im->shape[0], (int)im->shape[1], &ipc, &pv, img_grid[i], &e) == 0, "%s",
              e.msg);
        int64_t rows = img_grid[i][0] * img_grid[i][1] * img_grid[i][2], vec = 1536;
        img_pv = realloc(img_pv, (size_t)((n_img_rows + rows) * vec) * sizeof(float));
        memcpy(img_pv + n_img_rows * vec, pv, (size_t)(rows * vec) * sizeof(float));
        free(pv);
        n_img_rows += rows;
        n_img++;
        h3_tensor_free(im);
    }
    if (st_set_entry(in, "video_0", NULL)) {
        h3_tensor *v = gold_get(in, "video_0", H3_U8);
        CHECK(vision_preprocess(v->data, (int)v->shape[0], (int)v->shape[1], (int)v->shape[2], &vpc, &vid_pv, vid_grid,
                                &e) == 0, "%s", e.msg);
        n_vid_rows = vid_grid[0] * vid_grid[1] * vid_grid[2];
        h3_tensor_free(v);
        h3_tensor *gg = gold_get(in, "video_grid_thw", H3_I64);
        h3_tensor *gpv = gold_get(in, "pixel_values_videos", H3_F32);
        if (gg && gpv && vid_pv) {
            int64_t *g = gg->data;
            CHECK(g[0] == vid_grid[0] && g[1] == vid_grid[1] && g[2] == vid_grid[2], "video grid");
            size_t n = (size_t)h3_tensor_numel(gpv);
            CHECK(n == (size_t)(n_vid_rows * 1536) && !memcmp(gpv->data, vid_pv, n * sizeof(float)),
                  "video pixel_values differ from the processor's (bit for bit)");
        }
        h3_tensor_free(gg);
        h3_tensor_free(gpv);
    }
    /* the presentation, with the golden segment table and (if available) the real tokenizer */
    const int merge = 4;
    for (int pass = 0; pass < 2; pass++) {
        presentation pr = {0};
        pres_encode_fn enc = gold_segment_encode;
        void *ctx = meta;
        if (pass == 1) {
            if (!tok) continue;
            enc = presentation_tokenizer_encode;
            ctx = (void *)tok;
        }
        int rc;
        if (!strcmp(name, "fl2va")) {
            int64_t tokens[2];
            for (int i = 0; i < n_img; i++) tokens[i] = img_grid[i][1] * img_grid[i][2] / merge;
            rc = presentation_fl2va(enc, ctx, prompt, n_img, tokens, &pr, &e);
        } else {
            json_t *kinds = json_object_get(meta, "kinds"), *aud = json_object_get(meta, "has_audio");
            int nr = (int)json_array_size(kinds), ii = 0;
            pres_ref refs[8];
            double ts[64];
            int idx[512], n_idx = 0, nb = 0;
            CHECK(vision_sample_video(json_integer_value(json_object_get(meta, "video_frames")),
                                      json_number_value(json_object_get(meta, "video_fps")), 2.0, 2, idx, &n_idx, ts, &nb,
                                      &e) == 0, "%s", e.msg);
            json_t *gidx = json_object_get(meta, "sample_indices");
            int same = n_idx == (int)json_array_size(gidx);
            for (int i = 0; same && i < n_idx; i++) same = idx[i] == json_integer_value(json_array_get(gidx, (size_t)i));
            CHECK(same, "ref2va sampled frame indices differ");
            for (int r = 0; r < nr; r++) {
                const char *k = json_string_value(json_array_get(kinds, (size_t)r));
                refs[r].has_audio = json_is_true(json_array_get(aud, (size_t)r));
                refs[r].kind = !strcmp(k, "image") ? PRES_REF_IMAGE : !strcmp(k, "video") ? PRES_REF_VIDEO : PRES_REF_AUDIO;
                refs[r].tokens = refs[r].kind == PRES_REF_IMAGE ? img_grid[ii][1] * img_grid[ii][2] / merge
                                                                 : vid_grid[1] * vid_grid[2] / merge;
                if (refs[r].kind == PRES_REF_IMAGE) ii++;
                refs[r].n_blocks = nb;
                refs[r].block_timestamps = ts;
            }
            rc = presentation_ref2va(enc, ctx, prompt, refs, nr, &pr, &e);
        }
        CHECK(rc == 0, "%s", e.msg);
        if (rc == 0 && gids && gtags) check_presentation(name, &pr, gids, gtags, pass ? "real tokenizer" : "golden segments");
        presentation_free(&pr);
    }
    /* positions (get_rope_index) and the encoder with vision, fp32 and bf16 */
    int64_t L = gids ? gids->shape[0] : 0;
    int64_t *pos = malloc((size_t)(3 * L + 1) * sizeof(int64_t));
    int rc = presentation_rope_index(gids->data, L, n_img ? &img_grid[0][0] : NULL, n_img, n_vid_rows ? vid_grid : NULL,
                                     n_vid_rows ? 1 : 0, 2, pos, &e);
    CHECK(rc == 0, "%s", e.msg);
    CHECK(rc == 0 && gpos && !memcmp(pos, gpos->data, (size_t)(3 * L) * sizeof(int64_t)),
          "%s positions differ from get_rope_index", name);
    for (int bf16 = 0; bf16 <= 1; bf16++) {
        text_encoder *te = text_encoder_load(be, TE_TINY, bf16, &e);
        CHECK(te != NULL, "%s", e.msg);
        if (!te) continue;
        const te_config *cfg = text_encoder_get_config(te);
        int64_t H = cfg->text.hidden_size, nd = cfg->vision.n_deepstack;
        vision_model *vm = vision_new(be, &cfg->vision, text_encoder_weights(te), bf16, &e);
        CHECK(vm != NULL, "%s", e.msg);
        te_vision_rows vis = {0};
        vis.n_deep = (int)nd;
        float *im = NULL, *idp = NULL, *vv = NULL, *vdp = NULL;
        if (vm && n_img) {
            vis.n_image = n_img_rows / 4;
            im = malloc((size_t)(vis.n_image * H) * sizeof(float));
            idp = malloc((size_t)(nd * vis.n_image * H) * sizeof(float));
            CHECK(vision_forward(vm, img_pv, n_img_rows, &img_grid[0][0], n_img, im, idp, &e) == 0, "%s", e.msg);
            if (!bf16) {
                h3_tensor *ge = gold_get(out, "image_embeds", H3_F32), *gd = gold_get(out, "image_deepstack", H3_F32);
                char what[96];
                snprintf(what, sizeof what, "%s image embeds fp32 (from uint8)", name);
                if (ge) check_close(what, im, ge->data, (size_t)(vis.n_image * H), 1e-4);
                snprintf(what, sizeof what, "%s image deepstack fp32", name);
                if (gd) check_close(what, idp, gd->data, (size_t)(nd * vis.n_image * H), 1e-4);
                h3_tensor_free(ge);
                h3_tensor_free(gd);
            }
        }
        if (vm && n_vid_rows) {
            vis.n_video = n_vid_rows / 4;
            vv = malloc((size_t)(vis.n_video * H) * sizeof(float));
            vdp = malloc((size_t)(nd * vis.n_video * H) * sizeof(float));
            CHECK(vision_forward(vm, vid_pv, n_vid_rows, vid_grid, 1, vv, vdp, &e) == 0, "%s", e.msg);
            if (!bf16) {
                h3_tensor *ge = gold_get(out, "video_embeds", H3_F32), *gd = gold_get(out, "video_deepstack", H3_F32);
                char what[96];
                snprintf(what, sizeof what, "%s video embeds fp32", name);
                if (ge) check_close(what, vv, ge->data, (size_t)(vis.n_video * H), 1e-4);
                snprintf(what, sizeof what, "%s video deepstack fp32", name);
                if (gd) check_close(what, vdp, gd->data, (size_t)(nd * vis.n_video * H), 1e-4);
                h3_tensor_free(ge);
                h3_tensor_free(gd);
            }
        }
        vis.image_embeds = im, vis.image_deep = idp, vis.video_embeds = vv, vis.video_deep = vdp;
        float *got = malloc((size_t)(L * H) * sizeof(float));
        rc = text_encoder_forward(te, gids->data, L, pos, &vis, TE_OUTPUT_LAYER, got, &e);
        CHECK(rc == 0, "%s", e.msg);
        h3_tensor *ref = gold_get(out, bf16 ? "hidden_states_bf16" : "hidden_states_fp32", H3_F32);
        char what[96];
        snprintf(what, sizeof what, "%s hidden_states[50] %s (L=%lld)", name, bf16 ? "bf16" : "fp32", (long long)L);
        if (rc == 0 && ref) check_close(what, got, ref->data, (size_t)(L * H), bf16 ? 3e-2 : 1e-4);
        if (rc == 0 && ref && bf16) { /* context: the reference's own bf16 error against its fp32 run */
            h3_tensor *r32 = gold_get(out, "hidden_states_fp32", H3_F32);
            if (r32)
                printf("    (bf16 vs the fp32 reference: ours %.3e, transformers' own %.3e; bf16 rounding flips "
                       "amplify over 50 random layers)\n", h3_rel_l2(got, r32->data, (size_t)(L * H)),
                       h3_rel_l2(ref->data, r32->data, (size_t)(L * H)));
            h3_tensor_free(r32);
        }
        h3_tensor_free(ref);
        /* hidden_states[2] (excludes layer 1's own deepstack add, as transformers records it) and
         * [4] (after all three adds): the vision-row paths before bf16 rounding flips compound */
        for (int k = 2; k <= 4; k += 2) {
            rc = text_encoder_forward(te, gids->data, L, pos, &vis, k, got, &e);
            CHECK(rc == 0, "%s", e.msg);
            char gn[64];
            snprintf(gn, sizeof gn, "hidden_states_%d_%s", k, bf16 ? "bf16" : "fp32");
            ref = gold_get(out, gn, H3_F32);
            snprintf(what, sizeof what, "%s hidden_states[%d] %s", name, k, bf16 ? "bf16" : "fp32");
            if (rc == 0 && ref) check_close(what, got, ref->data, (size_t)(L * H), bf16 ? 3e-2 : 1e-5);
            h3_tensor_free(ref);
        }
        free(got);
        free(im);
        free(idp);
        free(vv);
        free(vdp);
        vision_free(vm);
        text_encoder_free(te);
    }
    free(pos);
    free(img_pv);
    free(vid_pv);
    h3_tensor_free(gids);
    h3_tensor_free(gtags);
    h3_tensor_free(gpos);
done:
    json_decref(meta);
    st_set_free(in);
    st_set_free(out);
}

static void test_presentation_rules(void) {
    h3_err e = {{0}};
    presentation pr;
    json_t *meta = json_load_file(TE_GOLD "fl2va.json", 0, NULL);
    CHECK(presentation_t2va(gold_segment_encode, meta, "bad <|image_pad|> prompt", &pr, &e) == -1 &&
              strstr(e.msg, "<|image_pad|>"), "vision token in the prompt accepted: %s", e.msg);
    CHECK(presentation_t2va(gold_segment_encode, meta, "", &pr, &e) == -1, "empty t2va prompt accepted");
    /* rope index: a pad run that does not match its grid */
    int64_t ids[4] = {1, 151652, 151655, 151653}, grid[3] = {1, 4, 4}, pos[12];
    CHECK(presentation_rope_index(ids, 4, grid, 1, NULL, 0, 2, pos, &e) == -1 && strstr(e.msg, "does not match"),
          "mismatched pad run accepted: %s", e.msg);
    json_decref(meta);
}

int main(void) {
    h3_err e = {{0}};
    be = h3_backend_new(H3_BACKEND_CPU, 0, &e);
    if (!be) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    printf("release tensor list\n");
    test_release_tensor_list();
    printf("tiny tensor list\n");
    test_tiny_tensor_list();
    printf("text-encode parity\n");
    run_text_case("fox");
    run_text_case("dialog");
    test_errors();
    h3_tokenizer *tok = tokenizer_load("tests/fixtures/tiny/tokenizer", &e);
    if (!tok) printf("  (real tokenizer not usable: %s)\n", e.msg);
    printf("presentations\n");
    test_presentation_rules();
    run_presentation_case("fl2va", tok);
    run_presentation_case("ref2va", tok);
    tokenizer_free(tok);
    h3_backend_free(be);
    TEST_END();
}
