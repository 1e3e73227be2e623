/* Video VAE decoder: time and peak memory of one release-shape tile (256 x 256 px x 7 latents =
 * 1797 tokens, width 2048, 32 heads, FFN 8192) with random weights, and the decoder workspace the
 * implementation allocates for whole canvases (computed from its buffer sizes).
 *
 *   build-x/bench/bench_video_vae [layers=1] [dir=/tmp/h3_vvae_bench]
 *
 * Writes a release-shape vae/ folder with `layers` decoder blocks (random F32 weights, ~270 MB per
 * block) into dir, decodes one clip of one tile (L = 7, 16 x 16 latents), prints wall time, the
 * per-layer time and ru_maxrss; activations do not depend on the depth (buffers are reused per
 * block), so the full 36-block decoder needs the same activations plus its 9.69 GB of weights. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <time.h>

#include "io/safetensors.h"
#include "model/video_vae.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double maxrss_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024.0;
}

static int write_model(const char *dir, int layers, h3_err *e) {
    video_vae_config c;
    if (video_vae_config_load("tests/fixtures/skeleton/vae", &c, e) != 0) return -1;
    json_error_t je;
    json_t *cfg = json_load_file("tests/fixtures/skeleton/vae/config.json", 0, &je);
    if (!cfg) return h3_fail(e, "skeleton config: %s", je.text);
    json_object_set_new(cfg, "decoder_num_layers", json_integer(layers));
    char path[1024];
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_dump_file(cfg, path, JSON_INDENT(2));
    json_decref(cfg);
    c.dec_layers = layers;
    h3_expect_list l = {0};
    if (video_vae_expected_tensors(&c, &l, e) != 0) return -1;
    st_writer *w = st_writer_new();
    uint64_t s = 12345;
    int rc = 0;
    for (int i = 0; i < l.n && rc == 0; i++) {
        if (strncmp(l.v[i].name, "decoder.", 8) && strncmp(l.v[i].name, "post_quant", 10)) continue;
        int64_t n = 1;
        for (int d = 0; d < l.v[i].ndim; d++) n *= l.v[i].shape[d];
        float *buf = malloc((size_t)n * sizeof(float));
        float scale = l.v[i].ndim >= 2 ? 1.0f / sqrtf((float)l.v[i].shape[l.v[i].ndim - 1]) : 0.2f;
        for (int64_t k = 0; k < n; k++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            buf[k] = ((float)((s >> 40) * (1.0 / 8388608.0)) - 1.0f) * scale * 1.7f;
        }
        rc = st_writer_add(w, l.v[i].name, H3_F32, l.v[i].ndim, l.v[i].shape, buf, e);
        free(buf);
    }
    snprintf(path, sizeof path, "%s/diffusion_pytorch_model.safetensors", dir);
    if (rc == 0) rc = st_writer_save(w, path, NULL, e);
    st_writer_free(w);
    h3_expect_list_free(&l);
    return rc;
}

int main(int argc, char **argv) {
    int layers = argc > 1 ? atoi(argv[1]) : 1;
    const char *dir = argc > 2 ? argv[2] : "/tmp/h3_vvae_bench";
    h3_err e = {{0}};
    video_vae_config c;
    if (video_vae_config_load("tests/fixtures/skeleton/vae", &c, &e) != 0) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    video_vae_tiling t = video_vae_tiling_default();
    const struct { const char *name; int64_t H, W; } canvases[] = {
        {"256x256 (one tile)", 256, 256}, {"544x960 (W x H)", 960, 544}, {"1344x768 (W x H)", 768, 1344}};
    printf("decoder workspace from buffer sizes (tile buffers + 22 chunk frames + 5 pending frames + strips):\n");
    for (int i = 0; i < 3; i++) {
        int64_t b = video_vae_decode_workspace_bytes(&c, canvases[i].H / 16, canvases[i].W / 16, &t);
        int64_t frame = 3 * canvases[i].H * canvases[i].W * 4;
        printf("  %-20s %8.1f MB   (+ %.1f MB per output frame if the caller keeps fp32 frames: %.0f MB for 124)\n",
               canvases[i].name, b / 1e6, frame / 1e6, 124.0 * frame / 1e6);
    }
    /* the writer holds the whole model in memory: write it in a child so the peak RSS below is the
     * decoder's alone */
    pid_t pid = fork();
    if (pid == 0) {
        if (write_model(dir, layers, &e) != 0) {
            fprintf(stderr, "%s\n", e.msg);
            _exit(1);
        }
        _exit(0);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "writing the bench model failed\n");
        return 1;
    }
    h3_backend *be = h3_backend_new(H3_BACKEND_CPU, 0, &e);
    double rss0 = maxrss_mb();
    video_vae *v = video_vae_new(be, dir, VIDEO_VAE_DECODER, &e);
    if (!v) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    const int64_t L = 7, h = 16, w = 16, T = video_vae_decoded_frames(&c, L, &e);
    float *z = malloc((size_t)(24 * L * h * w) * sizeof(float));
    for (int64_t i = 0; i < 24 * L * h * w; i++) z[i] = (float)((i * 7919) % 1000) / 500.0f - 1.0f;
    float *out = malloc((size_t)(3 * T * 256 * 256) * sizeof(float));
    double t0 = now_s();
    if (video_vae_decode(v, z, L, h, w, &t, out, &e) != 0) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    double dt = now_s() - t0;
    double weights_mb = 0;
    {
        char path[1024];
        snprintf(path, sizeof path, "%s/diffusion_pytorch_model.safetensors", dir);
        struct stat st;
        if (stat(path, &st) == 0) weights_mb = st.st_size / 1e6 * (1e6 / 1048576.0);
    }
    printf("one tile, %d decoder block(s): %.2f s (%.2f s per block incl. proj), peak RSS %.0f MiB "
           "(before load %.0f MiB, weights file %.0f MiB, output %.0f MiB)\n",
           layers, dt, dt / layers, maxrss_mb(), rss0, weights_mb, 3.0 * T * 256 * 256 * 4 / 1048576.0);
    printf("-> activations + workspace ~ %.0f MiB (peak RSS - before - weights - output)\n",
           maxrss_mb() - rss0 - weights_mb - 3.0 * T * 256 * 256 * 4 / 1048576.0);
    free(z);
    free(out);
    video_vae_free(v);
    h3_backend_free(be);
    return 0;
}
