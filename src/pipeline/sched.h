/* The MiniMax-H3 rectified-flow scheduler (docs/model/dit.md section 7), bit-exact with
 * diffusers' MiniMaxH3Scheduler: the shifted sigma grid, the timesteps t = 1 - sigma and the
 * Euler (eta = 0) update. A request holds two instances: video (shift 12) and audio (shift 3). */
#ifndef H3_SCHED_H
#define H3_SCHED_H

#include <stdint.h>

#include "../core/error.h"

#define SCHED_VIDEO_SHIFT 12.0
#define SCHED_AUDIO_SHIFT 3.0

typedef struct sched {
    int    num_sigmas;  /* grid points incl. the terminal 0; model evaluations = num_sigmas - 1 */
    float *sigmas;      /* [num_sigmas], strictly decreasing, sigmas[num_sigmas-1] == 0 */
    float *timesteps;   /* [num_sigmas - 1], timesteps[i] = fp32(1 - sigmas[i]) */
    int    training_euler; /* --step-update training_euler (docs/lora.md): LightX2V's x + (sigma - sigma_next) v */
} sched;

/* The ONE place that maps the CLI's `--steps N` (model evaluations, docs/model/features.md 5.1) to diffusers'
 * num_inference_steps (grid points incl. the terminal zero, docs/model/dit.md 7.1/trap 16): N + 1. */
int sched_num_inference_steps_for_evaluations(int evaluations, int *num_inference_steps, h3_err *e);

/* set_timesteps(num_inference_steps) (docs/model/dit.md 7.1): torch.linspace(1, 0, N) in fp32, the shift
 * s*b / (1 + (s-1)*b) as four fp32 ops, consecutive duplicates collapsed. N >= 2, shift > 0.
 * shift is a double because diffusers keeps it as a Python float (s - 1 is computed in double). */
int sched_init(sched *s, int num_inference_steps, double shift, h3_err *e);
/* set_timesteps(sigmas=...): an explicit grid, used verbatim; >= 2 values, strictly decreasing,
 * last exactly 0. */
int sched_init_sigmas(sched *s, const float *sigmas, int n, h3_err *e);
void sched_free(sched *s);

/* The shift of a snapshot's scheduler folder (scheduler/ or audio_scheduler/): scheduler_config.json read as
 * diffusers' MiniMaxH3Scheduler does (its only field is `shift`; absent = the class default 12.0; the other keys
 * are ignored, as ConfigMixin ignores unexpected ones). Refused with one line naming the file and the field: a
 * missing or unparsable file, a `_class_name` other than MiniMaxH3Scheduler, a shift that is not a JSON number
 * with 0 < shift <= SCHED_MAX_SHIFT (h3's bound; the reference only asks shift > 0). */
#define SCHED_DEFAULT_SHIFT 12.0
#define SCHED_MAX_SHIFT 1.0e6
int sched_config_load(const char *dir, double *shift, h3_err *e);

static inline int sched_evaluations(const sched *s) { return s->num_sigmas - 1; }

/* index_for_timestep: the first i with timesteps[i] == t (exact), or -1 with e filled. */
int sched_index_for_timestep(const sched *s, float t, h3_err *e);

/* One Euler step at grid index i (docs/model/dit.md 7.3), in place on n values:
 *   x0 = x + (1 - t) * v;  r = sigma[i+1] / sigma[i];  x = r*x + (1 - r)*x0   (each op one fp32 rounding)
 * where t = timesteps[i]. Requires 0 <= i < num_sigmas - 1. With training_euler set (after sched_init), LightX2V's
 * form of the same step: x = x + (sigma[i] - sigma[i+1]) * v, three fp32 roundings (docs/lora.md "Step update"). */
void sched_step(const sched *s, int i, const float *v, float *x, int64_t n);

#endif
