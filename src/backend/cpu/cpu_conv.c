/* CPU convolutions: im2col of a bounded block of output positions (padding applied while gathering,
 * so no padded copy of the input exists) followed by one OpenBLAS sgemm per block.
 * Workspace per call is at most COL_FLOATS floats (32 MB), whatever the input size. */
#include "cpu_ops.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define COL_FLOATS ((int64_t)8 << 20)
/* Below this many elements a parallel region costs more than it saves (and oversubscribes small
 * machines whose OpenBLAS threads are spinning). */
#define PAR_MIN ((int64_t)1 << 15)

/* Source index on an axis of length n for padded coordinate q (already shifted by the leading pad);
 * -1 = a zero sample. Reflect mirrors without repeating the edge (docs/model/video_vae.md 4.1). */
static inline int64_t pad_index(int64_t q, int64_t n, int mode) {
    if (q >= 0 && q < n) return q;
    if (mode != H3_PAD_REFLECT) return -1;
    return q < 0 ? -q : 2 * (n - 1) - q;
}

static void add_bias_rows(float *y, const float *bias, int64_t rows, int64_t len, int64_t stride) {
    if (!bias) return;
#pragma omp parallel for schedule(static) if (rows * len >= PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        float *yr = y + r * stride;
        float b = bias[r];
        for (int64_t i = 0; i < len; i++) yr[i] += b;
    }
}

void cpu_conv3d(h3_backend *be, float *y, const float *x, const h3_conv3d_geom *g, const float *w,
                const float *bias) {
    int64_t tout = 0, hout = 0, wout = 0;
    if (h3_conv3d_check(g, &tout, &hout, &wout, "conv3d", NULL) != 0) return;
    const int64_t plane_in = g->hin * g->win, vol_in = g->tin * plane_in;
    const int64_t plane_out = hout * wout, vol_out = tout * plane_out;
    const int64_t K = g->cin * g->kt * g->kh * g->kw;

    /* Pointwise conv without padding or stride: the input already is the column matrix. */
    if (g->kt == 1 && g->kh == 1 && g->kw == 1 && g->st == 1 && g->sh == 1 && g->sw == 1 && g->pt0 == 0 &&
        g->ph0 == 0 && g->ph1 == 0 && g->pw0 == 0 && g->pw1 == 0) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)g->cout, (int)vol_out, (int)K, 1.0f, w, (int)K,
                    x, (int)vol_in, 0.0f, y, (int)vol_out);
        add_bias_rows(y, bias, g->cout, vol_out, vol_out);
        return;
    }

    int64_t rows_blk = COL_FLOATS / (K * wout);
    if (rows_blk < 1) rows_blk = 1;
    if (rows_blk > hout) rows_blk = hout;
    float *col = malloc((size_t)(K * rows_blk * wout) * sizeof(float));
    if (!col) return; /* callers size inputs; an OOM here leaves y untouched */
    for (int64_t t = 0; t < tout; t++) {
        for (int64_t i0 = 0; i0 < hout; i0 += rows_blk) {
            int64_t nr = hout - i0 < rows_blk ? hout - i0 : rows_blk, nb = nr * wout;
#pragma omp parallel for schedule(static) if (K * nb >= PAR_MIN)
            for (int64_t k = 0; k < K; k++) {
                int v = (int)(k % g->kw), u = (int)(k / g->kw % g->kh), a = (int)(k / (g->kw * g->kh) % g->kt);
                int64_t ci = k / (g->kw * g->kh * g->kt);
                float *dst = col + k * nb;
                int64_t ft = t * g->st + a - g->pt0; /* causal: only zeros are prepended */
                if (ft < 0 || ft >= g->tin) {
                    memset(dst, 0, (size_t)nb * sizeof(float));
                    continue;
                }
                const float *src = x + ci * vol_in + ft * plane_in;
                for (int64_t r = 0; r < nr; r++) {
                    int64_t sy = pad_index((i0 + r) * g->sh + u - g->ph0, g->hin, g->spatial_pad);
                    float *d = dst + r * wout;
                    if (sy < 0) {
                        memset(d, 0, (size_t)wout * sizeof(float));
                        continue;
                    }
                    const float *srow = src + sy * g->win;
                    for (int64_t j = 0; j < wout; j++) {
                        int64_t sx = pad_index(j * g->sw + v - g->pw0, g->win, g->spatial_pad);
                        d[j] = sx < 0 ? 0.0f : srow[sx];
                    }
                }
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)g->cout, (int)nb, (int)K, 1.0f, w, (int)K,
                        col, (int)nb, 0.0f, y + t * plane_out + i0 * wout, (int)vol_out);
        }
    }
    free(col);
    add_bias_rows(y, bias, g->cout, vol_out, vol_out);
}

void cpu_groupnorm_frames(h3_backend *be, float *y, const float *x, int64_t C, int64_t T, int64_t HW, int groups,
                          const float *w, const float *b, float eps, int silu) {
    const int64_t cg = C / groups, vol = T * HW;
#pragma omp parallel for collapse(2) schedule(static) if (C * vol >= PAR_MIN)
    for (int64_t t = 0; t < T; t++) {
        for (int g = 0; g < groups; g++) {
            const int64_t c0 = g * cg, cnt = cg * HW;
            double s = 0.0, ss = 0.0;
            for (int64_t c = c0; c < c0 + cg; c++) {
                const float *xc = x + c * vol + t * HW;
                for (int64_t p = 0; p < HW; p++) s += xc[p];
            }
            double mean = s / (double)cnt;
            for (int64_t c = c0; c < c0 + cg; c++) {
                const float *xc = x + c * vol + t * HW;
                for (int64_t p = 0; p < HW; p++) ss += ((double)xc[p] - mean) * ((double)xc[p] - mean);
            }
            float rstd = 1.0f / sqrtf((float)(ss / (double)cnt) + eps), m = (float)mean;
            for (int64_t c = c0; c < c0 + cg; c++) {
                const float *xc = x + c * vol + t * HW;
                float *yc = y + c * vol + t * HW;
                float wc = w ? w[c] : 1.0f, bc = b ? b[c] : 0.0f;
                for (int64_t p = 0; p < HW; p++) {
                    float v = (xc[p] - m) * rstd;
                    v = v * wc + bc;
                    if (silu) v = v / (1.0f + expf(-v));
                    yc[p] = v;
                }
            }
        }
    }
}
