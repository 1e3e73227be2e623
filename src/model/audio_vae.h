/* MiniMax-H3 audio VAE (`AutoencoderKLMiniMaxH3Audio`, docs/model/audio_vae.md): a DAC encoder with a
 * causal-attention projection (waveform -> 32-channel latents, hop 800 at 32 kHz) and a BigVGAN decoder
 * (latents -> waveform). The model is mono: stereo is two batch items (B = 2: item 0 left, item 1 right).
 * Everything runs in fp32 (docs/model/audio_vae.md 8). The per-channel latent (de)normalization is the pipeline's (docs/model/audio_vae.md 7)
 * and lives in the helpers at the end, not inside decode/encode. */
#ifndef H3_AUDIO_VAE_H
#define H3_AUDIO_VAE_H

#include <stddef.h>
#include <stdint.h>

#include "../backend/backend.h"
#include "../core/error.h"
#include "../io/expect.h"

#define AVAE_MAX_STAGES  8   /* encoder blocks / decoder upsampling stages */
#define AVAE_MAX_KERNELS 4   /* parallel AMP blocks per decoder stage */
#define AVAE_MAX_DIL     4   /* dilations per AMP block */
#define AVAE_MAX_LATENT  256 /* latent_channels */

typedef struct audio_vae_config {
    int   encoder_dim;                                /* 64 */
    int   n_encoder_rates;
    int   encoder_rates[AVAE_MAX_STAGES];             /* 2,4,4,5,5 */
    int   latent_dim;                                 /* 2048 */
    int   latent_channels;                            /* 32 */
    int   num_attention_heads;                        /* 8 */
    int   decoder_dim;                                /* 1024 */
    int   n_decoder_rates;
    int   decoder_rates[AVAE_MAX_STAGES];             /* 5,5,2,2,2,2,2 */
    int   decoder_kernel_sizes[AVAE_MAX_STAGES];      /* 9,9,4,4,4,4,4 */
    int   n_resblocks;
    int   resblock_kernel_sizes[AVAE_MAX_KERNELS];    /* 3,7,11 */
    int   n_dilations[AVAE_MAX_KERNELS];
    int   resblock_dilation_sizes[AVAE_MAX_KERNELS][AVAE_MAX_DIL]; /* (1,3,5) x 3 */
    int   sampling_rate;                              /* 32000 */
    int   hop;                                        /* prod(encoder_rates) = 800 */
    int   has_latent_stats;                           /* latents_mean/std present */
    float latents_mean[AVAE_MAX_LATENT];              /* JSON doubles rounded to float (docs/model/audio_vae.md 2) */
    float latents_std[AVAE_MAX_LATENT];
} audio_vae_config;

/* dir: an audio_vae folder (reads dir/config.json). Checks the constructor's rules and the implicit
 * ones of docs/model/audio_vae.md 2 (rates multiply to the same hop, divisibility, odd resblock kernels, K - u even). */
int audio_vae_config_load(const char *dir, audio_vae_config *cfg, h3_err *e);
/* The same from a parsed config.json (path names it in messages); every field in a plausible range. Fuzzed. */
/* The weights the loader opens in dir (the diffusers file, its index, else dir itself); returns out. */
const char *audio_vae_weights_path(const char *dir, char *out, size_t cap);
struct json_t;
int audio_vae_config_parse(const struct json_t *root, const char *path, audio_vae_config *cfg, h3_err *e);
/* Every tensor (all F32) of diffusion_pytorch_model.safetensors the config implies (docs/model/audio_vae.md 3.3). */
int audio_vae_expected_tensors(const audio_vae_config *cfg, h3_expect_list *out, h3_err *e);

/* Latents of context each side of a chunk that make chunked decoding (or chunked encoder-trunk
 * runs) structurally identical to the whole-clip run (docs/model/audio_vae.md 9); derived from the config, conservative
 * (release: decoder 32 (29 is the exact bound), encoder 14). */
int64_t audio_vae_decode_margin(const audio_vae_config *cfg);
int64_t audio_vae_encode_margin(const audio_vae_config *cfg);

enum { AVAE_DECODER = 1, AVAE_ENCODER = 2, AVAE_ALL = 3 };

typedef struct audio_vae audio_vae;

/* Loads the parts asked for from an audio_vae folder: weight-norm folded once (docs/model/audio_vae.md 3.2), Snake
 * parameters turned into (frequency, 1/magnitude) pairs, everything fp32 in backend memory. The file
 * is closed before returning. */
audio_vae *audio_vae_load(h3_backend *be, const char *dir, int parts, h3_err *e);
/* The same model with random weights at cfg's shapes (no file; values by tensor role, as make-tiny's):
 * for benchmarks of the whole pipeline without a checkpoint. */
audio_vae *audio_vae_new_random(h3_backend *be, const audio_vae_config *cfg, int parts, uint64_t seed, h3_err *e);
void       audio_vae_free(audio_vae *m);
const audio_vae_config *audio_vae_get_config(const audio_vae *m);

/* Decoder (docs/model/audio_vae.md 5). z: host [B, latent_channels, T] raw (denormalized) latents. sample: host
 * [B, hop*T] in [-1, 1]; pre_clamp: host [B, hop*T] conv_post output, or NULL.
 * chunk > 0: decode `chunk` latents at a time with audio_vae_decode_margin latents of context each
 * side (memory bounded by chunk + 2*margin latents); 0: the whole clip at once, as the reference. */
int audio_vae_decode(audio_vae *m, const float *z, int B, int64_t T, int64_t chunk, float *sample,
                     float *pre_clamp, h3_err *e);

/* Encoder (docs/model/audio_vae.md 6). wave: host [B, S] mono items. Right-pads to hop*ceil(S/hop) with zeros. mean:
 * host [B, latent_channels, ceil(S/hop)] posterior mean; logs: the same shape (log-std), or NULL.
 * chunk > 0: run the conv trunk `chunk` latents at a time with audio_vae_encode_margin latents of
 * context (docs/model/audio_vae.md 9.2); the causal attention always sees the whole clip. 0: one shot. */
int audio_vae_encode(audio_vae *m, const float *wave, int B, int64_t S, int64_t chunk, float *mean, float *logs,
                     h3_err *e);

/* Pipeline helpers (docs/model/audio_vae.md 7), in place on host [B, latent_channels, T]:
 * denormalize z = z_norm * std[c] + mean[c] (before decode); normalize (x - mean[c]) / std[c] (after encode).
 * Fail when the config has no latents_mean/std. */
int audio_vae_denormalize(const audio_vae_config *cfg, float *z, int B, int64_t T, h3_err *e);
int audio_vae_normalize(const audio_vae_config *cfg, float *z, int B, int64_t T, h3_err *e);

/* DiT rows <-> VAE latents (docs/model/audio_vae.md 7.1): rows [B*T, C] channel-major (first T rows = item 0, time order)
 * <-> z [B, C, T]. */
void audio_vae_rows_to_latents(const float *rows, int B, int64_t T, int C, float *z);
void audio_vae_latents_to_rows(const float *z, int B, int64_t T, int C, float *rows);

#endif
