/* A GGUF transformer kept quantized (docs/checkpoints.md "Quantized on the GPU"): the main blocks' four linears (the
 * --ssd-streaming parts: qkv_proj or to_q/k/v, the attention output, the FFN input and output) are uploaded in their
 * GGUF block form, and each forward expands a block's parts into one of the two bf16 slots of dit_stream.c just
 * before the block runs (h3_gguf_dequant's arithmetic: the bytes the dequantize-at-load path would have uploaded),
 * on CUDA on the copy stream while the previous block computes. The other tensors (norms, biases, embeddings, the
 * refiner, the AdaLN projections) are small and dequantized at load as before. dit_new_random_gguf makes the same
 * model from random well-formed blocks (h3_gguf_fill_random), so a release-shape GGUF runs without a file. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backend/ops.h"
#include "../io/gguf.h"
#include "dit_internal.h"
#include "dit_lora.h"

int dit_gguf_begin(dit_model *m, int rand_type, h3_err *e) {
    const char *v = h3_knob_get(H3_KNOB_GGUF_RESIDENT);
    if (v && strcmp(v, "auto") && strcmp(v, "on") && strcmp(v, "off"))
        return h3_fail(e, "H3_GGUF_RESIDENT must be auto, on or off, got '%s'", v);
    const int on = v && !strcmp(v, "on"), off = v && !strcmp(v, "off");
    if (rand_type >= 0) {
        int64_t bv, bb;
        if (!gguf_type_block((uint32_t)rand_type, &bv, &bb, NULL))
            return h3_fail(e, "random GGUF weights: ggml type %d is not one h3 reads", rand_type);
        if (off) { /* the reference of a kept-quantized run: dequantized at load (random_dequant) */
            m->gguf_rand_dequant = rand_type + 1;
            return 0;
        }
        if (m->stream)
            return h3_fail(e, "random GGUF weights cannot be combined with --ssd-streaming (both fill the block slots)");
    } else {
        if (off) return 0;
        /* a LoRA does not change the choice: its pieces are merged into each slot as the fill expands it (load) */
        if (!on && m->be->kind == H3_BACKEND_CPU) return 0; /* the CPU reads dequantized host copies either way */
        if (m->stream) return h3_fail(e, "internal: a GGUF transformer with --ssd-streaming");
    }
    if (dit_stream_alloc(m, e) != 0) return -1;
    dit_stream *st = m->stream;
    const size_t n = (size_t)(m->cfg.num_layers > 0 ? m->cfg.num_layers : 1) * DIT_PARTS;
    st->quant = 1, st->rand_type = rand_type, st->stats.gguf = 1;
    if (!(st->qsrc = calloc(n, sizeof *st->qsrc)) || !(st->qtype = calloc(n, sizeof *st->qtype)) ||
        !(st->qbytes = calloc(n, sizeof *st->qbytes)))
        return h3_fail(e, "out of memory");
    return 0;
}

int dit_gguf_part(const dit_model *m, const char *name) {
    int64_t blk;
    return m->stream && m->stream->quant && dit_stream_part(&m->cfg, name, &blk) >= 0;
}

/* The random blocks of part i (block * DIT_PARTS + part) with dit_new_random's scale for matrices: uniform with the
 * variance of N(0, 1/fan_in). */
static void fill_random(dit_model *m, void *dev, uint32_t type, int64_t nblk, int64_t i, const h3_expect *x) {
    h3_gguf_fill_random(m->be, dev, type, nblk, 0x6767756600000000ull + (uint64_t)i * 0x9e3779b97f4a7c15ull,
                        sqrtf(3.0f / (float)x->shape[1]));
}

h3_tensor *dit_gguf_random_dequant(dit_model *m, const h3_expect *x, h3_err *e) {
    int64_t blk, bv, bb;
    const int part = dit_stream_part(&m->cfg, x->name, &blk);
    const uint32_t type = (uint32_t)(m->gguf_rand_dequant - 1);
    const char *tn;
    if (part < 0 || x->dtype != H3_BF16 || x->ndim != 2 || !gguf_type_block(type, &bv, &bb, &tn)) {
        h3_fail(e, "internal: '%s' is not a block linear made as random GGUF blocks", x->name);
        return NULL;
    }
    if (x->shape[1] % bv) {
        h3_fail(e, "random GGUF weights: '%s' has rows of %lld values, not whole %s blocks of %lld", x->name,
                (long long)x->shape[1], tn, (long long)bv);
        return NULL;
    }
    const int64_t n = x->shape[0] * x->shape[1], nblk = n / bv;
    h3_tensor *t = h3_tensor_new(H3_BF16, 2, x->shape, e);
    void *q = t ? h3_alloc(m->be, (size_t)(nblk * bb)) : NULL, *d = q ? h3_alloc(m->be, (size_t)n * 2) : NULL;
    if (d) {
        fill_random(m, q, type, nblk, blk * DIT_PARTS + part, x);
        h3_gguf_dequant(m->be, d, q, type, n);
        h3_download(m->be, t->data, d, (size_t)n * 2);
    }
    h3_free(m->be, q), h3_free(m->be, d);
    if (t && !d) {
        h3_tensor_free(t);
        h3_fail(e, "random GGUF weights: out of backend memory for '%s'", x->name);
        return NULL;
    }
    return t;
}

h3_tensor *dit_gguf_load(dit_model *m, const h3_expect_list *ex, const char *name, h3_err *e) {
    dit_stream *st = m->stream;
    int64_t blk;
    const int part = dit_stream_part(&m->cfg, name, &blk);
    const h3_expect *x = h3_expect_find(ex, name);
    if (!x || part < 0) {
        h3_fail(e, "internal: '%s' is not a block linear kept in GGUF form", name);
        return NULL;
    }
    const char *src_name = m->gguf ? m->gguf->path : "random GGUF weights";
    if (x->dtype != H3_BF16 || x->ndim != 2) { /* the slots hold bf16 matrices */
        h3_fail(e, "%s: '%s' is %s in the config's tensor list; a block linear kept in GGUF form must be a BF16 matrix",
                src_name, name, h3_dtype_name(x->dtype));
        return NULL;
    }
    const int64_t i = blk * DIT_PARTS + part;
    uint32_t type;
    const void *host = NULL;
    int64_t bv, bb, nblk;
    if (m->gguf) {
        char full[256];
        snprintf(full, sizeof full, "%s%s", m->name_prefix, name);
        const gguf_tensor *t = gguf_find(m->gguf, full);
        if (!t) {
            h3_fail(e, "%s: tensor '%s' not found", src_name, full);
            return NULL;
        }
        if (h3_expect_check(x, H3_BF16, t->ndim, t->shape, src_name, e) != 0) return NULL;
        type = t->type;
        host = gguf_data(m->gguf, t);
        gguf_type_block(type, &bv, &bb, NULL); /* the reader took only types it knows */
        nblk = (int64_t)t->bytes / bb;
    } else {
        type = (uint32_t)st->rand_type;
        const char *tn;
        gguf_type_block(type, &bv, &bb, &tn);
        if (x->shape[1] % bv) {
            h3_fail(e, "random GGUF weights: '%s' has rows of %lld values, not whole %s blocks of %lld", name,
                    (long long)x->shape[1], tn, (long long)bv);
            return NULL;
        }
        nblk = x->shape[0] * x->shape[1] / bv;
    }
    const size_t qb = (size_t)nblk * (size_t)bb;
    void *dev = h3_alloc(m->be, qb ? qb : 1);
    if (!dev) {
        h3_fail(e, "%s: out of backend memory for '%s' (%zu bytes of GGUF blocks)", src_name, name, qb);
        return NULL;
    }
    if (host) h3_upload(m->be, dev, host, qb);
    else fill_random(m, dev, type, nblk, i, x);
    h3_tensor *w = h3_tensor_view(H3_BF16, 2, x->shape, dev, e);
    if (!w) {
        h3_free(m->be, dev);
        return NULL;
    }
    w->owns_data = 0;
    st->qsrc[i] = st->src[i] = w;
    st->qtype[i] = type, st->qbytes[i] = qb;
    m->total_bytes += qb;
    /* --lora: the part's pieces, merged into the slot right after each expansion, as --ssd-streaming merges them: the
     * dequantize-at-load model's merged bits (docs/lora.md "With --ssd-streaming"); w's shape and dtype are those of
     * the dequantized tensor, which is all the pieces read */
    if (m->lora && dit_lora_touches(m->lora, &m->cfg, name) && dit_stream_lora_add(m, name, i, w, e) != 0) return NULL;
    return w;
}
