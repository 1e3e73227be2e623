/* The environment knobs of the engine (docs/tuning.md): one table of every variable src/ reads (name, type, default,
 * one-line meaning) and the only getenv calls in src/. A knob is read when the code that uses it runs (backend
 * creation for the CUDA settings, model creation for the VAE's, each call for the per-op switches), as before the
 * table existed: the tests set knobs between runs inside one process (test_denoise, test_dit, tests/cuda/), so a copy
 * taken once would change what they measure. Library code never prints: unknown H3_* names come back as text. */
#ifndef H3_TUNING_H
#define H3_TUNING_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum h3_knob {
    /* pipeline */
    H3_KNOB_PIN_PREFETCH,
    H3_KNOB_SESSION_GPU_GIB,
    H3_KNOB_TOKEN_REDUCTION_BLOCKS,
    H3_KNOB_TOKEN_REDUCTION_EARLY,
    H3_KNOB_TOKEN_REDUCTION_SCALE,
    /* models */
    H3_KNOB_VAE_BATCH,
    H3_KNOB_VAE_TAIL,
    H3_KNOB_VAE_PROJ_OUT,
    H3_KNOB_VAE_PROFILE,
    H3_KNOB_FUSED_QUANT,
    H3_KNOB_STREAM_READ,
    H3_KNOB_GGUF_RESIDENT,
    /* CUDA backend */
    H3_KNOB_CUDA_PRECISION,
    H3_KNOB_BF16_ROUND,
    H3_KNOB_FLASH_VARIANT,
    H3_KNOB_FLASH_BN,
    H3_KNOB_LT_WARMUP,
    H3_KNOB_UPLOAD_STAGED,
    H3_KNOB_ATTN,
    H3_KNOB_ATTN_STRIDED,
    H3_KNOB_VAE_ATTN,
    H3_KNOB_FP8_FAST_ACCUM,
    H3_KNOB_INT8_GEMM,
    H3_KNOB_CUDA_OPTIME,
    H3_KNOB_CUDNN_VARIANT,
    H3_KNOB_CUDNN_VERBOSE,
    H3_KNOB_SAGE8_VARIANT,
    /* media, files */
    H3_KNOB_MEDIA_LOG,
    H3_KNOB_TMPDIR,
    H3_KNOB_COUNT
} h3_knob;

typedef struct h3_knob_info {
    const char *name;    /* the environment variable */
    const char *type;    /* "int", "number", "word", "flag" (set at all), "path" */
    const char *dflt;    /* what unset means */
    const char *meaning; /* one line */
} h3_knob_info;

/* The table row of knob k (docs/tuning.md lists the same rows). */
const h3_knob_info *h3_knob_about(h3_knob k);
/* The variable's value now, NULL when unset. */
const char *h3_knob_get(h3_knob k);
/* 1 when the variable is set and equal to word. */
int h3_knob_is(h3_knob k, const char *word);
/* atoi of the value, or unset_value when the variable is unset. */
int h3_knob_int(h3_knob k, int unset_value);
/* The set H3_* variables that are no knob of the table nor a variable of the tools and tests (the
 * H3_TOOL_NAMES list in tuning.c), comma-separated into buf; returns how many. */
int h3_knob_unknown(char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
