/* The shape rules of the convolution ops (conv_shapes.h). */
#include "conv_shapes.h"

int64_t h3_conv1d_out_len(int64_t L, int K, int stride, int pad, int dilation) {
    int64_t span = (int64_t)dilation * (K - 1) + 1;
    int64_t n = L + 2 * (int64_t)pad - span;
    if (n < 0) return 0;
    return n / stride + 1;
}

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
