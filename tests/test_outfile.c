/* src/io/outfile.{c,h}: target checks, exclusive temporaries beside the target, commit/discard, claims, the
 * signal cleanup table and the sweep of stale temporaries (docs/robustness.md "Outputs and temporary files"). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"
#include "io/outfile.h"

static char dir[256];

static const char *P(const char *name) {
    static char buf[8][512];
    static int k;
    char *b = buf[k++ % 8];
    snprintf(b, 512, "%s/%s", dir, name);
    return b;
}

static void put(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (f) fputs(text, f), fclose(f);
}

static int has(const char *path, const char *text) {
    char buf[256] = {0};
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return !strcmp(buf, text);
}

static int temps_in(const char *d) { /* entries of d naming a temporary of ours */
    DIR *dd = opendir(d);
    int n = 0;
    struct dirent *de;
    while (dd && (de = readdir(dd)))
        if (strstr(de->d_name, ".h3tmp-")) n++;
    if (dd) closedir(dd);
    return n;
}

static int refused(const char *path, h3_out_kind kind, const char *want) {
    h3_err e = {{0}};
    int rc = h3_out_check("-o", path, kind, h3_out_frame_name, &e); /* 0 for a missing folder: the open says */
    h3_outfile *o = h3_outfile_open("-o", path, kind, h3_out_frame_name, &e);
    int ok = !o && strstr(e.msg, want) && !strchr(e.msg, '\n');
    if (!ok) fprintf(stderr, "  %s: rc %d, msg '%s'\n", path, rc, e.msg);
    h3_outfile_free(o);
    return ok;
}

static int dead_pid(void) {
    pid_t p = fork();
    if (p == 0) _exit(0);
    waitpid(p, NULL, 0);
    return (int)p;
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/h3-test-outfile-XXXXXX");
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    h3_err e = {{0}};

    /* names */
    CHECK(h3_out_frame_name("frame_00000.png") && h3_out_frame_name("frame_7.png"), "frame names");
    CHECK(!h3_out_frame_name("frame_.png") && !h3_out_frame_name("frame_1.png.bak") && !h3_out_frame_name("notes.txt"),
          "not frame names");

    /* targets that are not regular files are refused, and stay */
    CHECK(mkfifo(P("fifo"), 0644) == 0, "mkfifo");
    CHECK(refused(P("fifo"), H3_OUT_FILE, "exists and is not a regular file"), "FIFO");
    struct stat sb;
    CHECK(lstat(P("fifo"), &sb) == 0 && S_ISFIFO(sb.st_mode), "the FIFO stays");
    if (mknod(P("null"), S_IFCHR | 0666, makedev(1, 3)) == 0) { /* root only */
        CHECK(refused(P("null"), H3_OUT_FILE, "exists and is not a regular file"), "character device");
        CHECK(refused(P("null"), H3_OUT_DIR, "exists and is not a directory"), "character device as a folder");
        CHECK(lstat(P("null"), &sb) == 0 && S_ISCHR(sb.st_mode), "the device stays");
    }
    mkdir(P("adir"), 0755);
    CHECK(refused(P("adir"), H3_OUT_FILE, "is a directory"), "directory as a file");
    CHECK(refused(P("adir/"), H3_OUT_FILE, "names a folder"), "trailing slash");
    put(P("victim"), "precious");
    CHECK(symlink(P("victim"), P("link")) == 0, "symlink");
    CHECK(refused(P("link"), H3_OUT_FILE, "is a symbolic link"), "symbolic link");
    CHECK(refused("-", H3_OUT_FILE, "-o -: standard output is not supported"), "-");
    CHECK(refused("", H3_OUT_FILE, "the path is empty"), "empty");
    CHECK(refused(P("victim"), H3_OUT_DIR, "exists and is not a directory"), "file as a folder");
    CHECK(refused(P("nope/x.mp4"), H3_OUT_FILE, "cannot create a temporary file beside it"), "missing folder");
    CHECK(refused(P("victim/x.mp4"), H3_OUT_FILE, "cannot create a temporary file beside it"), "parent is a file");
    mkdir(P("busy"), 0755);
    put(P("busy/frame_00000.png"), "x");
    put(P("busy/notes.txt"), "mine");
    CHECK(refused(P("busy"), H3_OUT_DIR, "exists and holds 'notes.txt'"), "folder with other files");
    CHECK(has(P("busy/notes.txt"), "mine") && has(P("victim"), "precious"), "refusals changed nothing");
    CHECK(temps_in(dir) == 0, "refusals left temporaries");

    /* a temporary beside the target, of our pattern, committed into place */
    h3_outfile *o = h3_outfile_open("-o", P("out.bin"), H3_OUT_FILE, NULL, &e);
    CHECK(o && o->fd >= 0, "%s", e.msg);
    if (o) {
        char want[64];
        snprintf(want, sizeof want, "/.out.bin.h3tmp-%ld-", (long)getpid());
        const char *t = strstr(o->tmp, want);
        CHECK(!strncmp(o->tmp, dir, strlen(dir)) && t && strlen(t + strlen(want)) == 12, "temp name %s", o->tmp);
        CHECK(write(o->fd, "new", 3) == 3, "write");
        int probe = open(o->tmp, O_RDONLY);
        CHECK(probe >= 0 && flock(probe, LOCK_EX | LOCK_NB) != 0, "the open temporary is not locked");
        if (probe >= 0) close(probe);
        CHECK(lstat(P("out.bin"), &sb) != 0, "nothing at the target before the commit");
        CHECK(h3_outfile_commit(o, 1, &e) == 0 && has(P("out.bin"), "new"), "%s", e.msg);
        h3_outfile_free(o);
    }
    CHECK(temps_in(dir) == 0, "commit left a temporary");
    /* replace = 0 keeps an existing target */
    o = h3_outfile_open("!save", P("out.bin"), H3_OUT_FILE, NULL, &e);
    if (o) {
        CHECK(write(o->fd, "xx", 2) == 2, "write");
        CHECK(h3_outfile_commit(o, 0, &e) != 0 && strstr(e.msg, "the file exists"), "%s", e.msg);
        h3_outfile_free(o);
    }
    CHECK(has(P("out.bin"), "new") && temps_in(dir) == 0, "no-replace commit changed the target or left a temporary");
    /* a target replaced by a FIFO between open and commit is refused at the commit */
    o = h3_outfile_open("-o", P("late"), H3_OUT_FILE, NULL, &e);
    CHECK(o != NULL && mkfifo(P("late"), 0644) == 0, "%s", e.msg);
    if (o) {
        CHECK(h3_outfile_commit(o, 1, &e) != 0 && strstr(e.msg, "not a regular file"), "%s", e.msg);
        h3_outfile_free(o);
    }
    CHECK(lstat(P("late"), &sb) == 0 && S_ISFIFO(sb.st_mode) && temps_in(dir) == 0, "late FIFO replaced");
    /* free without commit removes the temporary */
    o = h3_outfile_open("-o", P("gone.bin"), H3_OUT_FILE, NULL, &e);
    h3_outfile_free(o);
    CHECK(o && lstat(P("gone.bin"), &sb) != 0 && temps_in(dir) == 0, "discard");
    /* a directory output replaces a frames-only folder and drops its old frames */
    o = h3_outfile_open("--frames-dir", P("frames"), H3_OUT_DIR, h3_out_frame_name, &e);
    if (o) {
        char fp[600];
        snprintf(fp, sizeof fp, "%s/frame_00000.png", o->tmp);
        int fd = h3_out_create(fp);
        CHECK(fd >= 0 && write(fd, "f", 1) == 1 && close(fd) == 0, "frame");
        CHECK(h3_outfile_commit(o, 1, &e) == 0, "%s", e.msg);
        h3_outfile_free(o);
    }
    o = h3_outfile_open("--frames-dir", P("frames/"), H3_OUT_DIR, h3_out_frame_name, &e);
    CHECK(o != NULL, "%s", e.msg);
    if (o) {
        CHECK(h3_outfile_commit(o, 1, &e) == 0, "%s", e.msg);
        h3_outfile_free(o);
    }
    CHECK(lstat(P("frames/frame_00000.png"), &sb) != 0 && lstat(P("frames"), &sb) == 0 && temps_in(dir) == 0,
          "frames folder replaced");

    /* h3_out_create never follows a link nor reuses a name */
    CHECK(h3_out_create(P("link")) < 0 && errno == EEXIST && has(P("victim"), "precious"), "create through a link");
    CHECK(h3_out_create(P("out.bin")) < 0 && errno == EEXIST, "create over a file");

    /* claims: exclusive, released (empty placeholder removed) or kept */
    CHECK(h3_out_claim(P("video-0001.mp4"), H3_OUT_FILE, &e) == 0, "%s", e.msg);
    CHECK(h3_out_claim(P("video-0001.mp4"), H3_OUT_FILE, &e) == 1, "second claim");
    CHECK(h3_out_claim(P("video-0001"), H3_OUT_DIR, &e) == 0 && h3_out_claim(P("video-0001"), H3_OUT_DIR, &e) == 1,
          "folder claim");
    h3_out_unclaim(P("video-0001.mp4"), 1);
    h3_out_unclaim(P("video-0001"), 1);
    CHECK(lstat(P("video-0001.mp4"), &sb) != 0 && lstat(P("video-0001"), &sb) != 0, "released placeholders removed");
    CHECK(h3_out_claim(P("video-0002.mp4"), H3_OUT_FILE, &e) == 0, "%s", e.msg);
    put(P("video-0002.mp4"), "real");
    h3_out_unclaim(P("video-0002.mp4"), 1);
    CHECK(has(P("video-0002.mp4"), "real"), "a placeholder with content is kept");
    /* a commit onto a claim forgets it: the signal cleanup must not remove the real output */
    CHECK(h3_out_claim(P("video-0003.mp4"), H3_OUT_FILE, &e) == 0, "%s", e.msg);
    o = h3_outfile_open("-o", P("video-0003.mp4"), H3_OUT_FILE, NULL, &e);
    if (o) {
        CHECK(write(o->fd, "v3", 2) == 2 && h3_outfile_commit(o, 1, &e) == 0, "%s", e.msg);
        h3_outfile_free(o);
    }

    /* the signal cleanup: every recorded temporary and claim goes, the committed output stays */
    h3_outfile *a = h3_outfile_open("-o", P("sig.mp4"), H3_OUT_FILE, NULL, &e);
    h3_outfile *d = h3_outfile_open("--frames-dir", P("sigframes"), H3_OUT_DIR, h3_out_frame_name, &e);
    CHECK(a && d && h3_out_claim(P("video-0004.mp4"), H3_OUT_FILE, &e) == 0, "%s", e.msg);
    if (d) {
        char fp[600];
        snprintf(fp, sizeof fp, "%s/frame_00003.png", d->tmp);
        int fd = h3_out_create(fp);
        if (fd >= 0) close(fd);
    }
    CHECK(temps_in(dir) == 2, "%d temporaries before the cleanup", temps_in(dir));
    h3_outfile_cleanup_signal();
    CHECK(temps_in(dir) == 0 && lstat(P("video-0004.mp4"), &sb) != 0, "cleanup left %d temporaries", temps_in(dir));
    CHECK(has(P("video-0003.mp4"), "v3"), "the cleanup removed a committed output");
    h3_outfile_free(a);
    h3_outfile_free(d);

    /* the sweep: stale temporaries of ours go; live ones, other patterns, links and user files stay */
    int dead = dead_pid();
    char n1[128], n2[128], n3[128], k1[128], k2[128], k3[128], k4[128], k5[128];
    snprintf(n1, sizeof n1, ".a.mp4.h3tmp-%d-abcdefghijkl", dead);
    snprintf(n2, sizeof n2, ".b.wav.h3tmp-%d-ABCDEFGHIJ12", dead);
    snprintf(n3, sizeof n3, ".fr.h3tmp-%d-abcdefghijkl", dead);
    snprintf(k1, sizeof k1, ".a.mp4.h3tmp-%d-abcdefghijkl", (int)getppid()); /* alive */
    snprintf(k2, sizeof k2, ".a.mp4.h3tmp-%d-abc", dead);
    snprintf(k3, sizeof k3, "a.mp4.h3tmp-%d-abcdefghijkl", dead);
    snprintf(k4, sizeof k4, ".a.mp4.h3tmp-%d-abcdefghijkl.bak", dead);
    snprintf(k5, sizeof k5, ".l.mp4.h3tmp-%d-abcdefghijkl", dead);
    put(P(n1), "t"), put(P(n2), "t");
    mkdir(P(n3), 0755);
    char inner[300], other[300];
    snprintf(inner, sizeof inner, "%s/frame_00000.png", n3);
    put(P(inner), "f");
    put(P(k1), "mine"), put(P(k2), "mine"), put(P(k3), "mine"), put(P(k4), "mine");
    CHECK(symlink(P("victim"), P(k5)) == 0, "symlink");
    char kd[128];
    snprintf(kd, sizeof kd, ".g.h3tmp-%d-abcdefghijkl", dead); /* a stale folder holding a user file stays */
    mkdir(P(kd), 0755);
    snprintf(other, sizeof other, "%s/notes.txt", kd);
    put(P(other), "mine");
    char k6[128]; /* a dead pid's name, but its writer (another host, another PID namespace) holds the lock */
    snprintf(k6, sizeof k6, ".h.mp4.h3tmp-%d-abcdefghijkl", dead);
    put(P(k6), "mine");
    int held = open(P(k6), O_RDONLY);
    CHECK(held >= 0 && flock(held, LOCK_EX) == 0, "flock");
    int removed = h3_out_sweep(P("a.mp4"), NULL);
    CHECK(has(P(k6), "mine"), "sweep removed a locked temporary");
    if (held >= 0) close(held);
    CHECK(removed == 3, "swept %d, want 3", removed);
    CHECK(lstat(P(n1), &sb) != 0 && lstat(P(n2), &sb) != 0 && lstat(P(n3), &sb) != 0, "stale temporaries left");
    CHECK(has(P(k1), "mine") && has(P(k2), "mine") && has(P(k3), "mine") && has(P(k4), "mine"), "sweep removed a non-stale name");
    CHECK(lstat(P(k5), &sb) == 0 && S_ISLNK(sb.st_mode) && has(P("victim"), "precious"), "sweep touched a link");
    CHECK(has(P(other), "mine"), "sweep removed a user file inside a folder of our pattern");

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
    TEST_END();
}
