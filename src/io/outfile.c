/* Output targets, their temporaries, claims and the cleanup table (outfile.h; docs/robustness.md). */
#include "outfile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define TMP_TAG      ".h3tmp-"
#define RAND_LEN     12
#define STALE_SECS   (7 * 24 * 3600)  /* a live pid's temporary older than this is stale (pid reuse) */
#define SLOTS        64
#define SLOT_PATH    4096
/* "<what> <path>: ..." (what may be "", e.g. from st_writer_save) */
#define FAILP(e, what, path, fmt, ...) h3_fail(e, "%s%s%s: " fmt, what, (what)[0] ? " " : "", path, ##__VA_ARGS__)

int h3_out_frame_name(const char *n)
{
    if (strncmp(n, "frame_", 6) != 0) return 0;
    const char *p = n + 6;
    if (*p < '0' || *p > '9') return 0;
    while (*p >= '0' && *p <= '9') p++;
    return strcmp(p, ".png") == 0;
}

/* ---- the cleanup table: written under a mutex, read by the signal handler without one ---- */

enum { S_FREE, S_BUSY, S_FILE, S_DIR, S_CLAIM_FILE, S_CLAIM_DIR };
static struct slot {
    volatile sig_atomic_t state;
    h3_out_accept         accept;
    char                  path[SLOT_PATH];
} slots[SLOTS];
static pthread_mutex_t slots_mu = PTHREAD_MUTEX_INITIALIZER;

static int slot_add(const char *path, int state, h3_out_accept accept)
{
    if (strlen(path) >= SLOT_PATH) return -1;
    int got = -1;
    pthread_mutex_lock(&slots_mu);
    for (int i = 0; i < SLOTS && got < 0; i++) {
        if (__atomic_load_n(&slots[i].state, __ATOMIC_SEQ_CST) != S_FREE) continue;
        slots[i].state = S_BUSY;
        memcpy(slots[i].path, path, strlen(path) + 1);
        slots[i].accept = accept;
        __atomic_store_n(&slots[i].state, state, __ATOMIC_SEQ_CST);
        got = i;
    }
    pthread_mutex_unlock(&slots_mu);
    return got;
}

static void slot_clear(int i)
{
    if (i >= 0 && i < SLOTS) __atomic_store_n(&slots[i].state, S_FREE, __ATOMIC_SEQ_CST);
}

/* Removes the accepted entries of a directory (regular files only, never through a link), by raw getdents64 so a
 * signal handler may call it. Returns the number left (entries not removed), or -1 when it cannot be opened. */
static int clean_dir(const char *path, h3_out_accept accept)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -1;
    int left = 0;
    char buf[4096] __attribute__((aligned(8)));
    for (;;) {
        long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (n <= 0) break;
        for (long off = 0; off < n;) {
            /* struct linux_dirent64: u64 ino, s64 off, u16 reclen, u8 type, char name[] */
            unsigned short reclen;
            memcpy(&reclen, buf + off + 16, sizeof reclen);
            unsigned char type = (unsigned char)buf[off + 18];
            const char *name = buf + off + 19;
            off += reclen;
            if (reclen == 0) break;
            if (name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2]))) continue;
            if (accept && accept(name) && (type == DT_REG || type == DT_UNKNOWN) && unlinkat(fd, name, 0) == 0) continue;
            left++;
        }
    }
    close(fd);
    return left;
}

static void remove_dir(const char *path, h3_out_accept accept)
{
    clean_dir(path, accept);
    rmdir(path);
}

void h3_outfile_cleanup_signal(void)
{
    for (int pass = 0; pass < 2; pass++) { /* files first (a frame temp inside a temp dir), then directories */
        for (int i = 0; i < SLOTS; i++) {
            int st = __atomic_load_n(&slots[i].state, __ATOMIC_SEQ_CST);
            if (pass == 0 && (st == S_FILE || st == S_CLAIM_FILE)) unlink(slots[i].path);
            if (pass == 1 && (st == S_DIR || st == S_CLAIM_DIR)) remove_dir(slots[i].path, slots[i].accept);
            if ((pass == 0 && (st == S_FILE || st == S_CLAIM_FILE)) || (pass == 1 && (st == S_DIR || st == S_CLAIM_DIR)))
                slots[i].state = S_FREE;
        }
    }
}

/* ---- names ---- */

/* "dir/" (or "") and the base of path; NULL base when path ends in '/'. */
static void split(const char *path, size_t *dir_len, const char **base)
{
    const char *slash = strrchr(path, '/');
    *dir_len = slash ? (size_t)(slash - path) + 1 : 0;
    *base = slash ? slash + 1 : path;
}

static void random_letters(char out[RAND_LEN + 1])
{
    static const char abc[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    unsigned char r[RAND_LEN] = {0};
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t x = (uint64_t)ts.tv_nsec * 6364136223846793005ull ^ (uint64_t)getpid() << 32 ^ (uint64_t)ts.tv_sec;
        for (int i = 0; i < RAND_LEN; i++) x = x * 6364136223846793005ull + 1442695040888963407ull, r[i] = (unsigned char)(x >> 33);
    }
    for (int i = 0; i < RAND_LEN; i++) out[i] = abc[r[i] % 62];
    out[RAND_LEN] = 0;
}

/* Our temporary's pattern: "." + base + ".h3tmp-" + pid digits + "-" + 12 letters/digits, nothing after.
 * Returns the pid, or 0 when name is not of the pattern. */
static long our_temp_pid(const char *n)
{
    if (n[0] != '.') return 0;
    const char *m = NULL;
    for (const char *p = strstr(n, TMP_TAG); p; p = strstr(p + 1, TMP_TAG)) m = p;
    if (!m || m < n + 2) return 0;  /* a base of at least one character */
    const char *q = m + strlen(TMP_TAG);
    long pid = 0;
    int digits = 0;
    for (; *q >= '0' && *q <= '9'; q++, digits++) {
        if (digits >= 10) return 0;
        pid = pid * 10 + (*q - '0');
    }
    if (!digits || *q != '-' || pid <= 0 || pid > 0x7fffffffL) return 0;
    q++;
    for (int i = 0; i < RAND_LEN; i++, q++) {
        char c = *q;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return 0;
    }
    return *q ? 0 : pid;
}

int h3_out_sweep(const char *path, h3_out_accept accept)
{
    size_t dl;
    const char *base;
    split(path, &dl, &base);
    char dir[SLOT_PATH];
    if (dl >= sizeof dir) return 0;
    if (dl) memcpy(dir, path, dl), dir[dl] = 0;
    else strcpy(dir, ".");
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return 0;
    DIR *d = fdopendir(dfd);
    if (!d) { close(dfd); return 0; }
    int removed = 0;
    time_t now = time(NULL);
    struct dirent *de;
    while ((de = readdir(d))) {
        long pid = our_temp_pid(de->d_name);
        if (!pid || pid == (long)getpid()) continue;
        struct stat sb;
        if (fstatat(dfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0) continue;
        if (!S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode)) continue;  /* links, FIFOs, ...: never ours */
        int dead = kill((pid_t)pid, 0) != 0 && errno == ESRCH;
        if (!dead && now - sb.st_mtime < STALE_SECS) continue;
        int lfd = openat(dfd, de->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        int locked = lfd >= 0 && flock(lfd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
        if (lfd >= 0) close(lfd);
        if (locked) continue; /* its writer is alive somewhere */
        if (S_ISREG(sb.st_mode)) {
            if (unlinkat(dfd, de->d_name, 0) == 0) removed++;
        } else {
            char sub[SLOT_PATH];
            if (snprintf(sub, sizeof sub, "%s/%s", dir, de->d_name) >= (int)sizeof sub) continue;
            clean_dir(sub, accept ? accept : h3_out_frame_name);
            if (unlinkat(dfd, de->d_name, AT_REMOVEDIR) == 0) removed++;
        }
    }
    closedir(d);
    return removed;
}

/* ---- the target ---- */

int h3_out_check(const char *what, const char *path, h3_out_kind kind, h3_out_accept accept, h3_err *e)
{
    if (!path || !path[0]) return FAILP(e, what, "''", "the path is empty");
    if (!strcmp(path, "-"))
        return FAILP(e, what, "-", "standard output is not supported (give a file path)");
    size_t len = strlen(path);
    if (kind == H3_OUT_FILE && path[len - 1] == '/')
        return FAILP(e, what, path, "names a folder, not a file");
    struct stat sb;
    if (lstat(path, &sb) != 0) return 0; /* missing (or its folder is): making the temporary says why */
    if (S_ISLNK(sb.st_mode))
        return FAILP(e, what, path, "is a symbolic link; refusing to replace it (give the path it points to)");
    if (kind == H3_OUT_FILE) {
        if (S_ISDIR(sb.st_mode)) return FAILP(e, what, path, "is a directory, not a file");
        if (!S_ISREG(sb.st_mode))
            return FAILP(e, what, path, "exists and is not a regular file (a FIFO, device or socket); refusing to replace it");
        return 0;
    }
    if (!S_ISDIR(sb.st_mode)) return FAILP(e, what, path, "exists and is not a directory");
    DIR *d = opendir(path);
    if (!d) return FAILP(e, what, path, "cannot read the existing directory: %s", strerror(errno));
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") || (accept && accept(de->d_name))) continue;
        rc = FAILP(e, what, path, "exists and holds '%s', not only the files h3 writes there; refusing to replace it",
                   de->d_name);
        break;
    }
    closedir(d);
    return rc;
}

int h3_out_create(const char *path)
{
    return open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
}

/* A fresh temporary name beside path, made exclusively as a file (*fd) or an empty directory. */
static char *make_temp(const char *path, h3_out_kind kind, int *fd)
{
    size_t dl;
    const char *base;
    split(path, &dl, &base);
    size_t n = strlen(path) + 48;
    char *tmp = malloc(n);
    if (!tmp) { errno = ENOMEM; return NULL; }
    for (int attempt = 0; attempt < 100; attempt++) {
        char r[RAND_LEN + 1];
        random_letters(r);
        snprintf(tmp, n, "%.*s.%s" TMP_TAG "%ld-%s", (int)dl, path, base, (long)getpid(), r);
        int ok;
        if (kind == H3_OUT_DIR) {
            ok = mkdir(tmp, 0777) == 0;
            if (ok) *fd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC); /* held for the lock */
        } else {
            *fd = h3_out_create(tmp);
            ok = *fd >= 0;
        }
        /* held until the rename: a sweep from another host or PID namespace, where our pid means nothing,
         * sees the lock and leaves the temporary alone */
        if (ok && *fd >= 0) flock(*fd, LOCK_EX | LOCK_NB);
        if (ok) return tmp;
        if (errno != EEXIST) break;
    }
    int err = errno;
    free(tmp);
    errno = err;
    return NULL;
}

h3_outfile *h3_outfile_open(const char *what, const char *path_in, h3_out_kind kind, h3_out_accept accept, h3_err *e)
{
    if (h3_out_check(what, path_in, kind, accept, e)) return NULL;
    h3_outfile *o = calloc(1, sizeof *o);
    if (!o || !(o->path = strdup(path_in)) || !(o->what = strdup(what))) {
        if (o) free(o->path), free(o);
        FAILP(e, what, path_in, "out of memory");
        return NULL;
    }
    size_t len = strlen(o->path);
    while (len > 1 && o->path[len - 1] == '/') o->path[--len] = 0;  /* a directory "out/" -> "out" */
    o->fd = o->dirfd = -1;
    o->kind = kind;
    o->accept = accept;
    o->slot = -1;
    h3_out_sweep(o->path, accept);
    o->tmp = make_temp(o->path, kind, kind == H3_OUT_DIR ? &o->dirfd : &o->fd);
    if (!o->tmp) {
        FAILP(e, what, o->path, "cannot create a temporary %s beside it: %s", kind == H3_OUT_DIR ? "directory" : "file",
              strerror(errno));
        h3_outfile_free(o);
        return NULL;
    }
    o->slot = slot_add(o->tmp, kind == H3_OUT_DIR ? S_DIR : S_FILE, accept);
    return o;
}

/* rename without replacing: renameat2's RENAME_NOREPLACE, else link + unlink for a file */
static int rename_noreplace(const char *from, const char *to, int is_dir)
{
    if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0) return 0;
    if (errno != EINVAL && errno != ENOSYS) return -1;
    if (is_dir) {
        struct stat sb;
        if (lstat(to, &sb) == 0) { errno = EEXIST; return -1; }
        return rename(from, to);
    }
    if (link(from, to) != 0) return -1;
    unlink(from);
    return 0;
}

int h3_outfile_commit(h3_outfile *o, int replace, h3_err *e)
{
    if (!o->tmp) return FAILP(e, o->what, o->path, "already written");
    if (o->fd >= 0 && fsync(o->fd) != 0 && errno != EINVAL && errno != EROFS) /* closed (unlocked) after the rename */
        return FAILP(e, o->what, o->path, "cannot write: %s", strerror(errno));
    if (h3_out_check(o->what, o->path, o->kind, o->accept, e)) return -1;  /* again: the target may have changed */
    h3_out_unclaim(o->path, 0);  /* before the rename: a signal now leaves the placeholder, never the real output */
    struct stat sb;
    int exists = lstat(o->path, &sb) == 0;
    int rc;
    if (!replace) {
        rc = rename_noreplace(o->tmp, o->path, o->kind == H3_OUT_DIR);
        if (rc && errno == EEXIST) return FAILP(e, o->what, o->path, "the file exists (give another name)");
    } else if (o->kind == H3_OUT_FILE || !exists) {
        rc = rename(o->tmp, o->path);
    } else if (renameat2(AT_FDCWD, o->tmp, AT_FDCWD, o->path, RENAME_EXCHANGE) == 0) {
        remove_dir(o->tmp, o->accept);  /* the temporary's name now holds the old directory */
        rc = 0;
    } else {
        /* no RENAME_EXCHANGE on this filesystem: the old directory moves aside (onto a fresh empty temporary) */
        int lock = -1;
        char *old = make_temp(o->path, H3_OUT_DIR, &lock);
        int slot = old ? slot_add(old, S_DIR, o->accept) : -1;
        rc = old && rename(o->path, old) == 0 && rename(o->tmp, o->path) == 0 ? 0 : -1;
        int err = errno;
        if (old) remove_dir(old, o->accept);
        if (lock >= 0) close(lock);
        slot_clear(slot);
        free(old);
        errno = err;
    }
    if (rc) return FAILP(e, o->what, o->path, "cannot rename the temporary into place: %s", strerror(errno));
    if (o->fd >= 0) close(o->fd);
    if (o->dirfd >= 0) close(o->dirfd);
    o->fd = o->dirfd = -1;
    slot_clear(o->slot);
    o->slot = -1;
    free(o->tmp);
    o->tmp = NULL;
    return 0;
}

void h3_outfile_free(h3_outfile *o)
{
    if (!o) return;
    if (o->fd >= 0) close(o->fd);
    if (o->dirfd >= 0) close(o->dirfd);
    if (o->tmp) {
        if (o->kind == H3_OUT_DIR) remove_dir(o->tmp, o->accept);
        else unlink(o->tmp);
    }
    slot_clear(o->slot);
    free(o->tmp);
    free(o->path);
    free(o->what);
    free(o);
}

/* ---- claims ---- */

int h3_out_claim(const char *path, h3_out_kind kind, h3_err *e)
{
    int ok;
    if (kind == H3_OUT_DIR) {
        ok = mkdir(path, 0777) == 0;
    } else {
        int fd = h3_out_create(path);
        ok = fd >= 0;
        if (ok) close(fd);
    }
    if (!ok) {
        if (errno == EEXIST) return 1;
        return h3_fail(e, "%s: cannot create: %s", path, strerror(errno));
    }
    slot_add(path, kind == H3_OUT_DIR ? S_CLAIM_DIR : S_CLAIM_FILE, NULL);
    return 0;
}

void h3_out_unclaim(const char *path, int remove)
{
    int kind = -1;
    pthread_mutex_lock(&slots_mu);
    for (int i = 0; i < SLOTS; i++) {
        int st = __atomic_load_n(&slots[i].state, __ATOMIC_SEQ_CST);
        if ((st == S_CLAIM_FILE || st == S_CLAIM_DIR) && !strcmp(slots[i].path, path)) {
            kind = st;
            slot_clear(i);
        }
    }
    pthread_mutex_unlock(&slots_mu);
    if (!remove) return;
    struct stat sb;
    if (lstat(path, &sb) != 0) return;
    if (S_ISREG(sb.st_mode) && sb.st_size == 0 && kind != S_CLAIM_DIR) unlink(path);
    else if (S_ISDIR(sb.st_mode) && kind != S_CLAIM_FILE) rmdir(path);  /* only when empty */
}
