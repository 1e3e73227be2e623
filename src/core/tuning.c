/* The knob table and the only getenv calls of src/ (tuning.h, docs/tuning.md). */
#include "tuning.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

static const h3_knob_info knobs[H3_KNOB_COUNT] = {
    [H3_KNOB_PIN_PREFETCH] = {"H3_PIN_PREFETCH", "word", "on", "0: no second thread pinning the video decoder's download buffers during the DiT (A/B)"},
    [H3_KNOB_SESSION_GPU_GIB] = {"H3_SESSION_GPU_GIB", "number", "the device's memory", "pretend a GPU of N GiB in the session default's keep-the-models verdict (tests)"},
    [H3_KNOB_TOKEN_REDUCTION_BLOCKS] = {"H3_TOKEN_REDUCTION_BLOCKS", "BEGIN:END", "4:30", "--token-reduction: the DiT blocks that run on paired video tokens"},
    [H3_KNOB_TOKEN_REDUCTION_EARLY] = {"H3_TOKEN_REDUCTION_EARLY", "0 or STEPS:END", "10:40 when END < 40", "--token-reduction: a deeper reduced stack for the first STEPS passes (0: none)"},
    [H3_KNOB_TOKEN_REDUCTION_SCALE] = {"H3_TOKEN_REDUCTION_SCALE", "number in [0, 2]", "1", "--token-reduction: the restore scale of the reduced tokens' update"},
    [H3_KNOB_VAE_BATCH] = {"H3_VAE_BATCH", "int", "0 (by the output budget)", "video VAE decoder: tiles per batch (1: the per-tile path)"},
    [H3_KNOB_VAE_TAIL] = {"H3_VAE_TAIL", "word", "on", "0: the batched video decoder's batches all equal (no small last batch; A/B)"},
    [H3_KNOB_VAE_PROJ_OUT] = {"H3_VAE_PROJ_OUT", "word", "fp16", "fp32: the decoder's proj_out as the fp32 SGEMM in bf16 mode (A/B)"},
    [H3_KNOB_VAE_PROFILE] = {"H3_VAE_PROFILE", "int", "0", ">0: the batched video decoder's per-stage seconds, one log line per decode"},
    [H3_KNOB_FUSED_QUANT] = {"H3_FUSED_QUANT", "int", "1", "0: the W8A8 GEMM inputs quantized in passes of their own (the same bits; for timing the fusion)"},
    [H3_KNOB_STREAM_READ] = {"H3_STREAM_READ", "auto|map|direct", "auto", "--ssd-streaming: block copies from the file mapping or read from the shards"},
    [H3_KNOB_GGUF_RESIDENT] = {"H3_GGUF_RESIDENT", "auto|on|off", "auto (on for GPU backends)", "a GGUF transformer's block linears kept in GGUF form on the backend, expanded per block (on: also on the CPU)"},
    [H3_KNOB_CUDA_PRECISION] = {"H3_CUDA_PRECISION", "word", "tf32/bf16 as the op says", "fp32: every CUDA GEMM in full fp32 (parity runs)"},
    [H3_KNOB_BF16_ROUND] = {"H3_BF16_ROUND", "sw|hw|pair", "pair", "the CUDA bf16 rounding code (same bits in every form)"},
    [H3_KNOB_FLASH_VARIANT] = {"H3_FLASH_VARIANT", "int", "by shape", "force one variant of the own sm90 flash-attention kernel (tuning runs)"},
    [H3_KNOB_FLASH_BN] = {"H3_FLASH_BN", "int", "64", "the own sm90 flash kernel's key block (tuning runs)"},
    [H3_KNOB_LT_WARMUP] = {"H3_LT_WARMUP", "0|sync", "a background thread", "the cuBLASLt warm-up at backend creation: off, or in line with its time logged"},
    [H3_KNOB_UPLOAD_STAGED] = {"H3_UPLOAD_STAGED", "word", "on", "0: large uploads from pageable memory without the pinned staging ring"},
    [H3_KNOB_ATTN] = {"H3_ATTN", "sm90|cudnn|own", "sm90, then cuDNN", "the DiT's bf16 attention implementation"},
    [H3_KNOB_ATTN_STRIDED] = {"H3_ATTN_STRIDED", "word", "on", "0: cuDNN attention always on head-major copies"},
    [H3_KNOB_VAE_ATTN] = {"H3_VAE_ATTN", "tile|cudnn", "the own batched kernel", "the video decoder's tile attention implementation"},
    [H3_KNOB_FP8_FAST_ACCUM] = {"H3_FP8_FAST_ACCUM", "int", "0", ">0: cuBLASLt's fast FP8 accumulation for --quant fp8"},
    [H3_KNOB_INT8_GEMM] = {"H3_INT8_GEMM", "lt|sm90", "lt", "--quant int8 on CUDA: sm90 = the own wgmma kernel with the fused dequantization (same bits)"},
    [H3_KNOB_CUDA_OPTIME] = {"H3_CUDA_OPTIME", "word", "off", "1: time every CUDA op with events (a table at backend shutdown)"},
    [H3_KNOB_CUDNN_VARIANT] = {"H3_CUDNN_VARIANT", "int", "the default engine", "the cuDNN SDPA engine configuration to use (tuning runs)"},
    [H3_KNOB_CUDNN_VERBOSE] = {"H3_CUDNN_VERBOSE", "flag", "off", "set: the cuDNN SDPA plan search says what it tried"},
    [H3_KNOB_SAGE8_VARIANT] = {"H3_SAGE8_VARIANT", "int", "the measured default", "force one variant of the own sm90 8-bit attention kernel (tuning runs)"},
    [H3_KNOB_MEDIA_LOG] = {"H3_MEDIA_LOG", "flag", "off", "set: FFmpeg's own messages (info level) on stderr"},
    [H3_KNOB_TMPDIR] = {"TMPDIR", "path", "/tmp", "where the API writes in-memory inputs for the pipeline"},
};

/* H3_* variables of the tools, tests and examples (not read by src/): not reported as unknown */
static const char *const tool_names[] = {"H3_HISTORY", "H3_OPENER", "H3_EXAMPLE_SIZE", "H3_EXAMPLE_STEPS", "H3_TEST_JOBS",
                                         "H3_BUILD", "H3_E2E_FAST", "H3_E2E_TASKS", "H3_E2E_SKIP", "H3_TOKENIZER_DIR",
                                         "H3_BENCH_HASH"};

const h3_knob_info *h3_knob_about(h3_knob k) { return k >= 0 && k < H3_KNOB_COUNT ? &knobs[k] : NULL; }

const char *h3_knob_get(h3_knob k) { return k >= 0 && k < H3_KNOB_COUNT ? getenv(knobs[k].name) : NULL; }

int h3_knob_is(h3_knob k, const char *word) {
    const char *v = h3_knob_get(k);
    return v && !strcmp(v, word);
}

int h3_knob_int(h3_knob k, int unset_value) {
    const char *v = h3_knob_get(k);
    return v ? atoi(v) : unset_value;
}

static int known(const char *name, size_t len) {
    for (int k = 0; k < H3_KNOB_COUNT; k++)
        if (strlen(knobs[k].name) == len && !strncmp(knobs[k].name, name, len)) return 1;
    for (size_t i = 0; i < sizeof tool_names / sizeof tool_names[0]; i++)
        if (strlen(tool_names[i]) == len && !strncmp(tool_names[i], name, len)) return 1;
    return 0;
}

int h3_knob_unknown(char *buf, size_t cap) {
    int n = 0;
    size_t off = 0;
    if (cap) buf[0] = 0;
    for (char **v = environ; v && *v; v++) {
        const char *eq = strchr(*v, '=');
        if (strncmp(*v, "H3_", 3) || !eq || known(*v, (size_t)(eq - *v))) continue;
        int k = snprintf(buf + off, off < cap ? cap - off : 0, "%s%.*s", n ? ", " : "", (int)(eq - *v), *v);
        if (k > 0) off += (size_t)k;
        n++;
    }
    return n;
}
