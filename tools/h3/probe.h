/* `h3 probe OP`: runs one component on named input tensors and writes named outputs
 * (the probe contract and the project's own ops: docs/probe.md).
 * Each component's ops live in probe_<component>.c and are listed in the table in cmd_probe.c. */
#ifndef H3_PROBE_H
#define H3_PROBE_H

#include "backend/backend.h"
#include "core/error.h"
#include "core/tensor.h"
#include "io/safetensors.h"
#include "model/dit_lora.h"

typedef struct probe_ctx {
    const char *op;
    const char *model;      /* --model snapshot dir */
    const char *component;  /* --component (NULL if not given) */
    const char *transformer; /* --transformer FILE: dit's weights from a single file (docs/checkpoints.md) */
    int         bf16;       /* --precision bf16 */
    int         quant_int8; /* --quant int8 (dit; docs/int8.md) */
    int         int8_fc2_groups; /* --int8-fc2-groups */
    int         vae_fp8;    /* --vae-quant fp8 (vae-decode; docs/fast.md) */
    int         attention_sage8; /* --attention sage8 (dit; docs/fast.md) */
    int         parallel;        /* --parallel N (dit; docs/parallel.md): the forward on N ranks, 1 by default */
    dit_lora_spec loras[DIT_LORA_MAX]; /* --lora / --lora-ref FILE[:SCALE] (dit, denoise; docs/lora.md) */
    int         n_loras;
    st_set     *in;         /* --in */
    st_writer  *out;        /* collected outputs, saved atomically to --out by the driver */
    h3_backend *be;         /* --backend cpu|cuda */
} probe_ctx;

typedef int (*probe_fn)(probe_ctx *p, h3_err *e);

/* Reads input NAME converted to dtype `want` (F32 accepts F32/BF16/F16/F64; I64 accepts I64/I32;
 * F64 accepts F64/F32). ndim < 0 accepts any rank. On error: "input 'NAME': rule". The tensor is
 * owned by the caller (h3_tensor_free). */
int probe_input(probe_ctx *p, const char *name, h3_dtype want, int ndim, h3_tensor **out, h3_err *e);
/* 1 when the input exists. */
int probe_has_input(probe_ctx *p, const char *name);
/* Adds an output tensor (copied). */
int probe_output(probe_ctx *p, const char *name, const h3_tensor *t, h3_err *e);
int probe_output_f32(probe_ctx *p, const char *name, const float *data, int ndim, const int64_t *shape,
                     h3_err *e);

/* Component ops (one file each). */
int probe_dit(probe_ctx *p, h3_err *e);
int probe_sigmas(probe_ctx *p, h3_err *e);
int probe_layout(probe_ctx *p, h3_err *e);
int probe_denoise(probe_ctx *p, h3_err *e);
int probe_noise(probe_ctx *p, h3_err *e);
int probe_vae_decode(probe_ctx *p, h3_err *e);
int probe_vae_encode(probe_ctx *p, h3_err *e);
int probe_audio_decode(probe_ctx *p, h3_err *e);
int probe_audio_encode(probe_ctx *p, h3_err *e);
int probe_text_encode(probe_ctx *p, h3_err *e);
int probe_tokenize(probe_ctx *p, h3_err *e);
int probe_vision(probe_ctx *p, h3_err *e);

#endif
