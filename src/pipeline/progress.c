#include "progress.h"

#include "../backend/backend_bench.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double progress_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int64_t progress_peak_rss(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    int64_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6)) sscanf(line + 6, "%ld", &kb);
    fclose(f);
    return kb * 1024;
}

void progress_reset_peak_rss(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return;
    fputs("5", f); /* resets VmHWM to the current RSS */
    fclose(f);
}

void progress_init(progress *p, FILE *out, int quiet) {
    memset(p, 0, sizeof *p);
    p->out = out;
    p->quiet = quiet || !out;
    p->tty = out && isatty(fileno(out));
}

static void fmt_time(double s, char *buf, size_t cap) {
    if (s < 0) s = 0;
    int t = (int)(s + 0.5);
    if (t >= 3600) snprintf(buf, cap, "%d:%02d:%02d", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, cap, "%d:%02d", t / 60, t % 60);
}

/* fprintf to p->out: the request's progress stream (request.h progress_out; NULL: nothing drawn) */
static void draw(progress *p, int final) {
    double now = progress_now(), el = now - p->start;
    char elapsed[32], eta[32] = "?";
    fmt_time(el, elapsed, sizeof elapsed);
    if (p->done > 0 && p->total > 0) fmt_time(el / (double)p->done * (double)(p->total - p->done), eta, sizeof eta);
    if (p->tty) {
        const int W = 30;
        int fill = p->total > 0 ? (int)(W * p->done / p->total) : 0;
        char bar[64];
        for (int i = 0; i < W; i++) bar[i] = i < fill ? '#' : '.';
        bar[W] = 0;
        if (p->total > 0)
            fprintf(p->out, "\r%-20s [%s] %ld/%ld  %s elapsed, ETA %s   ", p->name, bar, (long)p->done, (long)p->total,
                    elapsed, final ? "0:00" : eta);
        else
            fprintf(p->out, "\r%-20s %s elapsed   ", p->name, elapsed);
        if (final) fputc('\n', p->out);
    } else {
        if (p->total > 0)
            fprintf(p->out, "%s: %ld/%ld (%s elapsed, ETA %s)\n", p->name, (long)p->done, (long)p->total, elapsed,
                    final ? "0:00" : eta);
        else
            fprintf(p->out, "%s: done (%s)\n", p->name, elapsed);
    }
    fflush(p->out);
    p->last_print = now;
}

static void tell(progress *p, int event) {
    if (p->cb && p->cb(p->cb_user, event, p->name, p->done, p->total, progress_now() - p->start)) p->stopped = 1;
}

void progress_begin(progress *p, const char *name, int64_t total) {
    snprintf(p->name, sizeof p->name, "%s", name);
    p->total = total;
    p->done = 0;
    p->start = p->last_print = progress_now();
    p->last_decile = 0;
    progress_reset_peak_rss();
    p->base_dev = -1;
    if (p->device) {
        h3_sync(p->device); /* the pool's mark counts work queued before the phase otherwise */
        h3_memory_reset_peak(p->device);
        h3_memory_stats ms;
        h3_err e;
        if (h3_memory_query(p->device, &ms, &e) == 0) p->base_dev = (int64_t)ms.peak_bytes; /* = the use now */
    }
    if (!p->quiet && p->tty) draw(p, 0);
    tell(p, 0);
}

void progress_update(progress *p, int64_t done) {
    p->done = done;
    tell(p, 1);
    if (p->quiet) return;
    if (p->tty) {
        if (progress_now() - p->last_print > 0.1 || done == p->total) draw(p, 0);
    } else if (p->total > 0) {
        int decile = (int)(10 * done / p->total);
        if (decile > p->last_decile && done < p->total) {
            p->last_decile = decile;
            draw(p, 0);
        }
    }
}

void progress_end(progress *p) {
    if (p->total > 0) p->done = p->total;
    if (!p->quiet) draw(p, 1);
    tell(p, 2);
    if (p->nphases < PROGRESS_MAX_PHASES) {
        progress_phase *ph = &p->phases[p->nphases++];
        snprintf(ph->name, sizeof ph->name, "%s", p->name);
        ph->peak_dev = -1;
        ph->base_dev = p->base_dev;
        h3_memory_stats ms;
        h3_err e;
        if (p->device) {
            h3_sync(p->device); /* the phase's queued GPU work belongs to its time */
            if (h3_memory_query(p->device, &ms, &e) == 0) ph->peak_dev = (int64_t)ms.peak_bytes;
        }
        ph->seconds = progress_now() - p->start;
        ph->peak_rss = progress_peak_rss();
    }
}

/* Phases that only bring weights in (loads, random models, the AdaLN tables made from the AdaLN projections): the
 * rest is the work with the weights resident. */
static int is_load_phase(const char *name) {
    return !strncmp(name, "load ", 5) || !strncmp(name, "make random ", 12) || !strncmp(name, "prepare ", 8);
}

/* fprintf to `out`: the caller's stream (the pipeline passes a memstream and logs its lines, profile_log) */
void progress_report(const progress *p, FILE *out) {
    double total = 0, loads = 0;
    int64_t peak = 0, peak_dev = -1;
    int dev = p->device != NULL;
    fprintf(out, "\nprofile:\n  %-34s %10s %14s%s\n", "phase", "seconds", "peak RSS MiB", dev ? "  peak GPU GiB" : "");
    for (int i = 0; i < p->nphases; i++) {
        const progress_phase *ph = &p->phases[i];
        fprintf(out, "  %-34s %10.3f %14.1f", ph->name, ph->seconds, ph->peak_rss / 1048576.0);
        if (dev && ph->peak_dev >= 0) fprintf(out, " %14.2f", ph->peak_dev / 1073741824.0);
        fputc('\n', out);
        total += ph->seconds;
        if (is_load_phase(ph->name)) loads += ph->seconds;
        if (ph->peak_rss > peak) peak = ph->peak_rss;
        if (ph->peak_dev > peak_dev) peak_dev = ph->peak_dev;
    }
    fprintf(out, "  %-34s %10.3f %14.1f", "total", total, peak / 1048576.0);
    if (dev && peak_dev >= 0) fprintf(out, " %14.2f", peak_dev / 1073741824.0);
    fprintf(out, "  (peak = the largest phase)\n");
    if (loads > 0)
        fprintf(out, "  %-34s %10.3f  (weights resident: total less the load phases, %.3f s)\n", "compute", total - loads,
                loads);
    else /* e.g. a session's generation with every model kept (--resident) */
        fprintf(out, "  %-34s %10.3f  (no load phase: every model was resident)\n", "compute", total);
}
