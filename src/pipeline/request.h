/* A generation request as the user states it (`h3 generate` flags), and its validation.
 * Geometry and duration rules follow the diffusers pipeline (docs/model/dit.md 5, 10; docs/model/features.md 1-2). */
#ifndef H3_REQUEST_H
#define H3_REQUEST_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#include "../core/error.h"
#include "../model/dit_lora.h"

#define H3_MAX_REFS 12

typedef enum h3_task { H3_T2VA = 0, H3_FL2VA, H3_REF2VA } h3_task;
enum { H3_RESIDENT_OFF = 0, H3_RESIDENT_ALL = 1, H3_RESIDENT_AUTO = 2 };

typedef enum h3_ref_kind {
    H3_REF_IMAGE = 0,       /* --ref-image PATH */
    H3_REF_SILENT_VIDEO,    /* --ref-silent-video PATH */
    H3_REF_VIDEO,           /* --ref-video PATH (frames + the file's own audio) */
    H3_REF_VIDEO_AUDIO,     /* --ref-video-audio VIDEO AUDIO */
    H3_REF_AUDIO,           /* --ref-audio PATH */
} h3_ref_kind;

typedef struct h3_ref {
    h3_ref_kind kind;
    const char *path;
    const char *audio_path; /* H3_REF_VIDEO_AUDIO only */
} h3_ref;

/* One preview image (--show, docs/model/features.md 2): the representative frame after a denoising pass, or a final frame. */
typedef struct h3_preview {
    const float *rgb;           /* [height][width][3] in [0, 1], the output canvas */
    int          width, height;
    int          pass, passes;  /* after pass `pass` (1-based) of `passes`; pass 0: a final frame */
    int64_t      frame;         /* its frame index in the video */
} h3_preview;

typedef struct h3_request {
    const char *model_dir;
    const char *prompt;
    const char *output;        /* MP4 path; "" = no MP4 */
    const char *frames_dir;    /* PNG frames, or NULL */
    const char *wav;           /* WAV audio, or NULL */
    const char *dump_latents;  /* safetensors with the final latents/frames/audio, or NULL */
    int         width, height; /* 0 = default canvas */
    int         render_width, render_height; /* 0 = the output canvas; else the model's (docs/model/features.md 5.6) */
    int         frames;        /* requested (before alignment), 0 = unset */
    double      seconds;       /* 0 = unset */
    int         steps;         /* denoising passes (model evaluations with --reuse 1) */
    int         reuse;         /* --reuse R, 1..3 (docs/model/features.md 5.2) */
    int         layers;        /* --layers L, 35..50 DiT blocks kept (docs/model/features.md 5.3) */
    int         core_reuse;    /* --core-reuse C, 1..6 (docs/model/features.md 5.4) */
    uint64_t    seed;
    const char *first_frame, *last_frame;
    h3_ref      refs[H3_MAX_REFS];
    int         nrefs;
    int         profile;
    int         bf16;          /* --precision bf16 (default) vs fp32 */
    int         quant_fp8;     /* --quant fp8: the DiT blocks' linears as FP8 W8A8 (docs/fp8.md); bf16 only */
    const char *transformer_file; /* --transformer: a single-file transformer (docs/checkpoints.md), NULL: the snapshot's */
    dit_lora_spec loras[DIT_LORA_MAX]; /* --lora / --lora-ref (docs/lora.md): merged into the DiT at load, in order */
    int         n_loras;
    double      shift_video, shift_audio; /* --shift VIDEO[:AUDIO]: the schedulers' shifts, 0 = the snapshot's configs */
    const char *x264_preset;   /* --x264-preset: the MP4's x264 preset; NULL = "fast", or "veryfast" under --preset fast */
    int         preview_width; /* previews wanted at most this wide (0: the canvas); <= half: half-size previews (gen_preview.c) */
    int         step_update;   /* --step-update: 0 euler (diffusers' blend), 1 training_euler (LightX2V, docs/lora.md) */
    int         quant_int8;    /* --quant int8: INT8 W8A8, quantized at load (docs/int8.md); bf16, CPU and CUDA */
    int         int8_fc2_groups; /* --int8-fc2-groups: the FFN down input scaled per 1024 channels (docs/int8.md) */
    int         vae_fp8;       /* --vae-quant fp8: the video decoder's block GEMMs as FP8 W8A8 (docs/fast.md); bf16 only */
    int         preset_fast;   /* --preset fast chose (some of) quant / attention / vae_quant: said in the log */
    int         resident;      /* sessions: H3_RESIDENT_ALL (--resident) keeps each phase's model for the next generation,
                                  H3_RESIDENT_AUTO (a session's default, docs/model/features.md 3) the transformer and the video
                                  decoder when the GPU has their room (generate.c resident_auto_room); H3_RESIDENT_OFF: none */
    int         ssd_streaming; /* --ssd-streaming (docs/model/features.md 7.3): the DiT's main blocks streamed from host memory
                                  through two backend slots (automatic on CUDA when the resident model does not fit) */
    int         attention_sage8; /* --attention sage8 (docs/fast.md): the DiT's attention with 8-bit products; bf16 only */
    int         token_reduction; /* --token-reduction (docs/model/features.md 5.5): pooled target-video tokens in middle blocks */
    int         ref_image_size; /* --ref-image-size: 0 reference (2048 short edge, as diffusers), 1 match, 2 max
                                   (cond_ref_size, docs/model/features.md 1.3) */
    int         reference_rope; /* --use-reference-rope: the released spatial RoPE at a 256x256 render canvas, where it
                                   is otherwise halved (docs/model/features.md 5.7) */
    int         cuda;          /* --backend cuda */
    int         device;        /* --device N: the CUDA device index */
    int         threads;
    int         parallel;      /* --parallel N (docs/parallel.md): the DiT on N ranks (CPU threads or GPUs device..device+N-1),
                                  1..8; 0 is 1 */
    int         random_weights; /* --random-weights: weights made from the configs (benchmarks), t2va only */
    /* --show: called with one representative frame after every denoising pass (decoded from the current latents by
     * a preview video decoder kept during the denoising) and then with every final frame; nonzero cancels the
     * generation. NULL: no previews, nothing extra loaded. */
    int       (*preview)(void *user, const h3_preview *p);
    /* nonzero: the generation stops cleanly before its next phase or denoising step, with an error naming where
     * (sessions: Ctrl-C). NULL: never. */
    const volatile sig_atomic_t *cancel;
    void       *preview_user;
    /* Where the pipeline's messages go (src/api/, include/h3.h): library code prints nothing itself.
     * log: one line per call, without a newline; kind 0 a message (the CLI prefixes "h3: "), 1 a line of the
     * --profile table (printed as is); NULL drops them. */
    void      (*log)(void *user, int kind, const char *line);
    void       *log_user;
    /* progress.c's bar (a TTY) or ~10 % lines are drawn on this stream; NULL: none drawn */
    FILE       *progress_out;
    /* every phase's begin (event 0), updates (1) and end (2); nonzero cancels as *cancel does (progress.h) */
    int       (*progress)(void *user, int event, const char *phase, int64_t done, int64_t total, double elapsed);
    void       *progress_user;
    /* sinks: every final frame ([height][width][3] in [0, 1], the output canvas, in order) and the audio
     * (planar stereo, H3_MEDIA_SAMPLE_RATE, delivered once, after the audio decoder); nonzero cancels */
    int       (*on_frame)(void *user, const float *rgb, int width, int height, int64_t index, int64_t frames);
    int       (*on_audio)(void *user, const float *left, const float *right, int64_t samples, int sample_rate);
    void       *sink_user;
    /* appended to the generation's header line after the backend's name (--backend auto's choice, src/api/) */
    const char *backend_note;
} h3_request;

/* Defaults: seed 42, 20 steps, bf16, output "h3.mp4". */
void h3_request_init(h3_request *r);

/* The task the inputs imply. */
h3_task h3_request_task(const h3_request *r);

/* Checks every flag and combination; one line naming the flag and the rule on failure.
 * Fills the resolved numbers: aligned frame count and (when given) the canvas. */
int h3_request_validate(const h3_request *r, int *aligned_frames, h3_err *e);

/* The requested lengths the reference accepts (num_frames rounded up to 17n+5 must last 5..15 s at 24 fps):
 * --frames 108..345 (aligned 124..345), --seconds 4.5..14.375 (round(S x 24) frames). */
#define H3_MIN_REQUEST_FRAMES 108
#define H3_MAX_REQUEST_FRAMES 345
#define H3_MIN_REQUEST_SECONDS 4.5
#define H3_MAX_REQUEST_SECONDS 14.375

/* --seconds to a frame count: round(seconds * 24), Python round (half to even). */
int h3_seconds_to_frames(double seconds);

#endif
