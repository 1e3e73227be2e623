/* Shared helpers of the FFmpeg media build: logging, errors, AVIO on a descriptor, frame views. */
#include "media_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <libavutil/error.h>
#include <libavutil/log.h>
#include <libavutil/mem.h>
#include <libavformat/avformat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/tuning.h"

int h3_media_available(void) { return 1; }

void media_log_setup(void)
{
    /* FFmpeg prints warnings for recoverable stream damage; callers get our one-line errors. */
    av_log_set_level(h3_knob_get(H3_KNOB_MEDIA_LOG) ? AV_LOG_INFO : AV_LOG_QUIET);
}

const char *media_averr(int code, char buf[128])
{
    if (av_strerror(code, buf, 128) < 0) snprintf(buf, 128, "FFmpeg error %d", code);
    return buf;
}

/* AVIO on an open file descriptor (the temporary of h3_outfile_open): the muxers write and seek there, so no
 * file is opened again by name. */
#if LIBAVFORMAT_VERSION_MAJOR >= 61
static int fd_write(void *opaque, const uint8_t *buf, int n)
#else
static int fd_write(void *opaque, uint8_t *buf, int n)
#endif
{
    int fd = *(int *)opaque;
    for (int done = 0; done < n;) {
        ssize_t k = write(fd, buf + done, (size_t)(n - done));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return AVERROR(k < 0 ? errno : EIO);
        done += (int)k;
    }
    return n;
}

static int64_t fd_seek(void *opaque, int64_t off, int whence)
{
    int fd = *(int *)opaque;
    if (whence & AVSEEK_SIZE) {
        struct stat sb;
        return fstat(fd, &sb) == 0 ? (int64_t)sb.st_size : AVERROR(errno);
    }
    off_t r = lseek(fd, (off_t)off, whence & ~AVSEEK_FORCE);
    return r < 0 ? AVERROR(errno) : (int64_t)r;
}

AVIOContext *media_avio_fd(int *fd)
{
    const int size = 1 << 16;
    unsigned char *buf = av_malloc(size);
    AVIOContext *pb = buf ? avio_alloc_context(buf, size, 1, fd, NULL, fd_write, fd_seek) : NULL;
    if (!pb) av_free(buf);
    return pb;
}

int media_avio_close(AVIOContext **pb)
{
    if (!*pb) return 0;
    avio_flush(*pb);
    int r = (*pb)->error;
    av_freep(&(*pb)->buffer);
    avio_context_free(pb);
    return r < 0 ? r : 0;
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
