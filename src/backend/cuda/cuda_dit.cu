/* CUDA twins of the DiT ops (ops.h): one thread per element, the CPU twin's rounding order
 * (cpu/cpu_dit.c), compiled with --fmad=false so every product and sum rounds separately. */
#include "cuda_internal.h"
#include "cuda_ops.h"

#define RND(v) (round ? round_bf16(v) : (v))
#define GRID_STRIDE(i, n) \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)
#define LAUNCH(be, n) <<<cuda_blocks((n), 256), 256, 0, cuda_of(be)->stream>>>
#define LAUNCH2(be, rows, cols) <<<grid_rows_cols((rows), (cols), 256), 256, 0, cuda_of(be)->stream>>>

static __global__ void k_adaln_modulate(float *y, const float *x, int64_t rows, int64_t dim, const float *table,
                                        int64_t table_stride, const int32_t *row_index, int64_t shift_off,
                                        int64_t scale_off, int round) {
    FOR_ROWS_COLS(r, c, rows, dim) {
        int64_t i = r * dim + c;
        const float *t = table + (int64_t)row_index[r] * table_stride;
        float one_plus = RND(1.0f + t[scale_off + c]);
        float prod = RND(x[i] * one_plus);
        y[i] = RND(prod + t[shift_off + c]);
    }
}

extern "C" void cuda_adaln_modulate(h3_backend *be, float *y, const float *x, int64_t rows, int64_t dim,
                                    const float *table, int64_t table_stride, const int32_t *row_index,
                                    int64_t shift_off, int64_t scale_off, int flags) {
    if (rows * dim <= 0) return;
    k_adaln_modulate LAUNCH2(be, rows, dim)(y, x, rows, dim, table, table_stride, row_index, shift_off, scale_off,
                                            flags & H3_BF16_OUT);
    CUDA_LAUNCHED(be, "adaln_modulate");
}

static __global__ void k_gated_residual(float *x, const float *branch, int64_t rows, int64_t dim, const float *table,
                                        int64_t table_stride, const int32_t *row_index, int64_t gate_off, int round) {
    FOR_ROWS_COLS(r, c, rows, dim) {
        int64_t i = r * dim + c;
        float g = table[(int64_t)row_index[r] * table_stride + gate_off + c];
        x[i] = RND(x[i] + RND(g * branch[i]));
    }
}

extern "C" void cuda_gated_residual(h3_backend *be, float *x, const float *branch, int64_t rows, int64_t dim,
                                    const float *table, int64_t table_stride, const int32_t *row_index,
                                    int64_t gate_off, int flags) {
    if (rows * dim <= 0) return;
    k_gated_residual LAUNCH2(be, rows, dim)(x, branch, rows, dim, table, table_stride, row_index, gate_off,
                                            flags & H3_BF16_OUT);
    CUDA_LAUNCHED(be, "gated_residual");
}

static __global__ void k_swiglu(float *y, const float *value, const float *gate, int64_t n, int round) {
    GRID_STRIDE(i, n) {
        float g = gate[i];
        float s = RND(g / (1.0f + expf(-g)));
        y[i] = RND(value[i] * s);
    }
}

extern "C" void cuda_swiglu(h3_backend *be, float *y, const float *value, const float *gate, int64_t n, int flags) {
    if (n <= 0) return;
    k_swiglu LAUNCH(be, n)(y, value, gate, n, flags & H3_BF16_OUT);
    CUDA_LAUNCHED(be, "swiglu");
}

static __global__ void k_rows_gather(float *dst, const float *src, const int32_t *index, int64_t n, int64_t dim) {
    FOR_ROWS_COLS(r, c, n, dim) dst[r * dim + c] = src[(int64_t)index[r] * dim + c];
}

extern "C" void cuda_rows_gather(h3_backend *be, float *dst, const float *src, const int32_t *index, int64_t n,
                                 int64_t dim) {
    if (n * dim <= 0) return;
    k_rows_gather LAUNCH2(be, n, dim)(dst, src, index, n, dim);
    CUDA_LAUNCHED(be, "rows_gather");
}

static __global__ void k_rows_scatter(float *dst, const float *src, const int32_t *index, int64_t n, int64_t dim,
                                      int round) {
    FOR_ROWS_COLS(r, c, n, dim) dst[(int64_t)index[r] * dim + c] = RND(src[r * dim + c]);
}

extern "C" void cuda_rows_scatter(h3_backend *be, float *dst, const float *src, const int32_t *index, int64_t n,
                                  int64_t dim, int flags) {
    if (n * dim <= 0) return;
    k_rows_scatter LAUNCH2(be, n, dim)(dst, src, index, n, dim, flags & H3_BF16_OUT);
    CUDA_LAUNCHED(be, "rows_scatter");
}

static __global__ void k_qkv_deinterleave(float *q, float *k, float *v, const float *fused, int64_t rows, int heads,
                                          int head_dim) {
    int64_t inner = (int64_t)heads * head_dim;
    FOR_ROWS_COLS(r, hd, rows, inner) {
        int64_t i = r * inner + hd;
        int h = (int)hd / head_dim, d = (int)hd - h * head_dim;
        const float *src = fused + r * 3 * inner + (int64_t)h * 3 * head_dim + d;
        q[i] = src[0];
        k[i] = src[head_dim];
        v[i] = src[2 * head_dim];
    }
}

extern "C" void cuda_qkv_deinterleave(h3_backend *be, float *q, float *k, float *v, const float *fused, int64_t rows,
                                      int heads, int head_dim) {
    int64_t n = rows * heads * head_dim;
    if (n <= 0) return;
    k_qkv_deinterleave LAUNCH2(be, rows, (int64_t)heads * head_dim)(q, k, v, fused, rows, heads, head_dim);
    CUDA_LAUNCHED(be, "qkv_deinterleave");
}

/* Rows n of W' = rows (n / block_rows) * block_stride + block_offset + n % block_rows of w, copied in
 * the stored dtype (16-bit units: every supported dtype is 2 or 4 bytes). */
static __global__ void k_gather_weight_rows(uint16_t *dst, const uint16_t *src, int64_t N, int64_t row_units,
                                            int64_t block_rows, int64_t block_stride, int64_t block_offset) {
    FOR_ROWS_COLS(n, u, N, row_units) {
        int64_t s = (n / block_rows) * block_stride + block_offset + n % block_rows; /* once per row */
        dst[n * row_units + u] = src[s * row_units + u];
    }
}

extern "C" void cuda_matmul_rows(h3_backend *be, float *y, const float *x, int64_t M, const h3_tensor *w, int64_t N,
                                 int64_t block_rows, int64_t block_stride, int64_t block_offset, int flags) {
    int64_t K = w->shape[1];
    size_t esz = h3_dtype_size(w->dtype);
    if (M <= 0 || N <= 0) return;
    h3_tensor view = *w;
    view.ndim = 2, view.shape[0] = N, view.owns_data = 0;
    if (N <= block_rows) { /* one contiguous block: a view, no copy */
        view.data = (char *)w->data + (size_t)(block_offset * K) * esz;
        cuda_matmul(be, y, x, M, &view, NULL, flags);
        return;
    }
    /* TODO(perf): a strided-batched cuBLASLt GEMM would read the blocks in place */
    int64_t units = K * (int64_t)esz / 2;
    uint16_t *g = (uint16_t *)cuda_scratch(be, (size_t)(N * units) * 2);
    if (!g) return;
    k_gather_weight_rows LAUNCH2(be, N, units)(g, (const uint16_t *)w->data, N, units, block_rows, block_stride,
                                               block_offset);
    CUDA_LAUNCHED(be, "matmul_rows gather");
    view.data = g;
    cuda_matmul(be, y, x, M, &view, NULL, flags);
    cuda_free(be, g);
}
