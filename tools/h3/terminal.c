/* See terminal.h. */
#include "terminal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

static int env_set(const char *k) {
    const char *v = getenv(k);
    return v && *v;
}

static int env_is(const char *k, const char *want) {
    const char *v = getenv(k);
    return v && !strcmp(v, want);
}

term_graphics term_graphics_detect(void) {
    if (env_set("KITTY_WINDOW_ID") || env_is("TERM", "xterm-kitty") || env_set("GHOSTTY_RESOURCES_DIR") ||
        env_is("TERM_PROGRAM", "ghostty"))
        return TERM_KITTY;
    if (env_is("TERM_PROGRAM", "iTerm.app") || env_is("TERM_PROGRAM", "WezTerm") || env_set("ITERM_SESSION_ID") ||
        env_set("WEZTERM_PANE") || env_set("KONSOLE_VERSION"))
        return TERM_ITERM2;
    return TERM_NONE;
}

const char *term_graphics_name(term_graphics g) {
    return g == TERM_KITTY ? "kitty" : g == TERM_ITERM2 ? "iterm2" : "none";
}

static uint8_t to_u8(float v) {
    if (!(v > 0.0f)) return 0; /* NaN too */
    if (v >= 1.0f) return 255;
    return (uint8_t)(v * 255.0f + 0.5f);
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* base64 of n bytes into out (4 * ceil(n / 3) characters, no terminator) */
static void base64(const uint8_t *in, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0) | (i + 2 < n ? in[i + 2] : 0);
        out[o++] = B64[v >> 18 & 63];
        out[o++] = B64[v >> 12 & 63];
        out[o++] = i + 1 < n ? B64[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? B64[v & 63] : '=';
    }
}

static void put_le(uint8_t *p, uint32_t v, int bytes) {
    for (int i = 0; i < bytes; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Kitty sizes a placement in cells: the display size zoom * w x zoom * h in cells of the terminal's pixel size
 * (TIOCGWINSZ), or 0 (native size) when the terminal does not report pixels. */
static void kitty_cells(FILE *f, int w, int h, int zoom, int *cols, int *rows) {
    struct winsize ws;
    *cols = *rows = 0;
    if (zoom <= 1 || ioctl(fileno(f), TIOCGWINSZ, &ws) != 0 || !ws.ws_col || !ws.ws_row || !ws.ws_xpixel || !ws.ws_ypixel)
        return;
    double cw = (double)ws.ws_xpixel / ws.ws_col, ch = (double)ws.ws_ypixel / ws.ws_row;
    *cols = (int)((double)w * zoom / cw + 0.999), *rows = (int)((double)h * zoom / ch + 0.999);
}

int term_show_rgb(FILE *f, term_graphics g, const float *rgb, int w, int h, int zoom) {
    if (g == TERM_NONE || w < 1 || h < 1 || zoom < 1) return 0;
    const size_t W = (size_t)w, H = (size_t)h;
    /* Kitty takes rows top-down as RGB; a BMP stores bottom-up BGR rows padded to 4 bytes after a 54-byte header */
    const size_t row = g == TERM_KITTY ? 3 * W : (3 * W + 3) / 4 * 4, head = g == TERM_KITTY ? 0 : 54;
    const size_t bytes = head + row * H;
    uint8_t *img = calloc(1, bytes);
    char *b64 = malloc(4 * ((bytes + 2) / 3) + 1);
    if (!img || !b64) {
        free(img), free(b64);
        return -1;
    }
    for (size_t y = 0; y < H; y++) {
        uint8_t *d = img + head + (g == TERM_KITTY ? y : H - 1 - y) * row;
        const float *px = rgb + y * W * 3;
        for (size_t x = 0; x < W; x++, px += 3) {
            if (g == TERM_KITTY) d[3 * x] = to_u8(px[0]), d[3 * x + 1] = to_u8(px[1]), d[3 * x + 2] = to_u8(px[2]);
            else d[3 * x] = to_u8(px[2]), d[3 * x + 1] = to_u8(px[1]), d[3 * x + 2] = to_u8(px[0]);
        }
    }
    if (g == TERM_ITERM2) { /* BITMAPFILEHEADER + BITMAPINFOHEADER, 24 bits, no compression */
        img[0] = 'B', img[1] = 'M';
        put_le(img + 2, (uint32_t)bytes, 4), put_le(img + 10, 54, 4), put_le(img + 14, 40, 4);
        put_le(img + 18, (uint32_t)W, 4), put_le(img + 22, (uint32_t)H, 4), put_le(img + 26, 1, 2);
        put_le(img + 28, 24, 2), put_le(img + 34, (uint32_t)(row * H), 4);
        put_le(img + 38, 2835, 4), put_le(img + 42, 2835, 4); /* 72 dpi */
    }
    size_t n = 4 * ((bytes + 2) / 3);
    base64(img, bytes, b64);
    free(img);
    if (g == TERM_KITTY) { /* a=T transmit and show, f=24 RGB, q=2 no replies; chunks of 4096, m=1 while more follow */
        int cols, rows;
        kitty_cells(f, w, h, zoom, &cols, &rows);
        for (size_t o = 0; o < n; o += 4096) {
            size_t k = n - o < 4096 ? n - o : 4096;
            int more = o + k < n;
            if (o == 0 && cols) fprintf(f, "\033_Ga=T,f=24,s=%zu,v=%zu,c=%d,r=%d,q=2,m=%d;", W, H, cols, rows, more);
            else if (o == 0) fprintf(f, "\033_Ga=T,f=24,s=%zu,v=%zu,q=2,m=%d;", W, H, more);
            else fprintf(f, "\033_Gm=%d;", more);
            fwrite(b64 + o, 1, k, f);
            fputs("\033\\", f);
        }
    } else { /* the terminal scales the image to the given size */
        fprintf(f, "\033]1337;File=inline=1;size=%zu;width=%zupx;height=%zupx;preserveAspectRatio=1:", bytes,
                W * (size_t)zoom, H * (size_t)zoom);
        fwrite(b64, 1, n, f);
        fputc('\a', f);
    }
    fputc('\n', f);
    free(b64);
    fflush(f);
    return ferror(f) ? -1 : 0;
}

int term_preview_frame(void *user, const h3_frame *f) {
    term_preview *t = user;
    if (f->pass > 0) fprintf(stderr, "h3: preview after pass %d/%d (frame %lld)\n", f->pass, f->passes, (long long)f->index);
    return term_show_rgb(t->out, t->g, f->rgb, f->width, f->height, t->zoom) != 0;
}
