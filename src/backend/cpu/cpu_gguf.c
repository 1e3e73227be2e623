/* CPU twins of the GGUF block ops (ops_linear.h): the dequantization is gguf_dequantize (src/io/gguf_dequant.c,
 * ggml's reference arithmetic) followed by h3_f32_to_bf16, exactly what the dequantize-at-load path stores
 * (gguf_view_as), in chunks on the OpenMP threads. */
#include "cpu_ops.h"

#include "../../core/dtype.h"
#include "../../io/gguf.h"
#include "../gguf_random.h"

enum { CHUNK = 4096 }; /* values per task: a multiple of every block (1, 32, 256) */

void cpu_gguf_dequant(h3_backend *be, h3_bf16 *dst, const void *src, uint32_t type, int64_t n) {
    int64_t bv, bb;
    if (!gguf_type_block(type, &bv, &bb, NULL) || n < 0 || n % bv) {
        h3_backend_unsupported(be, "gguf_dequant", "a GGUF type h3 does not read, or a partial block");
        return;
    }
    const int64_t chunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static) if (n >= 65536)
    for (int64_t c = 0; c < chunks; c++) {
        float y[CHUNK];
        const int64_t v0 = c * CHUNK, len = n - v0 < CHUNK ? n - v0 : CHUNK;
        gguf_dequantize(type, (const uint8_t *)src + v0 / bv * bb, y, len);
        for (int64_t i = 0; i < len; i++) dst[v0 + i] = h3_f32_to_bf16(y[i]);
    }
}

void cpu_gguf_fill_random(h3_backend *be, void *dst, uint32_t type, int64_t nblk, uint64_t seed, float scale) {
    const int exp2 = h3_gguf_scale_exp2(scale);
    int64_t bv, bb;
    if (!gguf_type_block(type, &bv, &bb, NULL) || nblk < 0) {
        h3_backend_unsupported(be, "gguf_fill_random", "a GGUF type h3 does not read");
        return;
    }
#pragma omp parallel for schedule(static) if (nblk >= 4096)
    for (int64_t i = 0; i < nblk; i++) gguf_random_block((uint8_t *)dst + i * bb, type, bb, (uint64_t)i, seed, exp2);
}
