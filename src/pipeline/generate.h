/* `h3 generate` end to end: conditioning -> DiT denoising -> decoders -> outputs, one phase's
 * weights resident at a time (docs/model/features.md 4, 7.1). */
#ifndef H3_GENERATE_H
#define H3_GENERATE_H

#include <stddef.h>

#include "../core/error.h"
#include "request.h"

/* Returned when the request's flags or input media are invalid (unreadable, truncated or
 * unsupported files, media limits): the CLI exits 2 for these, 1 for other failures. */
#define H3_GENERATE_BAD_INPUT 2

/* Runs a validated request. Progress on stderr; outputs written atomically.
 * 0 on success, H3_GENERATE_BAD_INPUT or -1 with e filled.
 * = h3_gen_ctx_new + h3_generate_in + h3_gen_ctx_free. */
int h3_generate(const h3_request *r, h3_err *e);

/* A generation context: the backend(s) of --backend/--threads, kept from one request to the next
 * (the interactive session, docs/session.md), so CUDA's context, cuBLASLt/cuDNN plans and memory
 * pool are made once. Each request loads and frees every phase's weights (docs/model/features.md 7.1), unless it asks
 * for H3_RESIDENT_ALL (--resident: each phase's model stays loaded for the next request that needs the same one)
 * or H3_RESIDENT_AUTO (a session's default: the transformer and the video decoder, when the GPU has the room).
 *
 * h3_gen_ctx_new records r's --backend and --threads and makes no backend yet; the backends are made
 * by h3_gen_ctx_start, or by the first h3_generate_in once its request's inputs were checked (so a
 * bad request fails exactly as the one-shot h3_generate did, without starting a GPU). */
typedef struct h3_gen_ctx h3_gen_ctx;

h3_gen_ctx *h3_gen_ctx_new(const h3_request *r, h3_err *e);
/* Makes the backends now (0, or -1 with e filled, e.g. no CUDA device); a no-op once made. */
int  h3_gen_ctx_start(h3_gen_ctx *c, h3_err *e);
/* 1 when the backends are made and kept. */
int  h3_gen_ctx_started(const h3_gen_ctx *c);
/* h3_generate on the context's backends. r must ask for the context's backend and thread count.
 * After a failure whose cause a backend recorded (a sticky CUDA error), the backends are dropped
 * and the next request makes new ones. Returns as h3_generate. */
int  h3_generate_in(h3_gen_ctx *c, const h3_request *r, h3_err *e);
void h3_gen_ctx_free(h3_gen_ctx *c);
/* What the context keeps between requests: the models of --resident / the session default (request.h) and the last t2va prompt's
 * embedding. h3_gen_ctx_models describes them into buf ("prompt embedding (N rows); text encoder (key); ...") and
 * returns the number of models; h3_gen_ctx_drop_models frees all of it. */
int  h3_gen_ctx_models(const h3_gen_ctx *c, char *buf, size_t cap);
void h3_gen_ctx_drop_models(h3_gen_ctx *c);

#endif
