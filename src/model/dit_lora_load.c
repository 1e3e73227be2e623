/* A model's LoRAs (dit_internal.h, docs/lora.md): the set opened for the model's config before its weights are read,
 * each touched weight's view replaced by a merged host copy as load_all reads it (dit.c's lookup_checked), the copies
 * kept with the model and freed with it; with --ssd-streaming, or a GGUF kept quantized (dit_gguf.c), the streamed parts'
 * LoRA pieces instead, merged into each slot as it is filled (dit_stream.c). The file mapping is never written: another
 * LoRA list is a fresh load. */
#include <stdlib.h>
#include <time.h>

#include "dit_internal.h"
#include "dit_lora.h"

int dit_lora_begin(dit_model *m, const dit_lora_spec *loras, int n, int ref, int mode, h3_err *e) {
    (void)mode; /* every mode takes LoRAs: the fp32 mode's streamed parts are widened in their slots (dit_stream.c) */
    if (n <= 0) return 0;
    return (m->lora = dit_lora_set_new(loras, n, &m->cfg, ref, e)) ? 0 : -1;
}

/* The merged copy is in the stored dtype in bf16 mode and F32 in the fp32 mode, as diffusers' model holds it. A
 * streamed part keeps its view: its LoRA pieces are merged into each slot filled with it (dit_stream_lora_add). */
int dit_lora_view(dit_model *m, const char *name, h3_tensor *view, int *mi, h3_err *e) {
    const h3_dtype out = m->act == H3_BF16 ? view->dtype : H3_F32;
    void *buf = NULL;
    int64_t blk;
    const int part = m->stream && !m->stream->quant ? dit_stream_part(&m->cfg, name, &blk) : -1;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const int rc = part >= 0 ? dit_stream_lora_add(m, name, blk * DIT_PARTS + part, view, e)
                             : dit_lora_merge(m->lora, &m->cfg, name, view, out, &buf, e);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    m->lora_seconds += (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (rc != 0) return -1;
    if (!buf) return 0;
    void **v = realloc(m->lora_bufs, (size_t)(m->n_lora_bufs + 1) * sizeof *v);
    if (!v) {
        free(buf);
        return h3_fail(e, "out of memory");
    }
    m->lora_bufs = v;
    m->lora_bufs[m->n_lora_bufs++] = buf;
    view->data = buf, view->dtype = out, view->owns_data = 0;
    *mi = -1;
    return 0;
}

int dit_lora_end(dit_model *m, h3_err *e) {
    int rc = dit_lora_check_all_merged(m->lora, e);
    dit_lora_set_free(m->lora);
    m->lora = NULL;
    return rc;
}

int dit_lora_owns(const dit_model *m, const void *p) {
    for (int i = 0; i < m->n_lora_bufs; i++)
        if (m->lora_bufs[i] == p) return 1;
    return 0;
}

void dit_lora_release(dit_model *m) {
    dit_lora_set_free(m->lora);
    for (int i = 0; i < m->n_lora_bufs; i++) free(m->lora_bufs[i]);
    free(m->lora_bufs);
    m->lora = NULL, m->lora_bufs = NULL, m->n_lora_bufs = 0;
}

double dit_lora_seconds(const dit_model *m) { return m->lora_seconds; }
