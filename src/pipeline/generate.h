/* `h3 generate` end to end: conditioning -> DiT denoising -> decoders -> outputs, one phase's
 * weights resident at a time (features.md 4, 7.1). */
#ifndef H3_GENERATE_H
#define H3_GENERATE_H

#include "../core/error.h"
#include "request.h"

/* Runs a validated request. Progress on stderr; outputs written atomically. */
int h3_generate(const h3_request *r, h3_err *e);

#endif
