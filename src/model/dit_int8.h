/* INT8 W8A8 in the DiT (docs/int8.md): the three scopes (profiles), the scope-aware validation of a snapshot's
 * tensors, and the model's int8 linears (loaded from an int8 snapshot, or quantized at load by --quant int8). */
#ifndef H3_DIT_INT8_H
#define H3_DIT_INT8_H

#include "../io/safetensors.h"
#include "dit.h"

/* Which linears are INT8: mlp = each main block's FFN up and down (2 per block); dit_proj = mlp plus q, k, v and
 * the attention output (6; the original layout's fused qkv_proj counts as one tensor); all = dit_proj plus the
 * block's adaln_proj (7). The token refiner, the final layer and the in/out projections are never quantized. */
enum { DIT_INT8_NONE = 0, DIT_INT8_MLP = 1, DIT_INT8_DIT_PROJ = 2, DIT_INT8_ALL = 3 };

/* The safetensors "__metadata__" keys `h3 quantize` writes (LightX2V writes none). */
#define DIT_INT8_META_SCHEME  "h3.quant"
#define DIT_INT8_META_PROFILE "h3.int8_profile"
#define DIT_INT8_SCHEME       "w8a8-int8 per-channel absmax/127 rne clamp127"

const char *dit_int8_profile_name(int profile); /* "none", "mlp", "dit_proj", "all" */
int         dit_int8_profile_parse(const char *s); /* -1 when unknown */
/* 1 when the weight `name` (a ".weight" tensor) is in the profile's scope for this config's layout. */
int         dit_int8_in_scope(const dit_config *c, const char *name, int profile);

/* The scope rule for the tensors of s (headers are enough; scale values are checked when s has data): the
 * profile comes from the shards' metadata, or is inferred from which tensors are I8; exactly the profile's
 * weights are I8 with the config's [N, K], each with a "<name>_scale" F32 or BF16 [N, 1] (finite, > 0), nothing
 * else I8 and no other scale. On success *profile is set (DIT_INT8_NONE: a plain snapshot) and, when l is not
 * NULL, l (from dit_expected_tensors) is adjusted: the profile's weights expected as I8 and their scales added.
 * A breach: -1 with one line naming the tensor and the rule. */
int dit_int8_expect(const dit_config *c, const st_set *s, h3_expect_list *l, int *profile, h3_err *e);

/* The profile of a loaded model: its snapshot's, DIT_INT8_DIT_PROJ after dit_quantize_int8, else NONE. */
int dit_int8_profile(const dit_model *m);

/* --quant int8 (item 4 of docs/int8.md): the dit_proj linears of the main blocks quantized on the backend, block by
 * block, each source matrix given back once its int8 copy exists. A model loaded from an int8 snapshot is left as
 * it is. fc2_groups: the FFN down projection's input quantized per 1024 channels (--int8-fc2-groups). */
int dit_quantize_int8(dit_model *m, int fc2_groups, h3_err *e);
/* --int8-fc2-groups on a model whose int8 linears exist already (an int8 snapshot). */
int dit_int8_set_fc2_groups(dit_model *m, int on, h3_err *e);

#define DIT_INT8_FC2_GROUP 1024

#endif
