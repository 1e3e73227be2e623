/* CUDA twins of the video VAE encoder's ops (ops.h), after cpu/cpu_conv.c:
 *   conv3d            im2col of a tile of flattened output positions (t, i, j) (<= 64M floats of
 *                     scratch, padding applied while gathering) + one fp32 cuBLASLt GEMM per tile
 *                     y[:, tile] = W[Cout, Cin*kt*kh*kw] . col; pointwise convs read x directly; then
 *                     the bias pass (y = y + b, the twin's order)
 *   groupnorm_frames  per (frame, group): the sum and the centred sum of squares in double (fixed-order
 *                     two-level reduction instead of the twin's sequential one), the twin's fp32
 *                     normalization, affine and SiLU. */
#include "cuda_ops.h"

#include "cuda_gemm_rm.h"
#include "cuda_internal.h"

#define CONV3D_COL_CAP ((int64_t)64 << 20)

struct geom_dev {
    int64_t cin, tin, hin, win, tout, hout, wout;
    int     kt, kh, kw, st, sh, sw, pt0, ph0, pw0, reflect;
};

static __device__ __forceinline__ int64_t pad_index(int64_t q, int64_t n, int reflect) {
    if (q >= 0 && q < n) return q;
    if (!reflect) return -1;
    return q < 0 ? -q : 2 * (n - 1) - q;
}

/* col[k][p - p0] for k < Cin*kt*kh*kw (blockIdx.y strides k) and output positions p in [p0, p0 + np) */
static __global__ void k_im2col3d(float *col, const float *x, geom_dev g, int64_t Kt, int64_t p0, int64_t np) {
    const int64_t plane_in = g.hin * g.win, vol_in = g.tin * plane_in, plane_out = g.hout * g.wout;
    for (int64_t k = blockIdx.y; k < Kt; k += gridDim.y) {
        int v = (int)(k % g.kw), u = (int)(k / g.kw % g.kh), a = (int)(k / (g.kw * g.kh) % g.kt);
        int64_t ci = k / ((int64_t)g.kw * g.kh * g.kt);
        const float *xc = x + ci * vol_in;
        float *dst = col + k * np;
        for (int64_t q = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; q < np; q += (int64_t)gridDim.x * blockDim.x) {
            int64_t p = p0 + q;
            int64_t t = p / plane_out, rem = p - t * plane_out;
            int64_t i = rem / g.wout, j = rem - i * g.wout;
            int64_t ft = t * g.st + a - g.pt0;
            float val = 0.0f;
            if (ft >= 0 && ft < g.tin) {
                int64_t sy = pad_index(i * g.sh + u - g.ph0, g.hin, g.reflect);
                int64_t sx = pad_index(j * g.sw + v - g.pw0, g.win, g.reflect);
                if (sy >= 0 && sx >= 0) val = xc[ft * plane_in + sy * g.win + sx];
            }
            dst[q] = val;
        }
    }
}

static __global__ void k_bias_rows3(float *y, const float *bias, int64_t rows, int64_t len) {
    FOR_ROWS_COLS(r, i, rows, len) y[r * len + i] = y[r * len + i] + bias[r];
}

extern "C" void cuda_conv3d(h3_backend *be, float *y, const float *x, const h3_conv3d_geom *g, const float *w,
                            const float *bias) {
    cuda_impl *c = cuda_of(be);
    int64_t tout = 0, hout = 0, wout = 0;
    if (h3_conv3d_check(g, &tout, &hout, &wout, "conv3d", NULL) != 0) {
        cuda_record_error(be, "conv3d", "invalid geometry");
        return;
    }
    const int64_t vol_in = g->tin * g->hin * g->win, vol_out = tout * hout * wout;
    const int64_t K = g->cin * g->kt * g->kh * g->kw;
    if (g->kt == 1 && g->kh == 1 && g->kw == 1 && g->st == 1 && g->sh == 1 && g->sw == 1 && g->pt0 == 0 &&
        g->ph0 == 0 && g->ph1 == 0 && g->pw0 == 0 && g->pw1 == 0) {
        cuda_sgemm_rm(be, 0, 0, g->cout, vol_out, K, w, K, x, vol_in, y, vol_out, 1, 0, 0, 0);
    } else {
        int64_t tile = CONV3D_COL_CAP / K;
        if (tile < 256) tile = 256;
        if (tile > vol_out) tile = vol_out;
        float *col = (float *)cuda_scratch(be, (size_t)(K * tile) * sizeof(float));
        if (!col) return;
        geom_dev gd = {g->cin, g->tin, g->hin, g->win, tout, hout, wout, g->kt, g->kh, g->kw, g->st, g->sh, g->sw,
                       g->pt0, g->ph0, g->pw0, g->spatial_pad == H3_PAD_REFLECT};
        for (int64_t p0 = 0; p0 < vol_out; p0 += tile) {
            int64_t np = vol_out - p0 < tile ? vol_out - p0 : tile;
            int64_t gx = (np + 255) / 256, gy = K;
            if (gx > 32) gx = 32;
            if (gy > 65535) gy = 65535;
            k_im2col3d<<<dim3((unsigned)gx, (unsigned)gy), 256, 0, c->stream>>>(col, x, gd, K, p0, np);
            CUDA_LAUNCHED(be, "conv3d im2col");
            cuda_sgemm_rm(be, 0, 0, g->cout, np, K, w, K, col, np, y + p0, vol_out, 1, 0, 0, 0);
        }
        cuda_free(be, col);
    }
    if (bias) {
        k_bias_rows3<<<grid_rows_cols(g->cout, vol_out, 256), 256, 0, c->stream>>>(y, bias, g->cout, vol_out);
        CUDA_LAUNCHED(be, "conv3d bias");
    }
}

/* ---- per-frame GroupNorm ---- */

#define GN_SEG 8192 /* values of one channel-frame row per partial sum */
#define GN_THREADS 256

/* partial[tg][c_local * nseg + seg] = sum over one segment of channel c0 + c_local, frame t, of
 * x (pass 0) or (x - mean[tg])^2 (pass 1), in double, fixed-order block tree. grid (cg*nseg, T*groups). */
static __global__ void k_gn_partial(double *partial, const float *x, const double *mean, int64_t vol, int64_t HW,
                                    int64_t cg, int64_t nseg, int groups, int pass) {
    __shared__ double red[GN_THREADS];
    int64_t tg = blockIdx.y, t = tg / groups, gi = tg % groups;
    int64_t cl = blockIdx.x / nseg, seg = blockIdx.x % nseg;
    const float *xc = x + (gi * cg + cl) * vol + t * HW;
    int64_t p0 = seg * GN_SEG, p1 = p0 + GN_SEG < HW ? p0 + GN_SEG : HW;
    double m = pass ? mean[tg] : 0.0, s = 0.0;
    for (int64_t p = p0 + threadIdx.x; p < p1; p += GN_THREADS) {
        double d = (double)xc[p];
        if (pass) d = (d - m) * (d - m);
        s += d;
    }
    red[threadIdx.x] = s;
    __syncthreads();
    for (int o = GN_THREADS / 2; o > 0; o >>= 1) {
        if (threadIdx.x < o) red[threadIdx.x] += red[threadIdx.x + o];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[tg * gridDim.x + blockIdx.x] = red[0];
}

/* pass 0: mean[tg] = sum / cnt; pass 1: mr[2tg] = (float)mean, mr[2tg+1] = rstd (the twin's formulas) */
static __global__ void k_gn_finish(const double *partial, double *mean, float *mr, int64_t ntg, int64_t nparts,
                                   int64_t cnt, float eps, int pass) {
    for (int64_t tg = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; tg < ntg; tg += (int64_t)gridDim.x * blockDim.x) {
        double s = 0.0;
        for (int64_t i = 0; i < nparts; i++) s += partial[tg * nparts + i];
        if (!pass) {
            mean[tg] = s / (double)cnt;
        } else {
            mr[2 * tg] = (float)mean[tg];
            mr[2 * tg + 1] = 1.0f / sqrtf((float)(s / (double)cnt) + eps);
        }
    }
}

/* rows (c, t) of HW values: y = silu?((x - m) * rstd * w[c] + b[c]) */
static __global__ void k_gn_apply(float *y, const float *x, const float *mr, const float *w, const float *b,
                                  int64_t C, int64_t T, int64_t HW, int64_t cg, int groups, int silu) {
    FOR_ROWS_COLS(row, p, C * T, HW) {
        int64_t ch = row / T, t = row % T;
        int64_t tg = t * groups + ch / cg;
        float m = mr[2 * tg], rstd = mr[2 * tg + 1];
        float wc = w ? w[ch] : 1.0f, bc = b ? b[ch] : 0.0f;
        int64_t idx = ch * T * HW + t * HW + p;
        float v = (x[idx] - m) * rstd;
        v = v * wc + bc;
        if (silu) v = v / (1.0f + expf(-v));
        y[idx] = v;
    }
}

extern "C" void cuda_groupnorm_frames(h3_backend *be, float *y, const float *x, int64_t C, int64_t T, int64_t HW,
                                      int groups, const float *w, const float *b, float eps, int silu) {
    cuda_impl *c = cuda_of(be);
    if (C <= 0 || T <= 0 || HW <= 0 || groups <= 0) return;
    const int64_t cg = C / groups, vol = T * HW, ntg = T * groups, nseg = (HW + GN_SEG - 1) / GN_SEG;
    const int64_t nparts = cg * nseg;
    if (ntg > 65535) {
        cuda_record_error(be, "groupnorm_frames", "more than 65535 frame x group pairs");
        return;
    }
    double *partial = (double *)cuda_scratch(be, (size_t)(ntg * nparts + ntg) * sizeof(double));
    float *mr = (float *)cuda_scratch(be, (size_t)(2 * ntg) * sizeof(float));
    if (!partial || !mr) {
        if (partial) cuda_free(be, partial);
        if (mr) cuda_free(be, mr);
        return;
    }
    double *mean = partial + ntg * nparts;
    dim3 grid((unsigned)nparts, (unsigned)ntg);
    unsigned fb = (unsigned)((ntg + 127) / 128);
    for (int pass = 0; pass < 2; pass++) {
        k_gn_partial<<<grid, GN_THREADS, 0, c->stream>>>(partial, x, mean, vol, HW, cg, nseg, groups, pass);
        CUDA_LAUNCHED(be, "groupnorm_frames partial");
        k_gn_finish<<<fb, 128, 0, c->stream>>>(partial, mean, mr, ntg, nparts, cg * HW, eps, pass);
        CUDA_LAUNCHED(be, "groupnorm_frames finish");
    }
    k_gn_apply<<<grid_rows_cols(C * T, HW, 256), 256, 0, c->stream>>>(y, x, mr, w, b, C, T, HW, cg, groups, silu);
    CUDA_LAUNCHED(be, "groupnorm_frames apply");
    cuda_free(be, partial);
    cuda_free(be, mr);
}
