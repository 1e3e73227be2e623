/* What the DiT's files share below dit.c (dit_internal.h): the rotary tables, the weight memory a model gives back
 * (file pages, backend copies, AdaLN cache entries), the skipped-layer test and the W8A8 quantizers' block loop. dit.c, dit_adaln.c, dit_int8.c and
 * dit_reduce.c call these; nothing here calls back into them (docs/architecture.md). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../backend/backend_check.h"
#include "dit_internal.h"

/* inv_freq[k] = fp32(1 / fp32(theta ** (2k / 2F))) (docs/model/dit.md 4.1: two roundings, not a correctly
 * rounded theta ** (-k/F)). */
void dit_rope_inv_freq(float *out, int F, float theta) {
    for (int k = 0; k < F; k++) {
        float p = (float)pow((double)theta, (double)(float)(2 * k) / (double)(2 * F));
        out[k] = 1.0f / p;
    }
}

/* Rotary tables [S, 6F] (docs/model/dit.md 4.1): angle = fp32(fp32(pos) * inv_freq[k]) for the t, h and w blocks,
 * duplicated for the rotate-half pairs. */
void dit_rope_tables(const dit_model *m, const double *pos, int64_t S, float *cos_h, float *sin_h) {
    int F = m->cfg.rope_freq_dim, R = 6 * F;
#pragma omp parallel for schedule(static)
    for (int64_t s = 0; s < S; s++) {
        for (int a = 0; a < 3; a++) {
            float p = (float)pos[s * 3 + a];
            for (int k = 0; k < F; k++) {
                float th = p * m->inv_freq[k];
                float cs = cosf(th), sn = sinf(th);
                int j = a * F + k;
                cos_h[s * R + j] = cs, cos_h[s * R + j + 3 * F] = cs;
                sin_h[s * R + j] = sn, sin_h[s * R + j + 3 * F] = sn;
            }
        }
    }
}

void dit_free_cache_entry(dit_model *m, dit_adaln_entry *c) {
    h3_free(m->be, c->blocks);
    h3_free(m->be, c->final);
}

/* Hands the pages of a weight that is a view of the file mapping back to the kernel (MADV_DONTNEED): the view stays
 * valid, a later read faults the pages in from the file (or the page cache) again. */
void dit_give_back_pages(const h3_tensor *w) {
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)w->data + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
    uintptr_t hi = ((uintptr_t)w->data + h3_tensor_nbytes(w)) & ~((uintptr_t)page - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

/* Gives a weight's memory back: file pages to the kernel, backend copies freed. Row views of it (no memory of their
 * own) stay in the owned list and must no longer be used. */
void dit_drop_tensor(dit_model *m, h3_tensor *w) {
    if (!w) return;
    void *data = w->data;
    for (int j = 0; j < m->n_owned; j++) {
        if (m->owned[j] != w) continue;
        if (m->st && (m->be->kind == H3_BACKEND_CPU || m->owned_is_view[j] == 2) && !dit_lora_owns(m, data))
            dit_give_back_pages(w); /* file pages */
        if (m->owned_is_view[j] != 1) { /* uploads (and the CPU's views of host memory), host tensors */
            if (m->owned_is_view[j] == 2) h3_tensor_free(w);
            else h3_weight_free(m->be, w);
            m->owned[j] = NULL;
        }
    }
    /* random weights: the host memory dit_new_random made for it */
    for (int i = 0; !m->st && m->mem && i < m->mem_names.n; i++)
        if (m->mem[i] && m->mem[i]->data == data && !(m->mem_on_backend && m->mem_on_backend[i]) && m->mem[i]->owns_data) {
            free(m->mem[i]->data);
            m->mem[i]->data = NULL;
        }
}

int dit_layer_skipped(const dit_model *m, int block) {
    return m->skip && block >= 0 && block < m->cfg.num_layers && m->skip[block];
}

int dit_quantize_blocks(dit_model *m, const char *flag, dit_quant_copy copy, void (*free_block)(h3_backend *, dit_block_w *),
                        h3_err *e) {
    for (int b = 0; b < m->cfg.num_layers; b++) {
        if (dit_layer_skipped(m, b)) continue;
        dit_block_w *w = &m->blocks[b];
        h3_tensor **src[DIT_QUANT_LINEARS] = {&w->attn.qkv, &w->attn.qkv_planar, &w->attn.to_q, &w->attn.to_k,
                                              &w->attn.to_v, &w->attn.to_out, &w->ff_in, &w->ff_down};
        for (int j = 0; j < DIT_QUANT_LINEARS; j++) {
            if (!*src[j]) continue;
            if (copy(m->be, w, j, *src[j], e) != 0 || h3_backend_check(m->be, e) != 0) {
                char why[sizeof e->msg];
                snprintf(why, sizeof why, "%s", e->msg);
                free_block(m->be, w);
                return h3_fail(e, "%s: block %d: %s", flag, b, why);
            }
            dit_drop_tensor(m, *src[j]);
            *src[j] = NULL;
        }
        w->ff_value = w->ff_gate = NULL; /* row views of the dropped ff_in */
    }
    return 0;
}
