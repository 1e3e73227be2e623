/* `h3 serve`'s page (web/index.html, made into a C array at build time by the Makefile: $(BUILD)/gen/serve_page.h)
 * and the PNG encoder of the event stream's previews (stored deflate blocks: small previews, no zlib). */
#include <stdlib.h>
#include <string.h>

#include "cmd_serve.h"
#include "serve_page.h" /* static const unsigned char serve_page_data[], generated from web/index.html */

const unsigned char *serve_page(size_t *len) {
    *len = sizeof serve_page_data;
    return serve_page_data;
}

static uint32_t crc32_of(const unsigned char *d, size_t n, uint32_t crc) {
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= d[i];
        for (int k = 0; k < 8; k++) crc = crc >> 1 ^ (0xEDB88320u & (0u - (crc & 1)));
    }
    return ~crc;
}

static unsigned char *put32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16), p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
    return p + 4;
}

/* a chunk: length, type, data, CRC of type + data */
static unsigned char *chunk(unsigned char *p, const char *type, const unsigned char *data, size_t n) {
    p = put32(p, (uint32_t)n);
    unsigned char *t = p;
    memcpy(p, type, 4), p += 4;
    if (n) memcpy(p, data, n), p += n;
    return put32(p, crc32_of(t, n + 4, 0));
}

unsigned char *serve_png_encode(const float *rgb, int width, int height, int step, size_t *out_len) {
    int w = (width + step - 1) / step, h = (height + step - 1) / step;
    size_t row = (size_t)w * 3 + 1, raw_n = row * (size_t)h;
    unsigned char *raw = malloc(raw_n);
    if (!raw) return NULL;
    for (int y = 0; y < h; y++) {
        unsigned char *r = raw + (size_t)y * row;
        r[0] = 0; /* filter: none */
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++) {
                float v = rgb[((size_t)(y * step) * (size_t)width + (size_t)(x * step)) * 3 + (size_t)c];
                v = v < 0 ? 0 : v > 1 ? 1 : v;
                r[1 + x * 3 + c] = (unsigned char)(v * 255.0f + 0.5f);
            }
    }
    /* zlib stream: header, stored blocks of at most 65535 bytes, Adler-32 */
    size_t blocks = raw_n / 65535 + 1, z_n = 2 + raw_n + blocks * 5 + 4;
    unsigned char *z = malloc(z_n), *out = malloc(8 + 25 + 12 + z_n + 12);
    if (!z || !out) return free(raw), free(z), free(out), NULL;
    unsigned char *q = z;
    *q++ = 0x78, *q++ = 0x01;
    uint32_t a = 1, b = 0;
    for (size_t off = 0; off < raw_n || off == 0;) {
        size_t n = raw_n - off > 65535 ? 65535 : raw_n - off;
        *q++ = off + n == raw_n ? 1 : 0;
        *q++ = (unsigned char)n, *q++ = (unsigned char)(n >> 8);
        *q++ = (unsigned char)~n, *q++ = (unsigned char)(~n >> 8);
        memcpy(q, raw + off, n), q += n;
        for (size_t i = 0; i < n; i++) a = (a + raw[off + i]) % 65521, b = (b + a) % 65521;
        off += n;
        if (n == 0) break;
    }
    q = put32(q, b << 16 | a);
    unsigned char ihdr[13], *p = out;
    put32(ihdr, (uint32_t)w), put32(ihdr + 4, (uint32_t)h);
    ihdr[8] = 8, ihdr[9] = 2, ihdr[10] = ihdr[11] = ihdr[12] = 0; /* 8-bit RGB, no interlace */
    memcpy(p, "\x89PNG\r\n\x1a\n", 8), p += 8;
    p = chunk(p, "IHDR", ihdr, 13);
    p = chunk(p, "IDAT", z, (size_t)(q - z));
    p = chunk(p, "IEND", NULL, 0);
    free(raw), free(z);
    *out_len = (size_t)(p - out);
    return out;
}
