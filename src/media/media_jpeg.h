/* JPEG stills through libjpeg(-turbo), the library PIL decodes them with: with its defaults (integer IDCT, fancy
 * chroma upsampling, its YCbCr->RGB tables) h3's keyframes are the reference's pixels exactly (docs/media.md). */
#ifndef H3_MEDIA_JPEG_H
#define H3_MEDIA_JPEG_H

#include <stddef.h>
#include <stdint.h>

#include "../core/error.h"

/* 1 when the first bytes are a JPEG's (FF D8 FF). */
int media_is_jpeg(const uint8_t *head, size_t n);

/* Decodes the JPEG at path (or, with path NULL, the n bytes at data) into malloc'd RGB rows (*rgb, *w x *h x 3) and
 * its EXIF orientation (1..8, 1 when there is none). name is for messages. Returns 0; 1 when the picture is in a
 * colour space PIL converts its own way (CMYK, YCCK: the caller decodes it another way), nothing allocated; -1 with
 * one line in e (corrupt or truncated data, a size above max_pixels, out of memory). */
int media_jpeg_decode(const char *path, const void *data, size_t n, const char *name, int64_t max_pixels,
                      uint8_t **rgb, int *w, int *h, int *orientation, h3_err *e);

#endif
