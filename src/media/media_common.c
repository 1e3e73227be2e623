/* Shared helpers of the FFmpeg media build: logging, errors, temp names, frame views. */
#include "media_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <stdio.h>
#include <libavutil/error.h>
#include <libavutil/log.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int h3_media_available(void) { return 1; }

void media_log_setup(void)
{
    /* FFmpeg prints warnings for recoverable stream damage; callers get our one-line errors. */
    av_log_set_level(getenv("H3_MEDIA_LOG") ? AV_LOG_INFO : AV_LOG_QUIET);
}

const char *media_averr(int code, char buf[128])
{
    if (av_strerror(code, buf, 128) < 0) snprintf(buf, 128, "FFmpeg error %d", code);
    return buf;
}

/* 12 random letters for temporary names (getrandom; no shared state). */
static void random_suffix(char out[13])
{
    static const char abc[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    unsigned char r[12] = {0};
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
        unsigned long x = (unsigned long)getpid() * 2654435761u ^ (unsigned long)clock();
        for (int i = 0; i < 12; i++) r[i] = (unsigned char)(x >> (i * 5));
    }
    for (int i = 0; i < 12; i++) out[i] = abc[r[i] % 62];
    out[12] = 0;
}

/* Creates "<prefix>.h3tmp-XXXXXXXXXXXX" as a file (O_EXCL, mode 0666 less the umask, like any
 * output) or a directory (0777 less the umask). Returns the malloc'd name. */
static char *create_temp(const char *prefix, int is_dir, const char *what, h3_err *e)
{
    size_t n = strlen(prefix) + 32;
    char *tmp = malloc(n);
    if (!tmp) { h3_fail(e, "%s: out of memory", what); return NULL; }
    for (int attempt = 0; attempt < 100; attempt++) {
        char sfx[13];
        random_suffix(sfx);
        snprintf(tmp, n, "%s.h3tmp-%s", prefix, sfx);
        int ok;
        if (is_dir) {
            ok = mkdir(tmp, 0777) == 0;
        } else {
            int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
            ok = fd >= 0;
            if (ok) close(fd);
        }
        if (ok) return tmp;
        if (errno != EEXIST) break;
    }
    h3_fail(e, "%s: cannot create a temporary %s next to it: %s", what, is_dir ? "directory" : "file", strerror(errno));
    free(tmp);
    return NULL;
}

char *media_temp_file(const char *path, h3_err *e)
{
    const char *slash = strrchr(path, '/');
    size_t dir_len = slash ? (size_t)(slash - path) + 1 : 0;
    const char *base = slash ? slash + 1 : path;
    if (!*base) { h3_fail(e, "%s: output path names a directory, not a file", path); return NULL; }
    size_t n = strlen(path) + 2;
    char *prefix = malloc(n);
    if (!prefix) { h3_fail(e, "%s: out of memory", path); return NULL; }
    snprintf(prefix, n, "%.*s.%s", (int)dir_len, path, base);   /* hidden: ".name" */
    char *tmp = create_temp(prefix, 0, path, e);
    free(prefix);
    return tmp;
}

char *media_temp_dir(const char *dir, h3_err *e)
{
    return create_temp(dir, 1, dir, e);
}

int media_check_frames(const char *path, const h3_frames_view *v, h3_err *e)
{
    if (!v) return h3_fail(e, "%s: no frames given", path);
    if ((v->u8 == NULL) == (v->f32 == NULL))
        return h3_fail(e, "%s: frames must be given as exactly one of uint8 or float RGB", path);
    if (v->frames <= 0 || v->height <= 0 || v->width <= 0)
        return h3_fail(e, "%s: frames must have positive count and size, got %d frames of %dx%d",
                       path, v->frames, v->width, v->height);
    if (v->width > 16384 || v->height > 16384)
        return h3_fail(e, "%s: frame size %dx%d exceeds 16384 on a side", path, v->width, v->height);
    return 0;
}

const uint8_t *media_frame_u8(const h3_frames_view *v, int t, uint8_t *scratch)
{
    size_t n = (size_t)v->height * v->width * 3;
    if (v->u8) return v->u8 + (size_t)t * n;
    const float *src = v->f32 + (size_t)t * n;
    for (size_t i = 0; i < n; i++) {
        /* numpy: (x * 255.0).round().clip(0, 255).astype(uint8); rint rounds half to even. */
        float s = src[i] * 255.0f;
        if (!(s > 0.0f)) s = 0.0f;       /* also NaN -> 0 */
        if (s > 255.0f) s = 255.0f;
        scratch[i] = (uint8_t)rintf(s);
    }
    return scratch;
}

void h3_image_free(h3_image *im)
{
    if (!im) return;
    free(im->rgb);
    memset(im, 0, sizeof *im);
}

void h3_audio_free(h3_audio *a)
{
    if (!a) return;
    free(a->data);
    memset(a, 0, sizeof *a);
}

void h3_video_free(h3_video *v)
{
    if (!v) return;
    free(v->rgb);
    h3_audio_free(&v->audio);
    memset(v, 0, sizeof *v);
}
