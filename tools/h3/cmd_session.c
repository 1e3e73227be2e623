/* `h3 generate -d DIR` without -p: the interactive session (docs/model/features.md 3; docs/session.md).
 *
 * One line of stdin at a time: a line starting with '!' is a command, any other non-blank line is a
 * prompt that generates at once with the current state (seeded by the start-up flags). Generation goes through
 * the public API only (include/h3.h): one engine, whose backend (CUDA context, cuBLASLt/cuDNN plans, memory pool)
 * is started once and kept between generations; by default (!resident auto) the transformer and the video decoder stay for the next generation when
 * the GPU has the room, --resident / !resident on keeps each phase's model, !resident off none.
 *
 * Outputs of generation n go to the output directory (a fresh $TMPDIR/h3-XXXXXX, or !output's) as
 * video-NNNN.mp4; a start-up --frames-dir DIR becomes DIR/video-NNNN/, --wav A.wav and
 * --dump-latents B.safetensors become A-NNNN.wav and B-NNNN.safetensors. n is the lowest number
 * from the last success + 1 whose outputs do not exist yet, claimed by creating them exclusively (empty
 * placeholders, replaced by the outputs or removed when the generation fails), so nothing is overwritten and two
 * sessions writing into one folder take different numbers (docs/robustness.md).
 *
 * Command replies go to stdout, errors (one line, "h3: ...") and progress to stderr. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <spawn.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "session_parse.h"
#include "line_edit.h"
#include "terminal.h"
#include "io/outfile.h"
#include "core/text.h"

#define PATH_CAP 4096
#define MAX_NUMBER 999999

typedef struct session {
    h3_params   st;          /* the state; prompt, seed and output paths are filled per generation */
    h3_engine  *eng;         /* cmd_generate's, on -d */
    const h3_engine_options *opt; /* the start-up flags' (precision, quant, random weights) */
    int         memory;      /* !resident: H3_MEMORY_* */
    int         ssd_streaming; /* !ssd-streaming */
    const char *quant;       /* !quant: "none", "fp8" or "int8" (start-up: --quant) */
    int         fc2_groups;  /* !quant int8-fc2-groups: --int8-fc2-groups */
    int         show;        /* !show: the preview sink on */
    int         seed_fixed;  /* --seed / !seed N; else a fresh random seed per generation */
    int         mux;         /* an MP4 per generation (-o '' at start-up: none for the whole session) */
    char        out_dir[PATH_CAP];  /* where video-NNNN.mp4 go (!output) */
    char        tmp_dir[PATH_CAP];  /* the mkdtemp directory, removed at the end when left empty */
    const char *frames_base, *wav_base, *dump_base; /* start-up --frames-dir / --wav / --dump-latents */
    int         next;        /* the lowest number the next generation may take */
    int         done, failed;
    uint64_t    last_seed;
    char       *last_prompt;
    /* paths set by !first / !last / !ref-image (start-up paths point into argv and are not ours) */
    char       *first_owned, *last_owned, *ref_owned[H3_MAX_REFERENCES];
    char       *lora_owned[H3_MAX_LORAS]; /* !lora's paths (start-up --lora paths point into argv) */
    char        last_mp4[PATH_CAP]; /* the last generation's MP4 (for !save), or "" */
    term_preview tp;         /* !show: the terminal's graphics protocol, zoom, stream */
    int         open;        /* !open on: each finished MP4 goes to the system opener */
} session;

typedef struct gen_paths {
    char mp4[PATH_CAP], frames[PATH_CAP], wav[PATH_CAP], dump[PATH_CAP];
} gen_paths;

/* Ctrl-C (SIGINT): cancels the line being typed (line_edit.c) or, while one runs, the generation
 * (h3_engine_cancel is async-signal-safe; a flag raised at the prompt would cancel the next generation's start) */
static volatile sig_atomic_t interrupted, generating;
static h3_engine *volatile running_engine;
static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
    if (generating && running_engine) h3_engine_cancel(running_engine);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* One error line on stderr; returns -1 (the command failed, the session goes on). */
__attribute__((format(printf, 1, 2))) static int say_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("h3: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return -1;
}

/* ---- paths ---- */

/* base with "-NNNN" before the extension of its last component: out/a.wav -> out/a-0001.wav. */
static int numbered(const char *base, int n, char *out, size_t cap) {
    const char *slash = strrchr(base, '/'), *name = slash ? slash + 1 : base, *dot = strrchr(name, '.');
    if (!dot || dot == name) dot = base + strlen(base);
    int len = snprintf(out, cap, "%.*s-%04d%s", (int)(dot - base), base, n, dot);
    return len < 0 || (size_t)len >= cap ? -1 : 0;
}

static int paths_for(const session *s, int n, gen_paths *p) {
    memset(p, 0, sizeof *p);
    int a = snprintf(p->mp4, sizeof p->mp4, "%s/video-%04d.mp4", s->out_dir, n);
    int b = s->frames_base ? snprintf(p->frames, sizeof p->frames, "%s/video-%04d", s->frames_base, n) : 0;
    if (a < 0 || a >= PATH_CAP || b < 0 || b >= PATH_CAP || (s->wav_base && numbered(s->wav_base, n, p->wav, PATH_CAP)) ||
        (s->dump_base && numbered(s->dump_base, n, p->dump, PATH_CAP)))
        return say_error("output paths of generation %d are longer than %d bytes", n, PATH_CAP - 1);
    return 0;
}

static int exists(const char *p) {
    struct stat sb;
    return p[0] && lstat(p, &sb) == 0;
}

/* The outputs of p that this session writes (mp4 only with an MP4 per generation), and their kinds. */
static int gen_outputs(const session *s, const gen_paths *p, const char *out[4], h3_out_kind kind[4]) {
    int n = 0;
    if (s->mux) out[n] = p->mp4, kind[n++] = H3_OUT_FILE;
    if (p->frames[0]) out[n] = p->frames, kind[n++] = H3_OUT_DIR;
    if (p->wav[0]) out[n] = p->wav, kind[n++] = H3_OUT_FILE;
    if (p->dump[0]) out[n] = p->dump, kind[n++] = H3_OUT_FILE;
    return n;
}

/* Forgets the claims of p; remove: their placeholders go too (when still empty). */
static void release(const session *s, const gen_paths *p, int remove) {
    const char *out[4];
    h3_out_kind kind[4];
    for (int i = 0, n = gen_outputs(s, p, out, kind); i < n; i++) h3_out_unclaim(out[i], remove);
}

/* Claims every output of p by creating it exclusively: 0 all claimed, 1 one was taken (nothing stays claimed),
 * -1 an error (printed). */
static int claim(const session *s, const gen_paths *p) {
    const char *out[4];
    h3_out_kind kind[4];
    int n = gen_outputs(s, p, out, kind);
    for (int i = 0; i < n; i++) {
        h3_err e = {{0}};
        int r = h3_out_claim(out[i], kind[i], &e);
        if (r == 0) continue;
        for (int k = 0; k < i; k++) h3_out_unclaim(out[k], 1);
        if (r < 0) say_error("%s", e.msg);
        return r;
    }
    return 0;
}

/* The request of one generation: the state plus its prompt, seed and numbered outputs. */
static void request_for(const session *s, const char *prompt, uint64_t seed, const gen_paths *p, h3_params *q) {
    *q = s->st;
    q->prompt = prompt;
    q->seed = seed;
    q->output_mp4 = s->mux ? p->mp4 : "";
    q->frames_dir = s->frames_base ? p->frames : NULL;
    q->wav = s->wav_base ? p->wav : NULL;
    q->dump_latents = s->dump_base ? p->dump : NULL;
}

/* mkdir -p; 0 when path is (now) a directory. */
static int make_dirs(const char *path, h3_err *e) {
    char p[PATH_CAP];
    int len = snprintf(p, sizeof p, "%s", path);
    if (len <= 0 || len >= (int)sizeof p) return h3_fail(e, "%s: bad directory name", path);
    for (char *c = p + 1; *c; c++) {
        if (*c != '/') continue;
        *c = 0;
        if (mkdir(p, 0777) && errno != EEXIST) return h3_fail(e, "%s: cannot create: %s", p, strerror(errno));
        *c = '/';
    }
    if (mkdir(p, 0777) && errno != EEXIST) return h3_fail(e, "%s: cannot create: %s", p, strerror(errno));
    struct stat sb;
    if (stat(p, &sb) || !S_ISDIR(sb.st_mode)) return h3_fail(e, "%s: not a directory", p);
    return 0;
}

/* ---- values ---- */

static uint64_t random_seed(void) {
    uint32_t v;
    if (getrandom(&v, sizeof v, 0) == (ssize_t)sizeof v) return v;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint32_t)(ts.tv_nsec ^ ts.tv_sec * 2654435761u ^ (unsigned)getpid());
}

/* the session_parse.c value parsers, their error printed as one line */
static int parse_int(const char *cmd, const char *s, long lo, long hi, int *out) {
    h3_err e = {{0}};
    return session_parse_int(cmd, s, lo, hi, out, &e) ? say_error("%s", e.msg) : 0;
}

static int parse_wxh(const char *cmd, const char *s, int *w, int *h) {
    h3_err e = {{0}};
    return session_parse_wxh(cmd, s, w, h, &e) ? say_error("%s", e.msg) : 0;
}

/* The frame count a generation with st's length would have, by the engine's own check of a t2va request with only
 * that length set; -1 when the requested length breaks a rule (h3_engine_error says which), 1 when ref2va has no
 * length yet. */
static int generated_frames(h3_engine *eng, const h3_params *st, int *aligned) {
    if (st->nrefs && !st->frames && st->seconds == 0) return 1;
    h3_params t;
    h3_params_init(&t);
    t.prompt = "-";
    t.dump_latents = "-";
    t.frames = st->frames, t.seconds = st->seconds;
    return h3_engine_check(eng, &t, aligned) == H3_OK ? 0 : -1;
}

static void show_frames(h3_engine *eng, const h3_params *st) {
    int aligned;
    int rc = generated_frames(eng, st, &aligned);
    if (st->seconds != 0) printf("seconds %g = %d frames requested", st->seconds, h3_frames_of_seconds(st->seconds));
    else if (st->frames) printf("frames %d requested", st->frames);
    else printf("frames default");
    if (rc == 1) printf(" (ref2va needs !frames or !seconds)\n");
    else if (rc) printf(" (generation will fail: %s)\n", h3_engine_error(eng));
    else printf(" -> %d generated (%.3f s at 24 fps)\n", aligned, aligned / 24.0);
}

static void show_size(const h3_params *st) {
    if (st->width) printf("size %dx%d", st->width, st->height);
    else printf("size default (t2va/ref2va 1344x768; fl2va from the first keyframe)");
    if (st->render_width) printf(", render size %dx%d\n", st->render_width, st->render_height);
    else printf(", render size native\n");
}

static void show_seed(const session *s) {
    if (s->seed_fixed) printf("seed %llu (fixed)\n", (unsigned long long)s->st.seed);
    else if (s->done) printf("seed random per generation (last %llu)\n", (unsigned long long)s->last_seed);
    else printf("seed random per generation\n");
}

/* ---- commands ---- */

static const char *const ref_kinds[] = {"image", "silent video", "video", "video + audio", "audio"};

typedef int (*command_fn)(session *s, const char *arg); /* 0, -1 (error printed) or 1 (leave) */

static int c_help(session *s, const char *arg);

/* The LoRAs and the schedulers' shifts the next generation uses (docs/lora.md). */
static void show_loras(const h3_params *st) {
    if (!st->nloras) printf("lora: none\n");
    for (int i = 0; i < st->nloras; i++)
        printf("lora %d: %s scale %g%s\n", i + 1, st->loras[i].path, st->loras[i].scale,
               st->loras[i].ref ? " (transformer_ref: ref2va only)" : "");
    char v[32] = "the snapshot's", a[32] = "the snapshot's";
    if (st->shift_video > 0) snprintf(v, sizeof v, "%g", st->shift_video);
    if (st->shift_audio > 0) snprintf(a, sizeof a, "%g", st->shift_audio);
    printf("shift: video %s, audio %s; step update %s\n", v, a,
           st->step_update == H3_STEP_TRAINING_EULER ? "training_euler" : "euler");
}

/* !lora [FILE [SCALE] | off] / !lora-ref FILE [SCALE]: append a LoRA (merged from the untouched weights at the next
 * generation: the kept transformer is reloaded, never merged twice), clear them all, or list them. */
static int add_lora(session *s, const char *cmd, const char *arg, int ref) {
    if (!arg) {
        show_loras(&s->st);
        return 0;
    }
    if (!strcmp(arg, "off")) {
        if (ref) return say_error("!%s expects FILE [SCALE] (!lora off clears every LoRA)", cmd);
        for (int i = 0; i < H3_MAX_LORAS; i++) free(s->lora_owned[i]), s->lora_owned[i] = NULL;
        s->st.nloras = 0;
        printf("lora: none (the next generation loads the transformer without LoRA)\n");
        return 0;
    }
    if (s->st.nloras == H3_MAX_LORAS) return say_error("!%s: at most %d LoRAs (!lora off clears them)", cmd, H3_MAX_LORAS);
    char *copy = strdup(arg);
    if (!copy) return say_error("out of memory");
    double scale = 1.0;
    char *sp = strrchr(copy, ' ');
    if (sp) { /* FILE SCALE: the last word, when it is a number */
        char *end;
        double v = strtod(sp + 1, &end);
        if (sp[1] && !*end) {
            if (!isfinite(v) || fabs(v) > 100) {
                say_error("!%s: the scale must be a finite number in [-100, 100], got '%s'", cmd, h3_quote(sp + 1));
                free(copy);
                return -1;
            }
            scale = v;
            while (sp > copy && sp[-1] == ' ') sp--;
            *sp = 0;
        }
    }
    if (access(copy, R_OK)) {
        say_error("!%s %s: cannot read the file: %s", cmd, h3_quote(copy), strerror(errno));
        free(copy);
        return -1;
    }
    const int k = s->st.nloras++;
    s->lora_owned[k] = copy;
    s->st.loras[k] = (h3_lora){copy, scale, ref};
    show_loras(&s->st);
    return 0;
}
static int c_lora(session *s, const char *arg) { return add_lora(s, "lora", arg, 0); }
static int c_lora_ref(session *s, const char *arg) { return add_lora(s, "lora-ref", arg, 1); }

/* !shift [VIDEO[:AUDIO] | default] */
static int c_shift(session *s, const char *arg) {
    if (arg && !strcmp(arg, "default")) s->st.shift_video = s->st.shift_audio = 0;
    else if (arg && cli_parse_shift(arg, "!shift", &s->st.shift_video, &s->st.shift_audio)) return -1;
    show_loras(&s->st);
    return 0;
}

/* !step-update [euler|training_euler] */
static int c_step_update(session *s, const char *arg) {
    if (arg && strcmp(arg, "euler") && strcmp(arg, "training_euler"))
        return say_error("!step-update expects euler or training_euler, got '%s'", h3_quote(arg));
    if (arg) s->st.step_update = !strcmp(arg, "training_euler") ? H3_STEP_TRAINING_EULER : H3_STEP_EULER;
    show_loras(&s->st);
    return 0;
}

static int c_status(session *s, const char *arg) {
    const h3_params *st = &s->st;
    const h3_engine_options *o = s->opt;
    show_size(st);
    show_frames(s->eng, st);
    printf("steps %d, reuse %d, layers %d, core reuse %d, token reduction %s\n", st->steps, st->reuse, st->layers,
           st->core_reuse, st->token_reduction ? "on" : "off");
    show_seed(s);
    printf("precision %s, backend %s%s, parallel %d (%s)\n", o->precision, h3_engine_backend(s->eng),
           o->random_weights ? ", random weights" : "", o->parallel > 1 ? o->parallel : 1,
           h3_engine_started(s->eng) ? "started, kept between generations" : "not started");
    if (st->first_frame || st->last_frame)
        printf("fl2va: first %s, last %s\n", st->first_frame ? st->first_frame : "-", st->last_frame ? st->last_frame : "-");
    else if (!st->nrefs)
        printf("t2va (no keyframes, no references)\n");
    for (int i = 0; i < st->nrefs; i++)
        printf("reference %d: %s %s%s%s\n", i + 1, ref_kinds[st->refs[i].kind], st->refs[i].path,
               st->refs[i].audio_path ? " + " : "", st->refs[i].audio_path ? st->refs[i].audio_path : "");
    printf("output %s (%s)\n", s->out_dir, s->mux ? "video-NNNN.mp4" : "no MP4: -o ''");
    if (s->frames_base) printf("frames %s/video-NNNN/\n", s->frames_base);
    if (s->wav_base) printf("wav %s, numbered\n", s->wav_base);
    if (s->dump_base) printf("latents %s, numbered\n", s->dump_base);
    printf("profile %s; %d generated, %d failed; resident %s, quant %s%s, ssd-streaming %s\n", st->profile ? "on" : "off",
           s->done, s->failed,
           s->memory == H3_MEMORY_RESIDENT ? "on (!cache lists the kept models)"
           : s->memory == H3_MEMORY_AUTO   ? "auto (the transformer and the video decoder stay when they fit)"
                                              : "off (each generation loads every phase's weights)",
           s->quant, s->fc2_groups ? " (FFN down input per 1024 channels)" : "", s->ssd_streaming ? "on" : "auto");
    printf("preset %s\n", s->opt->preset && !strcmp(s->opt->preset, "fast")
                               ? "fast (--quant fp8, --attention sage8, --vae-quant fp8 where not set otherwise; docs/fast.md)"
                               : "exact");
    printf("show %s (terminal graphics: %s, zoom %d); open %s; spatial RoPE at 256x256: %s\n",
           s->show ? "on" : "off", term_graphics_name(s->tp.g), s->tp.zoom, s->open ? "on" : "off",
           st->reference_rope ? "released" : "halved");
    show_loras(st);
    return 0;
}

static int c_seed(session *s, const char *arg) {
    h3_err e = {{0}};
    if (arg && session_parse_seed(arg, &s->seed_fixed, &s->st.seed, &e)) return say_error("%s", e.msg);
    show_seed(s);
    return 0;
}

static int c_size(session *s, const char *arg) {
    if (arg && !strcmp(arg, "default")) s->st.width = s->st.height = 0;
    else if (arg && parse_wxh("size", arg, &s->st.width, &s->st.height)) return -1;
    show_size(&s->st);
    return 0;
}

static int c_render_size(session *s, const char *arg) {
    if (arg && !strcmp(arg, "native")) s->st.render_width = s->st.render_height = 0;
    else if (arg && parse_wxh("render-size", arg, &s->st.render_width, &s->st.render_height)) return -1;
    show_size(&s->st);
    return 0;
}

static int c_frames(session *s, const char *arg) {
    if (arg) {
        if (parse_int("frames", arg, 1, 1 << 20, &s->st.frames)) return -1;
        s->st.seconds = 0;
    }
    show_frames(s->eng, &s->st);
    return 0;
}

static int c_seconds(session *s, const char *arg) {
    if (arg) {
        h3_err e = {{0}};
        if (session_parse_seconds(arg, &s->st.seconds, &e)) return say_error("%s", e.msg);
        s->st.frames = 0;
    }
    show_frames(s->eng, &s->st);
    return 0;
}

/* !steps / !reuse / !layers / !core-reuse: the ranges docs/model/features.md 3 accepts here; generation
 * checks the request's own rules (steps 2.., reuse 1..3, core reuse not with reuse). */
static int set_int(const char *cmd, const char *arg, long lo, long hi, int *v) {
    if (arg && parse_int(cmd, arg, lo, hi, v)) return -1;
    printf("%s %d\n", cmd, *v);
    return 0;
}
static int c_steps(session *s, const char *arg) { return set_int("steps", arg, 1, 1000, &s->st.steps); }
static int c_reuse(session *s, const char *arg) { return set_int("reuse", arg, 1, 32, &s->st.reuse); }
static int c_layers(session *s, const char *arg) { return set_int("layers", arg, 35, 50, &s->st.layers); }
static int c_core_reuse(session *s, const char *arg) { return set_int("core-reuse", arg, 1, 6, &s->st.core_reuse); }
static int c_zoom(session *s, const char *arg) { return set_int("zoom", arg, 1, 64, &s->tp.zoom); }

/* "on" / "off" of a toggle command into *on; anything else: one error line naming the command */
static int parse_toggle(const char *cmd, const char *arg, int *on) {
    h3_err e = {{0}};
    return session_parse_toggle(cmd, arg, on, &e) ? say_error("%s", e.msg) : 0;
}

/* !open: the system's opener for files (H3_OPENER names another program, e.g. for tests), found on PATH */
static const char *opener(void) {
    const char *o = getenv("H3_OPENER");
    return o && *o ? o : "xdg-open";
}

static int on_path(const char *prog) {
    if (strchr(prog, '/')) return access(prog, X_OK) == 0;
    const char *path = getenv("PATH");
    char buf[PATH_CAP];
    for (const char *p = path ? path : ""; *p;) {
        size_t n = strcspn(p, ":");
        if (n && n + strlen(prog) + 2 < sizeof buf) {
            snprintf(buf, sizeof buf, "%.*s/%s", (int)n, p, prog);
            if (access(buf, X_OK) == 0) return 1;
        }
        p += n + (p[n] == ':');
    }
    return 0;
}

/* Starts the opener on path without waiting for it (finished openers are reaped here and at the end). */
static void open_file(const char *path) {
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    char *argv[] = {(char *)opener(), (char *)path, NULL};
    pid_t pid;
    extern char **environ;
    int err = posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ);
    if (err) say_error("!open: cannot start %s: %s", argv[0], strerror(err));
}

static int c_open(session *s, const char *arg) {
    int on;
    if (arg) {
        if (parse_toggle("open", arg, &on)) return -1;
        if (on && !s->mux) return say_error("!open: this session writes no MP4s (-o '')");
        if (on && !on_path(opener())) return say_error("!open: %s not found (H3_OPENER names another opener)", opener());
        s->open = on;
    }
    printf("open %s\n", s->open ? "on: each finished video goes to the system opener" : "off");
    return 0;
}

static int c_output(session *s, const char *arg) {
    if (arg) {
        h3_err e = {{0}};
        char dir[PATH_CAP];
        size_t len = strlen(arg);
        while (len > 1 && arg[len - 1] == '/') len--;
        if (len >= sizeof dir - 32) return say_error("!output: the path is too long");
        memcpy(dir, arg, len);
        dir[len] = 0;
        if (make_dirs(dir, &e)) return say_error("!output: %s", e.msg);
        memcpy(s->out_dir, dir, len + 1);
    }
    printf("output %s\n", s->out_dir);
    return 0;
}

/* ---- keyframes and references (docs/model/features.md 3): set here, checked again when a prompt generates ---- */

static int readable(const char *cmd, const char *path) {
    if (access(path, R_OK)) return say_error("!%s %s: cannot read the file: %s", cmd, h3_quote(path), strerror(errno));
    return 0;
}

/* !first / !last [PATH|clear]: the fl2va anchors; not with references (they are ref2va) */
static int set_anchor(session *s, const char *cmd, const char *arg, const char **slot, char **owned) {
    if (arg && !strcmp(arg, "clear")) {
        *slot = NULL;
        free(*owned), *owned = NULL;
    } else if (arg) {
        if (s->st.nrefs) return say_error("!%s: refused while references exist (!refs clear first)", cmd);
        if (readable(cmd, arg)) return -1;
        char *copy = strdup(arg);
        if (!copy) return say_error("out of memory");
        free(*owned), *owned = copy, *slot = copy;
    }
    printf("%s %s\n", cmd, *slot ? *slot : "none");
    return 0;
}
static int c_first(session *s, const char *arg) { return set_anchor(s, "first", arg, &s->st.first_frame, &s->first_owned); }
static int c_last(session *s, const char *arg) { return set_anchor(s, "last", arg, &s->st.last_frame, &s->last_owned); }

static int c_refs(session *s, const char *arg) {
    if (arg && strcmp(arg, "clear")) return say_error("!refs takes no value or 'clear', got '%s'", h3_quote(arg));
    if (arg) {
        for (int i = 0; i < H3_MAX_REFERENCES; i++) free(s->ref_owned[i]), s->ref_owned[i] = NULL;
        s->st.nrefs = 0;
    }
    if (!s->st.nrefs) printf("references: none\n");
    for (int i = 0; i < s->st.nrefs; i++) {
        const h3_reference *f = &s->st.refs[i];
        printf("reference %d: %s %s%s%s\n", i + 1, ref_kinds[f->kind], f->path, f->audio_path ? " + " : "",
               f->audio_path ? f->audio_path : "");
    }
    return 0;
}

/* !ref-image PATH: appends an image reference (<Picture k>); ref2va needs the snapshot's Ref2VA transformer */
static int c_ref_image(session *s, const char *arg) {
    if (!arg) return c_refs(s, NULL);
    if (s->st.first_frame || s->st.last_frame) return say_error("!ref-image: refused with keyframes (!first clear, !last clear)");
    if (h3_engine_has_task(s->eng, H3_TASK_REF2VA) != H3_OK) return say_error("!ref-image: %s", h3_engine_error(s->eng));
    int images = 0;
    for (int i = 0; i < s->st.nrefs; i++) images += s->st.refs[i].kind == H3_REFERENCE_IMAGE;
    if (images >= 9 || s->st.nrefs >= H3_MAX_REFERENCES)
        return say_error("!ref-image: at most 9 images and %d references (docs/model/features.md 1.3)", H3_MAX_REFERENCES);
    if (readable("ref-image", arg)) return -1;
    char *copy = strdup(arg);
    if (!copy) return say_error("out of memory");
    int k = s->st.nrefs++;
    s->ref_owned[k] = copy;
    s->st.refs[k] = (h3_reference){.kind = H3_REFERENCE_IMAGE, .path = copy};
    printf("reference %d: image %s (<Picture %d>)\n", k + 1, copy, images + 1);
    return 0;
}

/* !ref-remove N: removes reference N (1-based); the later ones move up */
static int c_ref_remove(session *s, const char *arg) {
    int n;
    if (!arg) return say_error("!ref-remove expects a reference number");
    if (!s->st.nrefs) return say_error("!ref-remove: there are no references");
    if (parse_int("ref-remove", arg, 1, s->st.nrefs, &n)) return -1;
    free(s->ref_owned[n - 1]);
    for (int i = n - 1; i + 1 < s->st.nrefs; i++) s->st.refs[i] = s->st.refs[i + 1], s->ref_owned[i] = s->ref_owned[i + 1];
    s->st.nrefs--;
    s->ref_owned[s->st.nrefs] = NULL;
    return c_refs(s, NULL);
}

/* !save [PATH]: copies the last video (default ./h3-<unix time>.mp4) through a temporary beside PATH (made
 * exclusively, never through a link: outfile.h) and a rename that never replaces an existing PATH */
static int c_save(session *s, const char *arg) {
    if (!s->last_mp4[0]) return say_error("!save: no video yet (or -o '' turned MP4s off)");
    char dst[PATH_CAP];
    if (arg) snprintf(dst, sizeof dst, "%s", arg);
    else snprintf(dst, sizeof dst, "h3-%lld.mp4", (long long)time(NULL));
    if (exists(dst)) return say_error("!save %s: the file exists (give another name)", h3_quote(dst));
    h3_err e = {{0}};
    FILE *in = fopen(s->last_mp4, "rb");
    if (!in) return say_error("!save %s: %s", s->last_mp4, strerror(errno));
    h3_outfile *o = h3_outfile_open("!save", dst, H3_OUT_FILE, NULL, &e);
    if (!o) {
        fclose(in);
        return say_error("%s", e.msg);
    }
    char buf[1 << 16];
    size_t k;
    int ok = 1;
    while (ok && (k = fread(buf, 1, sizeof buf, in)) > 0)
        for (size_t d = 0; ok && d < k;) {
            ssize_t w = write(o->fd, buf + d, k - d);
            if (w < 0 && errno == EINTR) continue;
            ok = w > 0;
            if (ok) d += (size_t)w;
        }
    ok &= !ferror(in);
    fclose(in);
    int rc = ok ? h3_outfile_commit(o, 0, &e) : h3_fail(&e, "!save %s: write failed: %s", h3_quote(dst), strerror(errno));
    h3_outfile_free(o);
    if (rc) return say_error("%s", e.msg);
    printf("saved %s\n", dst);
    return 0;
}

static void generate(session *s, const char *prompt);

static int c_again(session *s, const char *arg) {
    if (!s->last_prompt) return say_error("!again: no prompt yet");
    generate(s, s->last_prompt);
    return 0;
}

static int c_quit(session *s, const char *arg) { return 1; }

/* !resident [on|off|auto]: the models kept between generations. on = --resident (every phase's); auto, the session's
 * default (docs/model/features.md 3): the transformer and the video decoder, when the GPU has their room;
 * off frees them now */
static int c_resident(session *s, const char *arg) {
    if (arg) {
        if (!strcmp(arg, "on")) s->memory = H3_MEMORY_RESIDENT;
        else if (!strcmp(arg, "auto")) s->memory = H3_MEMORY_AUTO;
        else if (!strcmp(arg, "off")) s->memory = H3_MEMORY_PHASES;
        else return say_error("!resident expects on, off or auto, got '%s'", h3_quote(arg));
        h3_engine_set_memory(s->eng, s->memory); /* off frees the kept models now */
    }
    printf("resident %s\n", s->memory == H3_MEMORY_RESIDENT ? "on: each phase's model stays loaded for the next generation"
                           : s->memory == H3_MEMORY_AUTO
                               ? "auto: the transformer and the video decoder stay loaded for the next generation when "
                                 "the GPU has their room"
                               : "off: each generation loads and frees every phase's weights");
    return 0;
}

/* !reference-rope [on|off]: --use-reference-rope (docs/model/features.md 5.7) */
static int c_reference_rope(session *s, const char *arg) {
    if (arg && parse_toggle("reference-rope", arg, &s->st.reference_rope)) return -1;
    printf("reference rope %s\n", s->st.reference_rope ? "on: the released spatial RoPE at 256x256"
                                                       : "off: spatial RoPE halved at a 256x256 render canvas");
    return 0;
}

/* !show [on|off]: --show's terminal previews */
static int c_show(session *s, const char *arg) {
    int on;
    if (arg) {
        if (parse_toggle("show", arg, &on)) return -1;
        if (on && s->tp.g == TERM_NONE)
            return say_error("!show: no graphics terminal detected (Kitty/Ghostty or iTerm2/WezTerm/Konsole)");
        s->show = on;
    }
    printf("show %s\n", s->show ? "on: a frame after every denoising pass, then every final frame" : "off");
    return 0;
}

/* !token-reduction [on|off]: --token-reduction */
/* !ssd-streaming [on|off]: --ssd-streaming (off: automatic on CUDA) */
static int c_ssd_streaming(session *s, const char *arg) {
    int on = s->ssd_streaming;
    if (arg && parse_toggle("ssd-streaming", arg, &on)) return -1;
    if (arg && on && strcmp(s->quant, "none"))
        return say_error("!ssd-streaming: cannot be combined with --quant %s (the %s blocks are made resident)", s->quant,
                         !strcmp(s->quant, "fp8") ? "FP8" : "int8");
    if (arg && h3_engine_set_ssd_streaming(s->eng, on) != H3_OK) return say_error("!ssd-streaming: %s", h3_engine_error(s->eng));
    s->ssd_streaming = on;
    printf("ssd-streaming %s\n", s->ssd_streaming ? "on" : "auto (on with --backend cuda when the resident DiT does not fit)");
    return 0;
}

/* !quant [none|fp8|int8|int8-fc2-groups]: --quant (int8-fc2-groups: --quant int8 --int8-fc2-groups); the
 * transformer is quantized again at its next load (docs/int8.md, docs/fp8.md) */
static int c_quant(session *s, const char *arg) {
    if (arg) {
        const int g = !strcmp(arg, "int8-fc2-groups");
        const char *q = g ? "int8" : arg;
        if (strcmp(q, "none") && strcmp(q, "fp8") && strcmp(q, "int8"))
            return say_error("!quant expects none, fp8, int8 or int8-fc2-groups, got '%s'", h3_quote(arg));
        if (h3_engine_set_quant(s->eng, q, g) != H3_OK) return say_error("!quant: %s", h3_engine_error(s->eng));
        s->quant = !strcmp(q, "fp8") ? "fp8" : !strcmp(q, "int8") ? "int8" : "none", s->fc2_groups = g;
    }
    printf("quant %s%s\n", s->quant, s->fc2_groups ? " (FFN down input per 1024 channels)" : "");
    return 0;
}

static int c_token_reduction(session *s, const char *arg) {
    if (arg && parse_toggle("token-reduction", arg, &s->st.token_reduction)) return -1;
    printf("token reduction %s\n", s->st.token_reduction ? "on" : "off");
    return 0;
}

/* !cache [clear]: the models kept by --resident / frees them */
static int c_cache(session *s, const char *arg) {
    if (arg && strcmp(arg, "clear")) return say_error("!cache takes no value or 'clear', got '%s'", h3_quote(arg));
    if (arg) h3_engine_drop_models(s->eng);
    char buf[4 * 4600];
    int n = h3_engine_cached_models(s->eng, buf, sizeof buf);
    if (n) printf("cache: %d model%s resident: %s\n", n, n == 1 ? "" : "s", buf);
    else printf("cache: empty%s\n", s->memory != H3_MEMORY_PHASES ? "" : " (!resident is off)");
    return 0;
}

static const struct {
    const char *name, *args, *help;
    command_fn  fn;
    int         takes_arg;
} commands[] = {
    {"help", "", "list the commands", c_help, 0},
    {"status", "", "show the state the next prompt generates with", c_status, 0},
    {"seed", "[N|random]", "show; fix the seed; or a fresh random seed per generation (-1 too)", c_seed, 1},
    {"size", "[WxH|default]", "show/set the output canvas (checked when generating)", c_size, 1},
    {"render-size", "[WxH|native]", "set/clear the internal render canvas (docs/model/features.md 5.6)", c_render_size, 1},
    {"frames", "[N]", "show/set the requested frames (aligned up to 17n+5)", c_frames, 1},
    {"seconds", "[S]", "set frames = round(S x 24); shows the aligned frame count", c_seconds, 1},
    {"steps", "[N]", "denoising passes (model evaluations), 1..1000", c_steps, 1},
    {"reuse", "[N]", "velocity reuse, 1..32 (generation needs 1..3)", c_reuse, 1},
    {"layers", "[N]", "DiT blocks kept, 35..50", c_layers, 1},
    {"core-reuse", "[N]", "core residual refresh interval, 1..6", c_core_reuse, 1},
    {"resident", "[on|off|auto]", "the models kept between generations: every phase's (on, --resident), the transformer "
     "and video decoder when they fit (auto, the default), none (off)", c_resident, 1},
    {"cache", "[clear]", "show / free the models kept by !resident", c_cache, 1},
    {"token-reduction", "[on|off]", "DiT middle blocks on paired video tokens (docs/model/features.md 5.5)", c_token_reduction, 1},
    {"quant", "[none|fp8|int8|int8-fc2-groups]", "the DiT blocks' linears as W8A8 (docs/int8.md, docs/fp8.md), from the next load",
     c_quant, 1},
    {"ssd-streaming", "[on|off]", "DiT blocks streamed from host memory through two GPU slots (docs/model/features.md 7.3)", c_ssd_streaming, 1},
    {"show", "[on|off]", "terminal previews (--show); refused without a graphics terminal", c_show, 1},
    {"zoom", "[N]", "previews shown at N x their pixel size (--zoom, 1..64)", c_zoom, 1},
    {"open", "[on|off]", "open each finished video with the system opener (xdg-open; H3_OPENER)", c_open, 1},
    {"reference-rope", "[on|off]", "the released spatial RoPE at 256x256 (--use-reference-rope; docs/model/features.md 5.7)",
     c_reference_rope, 1},
    {"lora", "[FILE [SCALE]|off]", "list / append a LoRA (docs/lora.md; at most 8, merged from the untouched weights) / "
     "clear them", c_lora, 1},
    {"lora-ref", "FILE [SCALE]", "append a LoRA for the ref2va partition (transformer_ref) only", c_lora_ref, 1},
    {"shift", "[VIDEO[:AUDIO]|default]", "the schedulers' shifts (--shift; LightX2V's Turbo LoRAs: 6:3)", c_shift, 1},
    {"step-update", "[euler|training_euler]", "the Euler step's form (--step-update; docs/lora.md)", c_step_update, 1},
    {"first", "[PATH|clear]", "show/set/clear the first keyframe (fl2va); not with references", c_first, 1},
    {"last", "[PATH|clear]", "show/set/clear the last keyframe (fl2va); not with references", c_last, 1},
    {"ref-image", "[PATH]", "append an image reference (ref2va); not with keyframes", c_ref_image, 1},
    {"refs", "[clear]", "list the references / remove them all", c_refs, 1},
    {"ref-remove", "N", "remove reference N (1-based); the later ones move up", c_ref_remove, 1},
    {"save", "[PATH]", "copy the last video (default h3-<unix time>.mp4; never overwrites)", c_save, 1},
    {"again", "", "repeat the last prompt", c_again, 0},
    {"output", "[DIR]", "show/set the output directory (created)", c_output, 1},
    {"quit", "", "leave (so do !exit and end of input)", c_quit, 0},
    {"exit", "", "leave", c_quit, 0},
};
#define NCOMMANDS (int)(sizeof commands / sizeof commands[0])

static int c_help(session *s, const char *arg) {
    printf("a line not starting with '!' is a prompt: it generates at once with the current state\n");
    for (int i = 0; i < NCOMMANDS; i++) {
        char head[48];
        snprintf(head, sizeof head, "!%s %s", commands[i].name, commands[i].args);
        printf("  %-28s %s\n", head, commands[i].help);
    }
    return 0;
}

/* One parsed command line. */
static int run_command(session *s, const char *name, const char *arg) {
    for (int i = 0; i < NCOMMANDS; i++) {
        if (strcmp(name, commands[i].name)) continue;
        if (arg && !commands[i].takes_arg) return say_error("!%s takes no value, got '%s'", name, h3_quote(arg));
        return commands[i].fn(s, arg);
    }
    return say_error("unknown command '!%s' (!help lists them)", h3_quote(name));
}

/* ---- generation ---- */

static void generate(session *s, const char *prompt) {
    if (prompt != s->last_prompt) {
        char *copy = strdup(prompt);
        if (!copy) {
            say_error("out of memory");
            s->failed++;
            return;
        }
        free(s->last_prompt);
        s->last_prompt = copy;
        prompt = copy;
    }
    gen_paths p;
    int n = s->next;
    for (;; n++) {
        if (n > MAX_NUMBER || paths_for(s, n, &p)) {
            if (n > MAX_NUMBER) say_error("no free output number up to %d in %s", MAX_NUMBER, s->out_dir);
            s->failed++;
            return;
        }
        int r = claim(s, &p);
        if (r < 0) {
            s->failed++;
            return;
        }
        if (r == 0) break;
    }
    uint64_t seed = s->seed_fixed ? s->st.seed : random_seed();
    h3_params q;
    request_for(s, prompt, seed, &p, &q);
    h3_sinks sinks = {.preview = term_preview_frame, .user = &s->tp};
    double t0 = now_s();
    interrupted = 0;
    running_engine = s->eng;
    generating = 1;
    int rc = h3_engine_generate(s->eng, &q, s->show ? &sinks : NULL); /* checks q as the one-shot path does */
    generating = 0;
    if (rc != H3_OK) {
        release(s, &p, 1); /* the placeholders that no output replaced go */
        say_error("%s", h3_engine_error(s->eng));
        if (!interrupted) s->failed++; /* a cancelled generation is the user's choice, not a failure */
        interrupted = 0;
        return;
    }
    release(s, &p, 0);
    interrupted = 0;
    s->done++;
    s->next = n + 1;
    s->last_seed = seed;
    snprintf(s->last_mp4, sizeof s->last_mp4, "%s", s->mux ? p.mp4 : "");
    printf("video-%04d: seed %llu, %.2f s", n, (unsigned long long)seed, now_s() - t0);
    if (s->mux) printf(", %s", p.mp4);
    if (q.frames_dir) printf(", frames %s", p.frames);
    if (q.wav) printf(", %s", p.wav);
    if (q.dump_latents) printf(", %s", p.dump);
    printf("\n");
    if (s->open && s->mux) open_file(p.mp4);
}

/* ---- start-up and the loop ---- */

static int make_session_dir(session *s, h3_err *e) {
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !tmp[0]) tmp = "/tmp";
    size_t len = strlen(tmp);
    while (len > 1 && tmp[len - 1] == '/') len--;
    if (len + 12 >= sizeof s->tmp_dir) return h3_fail(e, "TMPDIR %s: too long", tmp);
    snprintf(s->tmp_dir, sizeof s->tmp_dir, "%.*s/h3-XXXXXX", (int)len, tmp);
    if (!mkdtemp(s->tmp_dir)) {
        h3_fail(e, "%s: cannot create the session directory: %s", s->tmp_dir, strerror(errno));
        s->tmp_dir[0] = 0;
        return -1;
    }
    memcpy(s->out_dir, s->tmp_dir, sizeof s->out_dir);
    return 0;
}

static void session_free(session *s) {
    running_engine = NULL;
    free(s->last_prompt);
    free(s->first_owned), free(s->last_owned);
    for (int i = 0; i < H3_MAX_LORAS; i++) free(s->lora_owned[i]);
    for (int i = 0; i < H3_MAX_REFERENCES; i++) free(s->ref_owned[i]);
}

int cmd_session(h3_engine *eng, const cli_generate *g) {
    const h3_params *r = &g->par;
    if (g->output_given && r->output_mp4 && r->output_mp4[0])
        return cli_error("generate: -o %s: a session writes video-NNNN.mp4 into its own directory (!output DIR); "
                         "give -p for one video, or -o '' for no MP4", r->output_mp4);
    session s;
    memset(&s, 0, sizeof s);
    s.st = *r;
    s.eng = eng, s.opt = &g->opt;
    /* docs/model/features.md 3: a session keeps the prepared DiT and decoder (auto) unless --resident keeps all */
    s.memory = g->resident ? H3_MEMORY_RESIDENT : H3_MEMORY_AUTO;
    s.ssd_streaming = g->opt.ssd_streaming;
    s.quant = g->opt.quant && !strcmp(g->opt.quant, "fp8") ? "fp8" : g->opt.quant && !strcmp(g->opt.quant, "int8") ? "int8" : "none";
    s.fc2_groups = g->opt.int8_fc2_groups;
    s.tp = (term_preview){term_graphics_detect(), g->zoom, stdout};
    s.show = g->show; /* --show, when the terminal has graphics (cmd_generate checked) */
    s.seed_fixed = g->seed_given;
    s.mux = !(r->output_mp4 && !r->output_mp4[0]);
    s.frames_base = r->frames_dir, s.wav_base = r->wav, s.dump_base = r->dump_latents;
    s.next = 1;
    h3_err e = {{0}};
    if (make_session_dir(&s, &e)) return cli_error("generate: %s", e.msg);
    /* the start-up flags, checked as the first generation's request would be */
    gen_paths p;
    h3_params q;
    if (paths_for(&s, 1, &p)) {
        rmdir(s.tmp_dir);
        return 2;
    }
    request_for(&s, "-", r->seed, &p, &q);
    if (h3_engine_check(eng, &q, NULL) != H3_OK) {
        rmdir(s.tmp_dir);
        return cli_error("generate: %s", h3_engine_error(eng));
    }
    if (s.frames_base && make_dirs(s.frames_base, &e)) {
        rmdir(s.tmp_dir);
        return cli_error("generate: --frames-dir %s", e.msg);
    }
    if ((s.mux || s.frames_base || s.wav_base) && !h3_has_media()) {
        rmdir(s.tmp_dir);
        fprintf(stderr, "h3: generate: -o/--frames-dir/--wav: this build has no FFmpeg (MEDIA=0); use -o '' --dump-latents\n");
        return 1;
    }
    if (h3_engine_set_memory(eng, s.memory) != H3_OK || h3_engine_start(eng) != H3_OK) {
        rmdir(s.tmp_dir);
        session_free(&s);
        fprintf(stderr, "h3: generate: %s\n", h3_engine_error(eng));
        return 1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0); /* replies stay in order with stderr's lines in a pipe */
    line_reader *in = line_reader_new();
    if (!in) {
        rmdir(s.tmp_dir);
        session_free(&s);
        fprintf(stderr, "h3: generate: out of memory\n");
        return 1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint; /* no SA_RESTART: the read returns, line_edit.c drops the typed line */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    line_reader_set_interrupt(in, &interrupted);
    printf("h3 session: outputs in %s; a line is a prompt, !help lists the commands (Ctrl-C cancels the line or the "
           "generation; !quit or Ctrl-D leaves)\n", s.out_dir);
    char *line;
    size_t len;
    while ((line = line_reader_read(in, "h3> ", &len)) != NULL) {
        int quit = 0;
        session_line sl;
        h3_err le = {{0}};
        if (session_line_parse(line, len, &sl, &le)) say_error("%s", le.msg);
        else if (sl.kind == SESSION_COMMAND) quit = run_command(&s, sl.name, sl.arg) == 1;
        else if (sl.kind == SESSION_PROMPT) generate(&s, sl.text);
        free(line);
        if (quit) break;
    }
    line_reader_free(in);
    while (waitpid(-1, NULL, WNOHANG) > 0) { /* openers that already finished */
    }
    int removed = rmdir(s.tmp_dir) == 0; /* only when nothing was written there */
    fprintf(stderr, "h3: session ended: %d generated, %d failed%s%s\n", s.done, s.failed,
            removed ? "; removed the empty " : "", removed ? s.tmp_dir : "");
    int rc = s.failed ? 1 : 0;
    session_free(&s);
    return rc;
}
