/* cpu_expf_shifted (src/backend/cpu/cpu_exp.h) against libm's expf one value at a time, bit for bit
 * (docs/architecture.md "The CPU twins' loops"):
 *  - floats across [-88, 0], the softmax rows' range (every 7th bit pattern; every one with --all, about 1.1e9
 *    values, ~10 s), in blocks of every length 0..BLK+3 so each tail and block edge is taken;
 *  - the values libm must decide: NaN, -inf, +-0, denormal and positive results, -87 and its neighbours;
 *  - softmax-like rows (scores minus a row max that is not one of them) with the shift applied inside. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/cpu_exp.h"
#include "test.h"

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* the floats with bit patterns start, start+step, ... up to last, through cpu_expf_shifted in blocks of a
 * varying length; returns the number of values that differ from expf, the count checked in *checked */
static int64_t sweep(uint32_t start, uint32_t last, uint32_t step, int64_t *checked) {
    enum { N = 4099 };
    static float x[N], y[N];
    int64_t bad = 0, len = 0;
    uint64_t u = start;
    *checked = 0;
    while (u <= last) {
        int64_t n = 0, want = len++ % N; /* 0, 1, 2, ... N-1, 0, ... */
        for (; n < want && u <= last; n++, u += step) x[n] = y[n] = from_bits((uint32_t)u);
        cpu_expf_shifted(y, n, 0.0f);
        for (int64_t i = 0; i < n; i++) {
            float r = expf(x[i]);
            if (memcmp(&r, &y[i], 4)) {
                if (bad < 5) fprintf(stderr, "  x %a: %a, expf %a\n", (double)x[i], (double)y[i], (double)r);
                bad++;
            }
        }
        *checked += n;
    }
    return bad;
}

int main(int argc, char **argv) {
    const int all = argc > 1 && !strcmp(argv[1], "--all");
    uint32_t last;
    float lo = -88.0f;
    memcpy(&last, &lo, 4);
    int64_t n, bad = sweep(0x80000000u, last, all ? 1 : 7, &n);
    printf("  [-88, 0]: %lld floats, %lld differ from expf\n", (long long)n, (long long)bad);
    CHECK(bad == 0 && n > (all ? 1000000000 : 150000000), "%lld of %lld differ", (long long)bad, (long long)n);

    /* the edges and the values outside the vector path's range */
    float sp[] = {NAN, -NAN, -INFINITY, INFINITY, 0.0f, -0.0f, 1.5f, 88.7f, 89.0f, -1e-45f, -87.0f,
                  nextafterf(-87.0f, 0.0f), nextafterf(-87.0f, -INFINITY), -87.3f, -100.0f, -103.9f, -104.0f,
                  -150.0f, 1e-7f, -1e-7f, -0.5f, -0.6931472f, -1.0f};
    const int ns = (int)(sizeof sp / sizeof sp[0]);
    for (int rep = 0; rep < 2; rep++) { /* alone (the scalar tail) and 4-aligned in a block */
        float y[64];
        int m = rep ? 24 : 3;
        int64_t diff = 0;
        for (int i0 = 0; i0 < ns; i0 += m) {
            int k = ns - i0 < m ? ns - i0 : m;
            memcpy(y, sp + i0, (size_t)k * 4);
            cpu_expf_shifted(y, k, 0.0f);
            for (int i = 0; i < k; i++) {
                float r = expf(sp[i0 + i]);
                diff += memcmp(&r, &y[i], 4) != 0;
            }
        }
        CHECK(diff == 0, "special values, blocks of %d: %lld differ", m, (long long)diff);
    }

    /* rows as the attentions give them: s - max(s), the subtraction inside */
    srand(7);
    int64_t diff = 0, total = 0;
    for (int row = 0; row < 200; row++) {
        float s[1031], want[1031];
        int len = 1 + rand() % 1031;
        float scale = powf(10.0f, (float)(rand() % 5) - 2.0f), mx = -INFINITY;
        for (int j = 0; j < len; j++) {
            s[j] = ((float)rand() / (float)RAND_MAX - 0.5f) * 40.0f * scale;
            mx = s[j] > mx ? s[j] : mx;
        }
        if (row % 3 == 0) s[rand() % len] = -INFINITY; /* a masked score */
        for (int j = 0; j < len; j++) want[j] = expf(s[j] - mx);
        cpu_expf_shifted(s, len, mx);
        for (int j = 0; j < len; j++) diff += memcmp(&s[j], &want[j], 4) != 0;
        total += len;
    }
    printf("  softmax rows: %lld values, %lld differ\n", (long long)total, (long long)diff);
    CHECK(diff == 0, "softmax rows: %lld of %lld differ", (long long)diff, (long long)total);
    TEST_END();
}
