/* Writing media: MP4 (H.264 + AAC), PNG frames, single PNG, WAV. docs/model/features.md 8.1-8.2.
 * Every output is written into a temporary beside its target (src/io/outfile.h, through its descriptor) and
 * renamed into place.
 * The MP4 writer encodes on its own thread (docs/media.md "Encoding off the critical path"): the caller's
 * h3_mp4_writer_frames / _audio only convert the frame to 8 bits and queue it, so a decoder that hands frames
 * over as it makes them keeps working while x264 encodes. The thread runs the jobs in the order they were
 * queued, which is the order the synchronous writer (h3_mp4_opts.sync) runs them, so the file is the same. */
#include "media_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
#include <libavutil/cpu.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>

/* ---------------------------------------------------------------------------------------------
 * MP4 writer */

enum { MP4_QUEUE = 8 };  /* frames queued ahead of the encoder thread (8 x w x h x 3 bytes) */
/* swscale's SIMD RGB readers load 16 bytes at a time and run past the end of the last row (valgrind: 4 bytes
 * beyond a 64x48 frame), so every frame it reads is ours, with zeroed padding behind it, never the caller's
 * buffer (docs/media.md "Same bytes every time"). */
enum { MP4_FRAME_PAD = 64 };

/* A queued piece of work for the encoder thread: one frame (its 8-bit RGB in the ring slot `slot`) or a run of
 * audio samples (pcm: [2][n], owned by the job). */
typedef struct mp4_job {
    struct mp4_job *next;
    int             slot;      /* >= 0: a frame in ring[slot]; -1: audio */
    float          *pcm;
    int64_t         n;
} mp4_job;

struct h3_mp4_writer {
    char            *path;
    h3_outfile      *out, *own;        /* the output written; own: the path API's own, committed at close */
    AVFormatContext *oc;
    AVCodecContext  *venc, *aenc;
    AVStream        *vst, *ast;
    struct SwsContext *sws;
    AVFrame         *vframe, *aframe;  /* yuv420p picture; fltp audio block of frame_size */
    AVPacket        *pkt;
    uint8_t         *scratch;          /* one uint8 RGB frame, for float input */
    int              width, height;
    int              afill;            /* samples waiting in aframe */
    int64_t          vpts, apts;       /* next frame / sample index */
    int              header_written, closed;
    /* the encoder thread (absent with h3_mp4_opts.sync); mu guards the queue, the counts and failed / terr */
    int              threaded;
    pthread_t        thr;
    pthread_mutex_t  mu;
    pthread_cond_t   work, space;      /* a job was queued / a frame slot came free */
    mp4_job         *head, *tail;
    uint8_t         *ring[MP4_QUEUE];  /* frame slots, used in turn */
    int64_t          queued, encoded;  /* frames handed to the thread / finished by it */
    int              stop, failed;
    h3_err           terr;             /* the thread's first error */
};

static void *encoder_main(void *arg);

/* Moves every packet the encoder has ready into the muxer. */
static int drain(h3_mp4_writer *w, AVCodecContext *enc, AVStream *st, h3_err *e)
{
    char eb[128];
    for (;;) {
        int r = avcodec_receive_packet(enc, w->pkt);
        if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return 0;
        if (r < 0) return h3_fail(e, "%s: %s encoder failed: %s", w->path, enc->codec->name, media_averr(r, eb));
        av_packet_rescale_ts(w->pkt, enc->time_base, st->time_base);
        w->pkt->stream_index = st->index;
        r = av_interleaved_write_frame(w->oc, w->pkt);  /* takes ownership of the packet data */
        if (r < 0) return h3_fail(e, "%s: writing the MP4 failed: %s", w->path, media_averr(r, eb));
    }
}

static int send_and_drain(h3_mp4_writer *w, AVCodecContext *enc, AVStream *st, AVFrame *f, h3_err *e)
{
    char eb[128];
    int r = avcodec_send_frame(enc, f);
    if (r < 0) return h3_fail(e, "%s: %s encoder refused a frame: %s", w->path, enc->codec->name, media_averr(r, eb));
    return drain(w, enc, st, e);
}

static const AVCodec *find_h264_encoder(void)
{
    /* libx264 is what docs/model/features.md 8.1 specifies (Debian's libavcodec links it); otherwise any
     * H.264 encoder this libavcodec has. */
    const AVCodec *c = avcodec_find_encoder_by_name("libx264");
    return c ? c : avcodec_find_encoder(AV_CODEC_ID_H264);
}

static int mp4_size_ok(const char *path, int width, int height, h3_err *e)
{
    if (width <= 0 || height <= 0 || width > 16384 || height > 16384)
        return h3_fail(e, "%s: frame size %dx%d is out of range (1..16384)", path, width, height);
    if (width % 2 || height % 2)
        return h3_fail(e, "%s: frame size %dx%d: width and height must be even for H.264 yuv420p", path, width, height);
    return 0;
}

static h3_mp4_writer *writer_new(h3_outfile *o, h3_outfile *own, int width, int height, int with_audio,
                                 const h3_mp4_opts *opts, h3_err *e)
{
    char eb[128];
    const char *path = o->path;
    media_log_setup();
    if (mp4_size_ok(path, width, height, e) || o->fd < 0) {
        if (o->fd < 0) h3_fail(e, "%s: the output is not open", path);
        h3_outfile_free(own);
        return NULL;
    }
    int crf = opts && opts->crf > 0 ? opts->crf : 18;
    const char *preset = opts && opts->preset ? opts->preset : "fast";
    int abr = opts && opts->audio_bitrate > 0 ? opts->audio_bitrate : 192000;

    h3_mp4_writer *w = calloc(1, sizeof *w);
    if (!w) { h3_fail(e, "%s: out of memory", path); h3_outfile_free(own); return NULL; }
    w->out = o, w->own = own;
    w->width = width, w->height = height;
    w->path = strdup(path);
    w->pkt = av_packet_alloc();
    if (!w->path || !w->pkt) { h3_fail(e, "%s: out of memory", path); goto fail; }

    int r = avformat_alloc_output_context2(&w->oc, NULL, "mp4", o->tmp);
    if (r < 0 || !w->oc) { h3_fail(e, "%s: cannot set up the MP4 muxer: %s", path, media_averr(r, eb)); goto fail; }

    /* Video: H.264, yuv420p, 24 fps, BT.709 limited range (tagged, so players agree). */
    const AVCodec *vc = find_h264_encoder();
    if (!vc) { h3_fail(e, "%s: this FFmpeg has no H.264 encoder (install libavcodec with libx264)", path); goto fail; }
    w->venc = avcodec_alloc_context3(vc);
    if (!w->venc) { h3_fail(e, "%s: out of memory", path); goto fail; }
    w->venc->width = width;
    w->venc->height = height;
    w->venc->pix_fmt = AV_PIX_FMT_YUV420P;
    w->venc->time_base = (AVRational){1, H3_MEDIA_FPS};
    w->venc->framerate = (AVRational){H3_MEDIA_FPS, 1};
    w->venc->color_range = AVCOL_RANGE_MPEG;
    w->venc->colorspace = AVCOL_SPC_BT709;
    w->venc->color_primaries = AVCOL_PRI_BT709;
    w->venc->color_trc = AVCOL_TRC_BT709;
    if (w->oc->oformat->flags & AVFMT_GLOBALHEADER) w->venc->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    AVDictionary *vopt = NULL;
    if (!strcmp(vc->name, "libx264")) {
        char crfs[16];
        snprintf(crfs, sizeof crfs, "%d", crf);
        av_dict_set(&vopt, "preset", preset, 0);
        av_dict_set(&vopt, "crf", crfs, 0);
        /* x264's AVX-512 kernels make the stream depend on what the heap held before (the same 22 frames gave
         * 25916-25984 bytes; its C code and every narrower instruction set give 25915 every time): on a CPU
         * with AVX-512 we name x264's instruction sets up to AVX2 ourselves (docs/media.md "Same bytes every
         * time"). Every AVX-512 CPU has all of them. */
        if (av_get_cpu_flags() & AV_CPU_FLAG_AVX512)
            av_dict_set(&vopt, "x264-params", "asm=MMX2,SSE2Fast,SSSE3,SSE4.2,AVX,FMA3,BMI2,AVX2", 0);
    }
    r = avcodec_open2(w->venc, vc, &vopt);
    av_dict_free(&vopt);
    if (r < 0) { h3_fail(e, "%s: cannot open the %s encoder: %s", path, vc->name, media_averr(r, eb)); goto fail; }
    w->vst = avformat_new_stream(w->oc, NULL);
    if (!w->vst || avcodec_parameters_from_context(w->vst->codecpar, w->venc) < 0) {
        h3_fail(e, "%s: cannot add the video stream", path); goto fail;
    }
    w->vst->time_base = w->venc->time_base;
    w->vst->avg_frame_rate = w->venc->framerate;

    w->vframe = av_frame_alloc();
    if (!w->vframe) { h3_fail(e, "%s: out of memory", path); goto fail; }
    w->vframe->format = AV_PIX_FMT_YUV420P;
    w->vframe->width = width;
    w->vframe->height = height;
    w->vframe->color_range = AVCOL_RANGE_MPEG;
    w->vframe->colorspace = AVCOL_SPC_BT709;
    w->vframe->color_primaries = AVCOL_PRI_BT709;
    w->vframe->color_trc = AVCOL_TRC_BT709;
    if (av_frame_get_buffer(w->vframe, 0) < 0) { h3_fail(e, "%s: out of memory", path); goto fail; }
    w->sws = sws_getContext(width, height, AV_PIX_FMT_RGB24, width, height, AV_PIX_FMT_YUV420P,
                            SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INP, NULL, NULL, NULL);
    if (!w->sws) { h3_fail(e, "%s: cannot set up the RGB -> yuv420p conversion", path); goto fail; }
    sws_setColorspaceDetails(w->sws, sws_getCoefficients(SWS_CS_ITU709), 1,
                             sws_getCoefficients(SWS_CS_ITU709), 0, 0, 1 << 16, 1 << 16);
    w->scratch = calloc(1, (size_t)width * height * 3 + MP4_FRAME_PAD);
    if (!w->scratch) { h3_fail(e, "%s: out of memory", path); goto fail; }

    if (with_audio) {
        /* Audio: AAC-LC, 32 kHz stereo, float planar input (docs/model/features.md 8.1). */
        const AVCodec *ac = avcodec_find_encoder(AV_CODEC_ID_AAC);
        if (!ac) { h3_fail(e, "%s: this FFmpeg has no AAC encoder", path); goto fail; }
        w->aenc = avcodec_alloc_context3(ac);
        if (!w->aenc) { h3_fail(e, "%s: out of memory", path); goto fail; }
        w->aenc->sample_fmt = AV_SAMPLE_FMT_FLTP;
        w->aenc->sample_rate = H3_MEDIA_SAMPLE_RATE;
        av_channel_layout_default(&w->aenc->ch_layout, 2);
        w->aenc->bit_rate = abr;
        w->aenc->time_base = (AVRational){1, H3_MEDIA_SAMPLE_RATE};
        if (w->oc->oformat->flags & AVFMT_GLOBALHEADER) w->aenc->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
        r = avcodec_open2(w->aenc, ac, NULL);
        if (r < 0) { h3_fail(e, "%s: cannot open the AAC encoder: %s", path, media_averr(r, eb)); goto fail; }
        w->ast = avformat_new_stream(w->oc, NULL);
        if (!w->ast || avcodec_parameters_from_context(w->ast->codecpar, w->aenc) < 0) {
            h3_fail(e, "%s: cannot add the audio stream", path); goto fail;
        }
        w->ast->time_base = w->aenc->time_base;
        w->aframe = av_frame_alloc();
        if (!w->aframe) { h3_fail(e, "%s: out of memory", path); goto fail; }
        w->aframe->format = AV_SAMPLE_FMT_FLTP;
        w->aframe->sample_rate = H3_MEDIA_SAMPLE_RATE;
        w->aframe->nb_samples = w->aenc->frame_size > 0 ? w->aenc->frame_size : 1024;
        av_channel_layout_default(&w->aframe->ch_layout, 2);
        if (av_frame_get_buffer(w->aframe, 0) < 0) { h3_fail(e, "%s: out of memory", path); goto fail; }
    }

    if (!(w->oc->pb = media_avio_fd(&o->fd))) { h3_fail(e, "%s: out of memory", path); goto fail; }
    AVDictionary *mopt = NULL;
    av_dict_set(&mopt, "movflags", "+faststart", 0);  /* moov first: playable while streaming */
    r = avformat_write_header(w->oc, &mopt);
    av_dict_free(&mopt);
    if (r < 0) { h3_fail(e, "%s: cannot write the MP4 header: %s", path, media_averr(r, eb)); goto fail; }
    w->header_written = 1;
    if (!(opts && opts->sync)) {
        pthread_mutex_init(&w->mu, NULL); /* default attributes: these cannot fail on Linux */
        pthread_cond_init(&w->work, NULL);
        pthread_cond_init(&w->space, NULL);
        if (pthread_create(&w->thr, NULL, encoder_main, w)) {
            pthread_mutex_destroy(&w->mu);
            pthread_cond_destroy(&w->work);
            pthread_cond_destroy(&w->space);
            h3_fail(e, "%s: cannot start the encoder thread", path);
            goto fail;
        }
        w->threaded = 1;
    }
    return w;
fail:
    h3_mp4_writer_free(w);
    return NULL;
}

h3_mp4_writer *h3_mp4_writer_new(const char *path, int width, int height, int with_audio,
                                 const h3_mp4_opts *opts, h3_err *e)
{
    if (mp4_size_ok(path, width, height, e)) return NULL;
    h3_outfile *own = h3_outfile_open("", path, H3_OUT_FILE, NULL, e);
    return own ? writer_new(own, own, width, height, with_audio, opts, e) : NULL;
}

h3_mp4_writer *h3_mp4_writer_new_to(h3_outfile *o, int width, int height, int with_audio, const h3_mp4_opts *opts,
                                    h3_err *e)
{
    return writer_new(o, NULL, width, height, with_audio, opts, e);
}

/* One 8-bit RGB frame through the colour conversion and the encoder (the encoder thread, or the caller with sync). */
static int encode_frame(h3_mp4_writer *w, const uint8_t *rgb, h3_err *e)
{
    if (av_frame_make_writable(w->vframe) < 0) return h3_fail(e, "%s: out of memory", w->path);
    const uint8_t *src[1] = {rgb};
    int stride[1] = {w->width * 3};
    sws_scale(w->sws, src, stride, 0, w->height, w->vframe->data, w->vframe->linesize);
    w->vframe->pts = w->vpts++;
    return send_and_drain(w, w->venc, w->vst, w->vframe, e);
}

static int encode_audio(h3_mp4_writer *w, const float *left, const float *right, int64_t samples, h3_err *e);

static void *encoder_main(void *arg)
{
    h3_mp4_writer *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->head && !w->stop) pthread_cond_wait(&w->work, &w->mu);
        mp4_job *j = w->head;
        if (!j) break; /* stopped, nothing left */
        w->head = j->next;
        if (!w->head) w->tail = NULL;
        const int skip = w->failed;
        pthread_mutex_unlock(&w->mu);
        h3_err err;
        int rc = 0;
        if (!skip)
            rc = j->slot >= 0 ? encode_frame(w, w->ring[j->slot], &err) : encode_audio(w, j->pcm, j->pcm + j->n, j->n, &err);
        free(j->pcm);
        pthread_mutex_lock(&w->mu);
        if (rc && !w->failed) w->failed = 1, w->terr = err;
        if (j->slot >= 0) w->encoded++;
        free(j);
        pthread_cond_broadcast(&w->space);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* The thread's first error, if any (under mu). */
static int thread_failed(h3_mp4_writer *w, h3_err *e)
{
    pthread_mutex_lock(&w->mu);
    int f = w->failed;
    if (f && e) *e = w->terr;
    pthread_mutex_unlock(&w->mu);
    return f ? -1 : 0;
}

static void enqueue(h3_mp4_writer *w, mp4_job *j)
{
    pthread_mutex_lock(&w->mu);
    if (w->tail) w->tail->next = j; else w->head = j;
    w->tail = j;
    if (j->slot >= 0) w->queued++;
    pthread_cond_signal(&w->work);
    pthread_mutex_unlock(&w->mu);
}

/* Ends the encoder thread after the jobs queued so far (or, with discard, without running them). */
static void thread_join(h3_mp4_writer *w, int discard)
{
    if (!w->threaded) return;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    if (discard && !w->failed) w->failed = 1, h3_fail(&w->terr, "%s: writer freed before it was closed", w->path);
    pthread_cond_signal(&w->work);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thr, NULL);
    w->threaded = 0;
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->work);
    pthread_cond_destroy(&w->space);
}

int h3_mp4_writer_frames(h3_mp4_writer *w, const h3_frames_view *v, h3_err *e)
{
    if (w->closed) return h3_fail(e, "%s: writer already closed", w->path);
    if (media_check_frames(w->path, v, e)) return -1;
    if (v->width != w->width || v->height != w->height)
        return h3_fail(e, "%s: frame size %dx%d differs from the stream's %dx%d", w->path, v->width,
                       v->height, w->width, w->height);
    const size_t fsz = (size_t)w->width * w->height * 3;
    for (int t = 0; t < v->frames; t++) {
        if (!w->threaded) {
            const uint8_t *rgb = media_frame_u8(v, t, w->scratch);
            if (rgb != w->scratch) memcpy(w->scratch, rgb, fsz); /* padded: see MP4_FRAME_PAD */
            if (encode_frame(w, w->scratch, e)) return -1;
            continue;
        }
        /* wait for the slot of the frame MP4_QUEUE before this one to be encoded */
        pthread_mutex_lock(&w->mu);
        while (w->queued - w->encoded >= MP4_QUEUE && !w->failed) pthread_cond_wait(&w->space, &w->mu);
        pthread_mutex_unlock(&w->mu);
        if (thread_failed(w, e)) return -1;
        const int slot = (int)(w->queued % MP4_QUEUE);
        mp4_job *j = calloc(1, sizeof *j);
        if (!j || (!w->ring[slot] && !(w->ring[slot] = calloc(1, fsz + MP4_FRAME_PAD)))) {
            free(j);
            return h3_fail(e, "%s: out of memory", w->path);
        }
        const uint8_t *rgb = media_frame_u8(v, t, w->ring[slot]);
        if (rgb != w->ring[slot]) memcpy(w->ring[slot], rgb, fsz); /* 8-bit input: the caller's buffer is not ours */
        j->slot = slot;
        enqueue(w, j);
    }
    return 0;
}

static int send_audio_block(h3_mp4_writer *w, h3_err *e)
{
    w->aframe->nb_samples = w->afill;
    w->aframe->pts = w->apts;
    w->apts += w->afill;
    w->afill = 0;
    return send_and_drain(w, w->aenc, w->ast, w->aframe, e);
}

int h3_mp4_writer_audio(h3_mp4_writer *w, const float *left, const float *right, int64_t samples, h3_err *e)
{
    if (w->closed) return h3_fail(e, "%s: writer already closed", w->path);
    if (!w->aenc) return h3_fail(e, "%s: writer was opened without an audio track", w->path);
    if (samples < 0 || (samples > 0 && (!left || !right))) return h3_fail(e, "%s: bad audio buffer", w->path);
    if (!w->threaded) return encode_audio(w, left, right, samples, e);
    if (samples == 0) return 0;
    if (thread_failed(w, e)) return -1;
    mp4_job *j = calloc(1, sizeof *j);
    float *pcm = malloc(sizeof(float) * 2 * (size_t)samples);
    if (!j || !pcm) {
        free(j);
        free(pcm);
        return h3_fail(e, "%s: out of memory", w->path);
    }
    memcpy(pcm, left, sizeof(float) * (size_t)samples);
    memcpy(pcm + samples, right, sizeof(float) * (size_t)samples);
    j->slot = -1, j->pcm = pcm, j->n = samples;
    enqueue(w, j);
    return 0;
}

static int encode_audio(h3_mp4_writer *w, const float *left, const float *right, int64_t samples, h3_err *e)
{
    int block = w->aenc->frame_size > 0 ? w->aenc->frame_size : 1024;
    for (int64_t i = 0; i < samples;) {
        if (w->afill == 0) {
            w->aframe->nb_samples = block;
            if (av_frame_make_writable(w->aframe) < 0) return h3_fail(e, "%s: out of memory", w->path);
        }
        int64_t take = samples - i;
        if (take > block - w->afill) take = block - w->afill;
        float *l = (float *)w->aframe->data[0] + w->afill, *r = (float *)w->aframe->data[1] + w->afill;
        for (int64_t k = 0; k < take; k++) {
            /* The AAC encoder refuses NaN/Inf input; a non-finite sample becomes silence. */
            l[k] = isfinite(left[i + k]) ? left[i + k] : 0.0f;
            r[k] = isfinite(right[i + k]) ? right[i + k] : 0.0f;
        }
        w->afill += (int)take;
        i += take;
        if (w->afill == block && send_audio_block(w, e)) return -1;
    }
    return 0;
}

int h3_mp4_writer_close(h3_mp4_writer *w, h3_err *e)
{
    char eb[128];
    if (w->closed) return h3_fail(e, "%s: writer already closed", w->path);
    w->closed = 1;
    thread_join(w, 0); /* every queued frame and sample encoded */
    if (w->failed) {
        if (e) *e = w->terr;
        return -1;
    }
    if (w->vpts == 0) return h3_fail(e, "%s: no video frames were written", w->path);
    if (send_and_drain(w, w->venc, w->vst, NULL, e)) return -1;
    if (w->aenc) {
        if (w->apts == 0 && w->afill == 0) return h3_fail(e, "%s: the audio track got no samples", w->path);
        if (w->afill > 0 && send_audio_block(w, e)) return -1;  /* a short last block is padded */
        if (send_and_drain(w, w->aenc, w->ast, NULL, e)) return -1;
    }
    int r = av_write_trailer(w->oc);
    if (r < 0) return h3_fail(e, "%s: cannot finish the MP4: %s", w->path, media_averr(r, eb));
    r = media_avio_close(&w->oc->pb);
    if (r < 0) return h3_fail(e, "%s: cannot write the MP4: %s", w->path, media_averr(r, eb));
    return w->own ? h3_outfile_commit(w->own, 1, e) : 0;
}

void h3_mp4_writer_free(h3_mp4_writer *w)
{
    if (!w) return;
    thread_join(w, 1);
    for (mp4_job *j = w->head, *n; j; j = n) {
        n = j->next;
        free(j->pcm);
        free(j);
    }
    for (int i = 0; i < MP4_QUEUE; i++) free(w->ring[i]);
    if (w->oc) {
        media_avio_close(&w->oc->pb);
        avformat_free_context(w->oc);
    }
    h3_outfile_free(w->own);   /* not committed: its temporary goes, nothing is left behind */
    avcodec_free_context(&w->venc);
    avcodec_free_context(&w->aenc);
    av_frame_free(&w->vframe);
    av_frame_free(&w->aframe);
    av_packet_free(&w->pkt);
    sws_freeContext(w->sws);
    free(w->scratch);
    free(w->path);
    free(w);
}

int h3_write_mp4(const char *path, const h3_frames_view *frames, const float *audio, int64_t samples,
                 const h3_mp4_opts *opts, h3_err *e)
{
    if (media_check_frames(path, frames, e)) return -1;
    if (audio && samples <= 0) return h3_fail(e, "%s: audio has no samples", path);
    h3_mp4_writer *w = h3_mp4_writer_new(path, frames->width, frames->height, audio != NULL, opts, e);
    if (!w) return -1;
    /* Interleave by time (video frame t covers [t, t+1)/24 s) so the muxer's queue stays short. */
    int rc = 0;
    int64_t done = 0;
    for (int t = 0; t < frames->frames && !rc; t++) {
        h3_frames_view one = *frames;
        one.frames = 1;
        size_t fsz = (size_t)frames->height * frames->width * 3;
        if (one.u8) one.u8 += (size_t)t * fsz; else one.f32 += (size_t)t * fsz;
        rc = h3_mp4_writer_frames(w, &one, e);
        if (!rc && audio) {
            int64_t upto = (int64_t)(t + 1) * H3_MEDIA_SAMPLE_RATE / H3_MEDIA_FPS;
            if (t == frames->frames - 1 || upto > samples) upto = samples;
            if (upto > done) rc = h3_mp4_writer_audio(w, audio + done, audio + samples + done, upto - done, e);
            done = upto > done ? upto : done;
        }
    }
    if (!rc) rc = h3_mp4_writer_close(w, e);
    h3_mp4_writer_free(w);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * PNG */

typedef struct png_encoder {
    AVCodecContext *ctx;
    AVFrame        *frame;
    AVPacket       *pkt;
} png_encoder;

static void png_encoder_free(png_encoder *p)
{
    avcodec_free_context(&p->ctx);
    av_frame_free(&p->frame);
    av_packet_free(&p->pkt);
}

static int png_encoder_init(png_encoder *p, const char *path, int height, int width, h3_err *e)
{
    char eb[128];
    memset(p, 0, sizeof *p);
    media_log_setup();
    if (width <= 0 || height <= 0 || width > 16384 || height > 16384)
        return h3_fail(e, "%s: image size %dx%d is out of range (1..16384)", path, width, height);
    const AVCodec *c = avcodec_find_encoder(AV_CODEC_ID_PNG);
    if (!c) return h3_fail(e, "%s: this FFmpeg has no PNG encoder", path);
    p->ctx = avcodec_alloc_context3(c);
    p->frame = av_frame_alloc();
    p->pkt = av_packet_alloc();
    if (!p->ctx || !p->frame || !p->pkt) { png_encoder_free(p); return h3_fail(e, "%s: out of memory", path); }
    p->ctx->width = width;
    p->ctx->height = height;
    p->ctx->pix_fmt = AV_PIX_FMT_RGB24;
    p->ctx->time_base = (AVRational){1, H3_MEDIA_FPS};
    int r = avcodec_open2(p->ctx, c, NULL);
    if (r < 0) { png_encoder_free(p); return h3_fail(e, "%s: cannot open the PNG encoder: %s", path, media_averr(r, eb)); }
    p->frame->format = AV_PIX_FMT_RGB24;
    p->frame->width = width;
    p->frame->height = height;
    return 0;
}

/* Encodes one RGB image into the open file fd (name in messages). */
static int png_encode_fd(png_encoder *p, int fd, const char *name, const uint8_t *rgb, h3_err *e)
{
    char eb[128];
    /* The encoder only reads the frame: point it at the caller's pixels. */
    av_frame_unref(p->frame);
    p->frame->format = AV_PIX_FMT_RGB24;
    p->frame->width = p->ctx->width;
    p->frame->height = p->ctx->height;
    p->frame->data[0] = (uint8_t *)rgb;
    p->frame->linesize[0] = p->ctx->width * 3;
    int r = avcodec_send_frame(p->ctx, p->frame);
    p->frame->data[0] = NULL;
    if (r >= 0) r = avcodec_receive_packet(p->ctx, p->pkt);
    if (r < 0) return h3_fail(e, "%s: PNG encoding failed: %s", name, media_averr(r, eb));
    const uint8_t *d = p->pkt->data;
    size_t left = (size_t)p->pkt->size;
    while (left) {
        ssize_t k = write(fd, d, left);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            int err = k < 0 ? errno : EIO;
            av_packet_unref(p->pkt);
            return h3_fail(e, "%s: cannot write: %s", name, strerror(err));
        }
        d += k, left -= (size_t)k;
    }
    av_packet_unref(p->pkt);
    return 0;
}

int h3_write_png(const char *path, const uint8_t *rgb, int height, int width, h3_err *e)
{
    if (!rgb) return h3_fail(e, "%s: no pixels given", path);
    png_encoder p;
    if (png_encoder_init(&p, path, height, width, e)) return -1;
    h3_outfile *o = h3_outfile_open("", path, H3_OUT_FILE, NULL, e);
    int rc = o ? png_encode_fd(&p, o->fd, path, rgb, e) : -1;
    if (!rc) rc = h3_outfile_commit(o, 1, e);
    h3_outfile_free(o);
    png_encoder_free(&p);
    return rc;
}

int h3_write_png_frames_to(h3_outfile *o, const h3_frames_view *v, h3_err *e)
{
    const char *dir = o->path;
    if (o->kind != H3_OUT_DIR || !o->tmp) return h3_fail(e, "%s: the frames folder is not open", dir);
    if (media_check_frames(dir, v, e)) return -1;
    if (v->frames > 99999) return h3_fail(e, "%s: %d frames exceed the 5-digit frame names", dir, v->frames);
    png_encoder p;
    if (png_encoder_init(&p, dir, v->height, v->width, e)) return -1;
    uint8_t *scratch = v->f32 ? malloc((size_t)v->height * v->width * 3) : NULL;
    int rc = 0;
    if (v->f32 && !scratch) rc = h3_fail(e, "%s: out of memory", dir);
    for (int t = 0; t < v->frames && !rc; t++) {
        char fp[4200];
        snprintf(fp, sizeof fp, "%s/frame_%05d.png", o->tmp, t);
        int fd = h3_out_create(fp);  /* inside our own fresh temporary folder */
        if (fd < 0) {
            rc = h3_fail(e, "%s: frame %d: cannot create %s: %s", dir, t, fp, strerror(errno));
            break;
        }
        rc = png_encode_fd(&p, fd, fp, media_frame_u8(v, t, scratch), e);
        if (close(fd) != 0 && !rc) rc = h3_fail(e, "%s: cannot write: %s", fp, strerror(errno));
        if (rc) h3_fail_prefix(e, "%s: frame %d", dir, t);
    }
    png_encoder_free(&p);
    free(scratch);
    return rc;
}

int h3_write_png_frames(const char *dir, const h3_frames_view *v, h3_err *e)
{
    if (media_check_frames(dir, v, e)) return -1;
    h3_outfile *o = h3_outfile_open("", dir, H3_OUT_DIR, h3_out_frame_name, e);
    if (!o) return -1;
    int rc = h3_write_png_frames_to(o, v, e);
    if (!rc) rc = h3_outfile_commit(o, 1, e);
    h3_outfile_free(o);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * WAV through libavformat's wav muxer; the samples are packed here (interleaved PCM). */

int h3_write_wav_to(h3_outfile *o, const float *audio, int channels, int64_t samples, int sample_rate, int bits,
                    h3_err *e)
{
    char eb[128];
    const char *path = o->path;
    media_log_setup();
    if (!audio || samples <= 0) return h3_fail(e, "%s: no audio samples given", path);
    if (channels < 1 || channels > 8) return h3_fail(e, "%s: %d channels (1..8 supported)", path, channels);
    if (sample_rate <= 0 || sample_rate > 384000) return h3_fail(e, "%s: bad sample rate %d", path, sample_rate);
    if (bits != 16 && bits != 32) return h3_fail(e, "%s: WAV bits must be 16 (PCM) or 32 (float), got %d", path, bits);
    int bps = bits / 8;
    if ((double)samples * channels * bps > 4.0e9) return h3_fail(e, "%s: audio too long for a WAV file (4 GB)", path);

    if (o->fd < 0) return h3_fail(e, "%s: the output is not open", path);
    AVFormatContext *oc = NULL;
    AVPacket *pkt = av_packet_alloc();
    int rc = 0, r = avformat_alloc_output_context2(&oc, NULL, "wav", o->tmp);
    AVStream *st = r >= 0 && oc ? avformat_new_stream(oc, NULL) : NULL;
    if (!st || !pkt) { rc = h3_fail(e, "%s: cannot set up the WAV muxer", path); goto done; }
    st->codecpar->codec_type = AVMEDIA_TYPE_AUDIO;
    st->codecpar->codec_id = bits == 16 ? AV_CODEC_ID_PCM_S16LE : AV_CODEC_ID_PCM_F32LE;
    st->codecpar->sample_rate = sample_rate;
    av_channel_layout_default(&st->codecpar->ch_layout, channels);
    st->codecpar->bits_per_coded_sample = bits;
    st->codecpar->block_align = channels * bps;
    st->codecpar->bit_rate = (int64_t)sample_rate * channels * bits;
    st->time_base = (AVRational){1, sample_rate};
    if (!(oc->pb = media_avio_fd(&o->fd))) { rc = h3_fail(e, "%s: out of memory", path); goto done; }
    if ((r = avformat_write_header(oc, NULL)) < 0) {
        rc = h3_fail(e, "%s: cannot start the WAV file: %s", path, media_averr(r, eb));
        goto done;
    }
    const int64_t block = 4096;
    for (int64_t i = 0; i < samples && !rc; i += block) {
        int64_t n = samples - i < block ? samples - i : block;
        if ((r = av_new_packet(pkt, (int)(n * channels * bps))) < 0) { rc = h3_fail(e, "%s: out of memory", path); break; }
        uint8_t *o = pkt->data;
        for (int64_t s = 0; s < n; s++) {
            for (int c = 0; c < channels; c++) {
                float x = audio[(int64_t)c * samples + i + s];
                if (bits == 32) {
                    memcpy(o, &x, 4);   /* little-endian host (x86-64, aarch64) */
                } else {
                    float y = rintf(x * 32768.0f);
                    int16_t v = y >= 32767.0f ? 32767 : y <= -32768.0f ? -32768 : (y == y ? (int16_t)y : 0);
                    o[0] = (uint8_t)(v & 0xff);
                    o[1] = (uint8_t)((uint16_t)v >> 8);
                }
                o += bps;
            }
        }
        pkt->pts = pkt->dts = i;
        pkt->duration = n;
        pkt->stream_index = 0;
        if ((r = av_write_frame(oc, pkt)) < 0) rc = h3_fail(e, "%s: writing failed: %s", path, media_averr(r, eb));
        av_packet_unref(pkt);
    }
    if (!rc && (r = av_write_trailer(oc)) < 0) rc = h3_fail(e, "%s: cannot finish the WAV file: %s", path, media_averr(r, eb));
    if (!rc && (r = media_avio_close(&oc->pb)) < 0) rc = h3_fail(e, "%s: cannot write: %s", path, media_averr(r, eb));
done:
    if (oc) {
        media_avio_close(&oc->pb);
        avformat_free_context(oc);
    }
    av_packet_free(&pkt);
    return rc;
}

int h3_write_wav(const char *path, const float *audio, int channels, int64_t samples, int sample_rate, int bits,
                 h3_err *e)
{
    if (!audio || samples <= 0) return h3_fail(e, "%s: no audio samples given", path);
    h3_outfile *o = h3_outfile_open("", path, H3_OUT_FILE, NULL, e);
    if (!o) return -1;
    int rc = h3_write_wav_to(o, audio, channels, samples, sample_rate, bits, e);
    if (!rc) rc = h3_outfile_commit(o, 1, e);
    h3_outfile_free(o);
    return rc;
}
