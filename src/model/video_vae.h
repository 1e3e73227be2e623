/* MiniMax-H3 video VAE (diffusers AutoencoderKLMiniMaxH3; docs/model/video_vae.md):
 * a causal 3-D CNN encoder (pixels -> posterior moments) and a ViT decoder with register tokens and
 * partial 3-axis RoPE (latents -> pixels), driven exactly like the reference: 17-frame clips with
 * token drop on encode, 7-latent clips with a 5-frame cross-fade on decode, and 256/64 spatial tiles
 * with linear blending in both directions.
 *
 * Tensors on the host API are fp32, batch 1, channel-major: pixels [3, T, H, W] in ImageNet-normalized
 * space (docs/model/video_vae.md 10.1), latents [C, L, h, w] in raw VAE space (docs/model/video_vae.md 10.2). Compute runs on backend ops;
 * decode streams clip by clip and tile by tile, so its memory does not grow with the video length
 * (only the caller's output does, and video_vae_decode_stream hands frames out one at a time). */
#ifndef H3_VIDEO_VAE_H
#define H3_VIDEO_VAE_H

#include <stdint.h>

#include "../backend/backend.h"
#include "../core/error.h"
#include "../io/expect.h"
#include "video_vae_tiling.h"

#define VVAE_MAX_LEVELS 8
#define VVAE_MAX_LATENT 256

typedef struct video_vae_config {
    int   in_channels, out_channels, latent_channels;  /* 3, 3, 24 */
    int   num_levels;                                  /* len(block_out_channels) = 6 */
    int   block_out_channels[VVAE_MAX_LEVELS];         /* 128 256 256 512 512 1024 */
    int   layers_per_block;                            /* 2 */
    int   spatial_factors[VVAE_MAX_LEVELS];            /* 2 2 2 2 1 1 */
    int   temporal_factors[VVAE_MAX_LEVELS];           /* 1 2 2 1 1 1 */
    int   norm_num_groups;                             /* 32 */
    float norm_eps;                                    /* 1e-6 */
    int   reflect;                                     /* spatial_padding_mode "reflect" (1) or "zeros" (0) */
    int   dec_layers, dec_heads, dec_head_dim;         /* 36, 32, 64 */
    int   dec_registers, dec_ffn_mult;                 /* 4, 4 */
    float rope_theta, rope_dim_ratio, dec_norm_eps;    /* 100, 0.75, 1e-5 */
    int   clip_length, token_drop;                     /* 17, 3 */
    float latents_mean[VVAE_MAX_LATENT], latents_std[VVAE_MAX_LATENT];
    /* derived (docs/model/video_vae.md section 1) */
    int   S, R;            /* spatial / temporal compression: 16, 4 */
    int   P, K, O, FO, CF; /* frame_pre_padding 3, tokens_chunk_size 5, token_overlap 2, frame_overlap 5, 20 */
    int   dim, rope_dim, patch_dim, ffn_inner; /* 2048, 48, 3072, 8192 */
} video_vae_config;

/* Reads DIR/config.json (DIR = the `vae/` folder) and derives the constants. */
int video_vae_config_load(const char *vae_dir, video_vae_config *cfg, h3_err *e);
/* The same from a parsed config.json (path names it in messages); every field in a plausible range. Fuzzed. */
struct json_t;
int video_vae_config_parse(const struct json_t *root, const char *path, video_vae_config *cfg, h3_err *e);
/* Every tensor the config implies (diffusers names, all F32; docs/model/video_vae.md Appendix A). */
int video_vae_expected_tensors(const video_vae_config *cfg, h3_expect_list *out, h3_err *e);


/* parts bits. VIDEO_VAE_BF16: the decoder's bf16 mode (docs/model/video_vae.md 11): the transformer blocks' q/k/v/out and FFN
 * matrices are converted to BF16 at load and run with H3_BF16_OUT (bf16 GEMM inputs and outputs, fp32
 * accumulation; on CUDA the tensor-core GEMM and the bf16 attention); proj_out is an fp16 GEMM on the fp16-rounded
 * norm_out output (F16 weights, fp32 accumulation and output; H3_VAE_PROJ_OUT=fp32 keeps the fp32 SGEMM); residual
 * stream, norms, RoPE tables, softmax, blends, post_quant_conv, proj_in and norm_out stay fp32. The encoder ignores it.
 * VIDEO_VAE_FP8 (`--vae-quant fp8`, docs/fast.md 7): the bf16 mode with the four block GEMMs (q|k|v, to_out,
 * the FFN's value|gate and ff.net.2) as FP8 W8A8 (ops_linear.h: per-token activation and per-channel weight scales,
 * the bias in the epilogue); implies VIDEO_VAE_BF16 and the tile-batched path. An opt-in fast mode: not the
 * reference's arithmetic. */
enum { VIDEO_VAE_ENCODER = 1, VIDEO_VAE_DECODER = 2, VIDEO_VAE_BF16 = 4, VIDEO_VAE_FP8 = 8 };

typedef struct video_vae video_vae;

/* Opens DIR (the `vae/` folder: config.json + safetensors, sharded with an index or single), checks
 * every tensor the parts need against video_vae_expected_tensors, and makes the weights resident on
 * `be` (CPU: zero-copy views into the mapping). parts: VIDEO_VAE_ENCODER | VIDEO_VAE_DECODER, plus
 * VIDEO_VAE_BF16 for the bf16 decoder (its converted matrices are owned copies). */
video_vae *video_vae_new(h3_backend *be, const char *vae_dir, int parts, h3_err *e);
void       video_vae_free(video_vae *v);
/* The same with random weights (no files; made in backend memory), deterministic in seed: benchmarks. */
video_vae *video_vae_new_random(h3_backend *be, const video_vae_config *cfg, int parts, uint64_t seed, h3_err *e);
const video_vae_config *video_vae_get_config(const video_vae *v);

/* Decoded frame count for L latent frames (docs/model/video_vae.md 8.3); -1 with e when the reference cannot decode L
 * (L < 3 for the released geometry). */
int64_t video_vae_decoded_frames(const video_vae_config *cfg, int64_t L, h3_err *e);
/* Latent frame count of encode() for T pixel frames (docs/model/video_vae.md 6): 1 for T = 1, else clips * K - token_drop. */
int64_t video_vae_encoded_frames(const video_vae_config *cfg, int64_t T);

/* Receives decoded frames in order: frame [3, H, W] fp32 (normalized pixel space), valid during the call. */
typedef int (*video_vae_frame_sink)(void *ctx, int64_t index, const float *frame, h3_err *e);

/* Decodes z [C, L, h, w] (raw latent space) clip by clip and tile by tile, handing each finished frame
 * to sink. Peak memory: one decoder tile's activations plus 22 + 5 frames of H x W x 3 (docs/model/video_vae.md 8.3). */
int video_vae_decode_stream(video_vae *v, const float *z, int64_t L, int64_t h, int64_t w,
                            const video_vae_tiling *tiling, video_vae_frame_sink sink, void *ctx, h3_err *e);
/* The same on n ranks (docs/parallel.md: --parallel): vs[r] the same decoder on rank r's backend (loaded the same
 * way); the one-rank plan's units (tiles, or batches of tiles) are dealt round-robin to the ranks and their host
 * part runs here in order: the frames are bit-identical to video_vae_decode_stream(vs[0]). n = 1 is that call. */
int video_vae_decode_stream_parallel(video_vae *const *vs, int n, const float *z, int64_t L, int64_t h, int64_t w,
                                     const video_vae_tiling *tiling, video_vae_frame_sink sink, void *ctx, h3_err *e);
/* bf16 mode: the decoder runs up to max_tiles equally shaped tiles (of one or more clips) as one stack of rows
 * through every linear (attention per tile; docs/model/video_vae.md 13), the next batch computing while the previous one is
 * downloaded and stitched. 0 (default): as many as fit ~400 MB of output per batch (18 tiles of 256 x 256 x 7
 * latents), at most 32, in equal batches (two or more from 4 jobs on); 1: the per-tile path (one tile at a time).
 * The environment variable H3_VAE_BATCH sets the initial value (e.g. H3_VAE_BATCH=1). No effect in fp32 mode
 * (always per tile). */
void video_vae_set_decode_batch(video_vae *v, int max_tiles);
/* Where the decoder's diagnostics go (H3_VAE_PROFILE's per-decode line, docs/tuning.md): one line per call, kind 0,
 * as request.h's log. NULL (the default): nowhere. */
void video_vae_set_log(video_vae *v, void (*log)(void *user, int kind, const char *line), void *user);

/* Bytes of one of the two pinned download slots the tile-batched (bf16) decoder of h x w latents takes from the
 * backend (h3_host_alloc), with H3_VAE_BATCH as at model creation; 0 when the per-tile path would run. A
 * pipeline can have the backend make them ahead of time (h3_host_prefetch) while other work runs. */
size_t video_vae_download_slot_bytes(const video_vae_config *c, int64_t h, int64_t w, const video_vae_tiling *tiling);
/* Same, into out [3, T, S h, S w] with T = video_vae_decoded_frames(L). */
int video_vae_decode(video_vae *v, const float *z, int64_t L, int64_t h, int64_t w, const video_vae_tiling *tiling,
                     float *out, h3_err *e);

/* Encodes x [3, T, H, W] (H, W multiples of the spatial ratio) into moments [2C, Tl, H/S, W/S]
 * (channels 0..C-1 mean, C..2C-1 raw logvar) with Tl = video_vae_encoded_frames(T). */
int video_vae_encode(video_vae *v, const float *x, int64_t T, int64_t H, int64_t W, const video_vae_tiling *tiling,
                     float *moments, h3_err *e);

/* DiagonalGaussianDistribution (docs/model/video_vae.md 9): mean = moments[0:C], logvar = clamp(moments[C:2C], -30, 20);
 * n = Tl * h * w values per channel. mean/logvar: [C, n]. */
void video_vae_posterior(const video_vae_config *cfg, const float *moments, int64_t n, float *mean, float *logvar);
/* z <- mean + exp(0.5 logvar) * eps (eps [C, n], e.g. torch.randn with seed 42, docs/model/video_vae.md 9.1 step 3). */
void video_vae_posterior_sample(const video_vae_config *cfg, const float *mean, const float *logvar,
                                const float *eps, int64_t n, float *z);

/* Latent normalization (docs/model/video_vae.md 10.2), in place on z [C, n]: normalize (z - mean_c) / std_c after encoding;
 * denormalize z * std_c + mean_c before decoding. */
void video_vae_normalize_latents(const video_vae_config *cfg, float *z, int64_t n);
void video_vae_denormalize_latents(const video_vae_config *cfg, float *z, int64_t n);

/* Pixel normalization (docs/model/video_vae.md 10.1), in place on x [3, n]: from [0,1] to the VAE's ImageNet space
 * ((p - m_c) / s_c), and back with v * s_c + m_c clamped to [0, 1]. */
void video_vae_normalize_pixels(float *x, int64_t n);
void video_vae_denormalize_pixels(float *x, int64_t n);
/* video_vae_denormalize_pixels of x [3, n] written as interleaved [n, 3] (x is left as it is). */
void video_vae_pixels_to_hwc(const float *x, float *out, int64_t n);
/* uint8 RGB [3, n] -> normalized fp32 (p / 255 - m_c) / s_c, as the reference divides first. */
void video_vae_pixels_from_u8(const uint8_t *p, float *x, int64_t n);

/* Bytes the decoder allocates besides weights for one clip of h x w latents (backend tile buffers +
 * host chunk buffers), from the buffer sizes of this implementation. */
int64_t video_vae_decode_workspace_bytes(const video_vae_config *cfg, int64_t h, int64_t w,
                                         const video_vae_tiling *tiling);

#endif
