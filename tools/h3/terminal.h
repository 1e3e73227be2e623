/* Terminal graphics for --show / !show (docs/model/features.md 2 and 3): the protocol detected from the environment and
 * one RGB image written to a stream as an inline image. */
#ifndef H3_TERMINAL_H
#define H3_TERMINAL_H

#include <stdio.h>

#include "h3.h"

typedef enum term_graphics {
    TERM_NONE = 0,
    TERM_KITTY,  /* Kitty graphics protocol: Kitty, Ghostty */
    TERM_ITERM2, /* iTerm2 inline images: iTerm2, WezTerm, Konsole */
} term_graphics;

/* From KITTY_WINDOW_ID / TERM=xterm-kitty / GHOSTTY_RESOURCES_DIR / TERM_PROGRAM=ghostty (Kitty), TERM_PROGRAM
 * iTerm.app or WezTerm / ITERM_SESSION_ID / WEZTERM_PANE / KONSOLE_VERSION (iTerm2); else TERM_NONE. */
term_graphics term_graphics_detect(void);
const char *term_graphics_name(term_graphics g);

/* Writes rgb ([h][w][3] in [0, 1]) as one inline image shown at zoom x its pixel size (zoom >= 1), then a
 * newline. Kitty: raw 24-bit RGB, base64 in chunks of 4096, placed over the cells that size covers when the
 * terminal reports its pixel size (else at native size); iTerm2: a 24-bit BMP file, base64, with the display
 * width and height in pixels. 0, or -1 when out of memory or the stream failed. */
int term_show_rgb(FILE *f, term_graphics g, const float *rgb, int w, int h, int zoom);

/* The preview sink (h3_sinks.preview): user is a term_preview. */
typedef struct term_preview {
    term_graphics g;
    int           zoom;
    FILE         *out;
} term_preview;
int term_preview_frame(void *user, const h3_frame *f);

#endif
