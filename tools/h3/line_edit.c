/* See line_edit.h. The editor is libedit's readline interface; the plain reader is getline. */
#include "line_edit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef H3_EDITLINE
#include <editline/readline.h>
#endif

enum { HISTORY_ENTRIES = 500 };

struct line_reader {
    int   tty;     /* stdin is a terminal */
    int   edit;    /* lines come from libedit */
    char *history; /* the history file, or NULL (no $HOME and no H3_HISTORY) */
    int   warned;  /* the history file could not be written: said once */
    char *last;    /* the last line added to the history (repeats are not added) */
    volatile sig_atomic_t *interrupt; /* line_reader_set_interrupt */
};

void line_reader_set_interrupt(line_reader *r, volatile sig_atomic_t *flag) { r->interrupt = flag; }

/* an interrupted read with the caller's flag set: the typed line is dropped (1), else the input ended (0) */
static int cancelled_line(line_reader *r) {
    if (!r->interrupt || !*r->interrupt) return 0;
    *r->interrupt = 0;
    clearerr(stdin);
    return 1;
}

static char *history_path(void) {
    const char *p = getenv("H3_HISTORY");
    if (p && *p) return strdup(p);
    const char *home = getenv("HOME");
    if (!home || !*home) return NULL;
    size_t n = strlen(home) + sizeof "/.h3_history";
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s/.h3_history", home);
    return s;
}

line_reader *line_reader_new(void) {
    line_reader *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->tty = isatty(STDIN_FILENO);
#ifdef H3_EDITLINE
    r->edit = r->tty;
    if (r->edit) {
        using_history();
        stifle_history(HISTORY_ENTRIES);
        r->history = history_path();
        if (r->history) read_history(r->history); /* a missing file is a fresh history */
    }
#endif
    return r;
}

int line_reader_edits(const line_reader *r) { return r && r->edit; }

#ifdef H3_EDITLINE
static void remember(line_reader *r, const char *line) {
    if (!line[strspn(line, " \t")] || (r->last && !strcmp(r->last, line))) return;
    add_history(line);
    free(r->last);
    r->last = strdup(line);
    /* written after every line, so the history survives a crash or a killed session */
    if (r->history && write_history(r->history) != 0 && !r->warned) {
        fprintf(stderr, "h3: cannot write the history file %s (the session goes on without saving it)\n", r->history);
        r->warned = 1;
    }
}
#endif

char *line_reader_read(line_reader *r, const char *prompt, size_t *len) {
again:;
#ifdef H3_EDITLINE
    if (r->edit) {
        rl_catch_signals = 0; /* SIGINT reaches the caller's handler, which interrupts the read */
        char *line = readline(prompt);
        if (!line) {
            fputc('\n', stdout);
            if (cancelled_line(r)) goto again;
            return NULL;
        }
        size_t n = strlen(line);
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        remember(r, line);
        *len = n;
        return line;
    }
#endif
    if (r->tty) {
        fputs(prompt, stdout);
        fflush(stdout);
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, stdin);
    if (n < 0) {
        free(line);
        if (r->tty) fputc('\n', stdout);
        if (cancelled_line(r)) goto again;
        return NULL;
    }
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
    *len = (size_t)n; /* the bytes read: a NUL inside is the caller's to refuse */
    return line;
}

void line_reader_free(line_reader *r) {
    if (!r) return;
    free(r->history);
    free(r->last);
    free(r);
}
