/* Output files and their temporaries: the one helper every writer uses (media, the safetensors writer,
 * make-tiny, the session's !save and numbered outputs). docs/robustness.md "Outputs and temporary files".
 *
 * - A target is checked before anything is written (h3_out_check): an existing target must be a regular
 *   file (kind FILE) or a directory holding nothing but the writer's own names (kind DIR); FIFOs, devices,
 *   sockets and symbolic links are refused, so is "-" and a name ending in '/'.
 * - The temporary lies in the target's folder, named "<dir>/.<base>.h3tmp-<pid>-<12 random letters>", made
 *   with O_CREAT|O_EXCL|O_NOFOLLOW (a file) or mkdir (a directory), mode 0666 / 0777 less the umask; it is
 *   renamed onto the target by h3_outfile_commit (which checks the target again) and removed otherwise.
 * - Every live temporary (and every claimed placeholder, h3_out_claim) is recorded in a small table that
 *   h3_outfile_cleanup_signal empties async-signal-safely: the CLI calls it from its SIGTERM/SIGINT handler
 *   (the library installs no handler).
 * - Opening a temporary sweeps the target's folder of stale temporaries of ours: a name of exactly that
 *   pattern, a regular file or a directory (not a link), whose pid is not alive or that is older than 7 days,
 *   and that no live writer holds the flock of (every temporary is locked until its rename).
 *   A stale directory loses only the entries the writer's accept() names, then goes if it is empty. */
#ifndef H3_OUTFILE_H
#define H3_OUTFILE_H

#include "../core/error.h"

typedef enum { H3_OUT_FILE = 0, H3_OUT_DIR = 1 } h3_out_kind;

/* For kind DIR: 1 when an entry name is the writer's own (e.g. frame_00000.png), which an existing target may
 * hold and which is removed with a temporary directory; NULL accepts nothing. Must be async-signal-safe. */
typedef int (*h3_out_accept)(const char *name);

/* "frame_" + digits + ".png": the names of a PNG frames folder (docs/model/features.md 8.2); the accept of --frames-dir,
 * and what a stale temporary directory of ours loses in a sweep. */
int h3_out_frame_name(const char *name);

/* Checks one target; what names the flag or command in the one-line message ("-o", "--wav", "!save").
 * A missing target is fine (its folder is checked when the temporary is made). 0, or -1 with e filled. */
int h3_out_check(const char *what, const char *path, h3_out_kind kind, h3_out_accept accept, h3_err *e);

typedef struct h3_outfile {
    char         *path;   /* the target */
    char         *tmp;    /* the temporary (file or directory); NULL once committed */
    int           fd;     /* the temporary file, open for writing (kind FILE; -1 after commit) */
    int           dirfd;  /* kind DIR: the temporary directory, open for its lock (-1 otherwise) */
    h3_out_kind   kind;
    h3_out_accept accept;
    int           slot;   /* its entry in the cleanup table, or -1 when the table was full */
    char         *what;
} h3_outfile;

/* Checks the target, sweeps stale temporaries beside it, makes and records the temporary. NULL with e filled. */
h3_outfile *h3_outfile_open(const char *what, const char *path, h3_out_kind kind, h3_out_accept accept, h3_err *e);

/* Closes the temporary file (fsync first), checks the target again and renames the temporary onto it.
 * replace = 0: an existing target is refused (the session's !save). A directory that exists is swapped
 * (RENAME_EXCHANGE) and the old one's accepted entries removed. 0, or -1 with e filled (the temporary stays
 * for h3_outfile_free). A claim (h3_out_claim) of the same path is forgotten first. */
int h3_outfile_commit(h3_outfile *o, int replace, h3_err *e);

/* Removes an uncommitted temporary (a directory: its accepted entries, then itself) and frees o. */
void h3_outfile_free(h3_outfile *o);

/* Creates a new file exclusively (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0666 less the umask), e.g. a frame inside a
 * temporary directory; returns its descriptor or -1 with errno set. */
int h3_out_create(const char *path);

/* Claims a numbered output name (the session's video-NNNN.mp4, its frames folder, ...): creates an empty
 * file or directory exclusively and records it for the signal cleanup. 0 claimed, 1 taken (it exists),
 * -1 with e filled. */
int h3_out_claim(const char *path, h3_out_kind kind, h3_err *e);
/* Forgets a claim; remove = 1 also removes the placeholder when it is still empty (a failed generation). */
void h3_out_unclaim(const char *path, int remove);

/* Removes every recorded temporary and placeholder. Async-signal-safe (no locks, no allocation): for a
 * signal handler, which should then re-raise. */
void h3_outfile_cleanup_signal(void);

/* Sweeps the folder of path (as h3_outfile_open does); returns how many stale temporaries went. */
int h3_out_sweep(const char *path, h3_out_accept accept);

#endif
