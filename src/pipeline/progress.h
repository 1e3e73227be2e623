/* Progress reporting for long phases: an updating bar with ETA on a terminal, plain lines
 * (one per ~10 %) when stderr is not a TTY. Also collects per-phase wall time and peak resident
 * memory for --profile. */
#ifndef H3_PROGRESS_H
#define H3_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

#define PROGRESS_MAX_PHASES 32

typedef struct progress_phase {
    char    name[48];
    double  seconds;
    int64_t peak_rss;   /* bytes, high-water mark while the phase ran */
    int64_t peak_dev;   /* bytes of device memory (the GPU pool's high-water mark), -1 without a device */
    int64_t base_dev;   /* the pool's use when the phase began (peak_dev - base_dev: what the phase added) */
} progress_phase;

typedef struct progress {
    FILE  *out;
    int    tty, quiet;
    char   name[48];
    int64_t total, done;
    double start, last_print;
    int    last_decile;
    progress_phase phases[PROGRESS_MAX_PHASES];
    int    nphases;
    struct h3_backend *device; /* optional: a CUDA backend whose memory peak each phase records */
    /* optional: told every begin (event 0), update (1) and end (2); a nonzero return sets stopped (the pipeline then
     * stops as for the request's cancel flag) */
    int  (*cb)(void *user, int event, const char *phase, int64_t done, int64_t total, double elapsed);
    void  *cb_user;
    int    stopped;
    int64_t base_dev;          /* the running phase's base_dev */
} progress;

/* out NULL: nothing drawn (the phases are still timed and measured) */
void progress_init(progress *p, FILE *out, int quiet);
/* Starts a phase of `total` units (0 = indeterminate). */
void progress_begin(progress *p, const char *name, int64_t total);
void progress_update(progress *p, int64_t done);
void progress_end(progress *p);
/* Prints the per-phase table (for --profile). */
void progress_report(const progress *p, FILE *out);

double  progress_now(void);           /* monotonic seconds */
int64_t progress_peak_rss(void);      /* bytes (VmHWM) */
void    progress_reset_peak_rss(void);/* best effort (Linux clear_refs) */

#endif
