/* h3.h: the public C API of libh3, a native inference engine for MiniMax-H3 (text/image to video + audio).
 * This is the only header a program embedding h3 needs (docs/api.md shows the lifecycle with examples/).
 *
 *   h3_engine_options o;  h3_engine_options_init(&o);          // backend "auto", bf16, memory by phase
 *   h3_engine *eng;       int rc = h3_engine_open("SNAPSHOT", &o, &eng);
 *   h3_params p;          h3_params_init(&p);  p.prompt = "A red fox.";  p.output_mp4 = "fox.mp4";
 *   rc = h3_engine_generate(eng, &p, NULL);                     // or with sinks: progress, previews, frames, audio
 *   if (rc) fprintf(stderr, "%s\n", h3_engine_error(eng));
 *   h3_engine_close(eng);
 *
 * Versioning: H3_API_VERSION changes with every incompatible change of this header; h3_api_version() is the
 * library's, so a program can refuse a library it was not compiled for. The option and parameter structs carry
 * their size (set by the *_init functions) so fields may be appended without breaking compiled programs.
 *
 * Threads: one engine drives one device; make one engine per GPU. The calls on one engine are serialized (the
 * library takes the engine's lock: a second h3_engine_generate on the same engine waits for the first); engines
 * are independent of each other. h3_engine_cancel may be called from any thread and from a signal handler.
 * The callbacks (log, sinks) run on the thread that called h3_engine_generate; the pointers they receive are
 * valid only during the call. h3_version, h3_api_version, h3_status_name and the *_init functions are pure.
 *
 * Errors: every fallible call returns an h3_status (H3_OK = 0); the engine keeps a one-line message naming the
 * parameter, file or tensor and the rule broken (h3_engine_error). Library code prints nothing: messages go to
 * the log callback, progress to the progress sink (or, when asked, a stream the caller gives). */
#ifndef H3_H
#define H3_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define H3_PUBLIC __attribute__((visibility("default")))
#else
#define H3_PUBLIC
#endif

#define H3_API_VERSION 1
#define H3_VERSION_STRING "0.1.0"

/* "0.1.0 (api 1, cpu+cuda|cpu, ffmpeg|no media)": the library's version and what the build contains */
H3_PUBLIC const char *h3_version(void);
/* the H3_API_VERSION the library was built with */
H3_PUBLIC int h3_api_version(void);
/* 1 when this build reads and writes media files through FFmpeg (MP4, PNG, WAV and the inputs' formats); 0 for a
 * MEDIA=0 build, which reads PPM keyframes and writes only h3_params.dump_latents */
H3_PUBLIC int h3_has_media(void);
/* h3_params.seconds as a frame count: round(seconds x 24), half to even (before the 17n+5 alignment) */
H3_PUBLIC int h3_frames_of_seconds(double seconds);

/* ---- status codes ---- */
typedef enum h3_status {
    H3_OK = 0,
    H3_ERR_BAD_INPUT = 1,     /* a parameter, option or input file breaks a rule (the h3 CLI exits 2 for these) */
    H3_ERR_OUT_OF_MEMORY = 2, /* host or device memory */
    H3_ERR_IO = 3,            /* an output could not be written or a file read failed */
    H3_ERR_BACKEND = 4,       /* the device failed (no usable GPU for "cuda", a CUDA error) */
    H3_ERR_CANCELLED = 5,     /* a sink returned nonzero or h3_engine_cancel was called; nothing half-written stays */
    H3_ERR_FAILED = 6,        /* any other failure (a malformed snapshot found during the run, an internal check) */
} h3_status;
/* "ok", "bad input", "out of memory", "i/o", "backend", "cancelled", "failed" */
H3_PUBLIC const char *h3_status_name(int status);

/* ---- engine ---- */

/* A log line: kind H3_LOG_MESSAGE is a one-line message (which phase runs where, warnings, the generation's
 * summary); H3_LOG_REPORT a line of the profile table (h3_params.profile). No newline at the end. */
enum { H3_LOG_MESSAGE = 0, H3_LOG_REPORT = 1 };
typedef void (*h3_log_fn)(void *user, int kind, const char *line);

/* What stays loaded between generations (docs/model/features.md 7.1, 3). */
enum {
    H3_MEMORY_PHASES = 0,   /* each generation loads and frees every phase's weights: peak = the largest phase */
    H3_MEMORY_RESIDENT = 1, /* every phase's model stays loaded for the next generation that needs it */
    H3_MEMORY_AUTO = 2,     /* the transformer and the video decoder stay when the GPU has their room */
};

typedef struct h3_engine_options {
    size_t      struct_size;    /* sizeof(h3_engine_options), set by h3_engine_options_init */
    const char *backend;        /* "auto" (default: CUDA when this build has it and a usable GPU is present, else the
                                   CPU; the reason is in h3_engine_backend_note and the generation's first log line),
                                   "cpu" or "cuda" */
    int         device;         /* CUDA device index [0] (the runtime's order, after CUDA_VISIBLE_DEVICES); a device
                                   other than 0 that is not a usable GPU is refused (H3_ERR_BAD_INPUT), with "auto" too;
                                   with "cpu" only 0 */
    int         threads;        /* CPU threads, 0 = all cores */
    const char *precision;      /* "bf16" (default, as the release runs) or "fp32" (the reference) */
    const char *quant;          /* "none" (default), "fp8" (the DiT blocks' linears as FP8 W8A8) or "int8" (INT8 W8A8,
                                   per-token activations; docs/int8.md); bf16 only. A snapshot converted by
                                   `h3 quantize` runs its int8 codes whatever this says */
    int         memory;         /* H3_MEMORY_PHASES (default), H3_MEMORY_RESIDENT or H3_MEMORY_AUTO */
    int         ssd_streaming;  /* 1: the DiT's blocks stay in host memory and are streamed through two device slots
                                   (docs/model/features.md 7.3); automatic on CUDA when the resident DiT does not fit */
    int         random_weights; /* 1: no checkpoint, every model made with random weights at the snapshot configs'
                                   shapes (benchmarks; t2va only; the output is noise) */
    h3_log_fn   log;            /* NULL: messages dropped */
    void       *log_user;
    FILE       *progress_stream; /* NULL (default): no text progress; else the library draws an updating bar (a TTY)
                                    or a line per ~10 % on it, as the h3 CLI shows */
    int         flag_messages;  /* 1: messages name the h3 CLI's flags (--width) instead of the fields of this API
                                   (width); the h3 tool sets it */
    int         int8_fc2_groups; /* 1: with int8, the FFN down projection's input scaled per 1024 channels (the
                                    Metal engine's scheme) instead of per token */
    const char *transformer;    /* NULL, or a single-file transformer (safetensors or GGUF, the published single files'
                                   layout) used instead of the snapshot's transformer/ weights for t2va and fl2va */
    const char *vae_quant;      /* "none" (default) or "fp8": the video decoder's block GEMMs as FP8 W8A8 (an opt-in
                                   fast mode, not the reference's arithmetic); bf16 only */
    const char *attention;      /* "exact" (default) or "sage8": the DiT's self-attention with INT8 Q K^T and FP8 P V
                                   (SageAttention2's scheme, docs/fast.md; faster, not the reference's numerics); bf16 only */
    const char *preset;         /* "exact" (default: the fields as set) or "fast": quant "fp8", attention "sage8" and
                                   vae_quant "fp8" wherever those fields are at their defaults (a value set explicitly
                                   wins); bf16 only. Not the reference's arithmetic (docs/fast.md) */
    int         parallel;       /* 0 or 1 (default): one device; 2..8: the DiT on that many ranks with Ulysses sequence
                                   parallelism (docs/parallel.md): GPUs device..device+N-1 (NCCL), or N CPU ranks with
                                   "cpu". Outputs as one rank's (the bit-exactness statement is in docs/parallel.md) */
} h3_engine_options;

H3_PUBLIC void h3_engine_options_init(h3_engine_options *o);

typedef struct h3_engine h3_engine;

/* Opens the snapshot (a diffusers-layout MiniMax-H3 folder) with options o (NULL = the defaults) and resolves the
 * backend; the device itself is started by the first generation (or h3_engine_start), after its inputs passed
 * their checks. On success *out is the engine. On failure *out is still an engine that holds only the error
 * (h3_engine_error tells why, h3_engine_close frees it), or NULL when even that could not be allocated. */
H3_PUBLIC int h3_engine_open(const char *snapshot_dir, const h3_engine_options *o, h3_engine **out);
H3_PUBLIC void h3_engine_close(h3_engine *eng);

/* The last failed call's one-line message ("" after a success), and its status. */
H3_PUBLIC const char *h3_engine_error(const h3_engine *eng);
H3_PUBLIC int h3_engine_status(const h3_engine *eng);

/* The backend the engine runs on ("cpu" or "cuda") and, when "auto" chose the CPU, why ("no CUDA in this build",
 * "no GPU: ...", "driver error: ..."); "" otherwise. */
H3_PUBLIC const char *h3_engine_backend(const h3_engine *eng);
H3_PUBLIC const char *h3_engine_backend_note(const h3_engine *eng);

/* Starts the device now (CUDA context, library handles, memory pool); a no-op once started. */
H3_PUBLIC int h3_engine_start(h3_engine *eng);
H3_PUBLIC int h3_engine_started(const h3_engine *eng);

/* Changes the memory mode for the next generations; H3_MEMORY_PHASES frees the kept models now. */
H3_PUBLIC int h3_engine_set_memory(h3_engine *eng, int memory);
/* Changes h3_engine_options.ssd_streaming for the next generations (0: automatic on CUDA, 1: on); refused with
 * quant "fp8" (the FP8 blocks are made resident). */
H3_PUBLIC int h3_engine_set_ssd_streaming(h3_engine *eng, int on);
/* Changes h3_engine_options.quant ("none", "fp8" or "int8"; NULL: "none") and int8_fc2_groups (0 or 1, int8 only) for
 * the next generations: the transformer is quantized again at its next load (a kept one made with other settings is
 * freed then). Refused in fp32 precision and with ssd_streaming on. */
H3_PUBLIC int h3_engine_set_quant(h3_engine *eng, const char *quant, int int8_fc2_groups);

/* The tasks; the inputs of h3_params choose one (t2va: none, fl2va: first/last keyframe, ref2va: references). */
enum { H3_TASK_T2VA = 0, H3_TASK_FL2VA = 1, H3_TASK_REF2VA = 2 };
/* H3_OK when the snapshot holds the transformer the task runs on (ref2va: transformer_ref/ at the root), else
 * H3_ERR_BAD_INPUT with h3_engine_error naming the missing folder. */
H3_PUBLIC int h3_engine_has_task(h3_engine *eng, int task);
/* What is kept between generations: a description into buf ("prompt embedding (N rows); transformer (...)") and
 * the number of models; h3_engine_drop_models frees all of it. */
H3_PUBLIC int h3_engine_cached_models(const h3_engine *eng, char *buf, size_t cap);
H3_PUBLIC void h3_engine_drop_models(h3_engine *eng);

/* Asks the running generation to stop cleanly before its next phase or denoising step (H3_ERR_CANCELLED);
 * async-signal-safe. A flag raised with no generation running cancels the next one's start: h3_engine_generate
 * clears it when it returns. */
H3_PUBLIC void h3_engine_cancel(h3_engine *eng);

/* ---- per-generation parameters ---- */

/* An image in memory: packed RGB8 rows, [height][width][3], no padding. */
typedef struct h3_rgb_image {
    const uint8_t *rgb;
    int            width, height;
} h3_rgb_image;

/* Audio in memory: planar float in [-1, 1], channel c at samples + c * frames; 1 or 2 channels, any rate
 * (resampled to 32 kHz stereo as a file's would be). */
typedef struct h3_pcm {
    const float *samples;
    int64_t      frames;
    int          channels, sample_rate;
} h3_pcm;

/* ref2va references, in order (docs/model/features.md 1.3). */
enum {
    H3_REFERENCE_IMAGE = 0,        /* path, or image in memory */
    H3_REFERENCE_SILENT_VIDEO = 1, /* path */
    H3_REFERENCE_VIDEO = 2,        /* path: the frames and the file's own audio */
    H3_REFERENCE_VIDEO_AUDIO = 3,  /* path (video) + audio_path */
    H3_REFERENCE_AUDIO = 4,        /* path, or audio in memory */
};
#define H3_MAX_REFERENCES 12       /* at most 9 images, 3 videos, 3 audio */

typedef struct h3_reference {
    int          kind;
    const char  *path;
    const char  *audio_path;       /* H3_REFERENCE_VIDEO_AUDIO only */
    h3_rgb_image image;            /* H3_REFERENCE_IMAGE with path NULL */
    h3_pcm       audio;            /* H3_REFERENCE_AUDIO with path NULL */
} h3_reference;

/* One LoRA merged into the transformer at load (docs/lora.md): every layout diffusers' MiniMax-H3 loader accepts. */
#define H3_MAX_LORAS 8
typedef struct h3_lora {
    const char *path;  /* a .safetensors LoRA file */
    double      scale; /* its weight (diffusers' set_adapters weight): finite, |scale| <= 100 */
    int         ref;   /* 1: for the transformer_ref partition only (ref2va), as load_into_transformer_ref=True */
} h3_lora;

/* ref_image_size */
enum { H3_REF_SIZE_REFERENCE = 0, H3_REF_SIZE_MATCH = 1, H3_REF_SIZE_MAX = 2 };

/* Every generation control of `h3 generate`; h3_params_init sets the defaults shown. The task follows the inputs:
 * t2va (none), fl2va (first/last keyframe), ref2va (references). */
typedef struct h3_params {
    size_t        struct_size;     /* sizeof(h3_params), set by h3_params_init */
    const char   *prompt;          /* used verbatim, no template (required) */
    int           width, height;   /* the canvas, multiples of 32, at most 768x1344 pixels; 0 = t2va/ref2va 1344x768,
                                      fl2va from the first keyframe's aspect */
    int           render_width, render_height; /* 0 = the canvas; else the DiT and VAE run at this smaller canvas
                                      (the canvas's aspect exactly) and the frames are upscaled (Lanczos) */
    int           frames;          /* requested length at 24 fps, rounded up to 17n+5: 108..345; 0 = unset [124] */
    double        seconds;         /* or the length in seconds, 4.5..14.375 (round(S x 24) frames); 0 = unset */
    int           steps;           /* denoising passes [20] */
    int           reuse;           /* 1..3: the model runs on every R-th pass, the others extrapolate [1] */
    int           layers;          /* 35..50 DiT blocks kept [50] */
    int           core_reuse;      /* 1..6: the core residual refreshed every C-th pass; not with reuse [1] */
    uint64_t      seed;            /* torch.Generator().manual_seed [42] */
    int           token_reduction; /* 1: DiT middle blocks on paired video tokens (bf16) */
    int           reference_rope;  /* 1: the released spatial RoPE at a 256x256 render canvas (else halved) */
    int           ref_image_size;  /* H3_REF_SIZE_REFERENCE (2048 short edge, as diffusers), _MATCH, _MAX */
    const char   *first_frame, *last_frame;  /* fl2va keyframes as files, or: */
    h3_rgb_image  first_image, last_image;   /* in memory (used when the path is NULL and rgb is set) */
    h3_reference  refs[H3_MAX_REFERENCES];
    int           nrefs;
    /* outputs, each written atomically (a temporary renamed into place; nothing half-written on failure) */
    const char   *output_mp4;      /* H.264 + AAC 32 kHz stereo; NULL = none [NULL] */
    const char   *frames_dir;      /* PNG frames frame_00000.png, ...; NULL = none */
    const char   *wav;             /* the audio as 16-bit WAV; NULL = none */
    const char   *dump_latents;    /* safetensors with the final latents, frames and audio; NULL = none */
    int           profile;         /* 1: the per-phase time and peak memory table through the log (H3_LOG_REPORT) */
    /* appended (read only when struct_size covers them): */
    h3_lora       loras[H3_MAX_LORAS]; /* merged in order into the transformer the task runs (docs/lora.md); a
                                      generation with other LoRAs than the kept transformer's reloads it from the
                                      untouched files */
    int           nloras;
    double        shift_video, shift_audio; /* the schedulers' shifts (docs/model/dit.md 7.1); 0 = the snapshot's
                                      scheduler configs (12 and 3); LightX2V's Turbo LoRAs use 6 and 3 */
    int           step_update;     /* H3_STEP_EULER (diffusers' x / x0 blend, default) or H3_STEP_TRAINING_EULER
                                      (LightX2V's x + (sigma - sigma_next) v: the same step, other fp32 roundings) */
    int           preview_width;   /* the sinks' pass previews are wanted at most this wide; 0 = the output canvas [0].
                                      At most half the canvas: the preview decoder runs on 2x2-averaged latents (a
                                      quarter of its work) and the previews come at half the canvas (docs/api.md) */
    const char   *x264_preset;     /* output_mp4's x264 preset (ultrafast .. placebo); NULL = "fast", or "veryfast"
                                      when the engine runs preset "fast" (docs/media.md) */
} h3_params;

enum { H3_STEP_EULER = 0, H3_STEP_TRAINING_EULER = 1 };

H3_PUBLIC void h3_params_init(h3_params *p);

/* ---- sinks ---- */

enum { H3_PROGRESS_BEGIN = 0, H3_PROGRESS_UPDATE = 1, H3_PROGRESS_END = 2 };
typedef struct h3_progress {
    int         event;         /* a phase begins, advances, ends */
    const char *phase;         /* "load transformer", "denoise", "video VAE decode", ... */
    int64_t     done, total;   /* units of the phase; total 0 = indeterminate */
    double      elapsed;       /* seconds since the phase began */
    double      eta;           /* seconds left at the current rate, -1 when unknown */
} h3_progress;

/* A frame: [height][width][3] float RGB in [0, 1] on the output canvas, valid during the call only. */
typedef struct h3_frame {
    const float *rgb;
    int          width, height;
    int64_t      index;        /* its index in the video */
    int64_t      count;        /* the video's frame count (0 for a preview) */
    int          pass, passes; /* previews: after denoising pass `pass` (1-based) of `passes`; 0 for a final frame */
} h3_frame;

/* Every callback may be NULL; a nonzero return cancels the generation cleanly (H3_ERR_CANCELLED). */
typedef struct h3_sinks {
    int  (*progress)(void *user, const h3_progress *p);
    /* a representative frame after every denoising pass (decoded by a preview decoder kept during the denoising,
     * which costs its memory and time), then every final frame; NULL: no previews, nothing extra loaded */
    int  (*preview)(void *user, const h3_frame *f);
    /* every final frame, in order, as the video decoder produces it */
    int  (*video_frame)(void *user, const h3_frame *f);
    /* the whole audio track, planar stereo float in [-1, 1] at sample_rate (32000), once, after the audio decoder
     * and before the first video frame */
    int  (*audio)(void *user, const float *left, const float *right, int64_t samples, int sample_rate);
    void  *user;
} h3_sinks;

/* Runs one generation with p on the engine, calling the sinks (NULL = none) as it goes; H3_OK or a status with
 * h3_engine_error set. Outputs named in p appear only when everything succeeded. */
H3_PUBLIC int h3_engine_generate(h3_engine *eng, const h3_params *p, const h3_sinks *sinks);

/* Checks p against every rule a generation checks before it reads inputs (the flags' ranges and combinations),
 * without running; *frames (may be NULL) gets the aligned frame count. The one rule that needs the sinks (a
 * request that writes no output and has no frame or audio sink would produce nothing) is left to
 * h3_engine_generate, which has them: a sinks-only p passes here. */
H3_PUBLIC int h3_engine_check(h3_engine *eng, const h3_params *p, int *frames);

/* ---- writers: each output written atomically (a temporary in the same folder, renamed into place) ---- */

/* MP4, H.264 + AAC: frames [count][height][width][3] float in [0, 1] at 24 fps (width, height even), audio planar
 * stereo at 32 kHz (left/right NULL = no audio track). err (may be NULL) gets the one-line message. */
H3_PUBLIC int h3_save_mp4(const char *path, const float *frames, int count, int width, int height, const float *left,
                          const float *right, int64_t samples, char *err, size_t err_cap);
/* One PNG from [height][width][3] float in [0, 1] (rounded to 8 bits as the frames of frames_dir are). */
H3_PUBLIC int h3_save_png(const char *path, const float *rgb, int width, int height, char *err, size_t err_cap);
/* WAV, 16-bit PCM, from planar float audio (right NULL = mono). */
H3_PUBLIC int h3_save_wav(const char *path, const float *left, const float *right, int64_t samples, int sample_rate,
                          char *err, size_t err_cap);

#ifdef __cplusplus
}
#endif

#endif
