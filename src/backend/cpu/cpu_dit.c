/* CPU twins of the DiT ops (ops.h): plain loops, OpenMP over rows. Compiled with
 * -ffp-contract=off: every product and sum below is one fp32 rounding, like the reference's
 * separate PyTorch ops; RND adds the bf16 rounding of each op in bf16 mode. */
#include "cpu_ops.h"
#include "cpu_lora.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define RND(v) ((flags & H3_BF16_OUT) ? h3_round_bf16(v) : (v))

void cpu_adaln_modulate(h3_backend *be, float *y, const float *x, int64_t rows, int64_t dim, const float *table,
                        int64_t table_stride, const int32_t *row_index, int64_t shift_off, int64_t scale_off,
                        int flags) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *t = table + (int64_t)row_index[r] * table_stride;
        const float *shift = t + shift_off, *scale = t + scale_off;
        const float *xr = x + r * dim;
        float *yr = y + r * dim;
        for (int64_t c = 0; c < dim; c++) {
            float one_plus = RND(1.0f + scale[c]);
            float prod = RND(xr[c] * one_plus);
            yr[c] = RND(prod + shift[c]);
        }
    }
}

void cpu_gated_residual(h3_backend *be, float *x, const float *branch, int64_t rows, int64_t dim,
                        const float *table, int64_t table_stride, const int32_t *row_index, int64_t gate_off,
                        int flags) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *gate = table + (int64_t)row_index[r] * table_stride + gate_off;
        const float *br = branch + r * dim;
        float *xr = x + r * dim;
        for (int64_t c = 0; c < dim; c++) xr[c] = RND(xr[c] + RND(gate[c] * br[c]));
    }
}

void cpu_swiglu(h3_backend *be, float *y, const float *value, const float *gate, int64_t n, int flags) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i];
        float s = RND(g / (1.0f + expf(-g)));
        y[i] = RND(value[i] * s);
    }
}

void cpu_rows_gather(h3_backend *be, float *dst, const float *src, const int32_t *index, int64_t n, int64_t dim) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++)
        memcpy(dst + i * dim, src + (int64_t)index[i] * dim, (size_t)dim * sizeof(float));
}

void cpu_rows_scatter(h3_backend *be, float *dst, const float *src, const int32_t *index, int64_t n, int64_t dim,
                      int flags) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float *d = dst + (int64_t)index[i] * dim;
        const float *s = src + i * dim;
        for (int64_t c = 0; c < dim; c++) d[c] = RND(s[c]);
    }
}

void cpu_qkv_deinterleave(h3_backend *be, float *q, float *k, float *v, const float *fused, int64_t rows,
                          int heads, int head_dim) {
    int64_t inner = (int64_t)heads * head_dim;
    size_t hb = (size_t)head_dim * sizeof(float);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *f = fused + r * 3 * inner;
        for (int h = 0; h < heads; h++) {
            const float *src = f + (int64_t)h * 3 * head_dim;
            memcpy(q + r * inner + (int64_t)h * head_dim, src, hb);
            memcpy(k + r * inner + (int64_t)h * head_dim, src + head_dim, hb);
            memcpy(v + r * inner + (int64_t)h * head_dim, src + 2 * head_dim, hb);
        }
    }
}

/* Tiles of 256 weight rows widened to fp32 (a [256, 5376] tile is 5.5 MB, cache-friendly for
 * OpenBLAS), each multiplied with one sgemm; the rows of a tile follow the block mapping. */
void cpu_matmul_rows(h3_backend *be, float *y, const float *x, int64_t M, const h3_tensor *w, int64_t N,
                     int64_t block_rows, int64_t block_stride, int64_t block_offset, int flags) {
    int64_t K = w->shape[1];
    if (M <= 0 || N <= 0) return;
    const int64_t tile = 256;
    float *buf = malloc((size_t)((tile < N ? tile : N) * K) * sizeof(float));
    const uint8_t *wb = w->data;
    size_t esz = h3_dtype_size(w->dtype);
    for (int64_t n0 = 0; n0 < N; n0 += tile) {
        int64_t nt = N - n0 < tile ? N - n0 : tile;
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < nt; r++) {
            int64_t n = n0 + r;
            int64_t src = (n / block_rows) * block_stride + block_offset + n % block_rows;
            h3_convert_to_f32(buf + r * K, wb + (size_t)(src * K) * esz, w->dtype, (size_t)K);
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)nt, (int)K, 1.0f, x, (int)K, buf, (int)K,
                    0.0f, y + n0, (int)N);
    }
    free(buf);
    if (flags & H3_BF16_OUT) {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < M * N; i++) y[i] = h3_round_bf16(y[i]);
    }
}

/* h3_lora_merge_into (ops_linear.def): the merge at load's arithmetic (cpu_lora.c, kept apart from the backend so
 * dit_lora.c and the fuzz target link it alone). The slot needs no ordering on the CPU: ops run in call order, so a
 * fill has finished when it returns. */
void cpu_lora_merge_into(h3_backend *be, h3_slot *slot, void *W, h3_dtype dt, const h3_lora_delta *d) {
    (void)slot;
    if (!h3_lora_delta_ok(be, W, dt, d)) return;
    const size_t na = (size_t)d->rank * (size_t)d->k, nb = (size_t)d->rank * (size_t)d->n;
    float *a = malloc((na ? na : 1) * sizeof *a), *b = malloc((nb ? nb : 1) * sizeof *b);
    if (!a || !b) {
        free(a), free(b);
        h3_backend_unsupported(be, "h3_lora_merge_into", "out of memory for the factors");
        return;
    }
    h3_convert_to_f32(a, d->A, dt, na); /* exact: the factors are in the weight's dtype */
    h3_convert_to_f32(b, d->B, dt, nb);
    cpu_lora_merge_rows(W, dt, d->n, d->k, d->row_group, d->group_stride, b, a, d->rank, d->scaling);
    free(a), free(b);
}
