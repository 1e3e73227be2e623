/* The pre-flight check of a request's weights (docs/robustness.md, "Snapshots, configs and safetensors"): before the
 * first phase runs, every shard of every phase the request needs is validated from its header and file size only
 * (the index, every header, every extent, every tensor listed) and every stored tensor against the dtype and shape its
 * config implies, so a truncated or relabelled VAE or DiT shard fails the request at once instead of after the text
 * encoder and the denoising. */
#ifndef H3_PREFLIGHT_H
#define H3_PREFLIGHT_H

#include "../core/error.h"
#include "request.h"

/* need_text: the text phase runs (not served by the conditioning cache). A no-op with --random-weights. */
int h3_preflight_weights(const h3_request *r, h3_task task, int need_text, h3_err *e);

#endif
