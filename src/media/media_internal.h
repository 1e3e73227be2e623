/* Helpers shared by media_read.c and media_write.c (FFmpeg builds only). */
#ifndef H3_MEDIA_INTERNAL_H
#define H3_MEDIA_INTERNAL_H

#include "media.h"

#include <libavformat/avio.h>

/* Quiets FFmpeg's own logging (our errors are one line each) unless H3_MEDIA_LOG is set. */
void media_log_setup(void);

/* FFmpeg error code as text ("Invalid data found when processing input"). */
const char *media_averr(int code, char buf[128]);

/* An AVIOContext writing (and seeking) on *fd, which must outlive it (the h3_outfile's fd); NULL when out of
 * memory. media_avio_close flushes it, frees it and returns its first write error (0 or an AVERROR). */
AVIOContext *media_avio_fd(int *fd);
int media_avio_close(AVIOContext **pb);

/* Checks a frames view: exactly one of u8/f32, positive sizes, no size overflow. */
int media_check_frames(const char *path, const h3_frames_view *v, h3_err *e);

/* Frame t of a view as uint8 RGB: returns v->u8 + offset, or converts f32 into scratch
 * (height * width * 3 bytes) with the reference's rounding and returns scratch. */
const uint8_t *media_frame_u8(const h3_frames_view *v, int t, uint8_t *scratch);

/* torchaudio.transforms.Resample(orig_rate, new_rate) on one channel (media_resample.c):
 * *out gets ceil(new * len / orig) samples (reduced rates), malloc'd. */
int media_resample(const float *in, int64_t len, int orig_rate, int new_rate, float **out, int64_t *out_len,
                   const char *name, h3_err *e);

#endif
