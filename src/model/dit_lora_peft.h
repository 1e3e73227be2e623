/* diffusers' `lora_adapter_metadata` (docs/lora.md "peft's LoraConfig in the file"): the peft LoraConfig a file
 * written by diffusers' save_lora_weights carries in its __metadata__, as JSON under the component's prefix
 * ("transformer.r", "transformer.lora_alpha", ...). When it is there, diffusers builds the adapter from it and not
 * from the tensors: each module's rank and alpha come from its rank_pattern / alpha_pattern entry (peft's first
 * pattern P with re.match("(.*\.)?(P)$", module)) or from r / lora_alpha, and its scaling is alpha / r, or
 * alpha / sqrt(r) with use_rslora. Which modules are adapted is still decided by the file's tensors (diffusers
 * injects from the state dict), so target_modules and the like are not read. */
#ifndef H3_DIT_LORA_PEFT_H
#define H3_DIT_LORA_PEFT_H

#include "../core/error.h"

typedef struct lora_peft lora_peft;

/* From a file's __metadata__ JSON (NULL or without lora_adapter_metadata: *out = NULL, 0), the entries under
 * `prefix` ("transformer" or "transformer_ref"). A config diffusers could not build or h3 does not apply (DoRA,
 * layer replication, no entry under the prefix, a field of the wrong type, a pattern that is no regular expression
 * h3 evaluates): -1 with one line naming the file, the field and the rule. */
int  lora_peft_parse(const char *metadata_json, const char *prefix, const char *path, lora_peft **out, h3_err *e);
/* The scaling of `module` (a diffusers module name without the prefix, e.g. transformer_blocks.0.attn.to_q) for a
 * LoRA weight `scale`: scale * alpha / r (scale * alpha / sqrt(r) with use_rslora), in double as peft's set_scale.
 * -1 when the config's rank for the module is not the factors' `rank` (diffusers fails on the size mismatch);
 * `key` names the file's tensor in the message. */
int  lora_peft_scaling(const lora_peft *p, const char *module, int rank, double scale, double *scaling,
                       const char *path, const char *key, h3_err *e);
void lora_peft_free(lora_peft *p);

#endif
