/* `h3 make-tiny DIR`: writes a tiny random-weight MiniMax-H3 snapshot in the release layout
 * (diffusers layout at the root). Configs are the tiny ones of the test fixtures; every tensor
 * the configs imply (the same lists `h3 info` validates against) gets seeded random values.
 * The tokenizer and processor files are copied from a weightless release skeleton. The result is
 * a smoke test of the whole pipeline: random weights generate noise, not video. */
#include <dirent.h>
#include <ftw.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "core/text.h"
#include "io/expect.h"
#include "io/outfile.h"
#include "io/safetensors.h"
#include "io/snapshot.h"
#include "model/audio_vae.h"
#include "model/dit.h"
#include "model/text_encoder.h"
#include "model/video_vae.h"
#include "pipeline/noise.h"

static const char model_index_json[] =
    "{\"_class_name\": \"MiniMaxH3ModularPipeline\", \"_blocks_class_name\": \"MiniMaxH3Blocks\",\n"
    " \"text_encoder\": [\"transformers\", \"Qwen3VLForConditionalGeneration\"],\n"
    " \"tokenizer\": [\"transformers\", \"Qwen2TokenizerFast\"], \"processor\": [\"transformers\", \"Qwen3VLProcessor\"],\n"
    " \"vae\": [\"diffusers\", \"AutoencoderKLMiniMaxH3\"], \"audio_vae\": [\"diffusers\", \"AutoencoderKLMiniMaxH3Audio\"],\n"
    " \"transformer\": [\"diffusers\", \"MiniMaxH3Transformer3DModel\"],\n"
    " \"transformer_ref\": [\"diffusers\", \"MiniMaxH3Transformer3DModel\"],\n"
    " \"scheduler\": [\"diffusers\", \"MiniMaxH3Scheduler\"], \"audio_scheduler\": [\"diffusers\", \"MiniMaxH3Scheduler\"],\n"
    " \"_h3_note\": \"tiny random-weight snapshot written by h3 make-tiny (smoke tests only)\"}\n";

static const char dit_json[] =
    "{\"_class_name\": \"MiniMaxH3Transformer3DModel\", \"num_attention_heads\": 2, \"attention_head_dim\": 32,\n"
    " \"hidden_size\": 48, \"num_layers\": 2, \"num_refiner_layers\": 2, \"ffn_dim\": 64, \"in_channels\": 24,\n"
    " \"audio_in_channels\": 32, \"patch_size\": [1, 2, 2], \"text_dim\": 16, \"freq_dim\": 16,\n"
    " \"time_embed_hidden_dim\": 40, \"time_embed_dim\": 24, \"rope_freq_dim\": 4, \"rope_theta\": 10000.0,\n"
    " \"norm_eps\": 1e-05, \"qk_norm_eps\": 1e-05, \"final_norm_eps\": 1e-05}\n";

static const char vae_json[] =
    "{\"_class_name\": \"AutoencoderKLMiniMaxH3\", \"in_channels\": 3, \"out_channels\": 3, \"latent_channels\": 24,\n"
    " \"block_out_channels\": [4, 8, 8, 8], \"layers_per_block\": 1, \"spatial_downsample_factors\": [2, 2, 2, 2],\n"
    " \"temporal_downsample_factors\": [1, 2, 2, 1], \"norm_num_groups\": 2, \"norm_eps\": 1e-06,\n"
    " \"spatial_padding_mode\": \"reflect\", \"decoder_num_layers\": 1, \"decoder_num_attention_heads\": 1,\n"
    " \"decoder_attention_head_dim\": 8, \"decoder_num_register_tokens\": 2, \"decoder_ffn_mult\": 2,\n"
    " \"decoder_rope_theta\": 100.0, \"decoder_rope_dim_ratio\": 0.75, \"decoder_norm_eps\": 1e-05,\n"
    " \"clip_length\": 17, \"token_drop\": 3,\n"
    " \"latents_mean\": [0.86, -0.96, 1.07, -0.51, -0.27, -1.37, -0.26, -0.27, -0.54, -0.05, 0.67, 0.2,\n"
    "                    -0.55, -0.4, -0.24, 0.26, -0.3, 0.21, -1.12, 0.36, -0.04, 0.26, 0.23, 0.71],\n"
    " \"latents_std\": [1.22, 1.28, 1.68, 1.75, 1.56, 2.19, 0.97, 1.06, 0.84, 0.77, 1.9, 0.95,\n"
    "                   0.8, 0.45, 0.72, 0.69, 2.96, 2.77, 3.05, 2.11, 3.28, 3.16, 2.28, 2.61]}\n";

static const char audio_vae_json[] =
    "{\"_class_name\": \"AutoencoderKLMiniMaxH3Audio\", \"encoder_dim\": 4, \"encoder_rates\": [2, 4, 4, 5, 5],\n"
    " \"latent_dim\": 128, \"latent_channels\": 32, \"decoder_dim\": 128, \"decoder_rates\": [5, 5, 2, 2, 2, 2, 2],\n"
    " \"decoder_kernel_sizes\": [9, 9, 4, 4, 4, 4, 4], \"num_attention_heads\": 2, \"resblock_kernel_sizes\": [3, 7],\n"
    " \"resblock_dilation_sizes\": [[1, 3], [1, 3]], \"sampling_rate\": 32000,\n"
    " \"latents_mean\": [-0.02, 0.39, -0.04, -0.29, 0.08, -0.36, 0.04, -0.02, -0.22, 0.18, 0.29, -0.08, -0.06, -0.37,\n"
    "                    -0.32, 0.59, -0.05, 0.01, -0.04, 0.1, -0.34, -0.31, -0.25, -0.03, 0.03, -0.21, -0.17, 0.32,\n"
    "                    -0.12, 0.44, -0.05, 0.4],\n"
    " \"latents_std\": [1.69, 2.76, 1.79, 1.68, 1.64, 2.78, 1.77, 1.62, 2.63, 1.85, 2.51, 1.81, 1.96, 1.67, 1.49, 3.3,\n"
    "                   1.95, 1.87, 1.83, 1.65, 1.62, 1.91, 1.57, 1.69, 1.83, 1.55, 1.93, 1.6, 1.72, 1.63, 1.87, 1.56]}\n";

static const char text_encoder_json[] =
    "{\"architectures\": [\"Qwen3VLForConditionalGeneration\"], \"model_type\": \"qwen3_vl\",\n"
    " \"image_token_id\": 151655, \"video_token_id\": 151656, \"vision_start_token_id\": 151652,\n"
    " \"vision_end_token_id\": 151653, \"tie_word_embeddings\": false,\n"
    " \"text_config\": {\"model_type\": \"qwen3_vl_text\", \"vocab_size\": 151936, \"hidden_size\": 16,\n"
    "   \"intermediate_size\": 48, \"num_hidden_layers\": 51, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,\n"
    "   \"head_dim\": 32, \"hidden_act\": \"silu\", \"rms_norm_eps\": 1e-06, \"attention_bias\": false,\n"
    "   \"max_position_embeddings\": 4096, \"rope_theta\": 5000000,\n"
    "   \"rope_scaling\": {\"rope_type\": \"default\", \"mrope_section\": [6, 5, 5], \"mrope_interleaved\": true},\n"
    "   \"dtype\": \"bfloat16\"},\n"
    " \"vision_config\": {\"model_type\": \"qwen3_vl\", \"depth\": 6, \"hidden_size\": 32, \"intermediate_size\": 48,\n"
    "   \"num_heads\": 2, \"hidden_act\": \"gelu_pytorch_tanh\", \"in_channels\": 3, \"patch_size\": 16,\n"
    "   \"temporal_patch_size\": 2, \"spatial_merge_size\": 2, \"out_hidden_size\": 16, \"num_position_embeddings\": 16,\n"
    "   \"deepstack_visual_indexes\": [1, 3, 4]}}\n";

static int write_text(const char *dir, const char *name, const char *text, h3_err *e) {
    char p[4096];
    snapshot_path(p, sizeof p, dir, name);
    int fd = h3_out_create(p); /* a new file inside the fresh temporary folder, never through a link */
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f && fd >= 0) close(fd);
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) return h3_fail(e, "%s: cannot write: %s", p, strerror(errno));
    return 0;
}

static int make_dir(const char *root, const char *sub, char *out, size_t cap, h3_err *e) {
    snapshot_path(out, cap, root, sub);
    if (mkdir(out, 0755) != 0 && errno != EEXIST) return h3_fail(e, "%s: cannot create: %s", out, strerror(errno));
    return 0;
}

static int copy_file(const char *src, const char *dst, h3_err *e) {
    FILE *in = fopen(src, "rb");
    if (!in) return h3_fail(e, "%s: cannot open: %s", src, strerror(errno));
    int fd = h3_out_create(dst);
    FILE *out = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!out) {
        if (fd >= 0) close(fd);
        fclose(in);
        return h3_fail(e, "%s: cannot create: %s", dst, strerror(errno));
    }
    char buf[1 << 16];
    size_t n;
    int bad = 0;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n) bad = 1;
    fclose(in);
    if (fclose(out) != 0 || bad) return h3_fail(e, "%s: write failed", dst);
    return 0;
}

static int copy_dir_files(const char *src, const char *dst, const char *const *names, h3_err *e) {
    for (int i = 0; names[i]; i++) {
        char a[4096], b[4096];
        if (copy_file(snapshot_path(a, sizeof a, src, names[i]), snapshot_path(b, sizeof b, dst, names[i]), e)) return -1;
    }
    return 0;
}

/* The resampling filter of the audio VAE (docs/model/audio_vae.md 4.6): Kaiser-windowed sinc, 12 taps. */
static void kaiser_sinc_filter(float *f) {
    const int K = 12, half = 6;
    double fc = 0.25, hw = 0.3, A = 2.285 * (half - 1) * M_PI * (4 * hw) + 7.95, beta = 0.1102 * (A - 8.7), sum = 0;
    double h[12];
    for (int n = 0; n < K; n++) {
        double r = (n - (K - 1) / 2.0) / ((K - 1) / 2.0), x = beta * sqrt(1 - r * r), i0 = 1, term = 1, i0b = 1, tb = 1;
        for (int k = 1; k < 30; k++) {
            term *= (x / 2 / k) * (x / 2 / k);
            i0 += term;
            tb *= (beta / 2 / k) * (beta / 2 / k);
            i0b += tb;
        }
        double t = n - half + 0.5, arg = 2 * fc * t;
        h[n] = 2 * fc * (i0 / i0b) * (arg == 0 ? 1 : sin(M_PI * arg) / (M_PI * arg));
        sum += h[n];
    }
    for (int n = 0; n < K; n++) f[n] = (float)(h[n] / sum);
}

static int has(const char *s, const char *sub) { return strstr(s, sub) != NULL; }
static int ends(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* Random values for one tensor, by what its name says it is (identity defaults hide nothing here,
 * but exploding activations would make the smoke test meaningless). */
static void init_tensor(const h3_expect *x, torch_rng *g, float *v, int64_t n) {
    torch_randn(g, v, n);
    int64_t fan_in = x->ndim >= 2 && x->shape[0] ? n / x->shape[0] : 1;
    if (ends(x->name, ".filter")) {
        float f[12];
        kaiser_sinc_filter(f);
        for (int64_t i = 0; i < n; i++) v[i] = f[i % 12];
    } else if (has(x->name, "zero_k_bias")) {
        for (int64_t i = 0; i < n; i++) v[i] = 0;
    } else if (ends(x->name, "weight_g")) {
        for (int64_t i = 0; i < n; i++) v[i] = fabsf(1.0f + 0.1f * v[i]);
    } else if (ends(x->name, ".alpha") || ends(x->name, ".beta")) {
        int logscale = has(x->name, "decoder");
        for (int64_t i = 0; i < n; i++) v[i] = logscale ? 0.1f * v[i] : fabsf(1.0f + 0.1f * v[i]);
    } else if (x->ndim == 1 && has(x->name, "norm") && ends(x->name, ".weight")) {
        for (int64_t i = 0; i < n; i++) v[i] = 1.0f + 0.1f * v[i];
    } else if (ends(x->name, "bias")) {
        for (int64_t i = 0; i < n; i++) v[i] = 0.05f * v[i];
    } else if (has(x->name, "embed_tokens") || has(x->name, "register_tokens")) {
        /* N(0, 1) */
    } else if (has(x->name, "pos_embed")) {
        for (int64_t i = 0; i < n; i++) v[i] *= 0.5f;
    } else if (x->ndim >= 2) {
        float s = 1.0f / sqrtf((float)fan_in);
        for (int64_t i = 0; i < n; i++) v[i] *= s;
    } else {
        for (int64_t i = 0; i < n; i++) v[i] *= 0.1f;
    }
}

static int write_shards(const char *dir, const h3_expect_list *l, int shards, const char *stem, torch_rng *g,
                        char *index, size_t index_cap, char *out, h3_err *e);

/* Writes the expected tensors of one component into `shards` files (+ an index when > 1). */
static int write_weights(const char *dir, const h3_expect_list *l, int shards, const char *stem, torch_rng *g,
                         h3_err *e) {
    enum { INDEX_CAP = 1 << 20 };
    char *index = malloc(INDEX_CAP), *out = malloc(INDEX_CAP + 32);
    int rc = index && out ? write_shards(dir, l, shards, stem, g, index, INDEX_CAP, out, e)
                          : h3_fail(e, "%s: out of memory", dir);
    free(index), free(out);
    return rc;
}

static int write_shards(const char *dir, const h3_expect_list *l, int shards, const char *stem, torch_rng *g,
                        char *index, size_t index_cap, char *out, h3_err *e) {
    size_t io = 0;
    uint64_t total = 0;
    int per = (l->n + shards - 1) / shards;
    io += (size_t)snprintf(index + io, index_cap - io, "{\"metadata\": {\"total_size\": TOTAL_PLACEHOLDER}, \"weight_map\": {");
    for (int s = 0; s < shards; s++) {
        char fname[256], path[4096];
        if (shards == 1) snprintf(fname, sizeof fname, "%s.safetensors", stem);
        else snprintf(fname, sizeof fname, "%s-%05d-of-%05d.safetensors", stem, s + 1, shards);
        st_writer *w = st_writer_new();
        for (int i = s * per; i < l->n && i < (s + 1) * per; i++) {
            const h3_expect *x = &l->v[i];
            int64_t n = 1;
            for (int d = 0; d < x->ndim; d++) n *= x->shape[d];
            float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
            void *raw = malloc((size_t)(n ? n : 1) * h3_dtype_size(x->dtype));
            init_tensor(x, g, v, n);
            h3_convert_from_f32(raw, x->dtype, v, (size_t)n);
            int rc = st_writer_add(w, x->name, x->dtype, x->ndim, x->shape, raw, e);
            free(v);
            free(raw);
            if (rc) {
                st_writer_free(w);
                return -1;
            }
            total += (uint64_t)n * h3_dtype_size(x->dtype);
            if (shards > 1 && io < index_cap - 512)
                io += (size_t)snprintf(index + io, index_cap - io, "%s\"%s\": \"%s\"", i ? ", " : "", x->name, fname);
        }
        int rc = st_writer_save(w, snapshot_path(path, sizeof path, dir, fname), "{\"format\":\"pt\"}", e);
        st_writer_free(w);
        if (rc) return -1;
    }
    if (shards == 1) return 0;
    if (io >= index_cap - 512) return h3_fail(e, "%s: index too large for make-tiny", dir);
    snprintf(index + io, index_cap - io, "}}\n");
    char num[32], *ph = strstr(index, "TOTAL_PLACEHOLDER");
    snprintf(num, sizeof num, "%llu", (unsigned long long)total);
    *ph = 0;
    snprintf(out, index_cap + 32, "%s%s%s", index, num, ph + strlen("TOTAL_PLACEHOLDER"));
    char iname[256];
    snprintf(iname, sizeof iname, "%s.safetensors.index.json", stem);
    return write_text(dir, iname, out, e);
}

static int build(const char *root, const char *skeleton, const char *dit_config_file, uint64_t seed, h3_err *e) {
    char d[4096], src[4096];
    torch_rng g;
    torch_rng_seed(&g, seed);
    if (write_text(root, "model_index.json", model_index_json, e)) return -1;
    static const char *const sched_names[2] = {"scheduler", "audio_scheduler"};
    static const char *const sched_json[2] = {"{\"_class_name\": \"MiniMaxH3Scheduler\", \"shift\": 12.0}\n",
                                              "{\"_class_name\": \"MiniMaxH3Scheduler\", \"shift\": 3.0}\n"};
    for (int i = 0; i < 2; i++)
        if (make_dir(root, sched_names[i], d, sizeof d, e) || write_text(d, "scheduler_config.json", sched_json[i], e)) return -1;
    static const char *const tok_files[] = {"vocab.json", "merges.txt", "tokenizer_config.json", NULL};
    static const char *const proc_files[] = {"preprocessor_config.json", "video_preprocessor_config.json", NULL};
    if (make_dir(root, "tokenizer", d, sizeof d, e) ||
        copy_dir_files(snapshot_path(src, sizeof src, skeleton, "tokenizer"), d, tok_files, e))
        return h3_fail_prefix(e, "make-tiny: the tokenizer comes from a release skeleton (--skeleton DIR)");
    if (make_dir(root, "processor", d, sizeof d, e) ||
        copy_dir_files(snapshot_path(src, sizeof src, skeleton, "processor"), d, proc_files, e))
        return h3_fail_prefix(e, "make-tiny: the processor configs come from a release skeleton (--skeleton DIR)");

    h3_expect_list l = {0};
    static const char *const dits[2] = {"transformer", "transformer_ref"};
    for (int i = 0; i < 2; i++) {
        dit_config c;
        /* --dit-config: transformer/ at that config's shapes (e.g. the release widths with fewer blocks: a converter
         * or loader benchmark), one shard per block so no shard is held whole in memory */
        const int given = i == 0 && dit_config_file;
        if (make_dir(root, dits[i], d, sizeof d, e) ||
            (given ? copy_file(dit_config_file, snapshot_path(src, sizeof src, d, "config.json"), e)
                   : write_text(d, "config.json", dit_json, e)) ||
            dit_config_load(d, &c, e) || dit_expected_tensors(&c, &l, e) ||
            write_weights(d, &l, given && c.num_layers > 2 ? c.num_layers : 2, "diffusion_pytorch_model", &g, e))
            goto fail;
        h3_expect_list_free(&l);
    }
    video_vae_config vc;
    if (make_dir(root, "vae", d, sizeof d, e) || write_text(d, "config.json", vae_json, e) ||
        video_vae_config_load(d, &vc, e) || video_vae_expected_tensors(&vc, &l, e) ||
        write_weights(d, &l, 2, "diffusion_pytorch_model", &g, e))
        goto fail;
    h3_expect_list_free(&l);
    audio_vae_config ac;
    if (make_dir(root, "audio_vae", d, sizeof d, e) || write_text(d, "config.json", audio_vae_json, e) ||
        audio_vae_config_load(d, &ac, e) || audio_vae_expected_tensors(&ac, &l, e) ||
        write_weights(d, &l, 1, "diffusion_pytorch_model", &g, e))
        goto fail;
    h3_expect_list_free(&l);
    te_config tc;
    if (make_dir(root, "text_encoder", d, sizeof d, e) || write_text(d, "config.json", text_encoder_json, e) ||
        text_encoder_config_load(d, &tc, e) || text_encoder_expected_tensors(&tc, &l, e) ||
        write_weights(d, &l, 2, "model", &g, e))
        goto fail;
    h3_expect_list_free(&l);
    return 0;
fail:
    h3_expect_list_free(&l);
    return -1;
}

static int remove_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw) {
    (void)sb, (void)type, (void)ftw;
    return remove(path);
}

int cmd_make_tiny(int argc, char **argv) {
    const char *dir = NULL, *skeleton = "tests/fixtures/skeleton", *dit_config_file = NULL;
    uint64_t seed = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: h3 make-tiny DIR [--seed N] [--skeleton SKELETON_DIR] [--dit-config CONFIG_JSON]\n"
                   "  Writes a tiny random-weight snapshot in the release layout to DIR (which must not exist).\n"
                   "  Tokenizer and processor files are copied from SKELETON_DIR [tests/fixtures/skeleton].\n"
                   "  Random weights: the pipeline runs end to end but generates noise.\n"
                   "  --dit-config: transformer/ at that config's shapes (e.g. the release's with fewer\n"
                   "  num_layers: a converter or loader benchmark), one shard per block.\n");
            return 0;
        } else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            if (h3_parse_u64(argv[++i], &seed))
                return cli_error("make-tiny: --seed expects an unsigned 64-bit integer, got '%s'", h3_quote(argv[i]));
        } else if (!strcmp(argv[i], "--skeleton") && i + 1 < argc) {
            skeleton = argv[++i];
        } else if (!strcmp(argv[i], "--dit-config") && i + 1 < argc) {
            dit_config_file = argv[++i];
        } else if (argv[i][0] == '-') {
            return cli_error("make-tiny: unknown option '%s'", argv[i]);
        } else if (!dir) {
            dir = argv[i];
        } else {
            return cli_error("make-tiny: one output folder expected, got '%s' too", argv[i]);
        }
    }
    if (!dir) return cli_error("make-tiny: the output folder DIR is required");
    if (snapshot_exists(dir)) return cli_error("make-tiny: %s already exists (refusing to overwrite)", dir);
    h3_err e = {{0}};
    /* assembled in a temporary folder beside DIR (outfile.h), renamed into place only when complete */
    h3_outfile *o = h3_outfile_open("make-tiny:", dir, H3_OUT_DIR, NULL, &e);
    if (!o) return cli_error("%s", e.msg);
    chmod(o->tmp, 0755);
    int rc = build(o->tmp, skeleton, dit_config_file, seed, &e);
    if (rc == 0) rc = h3_outfile_commit(o, 0, &e);
    if (rc != 0) {
        nftw(o->tmp, remove_entry, 16, FTW_DEPTH | FTW_PHYS); /* leave nothing half-written */
        h3_outfile_free(o);
        return cli_error("make-tiny: %s", e.msg);
    }
    h3_outfile_free(o);
    printf("wrote a tiny random-weight snapshot to %s (smoke tests only: random weights make noise)\n", dir);
    return 0;
}
