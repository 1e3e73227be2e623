/* Dispatch of the convolution ops (backend_conv.h) to the CPU twin (cpu/cpu_conv.c) or CUDA, plus the
 * shared geometry checks. */
#include "backend_conv.h"

#include "cpu/cpu_conv.h"
#ifdef H3_CUDA /* twins in src/backend/cuda/cuda_conv.cu */
#include "cuda/cuda_conv.h"
#define CONV_DISPATCH(be, op, ...)                                  \
    do {                                                            \
        if ((be)->kind == H3_BACKEND_CUDA) cuda_##op(__VA_ARGS__);  \
        else cpu_##op(__VA_ARGS__);                                 \
    } while (0)
#define CONV_HAS_CUDA 1
#else
/* A build without CUDA has no CUDA backend; any other backend kind records a clean failure
 * instead of handing its pointers to the CPU twin (h3_backend_check reports it). */
#define CONV_DISPATCH(be, op, ...)                                                                    \
    do {                                                                                              \
        if ((be)->kind != H3_BACKEND_CPU) h3_backend_unsupported(be, "h3_" #op, "no twin on this backend"); \
        else cpu_##op(__VA_ARGS__);                                                                   \
    } while (0)
#define CONV_HAS_CUDA 0
#endif

int h3_conv_supported(const h3_backend *be) { return be->kind == H3_BACKEND_CPU || (CONV_HAS_CUDA && be->kind == H3_BACKEND_CUDA); }

/* One axis: padded length, kernel, stride -> output length (0 when the kernel does not fit). */
static int64_t axis_out(int64_t n_padded, int k, int s) { return n_padded < k ? 0 : (n_padded - k) / s + 1; }

int h3_conv3d_check(const h3_conv3d_geom *g, int64_t *tout, int64_t *hout, int64_t *wout, const char *what,
                    h3_err *e) {
    if (g->cin <= 0 || g->cout <= 0 || g->tin <= 0 || g->hin <= 0 || g->win <= 0)
        return h3_fail(e, "%s: conv3d needs positive sizes (cin %lld, cout %lld, input %lldx%lldx%lld)", what,
                       (long long)g->cin, (long long)g->cout, (long long)g->tin, (long long)g->hin,
                       (long long)g->win);
    if (g->kt <= 0 || g->kh <= 0 || g->kw <= 0 || g->st <= 0 || g->sh <= 0 || g->sw <= 0)
        return h3_fail(e, "%s: conv3d kernel and stride must be positive", what);
    if (g->pt0 < 0 || g->ph0 < 0 || g->ph1 < 0 || g->pw0 < 0 || g->pw1 < 0)
        return h3_fail(e, "%s: conv3d padding must be >= 0", what);
    if (g->spatial_pad == H3_PAD_REFLECT) {
        int ph = g->ph0 > g->ph1 ? g->ph0 : g->ph1, pw = g->pw0 > g->pw1 ? g->pw0 : g->pw1;
        if (ph >= g->hin || pw >= g->win)
            return h3_fail(e, "%s: reflect padding %d/%d needs the padded axis longer than the pad, got %lldx%lld "
                           "(input too small for this level)", what, ph, pw, (long long)g->hin, (long long)g->win);
    }
    int64_t t = axis_out(g->tin + g->pt0, g->kt, g->st);
    int64_t h = axis_out(g->hin + g->ph0 + g->ph1, g->kh, g->sh);
    int64_t w = axis_out(g->win + g->pw0 + g->pw1, g->kw, g->sw);
    if (t <= 0 || h <= 0 || w <= 0)
        return h3_fail(e, "%s: conv3d input %lldx%lldx%lld is smaller than the kernel %dx%dx%d", what,
                       (long long)g->tin, (long long)g->hin, (long long)g->win, g->kt, g->kh, g->kw);
    if (tout) *tout = t;
    if (hout) *hout = h;
    if (wout) *wout = w;
    return 0;
}

void h3_conv3d(h3_backend *be, float *y, const float *x, const h3_conv3d_geom *g, const float *w,
               const float *bias) {
    CONV_DISPATCH(be, conv3d, be, y, x, g, w, bias);
}

void h3_groupnorm_frames(h3_backend *be, float *y, const float *x, int64_t C, int64_t T, int64_t HW, int groups,
                         const float *w, const float *b, float eps, int silu) {
    CONV_DISPATCH(be, groupnorm_frames, be, y, x, C, T, HW, groups, w, b, eps, silu);
}
