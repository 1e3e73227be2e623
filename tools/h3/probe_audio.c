/* Probe ops of the audio VAE (the probe contract, docs/probe.md):
 *   audio-decode  IN latents f32 [B,C,T] (raw, denormalized)  OUT sample f32 [B,1,hop*T],
 *                 sample_pre_clamp f32 [B,1,hop*T] (decoder.conv_post output, before clamp(-1, 1))
 *   audio-encode  IN sample f32 [B,1,N]                        OUT mean f32 [B,C,ceil(N/hop)],
 *                 logs f32 (posterior log-std, logs_proj; never used by the pipeline)
 * --model is a snapshot root (uses ROOT/audio_vae) or an audio_vae folder itself. */
#include <stdio.h>
#include <stdlib.h>

#include "io/snapshot.h"
#include "model/audio_vae.h"
#include "probe.h"

static int audio_vae_dir(probe_ctx *p, char *out, size_t cap, h3_err *e) {
    if (!p->model) return h3_fail(e, "--model is required");
    char cfg[4096];
    snapshot_path(out, cap, p->model, "audio_vae");
    snapshot_path(cfg, sizeof cfg, out, "config.json");
    if (snapshot_exists(cfg)) return 0;
    snapshot_path(cfg, sizeof cfg, p->model, "config.json");
    if (snapshot_exists(cfg)) {
        snprintf(out, cap, "%s", p->model);
        return 0;
    }
    return h3_fail(e, "--model %s: no audio_vae/config.json (nor config.json) found", p->model);
}

static audio_vae *open_model(probe_ctx *p, int parts, h3_err *e) {
    char dir[4096];
    if (audio_vae_dir(p, dir, sizeof dir, e)) return NULL;
    if (p->bf16) {
        /* docs/model/audio_vae.md 8: the release runs this model in fp32 only; there is no bf16 mode to reproduce */
        h3_fail(e, "--precision bf16: the audio VAE runs in fp32 only (as the reference keeps it)");
        return NULL;
    }
    return audio_vae_load(p->be, dir, parts, e);
}

int probe_audio_decode(probe_ctx *p, h3_err *e) {
    h3_tensor *z = NULL;
    audio_vae *m = NULL;
    float *out = NULL, *pre = NULL;
    int rc = -1;
    if (probe_input(p, "latents", H3_F32, 3, &z, e)) goto done;
    if (!(m = open_model(p, AVAE_DECODER, e))) goto done;
    const audio_vae_config *c = audio_vae_get_config(m);
    int64_t B = z->shape[0], C = z->shape[1], T = z->shape[2];
    if (C != c->latent_channels) {
        h3_fail(e, "input 'latents': dimension 1 is %lld, the audio VAE has latent_channels %d", (long long)C,
                c->latent_channels);
        goto done;
    }
    if (B < 1 || B > 64 || T < 1) {
        h3_fail(e, "input 'latents': need 1 <= B <= 64 and T >= 1, got B %lld, T %lld", (long long)B, (long long)T);
        goto done;
    }
    int64_t n = B * T * c->hop;
    out = malloc((size_t)n * sizeof(float));
    pre = malloc((size_t)n * sizeof(float));
    if (!out || !pre) {
        h3_fail(e, "out of memory for %lld output samples", (long long)n);
        goto done;
    }
    if (audio_vae_decode(m, z->data, (int)B, T, 0, out, pre, e)) goto done;
    int64_t shape[3] = {B, 1, T * c->hop};
    if (probe_output_f32(p, "sample", out, 3, shape, e) || probe_output_f32(p, "sample_pre_clamp", pre, 3, shape, e))
        goto done;
    rc = 0;
done:
    free(out);
    free(pre);
    audio_vae_free(m);
    h3_tensor_free(z);
    return rc;
}

int probe_audio_encode(probe_ctx *p, h3_err *e) {
    h3_tensor *x = NULL;
    audio_vae *m = NULL;
    float *mean = NULL, *logs = NULL;
    int rc = -1;
    if (probe_input(p, "sample", H3_F32, 3, &x, e)) goto done;
    int64_t B = x->shape[0], S = x->shape[2];
    if (x->shape[1] != 1) {
        h3_fail(e, "input 'sample': must be [B, 1, N] mono items (stereo = 2 batch items), got %lld channels",
                (long long)x->shape[1]);
        goto done;
    }
    if (B < 1 || B > 64 || S < 1) {
        h3_fail(e, "input 'sample': need 1 <= B <= 64 and N >= 1, got B %lld, N %lld", (long long)B, (long long)S);
        goto done;
    }
    if (!(m = open_model(p, AVAE_ENCODER, e))) goto done;
    const audio_vae_config *c = audio_vae_get_config(m);
    int64_t N = (S + c->hop - 1) / c->hop, n = B * c->latent_channels * N;
    mean = malloc((size_t)n * sizeof(float));
    logs = malloc((size_t)n * sizeof(float));
    if (!mean || !logs) {
        h3_fail(e, "out of memory");
        goto done;
    }
    if (audio_vae_encode(m, x->data, (int)B, S, 0, mean, logs, e)) goto done;
    int64_t shape[3] = {B, c->latent_channels, N};
    if (probe_output_f32(p, "mean", mean, 3, shape, e) || probe_output_f32(p, "logs", logs, 3, shape, e)) goto done;
    rc = 0;
done:
    free(mean);
    free(logs);
    audio_vae_free(m);
    h3_tensor_free(x);
    return rc;
}
