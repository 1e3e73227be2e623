/* One generation's state (`gen`), shared by the phase files of `h3 generate` (generate.c's data flow:
 * gen_condition -> gen_dit -> gen_decode -> gen_output), and the helpers every phase uses: the log line, the
 * snapshot paths, the model-cache keys, the backend a phase runs on and its progress label. Internal to src/pipeline. */
#ifndef H3_GEN_STATE_H
#define H3_GEN_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "../backend/backend.h"
#include "../core/error.h"
#include "../media/media.h"
#include "../model/video_vae.h"
#include "../io/outfile.h"
#include "condition.h"
#include "generate.h" /* H3_GENERATE_BAD_INPUT */
#include "layout.h"
#include "presentation.h"
#include "progress.h"
#include "request.h"

/* --random-weights: one seed per model, from the request's seed */
enum { RANDOM_TEXT = 0x7e47, RANDOM_DIT = 0xd17, RANDOM_AUDIO = 0xa0d10, RANDOM_VIDEO = 0x71de0 };

#define VIDEO_CHANNELS 24
#define AUDIO_CHANNELS 32

/* the size of a model-cache key (gen_resident.h) */
enum { RKEY = 4400 };

struct resident;
struct cond_cache;

typedef struct gen {
    const h3_request *r;
    h3_backend       *be;        /* --backend: the DiT and the video VAE decoder run here */
    h3_backend       *cpu;       /* phases whose ops have no CUDA twins (== be with --backend cpu) */
    progress          pg;
    h3_task           task;
    layout_geometry   g;
    cond_set          cond;      /* fl2va keyframes / ref2va references (condition.h) */
    /* conditioning */
    presentation      pres;
    float            *text;      /* [T, text_dim] */
    int64_t           T;
    int               text_dim;
    /* results */
    float            *video_latents; /* (1, 24, F, lh, lw), normalized */
    float            *audio_latents; /* (2, 32, A), normalized */
    float            *frames;        /* [frames, H, W, 3] in [0, 1] */
    int64_t           nframes;
    float            *audio;         /* [2, samples] in [-1, 1] */
    int64_t           samples;
    /* -o OUT.mp4: frames and audio are encoded as the video decoder delivers them (the encoder's CPU
     * time overlaps the decode); the file appears when phase_outputs closes the writer */
    h3_mp4_writer    *mp4;
    int64_t           mp4_frames, mp4_samples;
    /* every output's temporary, made before the first phase (docs/robustness.md), committed by phase_outputs */
    h3_outfile       *o_mp4, *o_frames, *o_wav, *o_dump;
    int               out_h, out_w;  /* output canvas; the model runs at g's (the render canvas, 5.6) */
    struct resident  *res;           /* sessions (--resident, the auto default): the models kept between requests, else NULL */
    struct cond_cache *cc;           /* the context's conditioning cache */
    int               cond_hit;      /* this request's conditioning came from cc */
    /* --show: the preview decoder kept during the denoising, and the loop's rows it previews */
    video_vae        *pv;
    int               pv_borrowed;   /* pv is the session's kept video decoder (not freed after the loop) */
    const layout     *pv_L;
    const float      *pv_vrows, *pv_arows;
    h3_err            pv_err;        /* why a preview stopped the loop */
    double            shift_video, shift_audio; /* the snapshot's scheduler/ and audio_scheduler/ configs */
    int               bad_input;     /* a phase refused the user's input (the prompt's length): exit 2 */
    /* --parallel N: the backends of ranks 1..N-1 (the context's; rank 0 runs on be), docs/parallel.md */
    h3_backend      **peers;
    int               parallel;
} gen;

/* One message line to the request's log callback (request.h); library code prints nothing itself. */
__attribute__((format(printf, 2, 3))) void gen_log(const h3_request *r, const char *fmt, ...);
/* out = the snapshot's folder `sub` */
void path_in(const gen *s, const char *sub, char *out, size_t cap);
/* "folder|settings|weights" into key[RKEY]: random weights are keyed by their seed (the request's ^ salt) */
void model_key(const gen *s, const char *dir, const char *settings, uint64_t salt, char *key);
/* The video decoder a request decodes with on be (the final decode and --show's previews): its folder, parts, key. */
int video_decoder_key(const gen *s, const h3_backend *be, char *dir, size_t cap, char *key);
/* The backend of one phase (the requested one when all its ops have twins there, else the CPU), said in one line. */
h3_backend *phase_backend(gen *s, const char *phase, int has_cuda_twins, const char *why_not);
/* A progress phase named "<name> [<backend>]" (--profile's table shows where each phase ran). */
void begin_on(gen *s, const char *name, const h3_backend *be, int64_t total);
/* After a phase on the GPU: waits for it and turns the first recorded failure into the error. */
int phase_check(h3_backend *be, h3_err *e);

#endif
