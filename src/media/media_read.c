/* Reading media: images, videos (24 fps whole-frame resampling + soundtrack), audio.
 * What the reference does (diffusers 0.42.1 modular_pipelines/minimax_h3):
 *   references.py _decode_video_file: every frame of streams.video[0] as rgb24, fps =
 *     average_rate or guessed_rate, display-matrix rotation undone in quarter turns;
 *     _decode_reference_soundtrack: streams.audio[0] as planar float at its native rate/layout.
 *   before_encoder.py _normalize_video_condition: whole-frame resampling onto 24 fps
 *     (h3_media_fps_slot); _normalize_audio_condition: 1 or 2 channels, mono duplicated,
 *     resampled to 32 kHz (torchaudio there, libswresample here: see docs/media.md).
 *   utils load_image: PIL open, EXIF transpose, convert("RGB"). */
#include "media_internal.h"
#include "media_jpeg.h"

#include <errno.h>
#include <stdio.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
#include <libavutil/display.h>
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
#include <libavutil/pixdesc.h>
#include <libswresample/swresample.h>
#include <libswscale/swscale.h>

/* Demuxers each reader accepts. Restricting them keeps exotic demuxers (playlists, concat files
 * that open other paths or URLs) out of reach of untrusted input. */
static const char *const IMAGE_FORMATS = "png_pipe,jpeg_pipe,webp_pipe";
static const char *const AV_FORMATS =
    "mov,mp4,m4a,3gp,matroska,webm,avi,mpegts,flv,gif,asf,mpeg,ogg,wav,w64,aiff,caf,flac,mp3,aac,ac3,eac3,au,amr";

#define DEFAULT_MAX_SECONDS 600.0
#define DEFAULT_MAX_BYTES   ((int64_t)8 << 30)
#define DEFAULT_MAX_PIXELS  ((int64_t)1 << 28)

/* ---------------------------------------------------------------------------------------------
 * Opening a file or a memory buffer */

typedef struct media_in {
    const char      *name;          /* for messages */
    AVFormatContext *fc;
    AVIOContext     *avio;          /* memory input only */
    const uint8_t   *mem;
    int64_t          mem_size, mem_pos;
} media_in;

static int mem_read(void *opaque, uint8_t *buf, int n)
{
    media_in *in = opaque;
    int64_t left = in->mem_size - in->mem_pos;
    if (left <= 0) return AVERROR_EOF;
    if (n > left) n = (int)left;
    memcpy(buf, in->mem + in->mem_pos, (size_t)n);
    in->mem_pos += n;
    return n;
}

static int64_t mem_seek(void *opaque, int64_t off, int whence)
{
    media_in *in = opaque;
    int64_t pos;
    switch (whence & ~AVSEEK_FORCE) {
    case AVSEEK_SIZE: return in->mem_size;
    case SEEK_SET: pos = off; break;
    case SEEK_CUR: pos = in->mem_pos + off; break;
    case SEEK_END: pos = in->mem_size + off; break;
    default: return AVERROR(EINVAL);
    }
    if (pos < 0 || pos > in->mem_size) return AVERROR(EINVAL);
    in->mem_pos = pos;
    return pos;
}

static void media_close(media_in *in)
{
    if (in->fc) avformat_close_input(&in->fc);
    if (in->avio) {
        av_freep(&in->avio->buffer);
        avio_context_free(&in->avio);
    }
}

/* The still-image demuxer the first bytes' signature names (PNG, JPEG, WebP), or NULL. Probing
 * by content alone is not enough: jpeg_pipe scores a JPEG whose end marker lies past FFmpeg's
 * first 2 KiB probe below the extension-based image2 demuxer, which is not on the list, so any
 * such JPEG named .jpg would be refused. */
static const AVInputFormat *still_demuxer(const uint8_t *b, size_t n)
{
    if (n >= 8 && !memcmp(b, "\x89PNG\r\n\x1a\n", 8)) return av_find_input_format("png_pipe");
    if (n >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) return av_find_input_format("jpeg_pipe");
    if (n >= 12 && !memcmp(b, "RIFF", 4) && !memcmp(b + 8, "WEBP", 4)) return av_find_input_format("webp_pipe");
    return NULL;
}

/* Opens path (or data/size when path is NULL) with the given demuxer whitelist and reads the
 * stream info. kind ("image", "audio", "video") words the errors; images are opened with the
 * demuxer their signature names (still_demuxer), anything else is probed. */
static int media_open(media_in *in, const char *path, const void *data, size_t size, const char *name,
                      const char *formats, const char *kind, const char *supported, h3_err *e)
{
    char eb[128];
    memset(in, 0, sizeof *in);
    in->name = path ? path : (name ? name : "<memory>");
    media_log_setup();
    if (path) {
        struct stat sb;
        if (stat(path, &sb) != 0) return h3_fail(e, "%s: cannot open: %s", path, strerror(errno));
        if (S_ISDIR(sb.st_mode)) return h3_fail(e, "%s: is a directory, not a%s %s file", path, kind[0] == 'a' || kind[0] == 'i' ? "n" : "", kind);
        if (sb.st_size == 0) return h3_fail(e, "%s: empty file (0 bytes)", path);
    } else {
        if (!data || size == 0) return h3_fail(e, "%s: empty input (0 bytes)", in->name);
        in->mem = data;
        in->mem_size = (int64_t)size;
    }
    in->fc = avformat_alloc_context();
    if (!in->fc) return h3_fail(e, "%s: out of memory", in->name);
    if (!path) {
        const int bufsize = 1 << 15;
        uint8_t *buf = av_malloc(bufsize);
        in->avio = buf ? avio_alloc_context(buf, bufsize, 0, in, mem_read, NULL, mem_seek) : NULL;
        if (!in->avio) { av_free(buf); media_close(in); return h3_fail(e, "%s: out of memory", in->name); }
        in->fc->pb = in->avio;
        in->fc->flags |= AVFMT_FLAG_CUSTOM_IO;
    }
    const AVInputFormat *fmt = NULL;
    if (formats == IMAGE_FORMATS) {
        uint8_t head[12];
        size_t n = 0;
        if (path) {
            FILE *f = fopen(path, "rb");
            if (f) {
                n = fread(head, 1, sizeof head, f);
                fclose(f);
            }
        } else {
            n = size < sizeof head ? size : sizeof head;
            memcpy(head, data, n);
        }
        fmt = still_demuxer(head, n);
    }
    AVDictionary *opt = NULL;
    av_dict_set(&opt, "format_whitelist", formats, 0);
    av_dict_set(&opt, "protocol_whitelist", "file", 0);
    int r = avformat_open_input(&in->fc, path, fmt, &opt);  /* frees fc on failure */
    av_dict_free(&opt);
    if (r < 0) {
        in->fc = NULL;
        media_close(in);
        /* INVALIDDATA: no demuxer recognised it; EINVAL: the one that did is not on the list. */
        if (r == AVERROR_INVALIDDATA || r == AVERROR(EINVAL))
            return h3_fail(e, "%s: not a recognised %s file, or truncated (supported: %s)", in->name, kind, supported);
        if (r == AVERROR_EOF) return h3_fail(e, "%s: truncated %s file (ends inside its header)", in->name, kind);
        return h3_fail(e, "%s: cannot read as %s: %s", in->name, kind, media_averr(r, eb));
    }
    r = avformat_find_stream_info(in->fc, NULL);
    if (r < 0) {
        media_close(in);
        return h3_fail(e, "%s: cannot read the stream parameters (truncated or corrupt?): %s", in->name, media_averr(r, eb));
    }
    return 0;
}

/* The first stream of a type, as PyAV's container.streams.video[0] / audio[0]; cover art
 * (attached pictures) is not a video. */
static int first_stream(AVFormatContext *fc, enum AVMediaType type)
{
    for (unsigned i = 0; i < fc->nb_streams; i++) {
        AVStream *st = fc->streams[i];
        if (st->codecpar->codec_type != type) continue;
        if (type == AVMEDIA_TYPE_VIDEO && (st->disposition & AV_DISPOSITION_ATTACHED_PIC)) continue;
        return (int)i;
    }
    return -1;
}

static AVCodecContext *open_decoder(media_in *in, int si, int strict, int64_t max_pixels, h3_err *e)
{
    char eb[128];
    AVCodecParameters *par = in->fc->streams[si]->codecpar;
    const AVCodec *c = avcodec_find_decoder(par->codec_id);
    if (!c) {
        h3_fail(e, "%s: unsupported codec '%s'", in->name, avcodec_get_name(par->codec_id));
        return NULL;
    }
    if (par->width > 0 && par->height > 0 && (int64_t)par->width * par->height > max_pixels) {
        /* a valid picture beyond the limit: said so (the decoder itself would only say "invalid data") */
        h3_fail(e, "%s: %dx%d = %lld pixels exceed the decoder's size limit of %lld pixels (not a corrupt file)", in->name,
                par->width, par->height, (long long)par->width * par->height, (long long)max_pixels);
        return NULL;
    }
    AVCodecContext *dec = avcodec_alloc_context3(c);
    if (!dec) { h3_fail(e, "%s: out of memory", in->name); return NULL; }
    int r = avcodec_parameters_to_context(dec, par);
    if (r >= 0) {
        dec->pkt_timebase = in->fc->streams[si]->time_base;
        dec->max_pixels = max_pixels > INT_MAX ? INT_MAX : max_pixels;
        if (strict) dec->err_recognition |= AV_EF_EXPLODE | AV_EF_CRCCHECK;  /* truncated image -> error */
        r = avcodec_open2(dec, c, NULL);
    }
    if (r < 0) {
        avcodec_free_context(&dec);
        h3_fail(e, "%s: cannot open the %s decoder: %s", in->name, c->name, media_averr(r, eb));
        return NULL;
    }
    return dec;
}

/* ---------------------------------------------------------------------------------------------
 * Pixels */

/* One decoded picture as RGB24 in out[h][w][3]. PIL-style conversions for the PNG formats
 * (alpha dropped, gray replicated, palette looked up, 16-bit -> high byte); swscale (bilinear,
 * the frame's own colour matrix and range, as PyAV's to_ndarray("rgb24")) for YUV and the rest. */
typedef struct rgb_converter {
    struct SwsContext *sws;
    int                flags;   /* swscale flags for the non-direct formats */
} rgb_converter;

/* Videos: PyAV's to_ndarray("rgb24") default (bilinear), which matched PyAV bit for bit on our
 * H.264 fixture. Stills: closest to PIL's libjpeg/libwebp decode (fancy chroma upsampling) of the
 * flag sets measured: max abs 3, mean 0.44 on a 4:2:0 JPEG (plain bilinear: max 6, mean 1.6). */
#define SWS_FLAGS_VIDEO SWS_BILINEAR
#define SWS_FLAGS_IMAGE (SWS_BICUBIC | SWS_FULL_CHR_H_INT | SWS_ACCURATE_RND)

static int frame_to_rgb(rgb_converter *cv, const AVFrame *f, uint8_t *out, const char *name, h3_err *e)
{
    int w = f->width, h = f->height;
    for (int y = 0; y < h; y++) {
        const uint8_t *s = f->data[0] + (ptrdiff_t)y * f->linesize[0];
        uint8_t *o = out + (size_t)y * w * 3;
        switch (f->format) {
        case AV_PIX_FMT_RGB24: memcpy(o, s, (size_t)w * 3); continue;
        case AV_PIX_FMT_RGBA:
            for (int x = 0; x < w; x++) o[3 * x] = s[4 * x], o[3 * x + 1] = s[4 * x + 1], o[3 * x + 2] = s[4 * x + 2];
            continue;
        case AV_PIX_FMT_RGB48BE:
            for (int x = 0; x < w; x++) o[3 * x] = s[6 * x], o[3 * x + 1] = s[6 * x + 2], o[3 * x + 2] = s[6 * x + 4];
            continue;
        case AV_PIX_FMT_RGBA64BE:
            for (int x = 0; x < w; x++) o[3 * x] = s[8 * x], o[3 * x + 1] = s[8 * x + 2], o[3 * x + 2] = s[8 * x + 4];
            continue;
        case AV_PIX_FMT_GRAY8:
            for (int x = 0; x < w; x++) o[3 * x] = o[3 * x + 1] = o[3 * x + 2] = s[x];
            continue;
        case AV_PIX_FMT_YA8:
            for (int x = 0; x < w; x++) o[3 * x] = o[3 * x + 1] = o[3 * x + 2] = s[2 * x];
            continue;
        case AV_PIX_FMT_GRAY16BE:
            /* PIL opens 16-bit gray as mode I;16 and convert("RGB") clips it at 255. */
            for (int x = 0; x < w; x++) {
                unsigned g = (unsigned)s[2 * x] << 8 | s[2 * x + 1];
                o[3 * x] = o[3 * x + 1] = o[3 * x + 2] = (uint8_t)(g > 255 ? 255 : g);
            }
            continue;
        case AV_PIX_FMT_YA16BE:
            for (int x = 0; x < w; x++) o[3 * x] = o[3 * x + 1] = o[3 * x + 2] = s[4 * x];
            continue;
        case AV_PIX_FMT_MONOBLACK:
            for (int x = 0; x < w; x++) o[3 * x] = o[3 * x + 1] = o[3 * x + 2] = (s[x >> 3] >> (7 - (x & 7)) & 1) ? 255 : 0;
            continue;
        case AV_PIX_FMT_PAL8: {
            const uint32_t *pal = (const uint32_t *)f->data[1];  /* 0xAARRGGBB, native endian */
            for (int x = 0; x < w; x++) {
                uint32_t p = pal[s[x]];
                o[3 * x] = (uint8_t)(p >> 16), o[3 * x + 1] = (uint8_t)(p >> 8), o[3 * x + 2] = (uint8_t)p;
            }
            continue;
        }
        default: break;
        }
        /* Not one of the direct formats: the whole picture through swscale. */
        cv->sws = sws_getCachedContext(cv->sws, w, h, f->format, w, h, AV_PIX_FMT_RGB24,
                                       cv->flags, NULL, NULL, NULL);
        if (!cv->sws) return h3_fail(e, "%s: cannot convert pixel format %s to RGB", name,
                                     av_get_pix_fmt_name(f->format) ? av_get_pix_fmt_name(f->format) : "?");
        int full = f->color_range == AVCOL_RANGE_JPEG || f->format == AV_PIX_FMT_YUVJ420P ||
                   f->format == AV_PIX_FMT_YUVJ422P || f->format == AV_PIX_FMT_YUVJ444P ||
                   f->format == AV_PIX_FMT_YUVJ440P || f->format == AV_PIX_FMT_YUVJ411P;
        const int *coef = sws_getCoefficients(f->colorspace);
        sws_setColorspaceDetails(cv->sws, coef, full, coef, 1, 0, 1 << 16, 1 << 16);
        uint8_t *dst[4] = {out, NULL, NULL, NULL};
        int dst_stride[4] = {w * 3, 0, 0, 0};
        sws_scale(cv->sws, (const uint8_t *const *)f->data, f->linesize, 0, h, dst, dst_stride);
        return 0;
    }
    return 0;
}

/* Rotates/flips an RGB picture. op: 0 none; PIL transposes by EXIF orientation 2..8 and numpy's
 * rot90 clockwise quarter turns are expressed as orientations (6 = 90 cw, 3 = 180, 8 = 90 ccw).
 * Output size is swapped for 5..8. */
static void orient_rgb(const uint8_t *in, int w, int h, int orientation, uint8_t *out)
{
    int ow = orientation >= 5 ? h : w;
    int oh = orientation >= 5 ? w : h;
    for (int y = 0; y < oh; y++) {
        for (int x = 0; x < ow; x++) {
            int sx, sy;
            switch (orientation) {
            case 2: sx = w - 1 - x, sy = y; break;              /* mirror left-right */
            case 3: sx = w - 1 - x, sy = h - 1 - y; break;      /* 180 */
            case 4: sx = x, sy = h - 1 - y; break;              /* mirror top-bottom */
            case 5: sx = y, sy = x; break;                      /* transpose */
            case 6: sx = y, sy = h - 1 - x; break;              /* 90 clockwise */
            case 7: sx = w - 1 - y, sy = h - 1 - x; break;      /* transverse */
            case 8: sx = w - 1 - y, sy = x; break;              /* 90 counterclockwise */
            default: sx = x, sy = y; break;
            }
            memcpy(out + ((size_t)y * ow + x) * 3, in + ((size_t)sy * w + sx) * 3, 3);
        }
    }
}

/* Quarter turns clockwise -> orientation code for orient_rgb. */
static int turns_to_orientation(int turns)
{
    static const int code[4] = {1, 6, 3, 8};
    return code[turns & 3];
}

/* EXIF orientation (1..8) that FFmpeg's JPEG/WebP/PNG decoders leave in the frame metadata. */
static int exif_orientation(const AVFrame *f)
{
    AVDictionaryEntry *t = av_dict_get(f->metadata, "Orientation", NULL, 0);
    if (!t || !t->value) return 1;
    char *end;
    long v = strtol(t->value, &end, 10);
    return (end != t->value && v >= 1 && v <= 8) ? (int)v : 1;
}

/* ---------------------------------------------------------------------------------------------
 * Packet/frame loop shared by the readers */

typedef struct decode_ctx {
    media_in       *in;
    int             vsi, asi;          /* stream indexes, -1 = not decoded */
    AVCodecContext *vdec, *adec;
    int             video_done;        /* stop feeding video (enough frames) */
    int (*on_video)(struct decode_ctx *d, AVFrame *f, h3_err *e);
    int (*on_audio)(struct decode_ctx *d, AVFrame *f, h3_err *e);
    void           *video_user, *audio_user;
} decode_ctx;

static int receive_all(decode_ctx *d, AVCodecContext *dec, int is_video, AVFrame *f, h3_err *e)
{
    char eb[128];
    for (;;) {
        int r = avcodec_receive_frame(dec, f);
        if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return 0;
        if (r < 0) return h3_fail(e, "%s: decoding failed (corrupt data?): %s", d->in->name, media_averr(r, eb));
        r = is_video ? (d->video_done ? 0 : d->on_video(d, f, e)) : d->on_audio(d, f, e);
        av_frame_unref(f);
        if (r) return -1;
    }
}

static int decode_all(decode_ctx *d, h3_err *e)
{
    char eb[128];
    AVPacket *pkt = av_packet_alloc();
    AVFrame *f = av_frame_alloc();
    int rc = 0;
    if (!pkt || !f) { rc = h3_fail(e, "%s: out of memory", d->in->name); goto done; }
    for (;;) {
        int r = av_read_frame(d->in->fc, pkt);
        if (r == AVERROR_EOF) break;
        if (r < 0) { rc = h3_fail(e, "%s: cannot read (truncated or corrupt file?): %s", d->in->name, media_averr(r, eb)); goto done; }
        int is_video = pkt->stream_index == d->vsi && !d->video_done;
        int is_audio = pkt->stream_index == d->asi;
        if (is_video || is_audio) {
            AVCodecContext *dec = is_video ? d->vdec : d->adec;
            if (pkt->flags & AV_PKT_FLAG_CORRUPT) {
                av_packet_unref(pkt);
                rc = h3_fail(e, "%s: corrupt or truncated packet in the %s stream", d->in->name, is_video ? "video" : "audio");
                goto done;
            }
            for (;;) {
                r = avcodec_send_packet(dec, pkt);
                if (r >= 0 || r != AVERROR(EAGAIN)) break;
                /* The decoder wants its output taken first: take it, then resend. */
                if (receive_all(d, dec, is_video, f, e)) { av_packet_unref(pkt); rc = -1; goto done; }
            }
            if (r < 0) {
                av_packet_unref(pkt);
                rc = h3_fail(e, "%s: decoding failed (corrupt data?): %s", d->in->name, media_averr(r, eb));
                goto done;
            }
            if (receive_all(d, dec, is_video, f, e)) { av_packet_unref(pkt); rc = -1; goto done; }
        }
        av_packet_unref(pkt);
        if (d->video_done && d->asi < 0) break;
    }
    /* Drain the decoders. */
    if (d->vdec && !d->video_done) {
        avcodec_send_packet(d->vdec, NULL);
        if (receive_all(d, d->vdec, 1, f, e)) { rc = -1; goto done; }
    }
    if (d->adec) {
        avcodec_send_packet(d->adec, NULL);
        if (receive_all(d, d->adec, 0, f, e)) { rc = -1; goto done; }
    }
done:
    av_packet_free(&pkt);
    av_frame_free(&f);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * Audio accumulation: 1 or 2 channels at their native layout -> planar float at the target rate. */

typedef struct audio_acc {
    SwrContext *swr;
    int         in_rate, in_fmt, channels;
    int64_t     n, cap, max_samples;   /* max_samples: at the native rate, set by the first frame */
    double      max_seconds;
    float      *ch[2];                 /* native rate, planar */
} audio_acc;

static void audio_acc_free(audio_acc *a)
{
    swr_free(&a->swr);
    free(a->ch[0]);
    free(a->ch[1]);
    memset(a, 0, sizeof *a);
}

static int audio_acc_reserve(audio_acc *a, int64_t more, const char *name, h3_err *e)
{
    if (a->n + more <= a->cap) return 0; /* the limit is checked on the decoded count (audio_acc_push) */
    int64_t cap = a->cap ? a->cap * 2 : 1 << 16;
    while (cap < a->n + more) cap *= 2;
    for (int c = 0; c < a->channels; c++) {
        float *p = realloc(a->ch[c], (size_t)cap * sizeof(float));
        if (!p) return h3_fail(e, "%s: out of memory for audio", name);
        a->ch[c] = p;
    }
    a->cap = cap;
    return 0;
}

/* in = NULL flushes the resampler. */
static int audio_acc_push(audio_acc *a, const AVFrame *in, const char *name, h3_err *e)
{
    char eb[128];
    if (in) {
        int ch = in->ch_layout.nb_channels;
        if (ch < 1 || ch > 2)
            return h3_fail(e, "%s: audio has %d channels; only mono or stereo is accepted (as the reference)", name, ch);
        if (in->sample_rate <= 0 || in->sample_rate > 768000) return h3_fail(e, "%s: bad audio sample rate %d", name, in->sample_rate);
        if (!a->swr) {
            a->in_rate = in->sample_rate, a->in_fmt = in->format, a->channels = ch;
            a->max_samples = (int64_t)(a->max_seconds * in->sample_rate); /* more decoded samples: refused */
            /* Sample format only: same rate and layout in and out (no remixing, no resampling). */
            AVChannelLayout lay;
            av_channel_layout_default(&lay, ch);
            int r = swr_alloc_set_opts2(&a->swr, &lay, AV_SAMPLE_FMT_FLTP, in->sample_rate, &lay, in->format,
                                        in->sample_rate, 0, NULL);
            if (r < 0 || (r = swr_init(a->swr)) < 0)
                return h3_fail(e, "%s: cannot set up audio conversion: %s", name, media_averr(r, eb));
        } else if (in->sample_rate != a->in_rate || in->format != a->in_fmt || ch != a->channels) {
            return h3_fail(e, "%s: audio format changes mid-stream (%d Hz %d ch -> %d Hz %d ch)", name, a->in_rate,
                           a->channels, in->sample_rate, ch);
        }
    }
    if (!a->swr) return 0;
    int64_t want = swr_get_out_samples(a->swr, in ? in->nb_samples : 0);
    if (want < 0) return h3_fail(e, "%s: audio conversion failed", name);
    if (audio_acc_reserve(a, want + 16, name, e)) return -1;
    uint8_t *out[2] = {(uint8_t *)(a->ch[0] + a->n), a->channels > 1 ? (uint8_t *)(a->ch[1] + a->n) : NULL};
    int got = swr_convert(a->swr, out, (int)(want + 16), in ? (const uint8_t **)in->extended_data : NULL,
                          in ? in->nb_samples : 0);
    if (got < 0) return h3_fail(e, "%s: audio conversion failed: %s", name, media_averr(got, eb));
    a->n += got;
    if (a->n > a->max_samples) /* exact, whatever the buffer's growth */
        return h3_fail(e, "%s: the audio lasts more than the %.0f s limit (%.3f s decoded so far; it is not trimmed)", name,
                       floor(a->max_seconds), (double)a->n / a->in_rate);
    return 0;
}

/* Finishes into out, as the reference's _normalize_audio_condition: truncate at the native rate,
 * mono duplicated to stereo, one resampling pass to out_rate (-1 = keep the native rate). */
static int audio_acc_finish(audio_acc *a, const h3_read_opts *o, h3_audio *out, const char *name, h3_err *e)
{
    if (audio_acc_push(a, NULL, name, e)) return -1;
    int64_t n = a->n;
    if (o && o->truncate_seconds > 0) {
        int64_t keep = (int64_t)(o->truncate_seconds * (double)a->in_rate);   /* int(max_duration * sr) */
        if (keep < n) n = keep;
    }
    if (n <= 0) return h3_fail(e, "%s: the audio stream holds no samples", name);
    int rate = (!o || o->sample_rate == 0) ? H3_MEDIA_SAMPLE_RATE : o->sample_rate < 0 ? a->in_rate : o->sample_rate;
    float *res[2] = {NULL, NULL};
    int64_t m = n;
    if (rate != a->in_rate) {
        for (int c = 0; c < a->channels; c++) {
            if (media_resample(a->ch[c], n, a->in_rate, rate, &res[c], &m, name, e)) { free(res[0]); return -1; }
        }
    }
    float *data = malloc((size_t)m * 2 * sizeof(float));
    if (!data) { free(res[0]); free(res[1]); return h3_fail(e, "%s: out of memory for audio", name); }
    for (int c = 0; c < 2; c++) {
        int src = a->channels > 1 ? c : 0;
        memcpy(data + c * m, res[src] ? res[src] : a->ch[src], (size_t)m * sizeof(float));
    }
    free(res[0]);
    free(res[1]);
    out->channels = 2;
    out->sample_rate = rate;
    out->samples = m;
    out->data = data;
    return 0;
}

static double max_seconds_of(const h3_read_opts *o)
{
    return o && o->max_seconds > 0 ? o->max_seconds : DEFAULT_MAX_SECONDS;
}

static int check_rate_opt(const h3_read_opts *o, const char *name, h3_err *e)
{
    if (o && o->sample_rate != 0 && o->sample_rate != -1 && (o->sample_rate < 1000 || o->sample_rate > 768000))
        return h3_fail(e, "%s: requested sample rate %d is out of range (1000..768000, 0 or -1)", name, o->sample_rate);
    return 0;
}

static int64_t max_pixels_of(const h3_read_opts *o)
{
    return o && o->max_pixels > 0 ? o->max_pixels : DEFAULT_MAX_PIXELS;
}

/* ---------------------------------------------------------------------------------------------
 * Images */

typedef struct image_state {
    rgb_converter cv;
    h3_image     *out;
    int           got;
} image_state;

/* out takes rgb (w x h, malloc'd), turned upright by its EXIF orientation as load_image's ImageOps.exif_transpose
 * does; rgb is freed on failure. */
static int oriented_image(uint8_t *rgb, int w, int h, int orient, const char *name, h3_image *out, h3_err *e)
{
    if (orient != 1) {
        uint8_t *turned = malloc((size_t)w * h * 3);
        if (!turned) { free(rgb); return h3_fail(e, "%s: out of memory", name); }
        orient_rgb(rgb, w, h, orient, turned);
        free(rgb);
        rgb = turned;
        if (orient >= 5) { int t = w; w = h; h = t; }
    }
    out->rgb = rgb;
    out->width = w;
    out->height = h;
    return 0;
}

static int image_on_video(decode_ctx *d, AVFrame *f, h3_err *e)
{
    image_state *s = d->video_user;
    if (f->width <= 0 || f->height <= 0) return h3_fail(e, "%s: picture has no size", d->in->name);
    size_t n = (size_t)f->width * f->height * 3;
    uint8_t *rgb = malloc(n);
    if (!rgb) return h3_fail(e, "%s: out of memory for a %dx%d image", d->in->name, f->width, f->height);
    if (frame_to_rgb(&s->cv, f, rgb, d->in->name, e)) { free(rgb); return -1; }
    if (oriented_image(rgb, f->width, f->height, exif_orientation(f), d->in->name, s->out, e)) return -1;
    s->got = 1;
    d->video_done = 1;   /* first picture only */
    return 0;
}

/* Whether the image at path (or data) starts with a JPEG's signature. */
static int jpeg_still(const char *path, const void *data, size_t size)
{
    uint8_t b[3];
    if (!path) return media_is_jpeg(data, size);
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(b, 1, sizeof b, f) : 0;
    if (f) fclose(f);
    return media_is_jpeg(b, n);
}

/* A PNG's size from its IHDR (the first 24 bytes), so a valid picture beyond the size limit is named as such: the
 * decoder refuses it as "invalid data" before the stream parameters hold its size. 0 when not a PNG. */
static int png_size(const char *path, const void *data, size_t size, int64_t *w, int64_t *h)
{
    unsigned char b[24];
    if (path) {
        FILE *f = fopen(path, "rb");
        size_t n = f ? fread(b, 1, sizeof b, f) : 0;
        if (f) fclose(f);
        if (n < sizeof b) return 0;
    } else {
        if (size < sizeof b) return 0;
        memcpy(b, data, sizeof b);
    }
    if (memcmp(b, "\x89PNG\r\n\x1a\n", 8) || memcmp(b + 12, "IHDR", 4)) return 0;
    *w = (int64_t)b[16] << 24 | b[17] << 16 | b[18] << 8 | b[19];
    *h = (int64_t)b[20] << 24 | b[21] << 16 | b[22] << 8 | b[23];
    return 1;
}

static int read_image(const char *path, const void *data, size_t size, const char *name,
                      const h3_read_opts *opts, h3_image *out, h3_err *e)
{
    memset(out, 0, sizeof *out);
    int64_t pw, ph; /* each < 2^32, so the product fits in 64 unsigned bits */
    if (png_size(path, data, size, &pw, &ph) && (uint64_t)pw * (uint64_t)ph > (uint64_t)max_pixels_of(opts))
        return h3_fail(e, "%s: %lldx%lld = %llu pixels exceed the decoder's size limit of %lld pixels (not a corrupt file)",
                       path ? path : name ? name : "<memory>", (long long)pw, (long long)ph,
                       (unsigned long long)pw * (unsigned long long)ph, (long long)max_pixels_of(opts));
    if (jpeg_still(path, data, size)) { /* libjpeg, as PIL (docs/media.md); CMYK/YCCK go on to FFmpeg */
        const char *label = path ? path : name ? name : "<memory>";
        uint8_t *rgb;
        int w, h, orient;
        int r = media_jpeg_decode(path, data, size, label, max_pixels_of(opts), &rgb, &w, &h, &orient, e);
        if (r <= 0) return r ? -1 : oriented_image(rgb, w, h, orient, label, out, e);
    }
    media_in in;
    if (media_open(&in, path, data, size, name, IMAGE_FORMATS, "image", "PNG, JPEG, WebP", e)) return -1;
    decode_ctx d = {.in = &in, .vsi = first_stream(in.fc, AVMEDIA_TYPE_VIDEO), .asi = -1};
    image_state s = {.out = out, .cv.flags = SWS_FLAGS_IMAGE};
    int rc = 0;
    if (d.vsi < 0) { rc = h3_fail(e, "%s: holds no picture", in.name); goto done; }
    if (!(d.vdec = open_decoder(&in, d.vsi, 1, max_pixels_of(opts), e))) { rc = -1; goto done; }
    d.on_video = image_on_video;
    d.video_user = &s;
    rc = decode_all(&d, e);
    if (!rc && !s.got) rc = h3_fail(e, "%s: no picture could be decoded (truncated or corrupt?)", in.name);
done:
    if (rc) h3_image_free(out);
    sws_freeContext(s.cv.sws);
    avcodec_free_context(&d.vdec);
    media_close(&in);
    return rc;
}

int h3_read_image(const char *path, const h3_read_opts *opts, h3_image *out, h3_err *e)
{
    return read_image(path, NULL, 0, NULL, opts, out, e);
}

int h3_read_image_mem(const void *data, size_t size, const char *name, const h3_read_opts *opts,
                      h3_image *out, h3_err *e)
{
    return read_image(NULL, data, size, name, opts, out, e);
}

/* ---------------------------------------------------------------------------------------------
 * Audio */

static int audio_on_audio(decode_ctx *d, AVFrame *f, h3_err *e)
{
    return audio_acc_push(d->audio_user, f, d->in->name, e);
}

static int read_audio(const char *path, const void *data, size_t size, const char *name,
                      const h3_read_opts *opts, h3_audio *out, h3_err *e)
{
    memset(out, 0, sizeof *out);
    if (check_rate_opt(opts, path ? path : name ? name : "<memory>", e)) return -1;
    media_in in;
    if (media_open(&in, path, data, size, name, AV_FORMATS, "audio", "WAV, FLAC, MP3, AAC/M4A, Ogg, MP4, MKV, ...", e))
        return -1;
    audio_acc acc = {.max_seconds = max_seconds_of(opts)};
    decode_ctx d = {.in = &in, .vsi = -1, .asi = first_stream(in.fc, AVMEDIA_TYPE_AUDIO),
                    .on_audio = audio_on_audio, .audio_user = &acc};
    int rc = 0;
    if (d.asi < 0) { rc = h3_fail(e, "%s: holds no audio stream", in.name); goto done; }
    if (!(d.adec = open_decoder(&in, d.asi, 0, 0, e))) { rc = -1; goto done; }
    rc = decode_all(&d, e);
    if (!rc) rc = audio_acc_finish(&acc, opts, out, in.name, e);
done:
    audio_acc_free(&acc);
    avcodec_free_context(&d.adec);
    media_close(&in);
    return rc;
}

int h3_read_audio(const char *path, const h3_read_opts *opts, h3_audio *out, h3_err *e)
{
    return read_audio(path, NULL, 0, NULL, opts, out, e);
}

int h3_read_audio_mem(const void *data, size_t size, const char *name, const h3_read_opts *opts,
                      h3_audio *out, h3_err *e)
{
    return read_audio(NULL, data, size, name, opts, out, e);
}

/* ---------------------------------------------------------------------------------------------
 * Video */

typedef struct video_state {
    rgb_converter cv;
    h3_video     *out;
    double        fps;
    int           have_matrix;     /* the stream carried a display matrix */
    int           ffmpeg_rotation; /* opts->ffmpeg_rotation */
    int           max_frames;      /* 0 = all */
    int64_t       max_bytes, cap;  /* cap: frames allocated */
    uint8_t      *scratch;         /* one frame before rotation */
} video_state;

/* Quarter turns the reference applies: turns = round(rotation / 90) % 4 with rotation =
 * int(av_display_rotation_get(matrix)) (PyAV frame.rotation), then np.rot90(k=-turns), i.e.
 * `turns` clockwise quarter turns. Python's round is half-to-even, as nearbyint.
 * ffmpeg instead turns by -rotation (a -90 matrix is shown turned 90 degrees clockwise), so for
 * +-90 degrees the reference's frames are upside down relative to every player; ffmpeg_rotation
 * selects ffmpeg's direction. */
static int display_turns(const int32_t *matrix, int ffmpeg_direction)
{
    if (!matrix) return 0;
    double deg = av_display_rotation_get(matrix);
    if (!(deg == deg)) return 0;   /* NaN: degenerate matrix */
    long rot = (long)deg;          /* int() truncates toward zero */
    long q = (long)nearbyint((double)rot / 90.0);
    if (ffmpeg_direction) q = -q;
    return (int)(((q % 4) + 4) % 4);
}

static int video_on_video(decode_ctx *d, AVFrame *f, h3_err *e)
{
    video_state *s = d->video_user;
    h3_video *v = s->out;
    const char *name = d->in->name;
    int w = f->width, h = f->height;
    int turns = v->rotation_turns;
    int ow = turns & 1 ? h : w, oh = turns & 1 ? w : h;
    if (w <= 0 || h <= 0) return h3_fail(e, "%s: video frame has no size", name);
    if (v->source_frames == 0) {
        /* A display matrix only on the frames (newer FFmpeg) counts as well. */
        AVFrameSideData *sd = av_frame_get_side_data(f, AV_FRAME_DATA_DISPLAYMATRIX);
        if (!s->have_matrix && sd && sd->size >= 36) {
            v->rotation_turns = turns = display_turns((const int32_t *)sd->data, s->ffmpeg_rotation);
            ow = turns & 1 ? h : w, oh = turns & 1 ? w : h;
        }
        v->width = ow, v->height = oh;
        s->scratch = malloc((size_t)w * h * 3);
        if (!s->scratch) return h3_fail(e, "%s: out of memory", name);
    } else if (ow != v->width || oh != v->height) {
        return h3_fail(e, "%s: frame %d is %dx%d, earlier frames were %dx%d (size changes are not supported)",
                       name, v->source_frames, ow, oh, v->width, v->height);
    }
    int64_t i = v->source_frames++;
    /* Frame i fills 24 fps slots [slot(i), slot(i+1)) (before_encoder.py). */
    int64_t from = h3_media_fps_slot(i, s->fps), to = h3_media_fps_slot(i + 1, s->fps);
    if (s->max_frames > 0 && to > s->max_frames) to = s->max_frames;
    if (to > from) {
        size_t fb = (size_t)ow * oh * 3;
        if (to > s->cap) {
            int64_t cap = s->cap ? s->cap * 2 : 64;
            while (cap < to) cap *= 2;
            if (s->max_frames > 0 && cap > s->max_frames) cap = s->max_frames;
            if ((int64_t)to * (int64_t)fb > s->max_bytes)
                return h3_fail(e, "%s: decoded video exceeds %lld bytes (%lld frames of %dx%d); limit the frame count",
                               name, (long long)s->max_bytes, (long long)to, ow, oh);
            if ((int64_t)cap * (int64_t)fb > s->max_bytes) cap = s->max_bytes / (int64_t)fb;
            uint8_t *p = realloc(v->rgb, (size_t)cap * fb);
            if (!p) return h3_fail(e, "%s: out of memory for %lld frames of %dx%d", name, (long long)cap, ow, oh);
            v->rgb = p;
            s->cap = cap;
        }
        uint8_t *dst = v->rgb + (size_t)from * fb;
        if (turns) {
            if (frame_to_rgb(&s->cv, f, s->scratch, name, e)) return -1;
            orient_rgb(s->scratch, w, h, turns_to_orientation(turns), dst);
        } else if (frame_to_rgb(&s->cv, f, dst, name, e)) {
            return -1;
        }
        for (int64_t k = from + 1; k < to; k++) memcpy(v->rgb + (size_t)k * fb, dst, fb);
        v->frames = (int)to;
    }
    if (s->max_frames > 0 && v->frames >= s->max_frames) d->video_done = 1;
    return 0;
}

static int read_video(const char *path, const void *data, size_t size, const char *name,
                      const h3_read_opts *opts, h3_video *out, h3_err *e)
{
    memset(out, 0, sizeof *out);
    if (check_rate_opt(opts, path ? path : name ? name : "<memory>", e)) return -1;
    media_in in;
    if (media_open(&in, path, data, size, name, AV_FORMATS, "video", "MP4/MOV, MKV/WebM, AVI, GIF, ...", e)) return -1;
    int rc = 0;
    video_state s = {.out = out, .cv.flags = SWS_FLAGS_VIDEO};
    audio_acc acc = {.max_seconds = max_seconds_of(opts)};
    decode_ctx d = {.in = &in, .vsi = first_stream(in.fc, AVMEDIA_TYPE_VIDEO), .asi = -1};
    if (d.vsi < 0) { rc = h3_fail(e, "%s: holds no video stream", in.name); goto done; }
    AVStream *vst = in.fc->streams[d.vsi];

    /* fps = float(stream.average_rate or stream.guessed_rate) */
    AVRational r = vst->avg_frame_rate;
    if (r.num <= 0 || r.den <= 0) r = av_guess_frame_rate(in.fc, vst, NULL);
    if (r.num <= 0 || r.den <= 0) { rc = h3_fail(e, "%s: the video stream has no frame rate", in.name); goto done; }
    s.fps = (double)r.num / (double)r.den;
    out->source_fps = s.fps;
    s.max_frames = opts && opts->max_frames > 0 ? opts->max_frames : 0;
    s.max_bytes = opts && opts->max_bytes > 0 ? opts->max_bytes : DEFAULT_MAX_BYTES;

#if LIBAVFORMAT_VERSION_INT >= AV_VERSION_INT(60, 15, 100)
    const AVPacketSideData *psd = av_packet_side_data_get(vst->codecpar->coded_side_data,
                                                          vst->codecpar->nb_coded_side_data, AV_PKT_DATA_DISPLAYMATRIX);
    const int32_t *matrix = psd && psd->size >= 36 ? (const int32_t *)psd->data : NULL;
#else
    size_t msize = 0;
    const int32_t *matrix = (const int32_t *)av_stream_get_side_data(vst, AV_PKT_DATA_DISPLAYMATRIX, &msize);
    if (msize < 36) matrix = NULL;
#endif
    s.ffmpeg_rotation = opts && opts->ffmpeg_rotation;
    out->rotation_turns = display_turns(matrix, s.ffmpeg_rotation);
    s.have_matrix = matrix != NULL;
    if (!(d.vdec = open_decoder(&in, d.vsi, 0, max_pixels_of(opts), e))) { rc = -1; goto done; }
    d.on_video = video_on_video;
    if (!(opts && opts->skip_audio)) {
        d.asi = first_stream(in.fc, AVMEDIA_TYPE_AUDIO);
        if (d.asi >= 0 && !(d.adec = open_decoder(&in, d.asi, 0, 0, e))) { rc = -1; goto done; }
        d.on_audio = audio_on_audio;
    }
    d.video_user = &s;
    d.audio_user = &acc;
    rc = decode_all(&d, e);
    if (!rc && out->frames == 0) rc = h3_fail(e, "%s: no video frames could be decoded", in.name);
    if (!rc && d.adec) {
        if (acc.n == 0 && !acc.swr) {
            out->has_audio = 0;   /* an audio stream without packets: treated as silent */
        } else {
            rc = audio_acc_finish(&acc, opts, &out->audio, in.name, e);
            out->has_audio = rc == 0;
        }
    }
done:
    if (rc) h3_video_free(out);
    audio_acc_free(&acc);
    sws_freeContext(s.cv.sws);
    free(s.scratch);
    avcodec_free_context(&d.vdec);
    avcodec_free_context(&d.adec);
    media_close(&in);
    return rc;
}

int h3_read_video(const char *path, const h3_read_opts *opts, h3_video *out, h3_err *e)
{
    return read_video(path, NULL, 0, NULL, opts, out, e);
}

int h3_read_video_mem(const void *data, size_t size, const char *name, const h3_read_opts *opts,
                      h3_video *out, h3_err *e)
{
    return read_video(NULL, data, size, name, opts, out, e);
}
