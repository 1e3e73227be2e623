/* MiniMaxH3Scheduler (docs/model/dit.md 7). Compiled with -ffp-contract=off: every expression below is rounded
 * once per operation exactly as torch's fp32 kernels are; the one fused multiply-add torch uses
 * (linspace's first half) is written as fmaf. */
#include "sched.h"

#include "../io/config.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sched_num_inference_steps_for_evaluations(int evaluations, int *num_inference_steps, h3_err *e) {
    if (evaluations < 1 || evaluations > 100000)
        return h3_fail(e, "--steps: must be between 1 and 100000 model evaluations, got %d", evaluations);
    *num_inference_steps = evaluations + 1;
    return 0;
}

/* torch.linspace(1, 0, n) on the CPU, fp32 (aten RangeFactoriesKernel): step = (end - start)/(n-1);
 * the first half counts up from start (fused: the kernel's start + step*i contracts to an FMA),
 * the second half counts down from end. */
static void linspace_1_to_0(float *b, int n) {
    const float step = (0.0f - 1.0f) / (float)(n - 1);
    const int halfway = n / 2;
    for (int i = 0; i < n; i++) {
        if (i < halfway) b[i] = fmaf(step, (float)i, 1.0f);
        else             b[i] = 0.0f - step * (float)(n - 1 - i);
    }
}

static int sched_alloc(sched *s, int n, h3_err *e) {
    s->sigmas = malloc(sizeof(float) * (size_t)n);
    s->timesteps = malloc(sizeof(float) * (size_t)(n > 1 ? n - 1 : 1));
    if (!s->sigmas || !s->timesteps) {
        sched_free(s);
        return h3_fail(e, "scheduler: out of memory for %d sigmas", n);
    }
    return 0;
}

static void fill_timesteps(sched *s) {
    for (int i = 0; i < s->num_sigmas - 1; i++) s->timesteps[i] = 1.0f - s->sigmas[i];
}

int sched_init(sched *s, int num_inference_steps, double shift, h3_err *e) {
    memset(s, 0, sizeof *s);
    if (num_inference_steps < 2 || num_inference_steps > 10000000)
        return h3_fail(e, "scheduler: num_inference_steps must be >= 2 (grid points incl. the terminal 0), got %d",
                       num_inference_steps);
    if (!(shift > 0.0) || !isfinite(shift))
        return h3_fail(e, "scheduler: shift must be positive, got %g", shift);
    if (sched_alloc(s, num_inference_steps, e)) return -1;
    const int n = num_inference_steps;
    float *b = malloc(sizeof(float) * (size_t)n);
    if (!b) {
        sched_free(s);
        return h3_fail(e, "scheduler: out of memory for %d sigmas", n);
    }
    linspace_1_to_0(b, n);
    /* sigmas = shift * base / (1 + (shift - 1) * base): torch casts the Python-float scalars to fp32
     * (shift - 1 is evaluated in double first), then four separately rounded fp32 ops. */
    const float s_f = (float)shift, sm1_f = (float)(shift - 1.0);
    int m = 0;
    for (int i = 0; i < n; i++) {
        float num = s_f * b[i];
        float den = 1.0f + sm1_f * b[i];
        float sig = num / den;
        /* unique_consecutive: drop a value bitwise equal to its predecessor. */
        if (m > 0 && memcmp(&sig, &s->sigmas[m - 1], sizeof sig) == 0) continue;
        s->sigmas[m++] = sig;
    }
    free(b);
    s->num_sigmas = m;
    fill_timesteps(s);
    return 0;
}

int sched_init_sigmas(sched *s, const float *sigmas, int n, h3_err *e) {
    memset(s, 0, sizeof *s);
    int ok = n >= 2 && sigmas[n - 1] == 0.0f;
    for (int i = 1; ok && i < n; i++) ok = sigmas[i] < sigmas[i - 1];
    if (!ok) return h3_fail(e, "scheduler: `sigmas` must hold at least two strictly decreasing values ending at 0.0");
    if (sched_alloc(s, n, e)) return -1;
    memcpy(s->sigmas, sigmas, sizeof(float) * (size_t)n);
    s->num_sigmas = n;
    fill_timesteps(s);
    return 0;
}

void sched_free(sched *s) {
    free(s->sigmas);
    free(s->timesteps);
    s->sigmas = s->timesteps = NULL;
    s->num_sigmas = 0;
}

int sched_index_for_timestep(const sched *s, float t, h3_err *e) {
    for (int i = 0; i < s->num_sigmas - 1; i++)
        if (s->timesteps[i] == t) return i;
    h3_fail(e, "scheduler: timestep %.9g is not in the schedule's timesteps", (double)t);
    return -1;
}

void sched_step(const sched *s, int i, const float *v, float *x, int64_t n) {
    const float t = s->timesteps[i];
    const float sigma_from_t = 1.0f - t;  /* docs/model/dit.md 7.3 step 1: from the timestep, not sigmas[i] */
    const float r = s->sigmas[i + 1] / s->sigmas[i];
    const float one_minus_r = 1.0f - r;
    if (s->training_euler) {
        const float d = s->sigmas[i] - s->sigmas[i + 1];
#pragma omp parallel for if (n > 65536) schedule(static)
        for (int64_t k = 0; k < n; k++) x[k] = x[k] + d * v[k];
        return;
    }
#pragma omp parallel for if (n > 65536) schedule(static)
    for (int64_t k = 0; k < n; k++) {
        float x0 = x[k] + sigma_from_t * v[k];
        x[k] = r * x[k] + one_minus_r * x0;
    }
}

int sched_config_load(const char *dir, double *shift, h3_err *e) {
    char path[4096];
    json_t *cfg = h3_json_load_in(dir, "scheduler_config.json", path, sizeof path, e); /* docs/robustness.md */
    if (!cfg) return -1;
    int rc = -1;
    json_t *cls = json_object_get(cfg, "_class_name"), *v = json_object_get(cfg, "shift");
    if (!json_is_object(cfg)) {
        h3_fail(e, "%s: the scheduler config is not a JSON object", path);
    } else if (cls && (!json_is_string(cls) || strcmp(json_string_value(cls), "MiniMaxH3Scheduler"))) {
        h3_fail(e, "%s: \"_class_name\" must be \"MiniMaxH3Scheduler\" (the only scheduler MiniMax-H3 runs)", path);
    } else if (!v) {
        *shift = SCHED_DEFAULT_SHIFT, rc = 0;
    } else if (!json_is_number(v) || !isfinite(json_number_value(v)) || !(json_number_value(v) > 0) ||
               json_number_value(v) > SCHED_MAX_SHIFT) {
        h3_fail(e, "%s: \"shift\" must be a number in (0, %g], got %s", path, SCHED_MAX_SHIFT,
                json_is_number(v) ? "a number outside it" : "another JSON type");
    } else {
        *shift = json_number_value(v), rc = 0;
    }
    json_decref(cfg);
    return rc;
}
