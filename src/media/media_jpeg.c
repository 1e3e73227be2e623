/* JPEG stills through libjpeg (media_jpeg.h). libjpeg reports fatal errors through a callback that must not return:
 * it longjmps back here, and the message it formats becomes the one line of h3_err. Warnings are ignored as PIL
 * ignores them, except a premature end of data, which PIL refuses ("image file is truncated"). */
#include "media_jpeg.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h> /* the message codes (JWRN_JPEG_EOF) */

int media_is_jpeg(const uint8_t *b, size_t n) { return n >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF; }

typedef struct jpeg_fail {
    struct jpeg_error_mgr mgr;
    jmp_buf               jump;
    char                  msg[JMSG_LENGTH_MAX];
} jpeg_fail;

static void on_error(j_common_ptr ci) {
    jpeg_fail *f = (jpeg_fail *)ci->err;
    ci->err->format_message(ci, f->msg);
    longjmp(f->jump, 1);
}

static void on_message(j_common_ptr ci, int level) {
    if (level < 0 && ci->err->msg_code == JWRN_JPEG_EOF) on_error(ci); /* truncated: an error, as in PIL */
}

/* EXIF orientation (tag 0x0112 of IFD0) of the first APP1 segment that starts "Exif\0\0", as PIL's getexif()
 * reads it; 1 when absent or malformed. Every offset is checked against the segment's length. */
static unsigned rd16(const uint8_t *p, int le) { return le ? p[0] | p[1] << 8 : p[0] << 8 | p[1]; }
static uint32_t rd32(const uint8_t *p, int le) {
    return le ? (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24
              : (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static int exif_orientation(const uint8_t *seg, size_t n) {
    if (n < 6 + 8 || memcmp(seg, "Exif\0\0", 6)) return 1;
    const uint8_t *t = seg + 6;
    const size_t tn = n - 6;
    int le;
    if (!memcmp(t, "II", 2)) le = 1;
    else if (!memcmp(t, "MM", 2)) le = 0;
    else return 1;
    if (rd16(t + 2, le) != 42) return 1;
    const uint32_t ifd = rd32(t + 4, le);
    if (ifd > tn || tn - ifd < 2) return 1;
    const unsigned count = rd16(t + ifd, le);
    for (unsigned i = 0; i < count; i++) {
        const size_t at = (size_t)ifd + 2 + (size_t)i * 12;
        if (at + 12 > tn) return 1;
        if (rd16(t + at, le) != 0x0112 || rd32(t + at + 4, le) != 1) continue;
        const unsigned type = rd16(t + at + 2, le);
        const uint32_t v = type == 3 ? rd16(t + at + 8, le) : type == 4 ? rd32(t + at + 8, le) : 0;
        return v >= 1 && v <= 8 ? (int)v : 1;
    }
    return 1;
}

int media_jpeg_decode(const char *path, const void *data, size_t n, const char *name, int64_t max_pixels,
                      uint8_t **rgb, int *w, int *h, int *orientation, h3_err *e) {
    *rgb = NULL;
    struct jpeg_decompress_struct ci;
    jpeg_fail fail;
    FILE *volatile f = NULL;
    uint8_t *volatile out = NULL;
    memset(&ci, 0, sizeof ci);
    ci.err = jpeg_std_error(&fail.mgr);
    fail.mgr.error_exit = on_error;
    fail.mgr.emit_message = on_message;
    if (setjmp(fail.jump)) {
        jpeg_destroy_decompress(&ci);
        if (f) fclose(f);
        free(out);
        return h3_fail(e, "%s: decoding failed (corrupt data?): %s", name, fail.msg);
    }
    jpeg_create_decompress(&ci);
    if (path) {
        if (!(f = fopen(path, "rb"))) {
            jpeg_destroy_decompress(&ci);
            return h3_fail(e, "%s: cannot open", name);
        }
        jpeg_stdio_src(&ci, f);
    } else {
        jpeg_mem_src(&ci, (const unsigned char *)data, (unsigned long)n);
    }
    jpeg_save_markers(&ci, JPEG_APP0 + 1, 0xFFFF);
    jpeg_read_header(&ci, TRUE);
    if (ci.jpeg_color_space == JCS_CMYK || ci.jpeg_color_space == JCS_YCCK) {
        jpeg_destroy_decompress(&ci);
        if (f) fclose(f);
        return 1;
    }
    const unsigned iw = ci.image_width, ih = ci.image_height;
    if ((int64_t)iw * ih > max_pixels) {
        jpeg_destroy_decompress(&ci);
        if (f) fclose(f);
        return h3_fail(e, "%s: %ux%u = %lld pixels exceed the decoder's size limit of %lld pixels (not a corrupt file)",
                       name, iw, ih, (long long)iw * ih, (long long)max_pixels);
    }
    int orient = 1;
    for (jpeg_saved_marker_ptr m = ci.marker_list; m; m = m->next)
        if (m->marker == JPEG_APP0 + 1 && m->data_length >= 6 && !memcmp(m->data, "Exif\0\0", 6)) {
            orient = exif_orientation(m->data, m->data_length);
            break;
        }
    /* PIL's defaults: integer IDCT, fancy upsampling; gray pictures are replicated into RGB as convert("RGB") does */
    const int gray = ci.jpeg_color_space == JCS_GRAYSCALE;
    ci.out_color_space = gray ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_start_decompress(&ci);
    const size_t W = ci.output_width, H = ci.output_height;
    out = malloc(W * H * 3);
    if (!out) {
        jpeg_destroy_decompress(&ci);
        if (f) fclose(f);
        return h3_fail(e, "%s: out of memory for a %zux%zu image", name, W, H);
    }
    while (ci.output_scanline < H) {
        JSAMPROW row = out + (size_t)ci.output_scanline * W * 3;
        if (jpeg_read_scanlines(&ci, &row, 1) != 1) break;
        if (gray) /* the row's W gray bytes spread to W RGB triples, from the end so nothing is overwritten early */
            for (size_t x = W; x-- > 0;) row[3 * x] = row[3 * x + 1] = row[3 * x + 2] = row[x];
    }
    const int complete = ci.output_scanline == H;
    if (complete) jpeg_finish_decompress(&ci);
    jpeg_destroy_decompress(&ci);
    if (!complete) { /* a source that ran dry without the end-of-data warning: refused like a truncated file */
        if (f) fclose(f);
        free(out);
        return h3_fail(e, "%s: decoding failed (corrupt data?): %zu of %zu rows decoded", name, (size_t)ci.output_scanline, H);
    }
    if (f) fclose(f);
    *rgb = out, *w = (int)W, *h = (int)H, *orientation = orient;
    return 0;
}
