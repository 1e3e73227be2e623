/* PIL-compatible resampling of 8-bit RGB images (Image.resize(size, filter) on an "RGB" image with
 * the default box): the separable two-pass resampler -- horizontal pass first, then vertical --
 * with per-output-pixel filter weights computed in double, normalized to sum 1, quantized to
 * fixed point with 22 fractional bits (round half away from zero), accumulated in integers from a
 * half-unit bias and clipped to 0..255. Bit-exact with Pillow for the filters below
 * (tests/test_condition.c, fixtures from tools/reference/gen_condition.py).
 *
 * Pure arithmetic: available in every build (MEDIA=0 included). The reference uses LANCZOS for
 * every resize (diffusers minimax_h3 before_encoder.py: keyframes, image and video references). */
#ifndef H3_RESIZE_H
#define H3_RESIZE_H

#include <stdint.h>

#include "../core/error.h"

typedef enum h3_resample {
    H3_RESAMPLE_BILINEAR = 0, /* PIL BILINEAR: triangle, support 1 */
    H3_RESAMPLE_BICUBIC,      /* PIL BICUBIC: Keys cubic a = -0.5, support 2 */
    H3_RESAMPLE_LANCZOS,      /* PIL LANCZOS: sinc windowed by sinc, support 3 */
} h3_resample;

/* src [sh][sw][3] -> dst [dh][dw][3] (caller-allocated). Same size = copy. */
int h3_resize_rgb(const uint8_t *src, int sw, int sh, uint8_t *dst, int dw, int dh, h3_resample filter, h3_err *e);

/* Float RGB in [0, 1]: src [sh][sw][3] -> dst [dh][dw][3] with the same filter taps unquantized,
 * accumulated in double (horizontal pass, then vertical), results clamped to [0, 1]. For upscaling
 * decoded frames from the render canvas (docs/model/features.md 5.6). */
int h3_resize_rgbf(const float *src, int sw, int sh, float *dst, int dw, int dh, h3_resample filter, h3_err *e);

/* Crop [top, top + ch) x [left, left + cw) out of src [sh][sw][3] into dst [ch][cw][3]. */
int h3_crop_rgb(const uint8_t *src, int sw, int sh, int left, int top, uint8_t *dst, int cw, int ch, h3_err *e);

#endif
