/* CPU twins of the audio VAE ops (ops.h; docs/model/audio_vae.md section 4).
 * Convolutions are GEMMs through OpenBLAS: Conv1d = W[Cout, Cin*K] x im2col[Cin*K, tile] and
 * ConvTranspose1d = W^T[Cout*K, Cin] x X[Cin, tile] followed by a scatter-add (col2im). The column
 * buffers are tiled over time so a long clip never needs more than COL_FLOATS of scratch. The Snake
 * family is a plain OpenMP loop; the alias-free activation is fused and tiled (docs/model/audio_vae.md 4.9). */
#include "cpu_ops.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define COL_FLOATS ((int64_t)2 << 20) /* 8 MB of im2col / col2im scratch per call */
#define AF_TILE 512                   /* outputs per alias-free tile */
/* Below this many elements a loop runs on one thread: waking a team costs more than the work
 * (and on a busy machine much more). */
#define PAR_MIN ((int64_t)1 << 15)

static int64_t col_tile(int64_t rows, int64_t len) {
    int64_t t = COL_FLOATS / (rows > 0 ? rows : 1);
    if (t < 16) t = 16;
    return t < len ? t : len;
}

void cpu_conv1d(h3_backend *be, float *y, const float *x, int B, int Cin, int64_t L, const float *w,
                const float *bias, int Cout, int K, int stride, int pad, int dilation) {
    int64_t Lout = h3_conv1d_out_len(L, K, stride, pad, dilation);
    if (Lout <= 0) return;
    int64_t CK = (int64_t)Cin * K;
    int direct = K == 1 && stride == 1 && pad == 0; /* a 1x1 conv reads x itself */
    int64_t tile = direct ? Lout : col_tile(CK, Lout);
    float *col = direct ? NULL : malloc((size_t)(CK * tile) * sizeof(float));
    for (int b = 0; b < B; b++) {
        const float *xb = x + (int64_t)b * Cin * L;
        float *yb = y + (int64_t)b * Cout * Lout;
        for (int64_t t0 = 0; t0 < Lout; t0 += tile) {
            int64_t nt = Lout - t0 < tile ? Lout - t0 : tile;
            const float *src = xb + t0;
            int64_t ld = L;
            if (!direct) {
#pragma omp parallel for schedule(static) if (CK * nt > PAR_MIN)
                for (int64_t r = 0; r < CK; r++) {
                    const float *xr = xb + (r / K) * L;
                    int64_t off = (r % K) * (int64_t)dilation - pad;
                    float *cr = col + r * nt;
                    for (int64_t j = 0; j < nt; j++) {
                        int64_t i = (t0 + j) * stride + off;
                        cr[j] = (i >= 0 && i < L) ? xr[i] : 0.0f;
                    }
                }
                src = col;
                ld = nt;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Cout, (int)nt, (int)CK, 1.0f, w, (int)CK, src,
                        (int)ld, 0.0f, yb + t0, (int)Lout);
        }
        if (bias) {
#pragma omp parallel for schedule(static) if ((int64_t)Cout * Lout > PAR_MIN)
            for (int o = 0; o < Cout; o++) {
                float *yr = yb + (int64_t)o * Lout;
                for (int64_t t = 0; t < Lout; t++) yr[t] = yr[t] + bias[o];
            }
        }
    }
    free(col);
}

void cpu_conv_transpose1d(h3_backend *be, float *y, const float *x, int B, int Cin, int64_t L, const float *w,
                          const float *bias, int Cout, int K, int stride, int pad) {
    int64_t Lout = (L - 1) * stride - 2 * (int64_t)pad + K;
    if (Lout <= 0 || L <= 0) return;
    int64_t OK = (int64_t)Cout * K;
    int64_t tile = col_tile(OK, L);
    float *cols = malloc((size_t)(OK * tile) * sizeof(float));
    for (int b = 0; b < B; b++) {
        const float *xb = x + (int64_t)b * Cin * L;
        float *yb = y + (int64_t)b * Cout * Lout;
#pragma omp parallel for schedule(static) if ((int64_t)Cout * Lout > PAR_MIN)
        for (int o = 0; o < Cout; o++)
            for (int64_t n = 0; n < Lout; n++) yb[(int64_t)o * Lout + n] = 0.0f;
        for (int64_t t0 = 0; t0 < L; t0 += tile) {
            int64_t nt = L - t0 < tile ? L - t0 : tile;
            /* cols[(o,k), j] = sum_c w[c, o, k] x[c, t0 + j] */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)OK, (int)nt, Cin, 1.0f, w, (int)OK, xb + t0,
                        (int)L, 0.0f, cols, (int)nt);
            /* input i lands on output i*stride + k - pad; each o owns its output row (no races) */
#pragma omp parallel for schedule(static) if (OK * nt > PAR_MIN)
            for (int o = 0; o < Cout; o++) {
                float *yr = yb + (int64_t)o * Lout;
                for (int k = 0; k < K; k++) {
                    const float *cr = cols + ((int64_t)o * K + k) * nt;
                    for (int64_t j = 0; j < nt; j++) {
                        int64_t n = (t0 + j) * stride + k - pad;
                        if (n >= 0 && n < Lout) yr[n] += cr[j];
                    }
                }
            }
        }
        if (bias) {
#pragma omp parallel for schedule(static) if ((int64_t)Cout * Lout > PAR_MIN)
            for (int o = 0; o < Cout; o++) {
                float *yr = yb + (int64_t)o * Lout;
                for (int64_t n = 0; n < Lout; n++) yr[n] = yr[n] + bias[o];
            }
        }
    }
    free(cols);
}

/* x + inv * sin(freq * x)^2, in PyTorch's order: sin, square, times the reciprocal, add. */
static inline float snake1(float v, float freq, float inv) {
    float s = sinf(freq * v);
    return v + inv * (s * s);
}

void cpu_snake(h3_backend *be, float *y, const float *x, int B, int C, int64_t L, const float *freq,
               const float *inv) {
    int64_t rows = (int64_t)B * C;
#pragma omp parallel for schedule(static) if (rows * L > PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        int c = (int)(r % C);
        const float *xr = x + r * L;
        float *yr = y + r * L;
        for (int64_t t = 0; t < L; t++) yr[t] = snake1(xr[t], freq[c], inv[c]);
    }
}

static inline int64_t clampi(int64_t i, int64_t n) { return i < 0 ? 0 : (i >= n ? n - 1 : i); }

void cpu_snake_alias_free(h3_backend *be, float *y, const float *x, int B, int C, int64_t L, const float *freq,
                          const float *inv, const float *filt) {
    if (L <= 0) return;
    float f[H3_AF_TAPS];
    memcpy(f, filt, sizeof f);
    int64_t rows = (int64_t)B * C, tiles = (L + AF_TILE - 1) / AF_TILE, L2 = 2 * L;
#pragma omp parallel for schedule(static) if (rows * L > PAR_MIN / 8)
    for (int64_t job = 0; job < rows * tiles; job++) {
        int64_t r = job / tiles, t0 = (job % tiles) * AF_TILE, t1 = t0 + AF_TILE < L ? t0 + AF_TILE : L;
        int c = (int)(r % C);
        const float *xr = x + r * L;
        float *yr = y + r * L;
        float v[2 * AF_TILE + H3_AF_TAPS];
        /* the 2x signal samples this tile's outputs read (docs/model/audio_vae.md 4.8: 2t-5 .. 2t+6, edge-clamped) */
        int64_t m_lo = 2 * t0 - 5 < 0 ? 0 : 2 * t0 - 5;
        int64_t m_hi = 2 * (t1 - 1) + 6 > L2 - 1 ? L2 - 1 : 2 * (t1 - 1) + 6;
        for (int64_t m = m_lo; m <= m_hi; m++) {
            int64_t j = m >> 1;
            float acc = 0.0f;
            if ((m & 1) == 0) /* u[2j] = 2 sum_r f[2r+1] x[j+2-r] (docs/model/audio_vae.md 4.7) */
                for (int rr = 0; rr < 6; rr++) acc += f[2 * rr + 1] * xr[clampi(j + 2 - rr, L)];
            else              /* u[2j+1] = 2 sum_r f[2r] x[j+3-r] */
                for (int rr = 0; rr < 6; rr++) acc += f[2 * rr] * xr[clampi(j + 3 - rr, L)];
            v[m - m_lo] = snake1(2.0f * acc, freq[c], inv[c]);
        }
        for (int64_t t = t0; t < t1; t++) {
            float acc = 0.0f;
            for (int k = 0; k < H3_AF_TAPS; k++) acc += f[k] * v[clampi(2 * t + k - 5, L2) - m_lo];
            yr[t] = acc;
        }
    }
}

void cpu_clamp(h3_backend *be, float *y, const float *x, float lo, float hi, int64_t n) {
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        y[i] = v < lo ? lo : (v > hi ? hi : v);
    }
}

void cpu_div_scalar(h3_backend *be, float *y, const float *x, float d, int64_t n) {
#pragma omp parallel for schedule(static) if (n > PAR_MIN)
    for (int64_t i = 0; i < n; i++) y[i] = x[i] / d;
}

void cpu_transpose_last2(h3_backend *be, float *y, const float *x, int B, int64_t R, int64_t C) {
    for (int b = 0; b < B; b++) {
        const float *xb = x + (int64_t)b * R * C;
        float *yb = y + (int64_t)b * R * C;
#pragma omp parallel for schedule(static) if (R * C > PAR_MIN)
        for (int64_t c = 0; c < C; c++)
            for (int64_t r = 0; r < R; r++) yb[c * R + r] = xb[r * C + c];
    }
}

void cpu_head_mean_pool(h3_backend *be, float *y, const float *x, int64_t rows, int H, int hd, int O) {
#pragma omp parallel for schedule(static) if (rows * H * hd > PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * (int64_t)H * hd;
        for (int o = 0; o < O; o++) {
            int e0 = (int)(((int64_t)o * hd) / O), e1 = (int)(((int64_t)(o + 1) * hd + O - 1) / O);
            float s = 0.0f;
            for (int e = e0; e < e1; e++) {
                float m = 0.0f; /* torch.mean over heads: sum, then divide */
                for (int h = 0; h < H; h++) m += xr[(int64_t)h * hd + e];
                s += m / (float)H;
            }
            y[r * O + o] = s / (float)(e1 - e0);
        }
    }
}
