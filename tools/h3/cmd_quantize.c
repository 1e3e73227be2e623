/* `h3 quantize -d SRC -o DST [--profile dit_proj|mlp|all]`: writes an int8 snapshot (docs/int8.md). Every DiT tree
 * of SRC (transformer/, transformer_ref/, FL2VA/transformer/, Ref2VA/transformer/, each in its own layout) is
 * converted by dit_int8_convert_tree; every other file is hard-linked (copied across filesystems; symbolic links
 * are followed, so DST holds the files they name). Assembled in a
 * temporary folder beside DST (outfile.h) and renamed at the end; an existing DST is refused. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "io/outfile.h"
#include "model/dit_int8.h"
#include "model/dit_int8_convert.h"

static const char *const trees[] = {"transformer", "transformer_ref", "FL2VA/transformer", "Ref2VA/transformer"};
enum { N_TREES = sizeof trees / sizeof trees[0] };

typedef struct progress {
    uint64_t done, total;
    double   t0, last;
    const char *tree;
} progress;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void on_progress(void *ctx, const char *shard, uint64_t bytes) {
    progress *p = ctx;
    p->done += bytes;
    double t = now_s();
    if (bytes && t - p->last < 1.0 && p->done < p->total) return;
    p->last = t;
    double el = t - p->t0, rate = el > 0 ? (double)p->done / el : 0;
    double eta = rate > 0 ? (double)(p->total - p->done) / rate : 0;
    const int gb = p->total >= 1000000000ull;
    const double u = gb ? 1e-9 : 1e-6;
    fprintf(stderr, "h3 quantize: %s/%s: %5.1f%% (%.2f of %.2f %s), %.2f %s/s, ETA %.0f s\n", p->tree, shard,
            100.0 * (double)p->done / (double)p->total, u * (double)p->done, u * (double)p->total, gb ? "GB" : "MB",
            u * rate, gb ? "GB" : "MB", eta);
}

static int is_tree(const char *rel) {
    for (int i = 0; i < N_TREES; i++)
        if (!strcmp(rel, trees[i])) return 1;
    return 0;
}

/* A hard link of src at dst, or a copy where links cannot be made (another filesystem, no permission). */
static int link_or_copy(const char *src, const char *dst, h3_err *e) {
    if (link(src, dst) == 0) return 0;
    int in = open(src, O_RDONLY | O_CLOEXEC), out = in >= 0 ? h3_out_create(dst) : -1;
    if (in < 0 || out < 0) {
        if (in >= 0) close(in);
        return h3_fail(e, "%s: cannot link or copy to %s: %s", src, dst, strerror(errno));
    }
    static char buf[1 << 16];
    ssize_t n;
    int rc = 0;
    while ((n = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, (size_t)n) != n) {
            rc = h3_fail(e, "%s: write failed: %s", dst, strerror(errno));
            break;
        }
    if (n < 0 && !rc) rc = h3_fail(e, "%s: read failed: %s", src, strerror(errno));
    close(in), close(out);
    return rc;
}

/* Mirrors SRC/rel into DST/rel: trees converted, files linked, symbolic links recreated, folders recursed. */
static int mirror(const char *src, const char *dst, const char *rel, int profile, progress *p, h3_err *e) {
    char sdir[4096], ddir[4096];
    snprintf(sdir, sizeof sdir, "%s%s%s", src, *rel ? "/" : "", rel);
    snprintf(ddir, sizeof ddir, "%s%s%s", dst, *rel ? "/" : "", rel);
    if (*rel && mkdir(ddir, 0755) != 0) return h3_fail(e, "%s: cannot create: %s", ddir, strerror(errno));
    const int tree = is_tree(rel);
    if (tree) {
        p->tree = rel;
        if (dit_int8_convert_tree(sdir, ddir, profile, on_progress, p, e) != 0) return -1;
    }
    DIR *d = opendir(sdir);
    if (!d) return h3_fail(e, "%s: cannot open: %s", sdir, strerror(errno));
    struct dirent *de;
    int rc = 0;
    while (!rc && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        if (tree && dit_int8_written_name(de->d_name)) continue;
        char s[4608], t[4608], r[4608];
        snprintf(s, sizeof s, "%s/%s", sdir, de->d_name);
        snprintf(t, sizeof t, "%s/%s", ddir, de->d_name);
        snprintf(r, sizeof r, "%s%s%s", rel, *rel ? "/" : "", de->d_name);
        struct stat sb;
        if (stat(s, &sb) != 0) { /* symbolic links followed: a relative one would not resolve from DST */
            rc = h3_fail(e, "%s: %s", s, strerror(errno));
        } else if (S_ISDIR(sb.st_mode)) {
            rc = mirror(src, dst, r, profile, p, e);
        } else if (S_ISREG(sb.st_mode)) {
            rc = link_or_copy(s, t, e);
        }
    }
    closedir(d);
    return rc;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

static void usage(FILE *f) {
    fprintf(f, "usage: h3 quantize -d SRC -o DST [--profile dit_proj|mlp|all]\n"
               "  Writes DST, a complete snapshot whose DiT linears are INT8 W8A8 (docs/int8.md):\n"
               "  dit_proj (default): q, k, v, attention out, FFN up and down of every main block;\n"
               "  mlp: FFN up and down only; all: dit_proj plus each block's adaln_proj.\n"
               "  Other components are hard-linked; DST must not exist.\n");
}

int cmd_quantize(int argc, char **argv) {
    const char *src = NULL, *dst = NULL, *prof_arg = "dit_proj";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        const char **slot = !strcmp(a, "-d") ? &src : !strcmp(a, "-o") ? &dst : !strcmp(a, "--profile") ? &prof_arg : NULL;
        if (!slot) return cli_error("quantize: unknown argument '%s' (see h3 quantize --help)", a);
        if (i + 1 >= argc) return cli_error("quantize: %s needs a value", a);
        *slot = argv[++i];
    }
    if (!src) return cli_error("quantize: -d SRC is required");
    if (!dst) return cli_error("quantize: -o DST is required");
    const int profile = dit_int8_profile_parse(prof_arg);
    if (profile < 0) return cli_error("quantize: --profile must be dit_proj, mlp or all, got '%s'", prof_arg);
    struct stat sb;
    if (stat(src, &sb) != 0 || !S_ISDIR(sb.st_mode)) return cli_error("quantize: -d %s: not a folder", src);
    if (lstat(dst, &sb) == 0) return cli_error("quantize: -o %s exists (refusing to overwrite)", dst);
    h3_err e = {{0}};
    progress p = {.t0 = now_s()};
    int n = 0;
    for (int i = 0; i < N_TREES; i++) {
        char t[4096];
        snprintf(t, sizeof t, "%s/%s", src, trees[i]);
        if (stat(t, &sb) != 0 || !S_ISDIR(sb.st_mode)) continue;
        uint64_t b = dit_int8_tree_bytes(t, &e);
        if (!b) return cli_error("quantize: %s", e.msg);
        p.total += b, n++;
    }
    if (!n) return cli_error("quantize: -d %s holds no DiT tree (transformer/, transformer_ref/, FL2VA/, Ref2VA/)", src);
    h3_outfile *o = h3_outfile_open("-o", dst, H3_OUT_DIR, NULL, &e);
    if (!o) return cli_error("quantize: %s", e.msg);
    chmod(o->tmp, 0755);
    int rc = mirror(src, o->tmp, "", profile, &p, &e);
    if (rc == 0) rc = h3_outfile_commit(o, 0, &e);
    if (rc != 0) {
        nftw(o->tmp, remove_entry, 16, FTW_DEPTH | FTW_PHYS); /* leave nothing half-written */
        h3_outfile_free(o);
        return cli_error("quantize: %s", e.msg);
    }
    h3_outfile_free(o);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double el = now_s() - p.t0;
    printf("wrote %s: %d DiT tree%s as int8 profile %s (%.3f GB read in %.2f s, %.2f GB/s; peak RSS %.1f MiB)\n", dst, n,
           n == 1 ? "" : "s", dit_int8_profile_name(profile), 1e-9 * (double)p.total, el,
           el > 0 ? 1e-9 * (double)p.total / el : 0.0, (double)ru.ru_maxrss / 1024.0);
    return 0;
}
