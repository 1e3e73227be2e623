/* PIL-compatible separable resampling of uint8 RGB (see resize.h). Written from the algorithm's
 * description: per output pixel, the filter is evaluated at the input pixel centres inside the
 * (scaled) support, normalized to sum 1, quantized to 22-bit fixed point; each pass accumulates
 * integer products from a half-unit bias and keeps the integer part clipped to 0..255. */
#include "resize.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PRECISION_BITS 22 /* fixed-point fraction bits of the 8-bit path */

static double filter_bilinear(double x) {
    if (x < 0.0) x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

static double filter_bicubic(double x) {
    const double a = -0.5;
    if (x < 0.0) x = -x;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
    return 0.0;
}

static double sinc(double x) {
    if (x == 0.0) return 1.0;
    x = x * M_PI;
    return sin(x) / x;
}

static double filter_lanczos(double x) {
    if (-3.0 <= x && x < 3.0) return sinc(x) * sinc(x / 3.0);
    return 0.0;
}

typedef struct taps {
    int      ksize;  /* taps per output pixel (stride of k) */
    int     *first;  /* [out] first input index */
    int     *count;  /* [out] taps used */
    int32_t *k;      /* [out][ksize] fixed-point weights */
    double  *kd;     /* [out][ksize] the same weights before quantization (float resampling) */
} taps;

static void taps_free(taps *t) {
    free(t->first);
    free(t->count);
    free(t->k);
    free(t->kd);
}

/* Weights for resampling in_size -> out_size over the whole axis (box [0, in_size)). */
static int taps_new(int in_size, int out_size, h3_resample f, taps *t, h3_err *e) {
    double (*fn)(double) = f == H3_RESAMPLE_BILINEAR ? filter_bilinear : f == H3_RESAMPLE_BICUBIC ? filter_bicubic : filter_lanczos;
    double support = f == H3_RESAMPLE_BILINEAR ? 1.0 : f == H3_RESAMPLE_BICUBIC ? 2.0 : 3.0;
    double scale = (double)in_size / out_size, filterscale = scale < 1.0 ? 1.0 : scale;
    support *= filterscale; /* downscaling widens the filter to cover the source footprint */
    memset(t, 0, sizeof *t);
    t->ksize = (int)ceil(support) * 2 + 1;
    t->first = malloc(sizeof(int) * (size_t)out_size);
    t->count = malloc(sizeof(int) * (size_t)out_size);
    t->k = malloc(sizeof(int32_t) * (size_t)out_size * (size_t)t->ksize);
    t->kd = malloc(sizeof(double) * (size_t)out_size * (size_t)t->ksize);
    double *w = malloc(sizeof(double) * (size_t)t->ksize);
    if (!t->first || !t->count || !t->k || !t->kd || !w) {
        free(w);
        taps_free(t);
        return h3_fail(e, "resize: out of memory for %d x %d filter taps", out_size, t->ksize);
    }
    const double inv = 1.0 / filterscale;
    for (int o = 0; o < out_size; o++) {
        double center = (o + 0.5) * scale;
        int lo = (int)(center - support + 0.5); /* C truncation, then clamped */
        if (lo < 0) lo = 0;
        int hi = (int)(center + support + 0.5);
        if (hi > in_size) hi = in_size;
        int n = hi - lo;
        double sum = 0.0;
        for (int i = 0; i < n; i++) {
            w[i] = fn((i + lo - center + 0.5) * inv);
            sum += w[i];
        }
        int32_t *k = t->k + (size_t)o * t->ksize;
        for (int i = 0; i < t->ksize; i++) {
            double v = i < n ? (sum != 0.0 ? w[i] / sum : w[i]) : 0.0;
            t->kd[(size_t)o * t->ksize + i] = v;
            /* round half away from zero into 22-bit fixed point */
            k[i] = v < 0 ? (int32_t)(-0.5 + v * (1 << PRECISION_BITS)) : (int32_t)(0.5 + v * (1 << PRECISION_BITS));
        }
        t->first[o] = lo;
        t->count[o] = n;
    }
    free(w);
    return 0;
}

static inline uint8_t clip8(int64_t acc) {
    int64_t v = acc >> PRECISION_BITS; /* floor */
    return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v;
}

/* rows [h][sw][3] -> [h][dw][3] */
static void pass_horizontal(const uint8_t *src, int sw, int h, uint8_t *dst, int dw, const taps *t) {
#pragma omp parallel for schedule(static)
    for (int y = 0; y < h; y++) {
        const uint8_t *in = src + (size_t)y * sw * 3;
        uint8_t *out = dst + (size_t)y * dw * 3;
        for (int x = 0; x < dw; x++) {
            const int32_t *k = t->k + (size_t)x * t->ksize;
            const uint8_t *p = in + (size_t)t->first[x] * 3;
            int64_t a0 = 1 << (PRECISION_BITS - 1), a1 = a0, a2 = a0;
            for (int i = 0; i < t->count[x]; i++) {
                a0 += (int64_t)p[3 * i + 0] * k[i];
                a1 += (int64_t)p[3 * i + 1] * k[i];
                a2 += (int64_t)p[3 * i + 2] * k[i];
            }
            out[3 * x + 0] = clip8(a0), out[3 * x + 1] = clip8(a1), out[3 * x + 2] = clip8(a2);
        }
    }
}

/* [sh][w][3] -> [dh][w][3] */
static void pass_vertical(const uint8_t *src, int w, uint8_t *dst, int dh, const taps *t) {
    const size_t row = (size_t)w * 3;
#pragma omp parallel for schedule(static)
    for (int y = 0; y < dh; y++) {
        const int32_t *k = t->k + (size_t)y * t->ksize;
        const uint8_t *in = src + (size_t)t->first[y] * row;
        uint8_t *out = dst + (size_t)y * row;
        for (size_t c = 0; c < row; c++) {
            int64_t a = 1 << (PRECISION_BITS - 1);
            for (int i = 0; i < t->count[y]; i++) a += (int64_t)in[(size_t)i * row + c] * k[i];
            out[c] = clip8(a);
        }
    }
}

int h3_resize_rgb(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh, h3_resample filter, h3_err *e) {
    if (sw < 1 || sh < 1 || dw < 1 || dh < 1)
        return h3_fail(e, "resize: sizes must be positive (%dx%d -> %dx%d)", sw, sh, dw, dh);
    if (filter != H3_RESAMPLE_BILINEAR && filter != H3_RESAMPLE_BICUBIC && filter != H3_RESAMPLE_LANCZOS)
        return h3_fail(e, "resize: unknown filter %d", (int)filter);
    if (sw == dw && sh == dh) {
        memcpy(dst, src, (size_t)sw * sh * 3);
        return 0;
    }
    taps th = {0}, tv = {0};
    uint8_t *tmp = NULL;
    int rc = -1;
    if (sw != dw && taps_new(sw, dw, filter, &th, e)) goto done;
    if (sh != dh && taps_new(sh, dh, filter, &tv, e)) goto done;
    if (sw == dw) { /* vertical only */
        pass_vertical(src, sw, dst, dh, &tv);
    } else if (sh == dh) { /* horizontal only */
        pass_horizontal(src, sw, sh, dst, dw, &th);
    } else if (dw > sw && dh < sh) {
        /* Pillow runs the vertical (reducing) pass first when the width grows and the height shrinks */
        tmp = malloc((size_t)dh * sw * 3);
        if (!tmp) {
            h3_fail(e, "resize: out of memory for a %dx%d intermediate", sw, dh);
            goto done;
        }
        pass_vertical(src, sw, tmp, dh, &tv);
        pass_horizontal(tmp, sw, dh, dst, dw, &th);
    } else {
        /* horizontal pass over the rows the vertical pass reads, then vertical */
        int y0 = tv.first[0], y1 = tv.first[dh - 1] + tv.count[dh - 1];
        tmp = malloc((size_t)(y1 - y0) * dw * 3);
        if (!tmp) {
            h3_fail(e, "resize: out of memory for a %dx%d intermediate", dw, y1 - y0);
            goto done;
        }
        pass_horizontal(src + (size_t)y0 * sw * 3, sw, y1 - y0, tmp, dw, &th);
        for (int y = 0; y < dh; y++) tv.first[y] -= y0;
        pass_vertical(tmp, dw, dst, dh, &tv);
    }
    rc = 0;
done:
    free(tmp);
    taps_free(&th);
    taps_free(&tv);
    return rc;
}

int h3_crop_rgb(const uint8_t *src, int sw, int sh, int left, int top, uint8_t *dst, int cw, int ch, h3_err *e) {
    if (left < 0 || top < 0 || cw < 1 || ch < 1 || left + cw > sw || top + ch > sh)
        return h3_fail(e, "crop: box (%d, %d, %d, %d) is outside the %dx%d image", left, top, left + cw, top + ch, sw, sh);
    for (int y = 0; y < ch; y++) memcpy(dst + (size_t)y * cw * 3, src + ((size_t)(top + y) * sw + left) * 3, (size_t)cw * 3);
    return 0;
}

/* ---- float RGB: the same taps, unquantized (double accumulation, results clamped to [0, 1]) ---- */

static float clip01(double v) { return v < 0.0 ? 0.0f : v > 1.0 ? 1.0f : (float)v; }

static void passf(const float *src, int n_lines, int in_len, size_t in_step, size_t line_step_in, float *dst,
                  int out_len, size_t out_step, size_t line_step_out, int channels_per_step, const taps *t,
                  int clamp) {
#pragma omp parallel for collapse(2) schedule(static)
    for (int l = 0; l < n_lines; l++)
        for (int o = 0; o < out_len; o++) {
            const double *k = t->kd + (size_t)o * t->ksize;
            for (int c = 0; c < channels_per_step; c++) {
                const float *p = src + (size_t)l * line_step_in + (size_t)t->first[o] * in_step + c;
                double a = 0.0;
                for (int i = 0; i < t->count[o]; i++) a += (double)p[(size_t)i * in_step] * k[i];
                float *q = dst + (size_t)l * line_step_out + (size_t)o * out_step + c;
                *q = clamp ? clip01(a) : (float)a;
            }
        }
    (void)in_len;
}

int h3_resize_rgbf(const float *src, int sw, int sh, float *dst, int dw, int dh, h3_resample filter, h3_err *e) {
    if (sw < 1 || sh < 1 || dw < 1 || dh < 1)
        return h3_fail(e, "resize: sizes must be positive (%dx%d -> %dx%d)", sw, sh, dw, dh);
    if (filter != H3_RESAMPLE_BILINEAR && filter != H3_RESAMPLE_BICUBIC && filter != H3_RESAMPLE_LANCZOS)
        return h3_fail(e, "resize: unknown filter %d", (int)filter);
    if (sw == dw && sh == dh) {
        memcpy(dst, src, sizeof(float) * (size_t)sw * sh * 3);
        return 0;
    }
    taps th = {0}, tv = {0};
    float *tmp = malloc(sizeof(float) * (size_t)dw * sh * 3);
    int rc = -1;
    if (!tmp) {
        h3_fail(e, "resize: out of memory for a %dx%d intermediate", dw, sh);
        goto done;
    }
    if (taps_new(sw, dw, filter, &th, e) || taps_new(sh, dh, filter, &tv, e)) goto done;
    /* horizontal: lines = rows, step 3 floats; vertical: lines = the dw*3 columns, step one row */
    passf(src, sh, sw, 3, (size_t)sw * 3, tmp, dw, 3, (size_t)dw * 3, 3, &th, 0);
    passf(tmp, 1, sh, (size_t)dw * 3, 0, dst, dh, (size_t)dw * 3, 0, dw * 3, &tv, 1);
    rc = 0;
done:
    free(tmp);
    taps_free(&th);
    taps_free(&tv);
    return rc;
}
