/* Audio sample-rate conversion as the reference does it: torchaudio.transforms.Resample(orig,
 * new) with its defaults (windowed sinc, Hann window, lowpass_filter_width 6, rolloff 0.99;
 * torchaudio functional.py _get_sinc_resample_kernel / _apply_sinc_resample_kernel), which
 * diffusers' _normalize_audio_condition applies to reference audio (docs/model/audio_vae.md 7.2).
 *
 * The kernel is computed in double with the reference's rounding points (the phase offset -j/new
 * is a float32 division in torch) and stored as float, like the transform's cached buffer. Taps
 * whose argument the reference clamps to +-6 zero crossings evaluate to ~1e-49 and round to 0.0f,
 * so only the window around each phase is kept; that also bounds memory for odd rate pairs. */
#include "media_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define LOWPASS_WIDTH 6
#define ROLLOFF       0.99

typedef struct sinc_phase {
    int    first;   /* first tap index (into the padded input window of this phase) */
    int    count;
    float *w;
} sinc_phase;

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) { int64_t t = a % b; a = b; b = t; }
    return a;
}

int media_resample(const float *in, int64_t len, int orig_rate, int new_rate, float **out, int64_t *out_len,
                   const char *name, h3_err *e)
{
    *out = NULL;
    *out_len = 0;
    if (orig_rate <= 0 || new_rate <= 0) return h3_fail(e, "%s: bad sample rates %d -> %d", name, orig_rate, new_rate);
    int64_t g = gcd64(orig_rate, new_rate);
    int64_t o = orig_rate / g, n = new_rate / g;
    double base = (double)(o < n ? o : n) * ROLLOFF;
    int64_t width = (int64_t)ceil(LOWPASS_WIDTH * (double)o / base);
    int64_t taps = 2 * width + o;
    double scale = base / (double)o;

    sinc_phase *ph = calloc((size_t)n, sizeof *ph);
    if (!ph) return h3_fail(e, "%s: out of memory for the resampler", name);
    int rc = 0;
    for (int64_t j = 0; j < n && !rc; j++) {
        float tj = (float)(-j) / (float)n;   /* torch: int64 arange / int -> float32 */
        /* Taps with |(tj + (k - width) / o) * base| < 6, plus a margin; the rest are exact zeros. */
        double lo = (-LOWPASS_WIDTH / base - (double)tj) * (double)o + (double)width - 2.0;
        double hi = (LOWPASS_WIDTH / base - (double)tj) * (double)o + (double)width + 2.0;
        int64_t k0 = lo < 0 ? 0 : (int64_t)lo, k1 = hi >= (double)taps ? taps : (int64_t)hi + 1;
        if (k1 < k0) k1 = k0;
        ph[j].first = (int)k0;
        ph[j].count = (int)(k1 - k0);
        ph[j].w = malloc(sizeof(float) * (size_t)(ph[j].count ? ph[j].count : 1));
        if (!ph[j].w) { rc = h3_fail(e, "%s: out of memory for the resampler", name); break; }
        for (int64_t k = k0; k < k1; k++) {
            double idx = (double)(k - width) / (double)o;
            double t = (double)tj + idx;
            t *= base;
            if (t < -LOWPASS_WIDTH) t = -LOWPASS_WIDTH;
            if (t > LOWPASS_WIDTH) t = LOWPASS_WIDTH;
            double win = cos(t * M_PI / LOWPASS_WIDTH / 2);
            win = win * win;
            t *= M_PI;
            double kv = t == 0.0 ? 1.0 : sin(t) / t;
            kv *= win * scale;
            ph[j].w[k - k0] = (float)kv;
        }
    }
    /* Output length ceil(new * len / orig) (reduced rates), positions p * n + j, each the dot
     * product of phase j with the zero-padded input starting at p * o - width. */
    int64_t target = (int64_t)ceil((double)(n * len) / (double)o);
    float *y = rc ? NULL : malloc(sizeof(float) * (size_t)(target > 0 ? target : 1));
    if (!rc && !y) rc = h3_fail(e, "%s: out of memory for resampled audio", name);
    for (int64_t m = 0; !rc && m < target; m++) {
        int64_t p = m / n, j = m % n;
        int64_t start = p * o - width + ph[j].first;
        const float *w = ph[j].w;
        double acc = 0.0;
        for (int k = 0; k < ph[j].count; k++) {
            int64_t i = start + k;
            if (i >= 0 && i < len) acc += (double)w[k] * (double)in[i];
        }
        y[m] = (float)acc;
    }
    for (int64_t j = 0; j < n; j++) free(ph[j].w);
    free(ph);
    if (rc) { free(y); return -1; }
    *out = y;
    *out_len = target;
    return 0;
}
