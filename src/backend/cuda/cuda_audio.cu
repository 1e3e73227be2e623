/* CUDA twins of the audio VAE ops (ops.h), in the CPU twins' operation order
 * (cpu/cpu_audio.c; --fmad=false):
 *   conv1d            im2col of a tile of output columns (<= 16M floats) + fp32 cuBLASLt GEMM
 *                     W[Cout, Cin*K] . col[Cin*K, tile] (K = 1 convs read x directly), then the bias pass
 *   conv_transpose1d  the twin's own tiling (COL_FLOATS / (Cout*K) input columns): per tile one GEMM
 *                     W^T[Cout*K, Cin] . X[Cin, tile] and a gather that adds each output's contributions
 *                     in the twin's order (tiles, then taps ascending), so the col2im sums are the CPU's
 *   snake, alias-free snake, clamp, div, transpose, head-mean pool: element-wise in the twin's order
 *                     (the resampling filters' 6- and 12-tap sums sequential per output). */
#include "cuda_ops.h"

#include "cuda_gemm_rm.h"
#include "cuda_internal.h"

extern "C" {
#include "../conv_shapes.h" /* h3_conv1d_out_len, H3_AF_TAPS */
}

#define CONV_COL_CAP ((int64_t)16 << 20) /* floats of im2col scratch per conv1d tile (64 MB) */
#define TWIN_COL_FLOATS ((int64_t)2 << 20) /* cpu_audio.c's COL_FLOATS: the transposed conv's tiling */
#define AF_OUT 256                        /* outputs per block of the alias-free kernel */

/* ---- conv1d ---- */

/* col[r][j] = x[r / K][(t0 + j) * stride + (r % K) * dil - pad] (0 outside), r < Cin*K, j < nt */
static __global__ void k_im2col1d(float *col, const float *x, int64_t CK, int K, int64_t L, int64_t t0, int64_t nt,
                                  int stride, int pad, int dil) {
    for (int64_t r = blockIdx.y; r < CK; r += gridDim.y) {
        const float *xr = x + (r / K) * L;
        int64_t off = (r % K) * (int64_t)dil - pad;
        float *cr = col + r * nt;
        for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < nt; j += (int64_t)gridDim.x * blockDim.x) {
            int64_t i = (t0 + j) * stride + off;
            cr[j] = (i >= 0 && i < L) ? xr[i] : 0.0f;
        }
    }
}

/* y[o][t] = y[o][t] + bias[o] over rows = B*Cout (bias index o = row % Cout) */
static __global__ void k_bias_rows(float *y, const float *bias, int64_t rows, int64_t len, int Cout) {
    FOR_ROWS_COLS(r, t, rows, len) y[r * len + t] = y[r * len + t] + bias[r % Cout];
}

extern "C" void cuda_conv1d(h3_backend *be, float *y, const float *x, int B, int Cin, int64_t L, const float *w,
                            const float *bias, int Cout, int K, int stride, int pad, int dilation) {
    cuda_impl *c = cuda_of(be);
    int64_t Lout = h3_conv1d_out_len(L, K, stride, pad, dilation);
    if (Lout <= 0 || B <= 0 || Cout <= 0) return;
    int64_t CK = (int64_t)Cin * K;
    int direct = K == 1 && stride == 1 && pad == 0;
    int64_t tile = direct ? Lout : CONV_COL_CAP / (CK > 0 ? CK : 1);
    if (tile < 16) tile = 16;
    if (tile > Lout) tile = Lout;
    float *col = direct ? NULL : (float *)cuda_scratch(be, (size_t)(CK * tile) * sizeof(float));
    if (!direct && !col) return;
    for (int b = 0; b < B; b++) {
        const float *xb = x + (int64_t)b * Cin * L;
        float *yb = y + (int64_t)b * Cout * Lout;
        if (direct) {
            cuda_sgemm_rm(be, 0, 0, Cout, Lout, CK, w, CK, xb, L, yb, Lout, 1, 0, 0, 0);
            continue;
        }
        for (int64_t t0 = 0; t0 < Lout; t0 += tile) {
            int64_t nt = Lout - t0 < tile ? Lout - t0 : tile;
            int64_t gx = (nt + 255) / 256, gy = CK;
            if (gx > 64) gx = 64;
            if (gy > 65535) gy = 65535;
            k_im2col1d<<<dim3((unsigned)gx, (unsigned)gy), 256, 0, c->stream>>>(col, xb, CK, K, L, t0, nt, stride, pad,
                                                                                dilation);
            CUDA_LAUNCHED(be, "conv1d im2col");
            cuda_sgemm_rm(be, 0, 0, Cout, nt, CK, w, CK, col, nt, yb + t0, Lout, 1, 0, 0, 0);
        }
    }
    if (col) cuda_free(be, col);
    if (bias) {
        k_bias_rows<<<grid_rows_cols((int64_t)B * Cout, Lout, 256), 256, 0, c->stream>>>(y, bias, (int64_t)B * Cout,
                                                                                       Lout, Cout);
        CUDA_LAUNCHED(be, "conv1d bias");
    }
}

/* ---- conv_transpose1d ---- */

/* y[o][n] += cols[(o*K + k)][j] for input i = t0 + j landing on n = i*stride + k - pad, k ascending
 * (the twin's loop order for one output within a tile); n in [n0, n0 + nn). */
static __global__ void k_col2im1d(float *y, const float *cols, int Cout, int K, int64_t Lout, int64_t t0, int64_t nt,
                                  int stride, int pad, int64_t n0, int64_t nn) {
    FOR_ROWS_COLS(o, q, Cout, nn) {
        int64_t n = n0 + q;
        float acc = y[o * Lout + n];
        for (int k = 0; k < K; k++) {
            int64_t m = n + pad - k;
            if (m < 0 || m % stride) continue;
            int64_t j = m / stride - t0;
            if (j >= 0 && j < nt) acc += cols[(o * K + k) * nt + j];
        }
        y[o * Lout + n] = acc;
    }
}

extern "C" void cuda_conv_transpose1d(h3_backend *be, float *y, const float *x, int B, int Cin, int64_t L,
                                      const float *w, const float *bias, int Cout, int K, int stride, int pad) {
    cuda_impl *c = cuda_of(be);
    int64_t Lout = (L - 1) * stride - 2 * (int64_t)pad + K;
    if (Lout <= 0 || L <= 0 || B <= 0 || Cout <= 0) return;
    int64_t OK = (int64_t)Cout * K;
    int64_t tile = TWIN_COL_FLOATS / (OK > 0 ? OK : 1); /* cpu_audio.c col_tile(OK, L) */
    if (tile < 16) tile = 16;
    if (tile > L) tile = L;
    float *cols = (float *)cuda_scratch(be, (size_t)(OK * tile) * sizeof(float));
    if (!cols) return;
    CUDA_OK(be, cudaMemsetAsync(y, 0, (size_t)((int64_t)B * Cout * Lout) * sizeof(float), c->stream));
    for (int b = 0; b < B; b++) {
        const float *xb = x + (int64_t)b * Cin * L;
        float *yb = y + (int64_t)b * Cout * Lout;
        for (int64_t t0 = 0; t0 < L; t0 += tile) {
            int64_t nt = L - t0 < tile ? L - t0 : tile;
            /* cols[(o,k)][j] = sum_c w[c][(o,k)] x[c][t0 + j] */
            cuda_sgemm_rm(be, 1, 0, OK, nt, Cin, w, OK, xb + t0, L, cols, nt, 1, 0, 0, 0);
            int64_t n0 = t0 * stride - pad, n1 = (t0 + nt - 1) * stride + K - 1 - pad;
            if (n0 < 0) n0 = 0;
            if (n1 > Lout - 1) n1 = Lout - 1;
            if (n1 < n0) continue;
            k_col2im1d<<<grid_rows_cols(Cout, n1 - n0 + 1, 256), 256, 0, c->stream>>>(yb, cols, Cout, K, Lout, t0, nt,
                                                                                      stride, pad, n0, n1 - n0 + 1);
            CUDA_LAUNCHED(be, "conv_transpose1d col2im");
        }
    }
    cuda_free(be, cols);
    if (bias) {
        k_bias_rows<<<grid_rows_cols((int64_t)B * Cout, Lout, 256), 256, 0, c->stream>>>(y, bias, (int64_t)B * Cout,
                                                                                       Lout, Cout);
        CUDA_LAUNCHED(be, "conv_transpose1d bias");
    }
}

/* ---- Snake family ---- */

static __device__ __forceinline__ float snake1(float v, float freq, float inv) {
    float s = sinf(freq * v);
    return v + inv * (s * s);
}

static __global__ void k_snake(float *y, const float *x, int64_t rows, int64_t L, int C, const float *freq,
                               const float *inv) {
    FOR_ROWS_COLS(r, t, rows, L) {
        int ch = (int)(r % C);
        y[r * L + t] = snake1(x[r * L + t], freq[ch], inv[ch]);
    }
}

extern "C" void cuda_snake(h3_backend *be, float *y, const float *x, int B, int C, int64_t L, const float *freq,
                           const float *inv) {
    int64_t rows = (int64_t)B * C;
    if (rows <= 0 || L <= 0) return;
    k_snake<<<grid_rows_cols(rows, L, 256), 256, 0, cuda_of(be)->stream>>>(y, x, rows, L, C, freq, inv);
    CUDA_LAUNCHED(be, "snake");
}

static __device__ __forceinline__ int64_t clampi(int64_t i, int64_t n) { return i < 0 ? 0 : (i >= n ? n - 1 : i); }

/* One block: AF_OUT outputs [t0, t1) of one row. The 2x signal samples they read (docs/model/audio_vae.md 4.8:
 * 2t-5 .. 2t+6, edge-clamped) are formed once in shared memory, each as the twin forms it. */
static __global__ void k_snake_alias_free(float *y, const float *x, int64_t L, int64_t tiles, int C,
                                          const float *freq, const float *inv, const float *filt) {
    __shared__ float f[H3_AF_TAPS];
    __shared__ float v[2 * AF_OUT + H3_AF_TAPS];
    int64_t r = blockIdx.x / tiles, t0 = (blockIdx.x % tiles) * AF_OUT;
    int64_t t1 = t0 + AF_OUT < L ? t0 + AF_OUT : L, L2 = 2 * L;
    int ch = (int)(r % C);
    const float *xr = x + r * L;
    if (threadIdx.x < H3_AF_TAPS) f[threadIdx.x] = filt[threadIdx.x];
    __syncthreads();
    float fr = freq[ch], iv = inv[ch];
    int64_t m_lo = 2 * t0 - 5 < 0 ? 0 : 2 * t0 - 5;
    int64_t m_hi = 2 * (t1 - 1) + 6 > L2 - 1 ? L2 - 1 : 2 * (t1 - 1) + 6;
    for (int64_t m = m_lo + threadIdx.x; m <= m_hi; m += blockDim.x) {
        int64_t j = m >> 1;
        float acc = 0.0f;
        if ((m & 1) == 0)
            for (int rr = 0; rr < 6; rr++) acc += f[2 * rr + 1] * xr[clampi(j + 2 - rr, L)];
        else
            for (int rr = 0; rr < 6; rr++) acc += f[2 * rr] * xr[clampi(j + 3 - rr, L)];
        v[m - m_lo] = snake1(2.0f * acc, fr, iv);
    }
    __syncthreads();
    for (int64_t t = t0 + threadIdx.x; t < t1; t += blockDim.x) {
        float acc = 0.0f;
        for (int k = 0; k < H3_AF_TAPS; k++) acc += f[k] * v[clampi(2 * t + k - 5, L2) - m_lo];
        y[r * L + t] = acc;
    }
}

extern "C" void cuda_snake_alias_free(h3_backend *be, float *y, const float *x, int B, int C, int64_t L,
                                      const float *freq, const float *inv, const float *filt) {
    int64_t rows = (int64_t)B * C;
    if (rows <= 0 || L <= 0) return;
    int64_t tiles = (L + AF_OUT - 1) / AF_OUT;
    int64_t blocks = rows * tiles;
    if (blocks > 0x7fffffffLL) {
        cuda_record_error(be, "snake_alias_free", "too many rows x tiles for one launch");
        return;
    }
    k_snake_alias_free<<<(unsigned)blocks, AF_OUT, 0, cuda_of(be)->stream>>>(y, x, L, tiles, C, freq, inv, filt);
    CUDA_LAUNCHED(be, "snake_alias_free");
}

/* ---- small helpers ---- */

static __global__ void k_clamp(float *y, const float *x, float lo, float hi, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float v = x[i];
        y[i] = v < lo ? lo : (v > hi ? hi : v);
    }
}

extern "C" void cuda_clamp(h3_backend *be, float *y, const float *x, float lo, float hi, int64_t n) {
    if (n <= 0) return;
    k_clamp<<<cuda_blocks(n, 256), 256, 0, cuda_of(be)->stream>>>(y, x, lo, hi, n);
    CUDA_LAUNCHED(be, "clamp");
}

static __global__ void k_div_scalar(float *y, const float *x, float d, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = x[i] / d; /* IEEE division (nvcc's default -prec-div=true) */
}

extern "C" void cuda_div_scalar(h3_backend *be, float *y, const float *x, float d, int64_t n) {
    if (n <= 0) return;
    k_div_scalar<<<cuda_blocks(n, 256), 256, 0, cuda_of(be)->stream>>>(y, x, d, n);
    CUDA_LAUNCHED(be, "div_scalar");
}

/* 32x32 tiles through shared memory; blockIdx.z = item */
static __global__ void k_transpose(float *y, const float *x, int64_t R, int64_t C) {
    __shared__ float tile[32][33];
    const float *xb = x + (int64_t)blockIdx.z * R * C;
    float *yb = y + (int64_t)blockIdx.z * R * C;
    for (int64_t r0 = (int64_t)blockIdx.y * 32; r0 < R; r0 += (int64_t)gridDim.y * 32)
        for (int64_t c0 = (int64_t)blockIdx.x * 32; c0 < C; c0 += (int64_t)gridDim.x * 32) {
            for (int i = threadIdx.y; i < 32; i += blockDim.y) {
                int64_t r = r0 + i, cc = c0 + threadIdx.x;
                if (r < R && cc < C) tile[i][threadIdx.x] = xb[r * C + cc];
            }
            __syncthreads();
            for (int i = threadIdx.y; i < 32; i += blockDim.y) {
                int64_t cc = c0 + i, r = r0 + threadIdx.x;
                if (r < R && cc < C) yb[cc * R + r] = tile[threadIdx.x][i];
            }
            __syncthreads();
        }
}

extern "C" void cuda_transpose_last2(h3_backend *be, float *y, const float *x, int B, int64_t R, int64_t C) {
    if (B <= 0 || R <= 0 || C <= 0) return;
    int64_t gx = (C + 31) / 32, gy = (R + 31) / 32;
    if (gx > 1024) gx = 1024;
    if (gy > 1024) gy = 1024;
    k_transpose<<<dim3((unsigned)gx, (unsigned)gy, (unsigned)B), dim3(32, 8), 0, cuda_of(be)->stream>>>(y, x, R, C);
    CUDA_LAUNCHED(be, "transpose_last2");
}

static __global__ void k_head_mean_pool(float *y, const float *x, int64_t rows, int H, int hd, int O) {
    FOR_ROWS_COLS(r, o, rows, O) {
        const float *xr = x + r * (int64_t)H * hd;
        int e0 = (int)(((int64_t)o * hd) / O), e1 = (int)(((int64_t)(o + 1) * hd + O - 1) / O);
        float s = 0.0f;
        for (int e = e0; e < e1; e++) {
            float m = 0.0f;
            for (int h = 0; h < H; h++) m += xr[(int64_t)h * hd + e];
            s += m / (float)H;
        }
        y[r * O + o] = s / (float)(e1 - e0);
    }
}

extern "C" void cuda_head_mean_pool(h3_backend *be, float *y, const float *x, int64_t rows, int H, int hd, int O) {
    if (rows <= 0 || O <= 0) return;
    k_head_mean_pool<<<grid_rows_cols(rows, O, 64), 64, 0, cuda_of(be)->stream>>>(y, x, rows, H, hd, O);
    CUDA_LAUNCHED(be, "head_mean_pool");
}
