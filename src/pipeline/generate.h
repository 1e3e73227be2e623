/* `h3 generate` end to end: conditioning -> DiT denoising -> decoders -> outputs, one phase's
 * weights resident at a time (features.md 4, 7.1). */
#ifndef H3_GENERATE_H
#define H3_GENERATE_H

#include "../core/error.h"
#include "request.h"

/* Returned when the request's flags or input media are invalid (unreadable, truncated or
 * unsupported files, media limits): the CLI exits 2 for these, 1 for other failures. */
#define H3_GENERATE_BAD_INPUT 2

/* Runs a validated request. Progress on stderr; outputs written atomically.
 * 0 on success, H3_GENERATE_BAD_INPUT or -1 with e filled. */
int h3_generate(const h3_request *r, h3_err *e);

#endif
