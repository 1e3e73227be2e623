/* The shape rules of the convolution ops (ops.h's 1-D, ops.h's 3-D): output lengths, the
 * geometry checks, the alias-free filter's taps. They sit below the dispatchers (ops.c) and
 * their CPU / CUDA twins, which all use them, so no twin calls back into its dispatcher. */
#ifndef H3_CONV_SHAPES_H
#define H3_CONV_SHAPES_H

#include <stdint.h>

#include "../core/error.h"

/* Taps of the alias-free resampling filter (docs/model/audio_vae.md 4.6). */
#define H3_AF_TAPS 12

/* Output length of a Conv1d (docs/model/audio_vae.md 4.1); <= 0 when the input is too short. */
int64_t h3_conv1d_out_len(int64_t L, int K, int stride, int pad, int dilation);

enum { H3_PAD_ZERO = 0, H3_PAD_REFLECT = 1 };

/* Geometry of one 3-D convolution. Padding is applied implicitly (no padded copy is made):
 * `pt0` zero frames are prepended (causal temporal padding, nothing appended), and the spatial axes
 * are padded by ph0 (top), ph1 (bottom), pw0 (left), pw1 (right) with `spatial_pad` = zeros or
 * reflect (mirror without repeating the edge sample, docs/model/video_vae.md 4.1; needs pad < axis length). */
typedef struct h3_conv3d_geom {
    int64_t cin, tin, hin, win;
    int64_t cout;
    int     kt, kh, kw;
    int     st, sh, sw;
    int     pt0;
    int     ph0, ph1, pw0, pw1;
    int     spatial_pad;
} h3_conv3d_geom;

/* Output sizes; returns 0, or -1 with e naming the rule (empty output, reflect pad >= axis length,
 * non-positive sizes or strides). `what` prefixes the message (e.g. a tensor name). */
int h3_conv3d_check(const h3_conv3d_geom *g, int64_t *tout, int64_t *hout, int64_t *wout, const char *what,
                    h3_err *e);

#endif
