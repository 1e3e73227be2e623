/* A random LoRA in the diffusers / peft layout (docs/lora.md "Random LoRAs"): for every main block of a config, the
 * six linears a published H3 LoRA trains (attn.to_q, to_k, to_v, to_out.0, ff.net.0.proj, ff.net.2), rank r, BF16
 * factors, alpha-less (scale 1). lora_A uniform with the variance of N(0, 1/in), lora_B uniform in
 * [-0.05, 0.05] / sqrt(r) (peft would start it at 0; random, the merge changes every weight by about 2 %). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "../backend/backend_bench.h"
#include "../io/safetensors.h"
#include "dit_lora.h"

int dit_lora_write_random(const dit_config *c, int rank, uint64_t seed, const char *path, h3_err *e) {
    if (rank < 1 || rank > 4096) return h3_fail(e, "random LoRA: rank %d is not in 1..4096", rank);
    const int64_t H = c->hidden_size, I = (int64_t)c->num_attention_heads * c->attention_head_dim, FF = c->ffn_dim;
    static const char *const mod[6] = {"attn.to_q", "attn.to_k", "attn.to_v", "attn.to_out.0", "ff.net.0.proj", "ff.net.2"};
    const int64_t out[6] = {I, I, I, H, 2 * FF, H}, in[6] = {H, H, H, I, H, FF};
    st_writer *w = st_writer_new();
    if (!w) return h3_fail(e, "out of memory");
    int64_t most = 0;
    for (int j = 0; j < 6; j++) most = out[j] > most ? out[j] : most, most = in[j] > most ? in[j] : most;
    uint16_t *buf = malloc((size_t)(most * rank) * sizeof *buf);
    int rc = buf ? 0 : h3_fail(e, "out of memory");
    for (int b = 0; b < c->num_layers && rc == 0; b++)
        for (int j = 0; j < 6 && rc == 0; j++) {
            char name[160];
            const uint64_t s = seed + (uint64_t)(b * 6 + j) * 0x9e3779b97f4a7c15ull;
            const int64_t sa[2] = {rank, in[j]}, sb[2] = {out[j], rank};
            h3_fill_random_host(buf, H3_BF16, rank * in[j], s, sqrtf(3.0f / (float)in[j]), 0.0f);
            snprintf(name, sizeof name, "transformer.transformer_blocks.%d.%s.lora_A.weight", b, mod[j]);
            rc = st_writer_add(w, name, H3_BF16, 2, sa, buf, e);
            if (rc) break;
            h3_fill_random_host(buf, H3_BF16, out[j] * rank, s ^ 0xb5ad4eceda1ce2a9ull, 0.05f / sqrtf((float)rank), 0.0f);
            snprintf(name, sizeof name, "transformer.transformer_blocks.%d.%s.lora_B.weight", b, mod[j]);
            rc = st_writer_add(w, name, H3_BF16, 2, sb, buf, e);
        }
    free(buf);
    if (rc == 0) rc = st_writer_save(w, path, NULL, e);
    st_writer_free(w);
    return rc;
}
