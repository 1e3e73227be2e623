/* CUDA twins of the VAE decoder ops (ops.h): the CPU twins' arithmetic (cpu/cpu_vae.c) in the same
 * order, compiled with --fmad=false; sums of squares in double like the twins (only the summation order
 * differs). Plus pinned host buffers and a copy stream for the decoder's asynchronous tile downloads. */
#include "cuda_ops.h"
#include "cuda_int8.h"
#include "cuda_internal.h"
#include "cuda_rowq.h"
#include "cuda_vae.h"

static __device__ __forceinline__ float bf(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

enum { RN_THREADS = 256 };

/* One block per row. VEC: dim % 4 == 0 and 16-byte aligned rows (x, scale, w) / 8-byte (branch, y). Q: the rows of
 * y also quantized (cuda_rowq.h: dim % 8 == 0, y 16-byte aligned; ops.h). */
template <int VEC, int Q>
static __global__ void k_residual_rmsnorm(float *x, uint16_t *y, const uint16_t *branch, const float *scale,
                                          int64_t rows, int64_t dim, const float *w, float eps, rowq_arg qa) {
    __shared__ double red[RN_THREADS / 32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        float *xr = x + r * dim;
        double ss = 0.0;
        if (VEC) {
            const int64_t d4 = dim / 4;
            for (int64_t c = threadIdx.x; c < d4; c += blockDim.x) {
                float4 v = ((float4 *)xr)[c];
                if (branch) {
                    uint2 b = ((const uint2 *)(branch + r * dim))[c];
                    float4 s = ((const float4 *)scale)[c];
                    v.x = v.x + s.x * __uint_as_float(b.x << 16);
                    v.y = v.y + s.y * __uint_as_float(b.x & 0xffff0000u);
                    v.z = v.z + s.z * __uint_as_float(b.y << 16);
                    v.w = v.w + s.w * __uint_as_float(b.y & 0xffff0000u);
                    ((float4 *)xr)[c] = v;
                }
                ss += (double)v.x * v.x;
                ss += (double)v.y * v.y;
                ss += (double)v.z * v.z;
                ss += (double)v.w * v.w;
            }
        } else {
            for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
                float v = xr[c];
                if (branch) {
                    v = v + scale[c] * bf(branch[r * dim + c]);
                    xr[c] = v;
                }
                ss += (double)v * v;
            }
        }
        if (y) {
            ss = cuda_block_sum_d(ss, red);
            float inv = 1.0f / sqrtf((float)(ss / (double)dim) + eps);
            uint16_t *yr = y + r * dim;
            if (VEC) {
                const int64_t d4 = dim / 4;
                for (int64_t c = threadIdx.x; c < d4; c += blockDim.x) {
                    float4 v = ((float4 *)xr)[c];
                    float o0 = v.x * inv, o1 = v.y * inv, o2 = v.z * inv, o3 = v.w * inv;
                    if (w) {
                        float4 g = ((const float4 *)w)[c];
                        o0 = o0 * g.x, o1 = o1 * g.y, o2 = o2 * g.z, o3 = o3 * g.w;
                    }
                    uint2 o;
                    o.x = (uint32_t)f32_to_bf16_bits(o0) | ((uint32_t)f32_to_bf16_bits(o1) << 16);
                    o.y = (uint32_t)f32_to_bf16_bits(o2) | ((uint32_t)f32_to_bf16_bits(o3) << 16);
                    ((uint2 *)yr)[c] = o;
                }
            } else {
                for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
                    float v = xr[c] * inv;
                    if (w) v = v * w[c];
                    yr[c] = f32_to_bf16_bits(v);
                }
            }
            if (Q) rowq_row(qa, yr, r, dim);
            __syncthreads(); /* red is reused by the next row */
        }
    }
}

static int al(const void *p, uintptr_t a) { return p == NULL || ((uintptr_t)p % a) == 0; }

extern "C" void cuda_vae_residual_rmsnorm(h3_backend *be, float *x, h3_bf16 *y, const h3_bf16 *branch,
                                          const float *scale, int64_t rows, int64_t dim, const float *w, float eps) {
    if (rows <= 0 || dim <= 0 || (!branch && !y)) return;
    int vec = dim % 4 == 0 && al(x, 16) && al(scale, 16) && al(w, 16) && al(branch, 8) && al(y, 8);
    unsigned grid = (unsigned)(rows < 65535 * 4 ? rows : 65535 * 4);
    cudaStream_t st = cuda_of(be)->stream;
    rowq_arg none = {0, NULL, NULL, 0};
    if (vec) k_residual_rmsnorm<1, 0><<<grid, RN_THREADS, 0, st>>>(x, y, branch, scale, rows, dim, w, eps, none);
    else k_residual_rmsnorm<0, 0><<<grid, RN_THREADS, 0, st>>>(x, y, branch, scale, rows, dim, w, eps, none);
    CUDA_LAUNCHED(be, "vae_residual_rmsnorm");
}

extern "C" void cuda_vae_residual_rmsnorm_q(h3_backend *be, float *x, h3_bf16 *y, const h3_bf16 *branch,
                                            const float *scale, int64_t rows, int64_t dim, const float *w, float eps,
                                            const h3_rowq *q) {
    if (!y) {
        h3_backend_unsupported(be, "h3_vae_residual_rmsnorm_q", "y is NULL (the quantized rows are y's)");
        return;
    }
    if (!h3_rowq_ok(be, "h3_vae_residual_rmsnorm_q", q, dim)) return;
    if (rows <= 0 || dim <= 0) return;
    int vec = dim % 4 == 0 && al(x, 16) && al(scale, 16) && al(w, 16) && al(branch, 8) && al(y, 8);
    if (!rowq_fusable(q, dim) || !al(y, 16)) { /* the two ops in turn */
        cuda_vae_residual_rmsnorm(be, x, y, branch, scale, rows, dim, w, eps);
        if (q->kind == H3_ROWQ_INT8) cuda_int8_quant_rows(be, (int8_t *)q->q, q->scale, y, rows, dim, dim, q->group);
        else cuda_fp8_quant_rows(be, (uint8_t *)q->q, q->scale, y, rows, dim, dim);
        return;
    }
    unsigned grid = (unsigned)(rows < 65535 * 4 ? rows : 65535 * 4);
    cudaStream_t st = cuda_of(be)->stream;
    rowq_arg qa = rowq_of(q);
    if (vec) k_residual_rmsnorm<1, 1><<<grid, RN_THREADS, 0, st>>>(x, y, branch, scale, rows, dim, w, eps, qa);
    else k_residual_rmsnorm<0, 1><<<grid, RN_THREADS, 0, st>>>(x, y, branch, scale, rows, dim, w, eps, qa);
    CUDA_LAUNCHED(be, "vae_residual_rmsnorm_q");
}

/* One warp per (row, head); head_dim <= 128. The normalized head goes through shared memory for the
 * rotate-half pairing (d, d +- rot/2). PAIR: head_dim == 64 and 4-byte aligned heads, two channels per lane
 * with 32-bit accesses. */
enum { QK_WARPS = 8, QK_MAXD = 128 };

template <int PAIR>
static __global__ void k_qk_norm_rope(uint16_t *x, int64_t rows, int64_t row_stride, int64_t period, int heads,
                                      int head_dim, float eps, int rot_dim, const float *cos, const float *sin) {
    __shared__ float buf[QK_WARPS][QK_MAXD];
    const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5, half = rot_dim / 2;
    const int64_t items = rows * heads, nwarps = (int64_t)gridDim.x * QK_WARPS;
    float *n = buf[wib];
    for (int64_t it = blockIdx.x * (int64_t)QK_WARPS + wib; it < items; it += nwarps) {
        const int64_t r = it / heads;
        const int h = (int)(it - r * heads);
        uint16_t *xh = x + r * row_stride + (int64_t)h * head_dim;
        double ss = 0.0;
        float f0 = 0.0f, f1 = 0.0f;
        if (PAIR) {
            uint32_t u = ((const uint32_t *)xh)[lane];
            f0 = __uint_as_float(u << 16), f1 = __uint_as_float(u & 0xffff0000u);
            ss = (double)f0 * f0;
            ss += (double)f1 * f1;
        } else {
            for (int d = lane; d < head_dim; d += 32) {
                float f = bf(xh[d]);
                ss += (double)f * f;
            }
        }
        for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
        float inv = 1.0f / sqrtf((float)(ss / (double)head_dim) + eps);
        if (PAIR) {
            n[2 * lane] = f0 * inv, n[2 * lane + 1] = f1 * inv;
        } else {
            for (int d = lane; d < head_dim; d += 32) n[d] = bf(xh[d]) * inv;
        }
        __syncwarp();
        const int64_t s = r % period;
        const float *cr = cos + s * rot_dim, *sr = sin + s * rot_dim;
        if (PAIR) {
            uint32_t o = 0;
#pragma unroll
            for (int j = 0; j < 2; j++) {
                const int d = 2 * lane + j;
                float val = n[d];
                if (d < rot_dim) {
                    float rot = d < half ? -n[d + half] : n[d - half];
                    float a = n[d] * cr[d], bb = rot * sr[d];
                    val = a + bb;
                }
                o |= (uint32_t)f32_to_bf16_bits(val) << (16 * j);
            }
            ((uint32_t *)xh)[lane] = o;
        } else {
            for (int d = lane; d < head_dim; d += 32) {
                float val = n[d];
                if (d < rot_dim) {
                    float rot = d < half ? -n[d + half] : n[d - half];
                    float a = n[d] * cr[d], bb = rot * sr[d];
                    val = a + bb;
                }
                xh[d] = f32_to_bf16_bits(val);
            }
        }
        __syncwarp(); /* n is rewritten by the next item */
    }
}

/* head_dim 64, 16-byte rows: a warp takes 4 heads of a row, 8 lanes per head, 8 channels (one 16-byte access) per
 * lane, so each warp keeps 512 bytes in flight (the one-head-per-warp kernel is latency-bound at ~0.8 TB/s). */
static __global__ void k_qk_norm_rope64x4(uint16_t *x, int64_t rows, int64_t row_stride, int64_t period, int heads,
                                          float eps, int rot_dim, const float *cos, const float *sin) {
    __shared__ float buf[QK_WARPS][4][64];
    const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5, hh = lane >> 3, c8 = (lane & 7) * 8, half = rot_dim / 2;
    const int groups = heads / 4;
    const int64_t items = rows * groups, nwarps = (int64_t)gridDim.x * QK_WARPS;
    float *n = buf[wib][hh];
    for (int64_t it = blockIdx.x * (int64_t)QK_WARPS + wib; it < items; it += nwarps) {
        const int64_t r = it / groups;
        const int g = (int)(it - r * groups);
        uint16_t *xh = x + r * row_stride + (int64_t)(4 * g + hh) * 64 + c8;
        uint4 u = *(const uint4 *)xh;
        uint32_t w[4] = {u.x, u.y, u.z, u.w};
        float f[8];
#pragma unroll
        for (int j = 0; j < 4; j++) f[2 * j] = __uint_as_float(w[j] << 16), f[2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
        double ss = 0.0;
#pragma unroll
        for (int j = 0; j < 8; j++) ss += (double)f[j] * f[j];
        for (int o = 1; o < 8; o <<= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
        float inv = 1.0f / sqrtf((float)(ss / 64.0) + eps);
#pragma unroll
        for (int j = 0; j < 8; j++) n[c8 + j] = f[j] * inv;
        __syncwarp();
        const int64_t s = r % period;
        const float *cr = cos + s * rot_dim, *sr = sin + s * rot_dim;
        uint32_t o[4];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int d = c8 + j;
            float val = n[d];
            if (d < rot_dim) {
                float rot = d < half ? -n[d + half] : n[d - half];
                float a = n[d] * cr[d], bb = rot * sr[d];
                val = a + bb;
            }
            uint32_t b = f32_to_bf16_bits(val);
            if (j & 1) o[j / 2] |= b << 16;
            else o[j / 2] = b;
        }
        *(uint4 *)xh = make_uint4(o[0], o[1], o[2], o[3]);
        __syncwarp(); /* n is rewritten by the next item */
    }
}

/* head_dim 64, 16-byte rows and rot_dim % 16 == 0: k_qk_norm_rope64x4's arithmetic with the rotate-half partners in
 * registers instead of shared memory. 8 lanes per head, 8 channels per lane: as rot_dim / 2 is a multiple of 8, the
 * partner of channel d (d +- rot_dim / 2) is the same slot of lane +- rot_dim / 16 in the head's 8-lane group (one
 * __shfl_sync per channel). A warp item is QK_QUADS groups of 4 heads of one row (16 heads: 4 16-byte loads per lane
 * issued before any is used, where k_qk_norm_rope64x4 keeps one in flight) plus the row's cos/sin as float4s. The
 * sum of squares, its shuffle tree and every product are those of k_qk_norm_rope64x4: the same bits (HW: the
 * output rounding through cvt.rn.bf16.f32, the same bits as the integer form, cuda_internal.h). */
enum { QK_QUADS = 4 };
template <int HW>
static __global__ void __launch_bounds__(QK_WARPS * 32)
    k_qk_norm_rope64_shfl(uint16_t *x, int64_t rows, int64_t row_stride, int64_t period, int heads, float eps,
                          int rot_dim, const float *cos, const float *sin) {
    const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5, sub = lane & 7, c8 = sub * 8, half = rot_dim / 2;
    const int quads = heads / 4, per_row = (quads + QK_QUADS - 1) / QK_QUADS;
    const int lo = c8 < half, rotl = c8 < rot_dim; /* this lane's 8 channels: first half / rotated at all */
    const int partner = (lane & ~7) | (lo ? sub + half / 8 : sub - half / 8);
    const int64_t items = rows * per_row, nwarps = (int64_t)gridDim.x * QK_WARPS;
    for (int64_t it = blockIdx.x * (int64_t)QK_WARPS + wib; it < items; it += nwarps) {
        const int64_t r = it / per_row;
        const int q0 = (int)(it - r * per_row) * QK_QUADS;
        /* this lane's 8 channels of head 4 q + lane / 8 at xr[32 q] (uint4-typed: nvcc keeps the stores 16-byte) */
        uint4 *xr = (uint4 *)(x + r * row_stride + (lane >> 3) * 64 + c8);
        uint4 u[QK_QUADS];
#pragma unroll
        for (int i = 0; i < QK_QUADS; i++)
            u[i] = q0 + i < quads ? xr[(int64_t)(q0 + i) * 32] : make_uint4(0u, 0u, 0u, 0u);
        float cs[8] = {0.0f}, sn[8] = {0.0f};
        if (rotl) {
            const int64_t s = r % period;
            load8f(cs, cos + s * rot_dim + c8), load8f(sn, sin + s * rot_dim + c8);
        }
#pragma unroll
        for (int i = 0; i < QK_QUADS; i++) {
            if (q0 + i >= quads) break; /* warp-uniform */
            uint32_t w[4] = {u[i].x, u[i].y, u[i].z, u[i].w};
            float f[8];
#pragma unroll
            for (int j = 0; j < 4; j++) f[2 * j] = __uint_as_float(w[j] << 16), f[2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
            double ss = 0.0;
#pragma unroll
            for (int j = 0; j < 8; j++) ss += (double)f[j] * f[j];
            for (int o = 1; o < 8; o <<= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
            const float inv = 1.0f / sqrtf((float)(ss / 64.0) + eps);
            float n[8], p[8];
#pragma unroll
            for (int j = 0; j < 8; j++) n[j] = f[j] * inv;
#pragma unroll
            for (int j = 0; j < 8; j++) p[j] = __shfl_sync(0xffffffffu, n[j], partner);
            float v[8];
#pragma unroll
            for (int j = 0; j < 8; j++) { /* computed on every lane, kept where rotated (a select, no branch) */
                float rot = lo ? -p[j] : p[j];
                float a = n[j] * cs[j], bb = rot * sn[j];
                v[j] = rotl ? a + bb : n[j];
            }
            uint32_t o[4];
#pragma unroll
            for (int j = 0; j < 4; j++) o[j] = pack2<HW>(v[2 * j], v[2 * j + 1]);
            xr[(int64_t)(q0 + i) * 32] = make_uint4(o[0], o[1], o[2], o[3]);
        }
    }
}

extern "C" void cuda_vae_qk_norm_rope(h3_backend *be, h3_bf16 *x, int64_t rows, int64_t row_stride, int64_t period,
                                      int heads, int head_dim, float eps, int rot_dim, const float *cos,
                                      const float *sin) {
    if (rows <= 0 || heads <= 0) return;
    if (head_dim > QK_MAXD || rot_dim > head_dim || period <= 0) {
        cuda_record_error(be, "vae_qk_norm_rope", "head_dim must be <= 128, rot_dim <= head_dim, period > 0");
        return;
    }
    int64_t items = rows * heads, blocks = (items + QK_WARPS - 1) / QK_WARPS;
    if (blocks > 16384) blocks = 16384;
    int pair = head_dim == 64 && row_stride % 2 == 0 && al(x, 4);
    cudaStream_t st = cuda_of(be)->stream;
    if (head_dim == 64 && heads % 4 == 0 && row_stride % 8 == 0 && al(x, 16) && rot_dim >= 0 && rot_dim % 16 == 0 &&
        al(cos, 16) && al(sin, 16)) { /* the release decoder: rope 48 of 64 */
        const int64_t per_row = (heads / 4 + QK_QUADS - 1) / QK_QUADS;
        int64_t bs = (rows * per_row + QK_WARPS - 1) / QK_WARPS;
        if (bs > 16384) bs = 16384;
        if (cuda_of(be)->bf16_hw_round == 2)
            k_qk_norm_rope64_shfl<2><<<(unsigned)bs, QK_WARPS * 32, 0, st>>>(x, rows, row_stride, period, heads, eps,
                                                                             rot_dim, cos, sin);
        else if (cuda_of(be)->bf16_hw_round)
            k_qk_norm_rope64_shfl<1><<<(unsigned)bs, QK_WARPS * 32, 0, st>>>(x, rows, row_stride, period, heads, eps,
                                                                             rot_dim, cos, sin);
        else
            k_qk_norm_rope64_shfl<0><<<(unsigned)bs, QK_WARPS * 32, 0, st>>>(x, rows, row_stride, period, heads, eps,
                                                                             rot_dim, cos, sin);
    } else if (head_dim == 64 && heads % 4 == 0 && row_stride % 8 == 0 && al(x, 16)) {
        int64_t b4 = (rows * (heads / 4) + QK_WARPS - 1) / QK_WARPS;
        if (b4 > 16384) b4 = 16384;
        k_qk_norm_rope64x4<<<(unsigned)b4, QK_WARPS * 32, 0, st>>>(x, rows, row_stride, period, heads, eps, rot_dim,
                                                                   cos, sin);
    } else if (pair)
        k_qk_norm_rope<1><<<(unsigned)blocks, QK_WARPS * 32, 0, st>>>(x, rows, row_stride, period, heads, head_dim, eps,
                                                                      rot_dim, cos, sin);
    else
        k_qk_norm_rope<0><<<(unsigned)blocks, QK_WARPS * 32, 0, st>>>(x, rows, row_stride, period, heads, head_dim, eps,
                                                                      rot_dim, cos, sin);
    CUDA_LAUNCHED(be, "vae_qk_norm_rope");
}

/* ---- attention over the tiles of a batch ---- */

/* Tile t's q/k/v rows at qkv + t*N*3D (k at +D, v at +2D, head stride head_dim), its output at out + t*N*D.
 * Order: the own Hopper kernel over all tiles in one launch (head_dim 64 / 128), one batched cuDNN SDPA,
 * then per tile. H3_VAE_ATTN=cudnn skips the own kernel (the cuDNN batched path as before); =tile runs one
 * call per tile (the own kernel per tile, else h3_bf16_attention's chain): a comparison for the batched
 * results (the own kernel's batched and per-tile results are bit-identical). */
extern "C" void cuda_vae_tile_attention(h3_backend *be, h3_bf16 *out, const h3_bf16 *qkv, int64_t tiles, int64_t N,
                                        int heads, int head_dim, float scale) {
    if (tiles <= 0 || N <= 0) return;
    const int64_t D = (int64_t)heads * head_dim, ld = 3 * D;
    const int64_t bst[4] = {N * ld, N * ld, N * ld, N * D};
    const char *mode = h3_knob_get(H3_KNOB_VAE_ATTN);
    const int per_tile = mode && !strcmp(mode, "tile"), use_cudnn = mode && !strcmp(mode, "cudnn");
    if (!per_tile && !use_cudnn &&
        cuda_flash_sm90_batched(be, tiles, N * ld, N * ld, N * ld, N * D, out, D, head_dim, qkv, ld, head_dim, qkv + D,
                                ld, head_dim, qkv + 2 * D, ld, head_dim, N, N, heads, heads, head_dim, scale) == 0)
        return;
    if (!per_tile && cuda_cudnn_attention_bf16_batched(be, tiles, bst, out, D, qkv, ld, head_dim, qkv + D, ld, head_dim,
                                                       qkv + 2 * D, ld, head_dim, N, N, heads, heads, head_dim,
                                                       scale) == 0)
        return;
    for (int64_t t = 0; t < tiles; t++) {
        const h3_bf16 *q = qkv + t * N * ld;
        h3_bf16 *o = out + t * N * D;
        if (!use_cudnn && cuda_flash_sm90(be, o, D, head_dim, q, ld, head_dim, q + D, ld, head_dim, q + 2 * D, ld,
                                          head_dim, N, N, heads, heads, head_dim, scale) == 0)
            continue;
        cuda_bf16_attention(be, o, D, q, ld, head_dim, q + D, ld, head_dim, q + 2 * D, ld, head_dim, N, N, heads, heads,
                            head_dim, scale);
    }
}

/* ---- pinned host buffers, asynchronous downloads ---- */

/* cudaHostAlloc pins page by page (slow: ~0.1 s per GB, more in a VM), so the backend keeps the pinned buffers it
 * made and a later decoder on the same backend (the next generation of a session) reuses them: a free marks the
 * buffer unused, an allocation takes the smallest unused buffer that is large enough. All are released at
 * shutdown (cuda_vae_pin_release). Buffers beyond the table's CUDA_PIN_CACHE entries are not kept. The table is
 * locked: h3_host_prefetch fills it from a second thread while the main thread runs the DiT. */
extern "C" void *cuda_host_alloc(h3_backend *be, size_t bytes) {
    cuda_impl *c = cuda_of(be);
    if (!bytes) bytes = 1;
    pthread_mutex_lock(&c->pin_lock);
    int best = -1;
    /* at most twice the size asked for: a staging buffer must not take (and, the weight slots' copier, keep) the
     * decoder's ~400 MB download buffers that h3_host_prefetch made for it */
    for (int i = 0; i < CUDA_PIN_CACHE; i++)
        if (c->pin_ptr[i] && !c->pin_used[i] && c->pin_bytes[i] >= bytes && c->pin_bytes[i] / 2 <= bytes &&
            (best < 0 || c->pin_bytes[i] < c->pin_bytes[best]))
            best = i;
    if (best >= 0) c->pin_used[best] = 1;
    pthread_mutex_unlock(&c->pin_lock);
    if (best >= 0) return c->pin_ptr[best];
    /* pinning takes long: not under the lock, so the other thread's takes of kept buffers do not wait for it */
    void *p = NULL;
    cudaSetDevice(c->device); /* this thread may not have used the device yet */
    if (cudaHostAlloc(&p, bytes, cudaHostAllocDefault) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    pthread_mutex_lock(&c->pin_lock);
    int slot = -1;
    for (int i = 0; i < CUDA_PIN_CACHE && slot < 0; i++)
        if (!c->pin_ptr[i]) slot = i;
    if (slot < 0) /* table full: drop the largest unused buffer to make room */
        for (int i = 0; i < CUDA_PIN_CACHE; i++)
            if (!c->pin_used[i] && (slot < 0 || c->pin_bytes[i] > c->pin_bytes[slot])) slot = i;
    if (slot >= 0) {
        if (c->pin_ptr[slot]) cudaFreeHost(c->pin_ptr[slot]);
        c->pin_ptr[slot] = p, c->pin_bytes[slot] = bytes, c->pin_used[slot] = 1;
    }
    pthread_mutex_unlock(&c->pin_lock);
    return p; /* not kept when every entry is in use: cuda_host_free then frees it */
}

extern "C" void cuda_host_free(h3_backend *be, void *p) {
    if (!p) return;
    cuda_impl *c = cuda_of(be);
    pthread_mutex_lock(&c->pin_lock);
    int kept = 0;
    for (int i = 0; i < CUDA_PIN_CACHE && !kept; i++)
        if (c->pin_ptr[i] == p) c->pin_used[i] = 0, kept = 1;
    pthread_mutex_unlock(&c->pin_lock);
    if (!kept) CUDA_OK(be, cudaFreeHost(p));
}

extern "C" void cuda_vae_pin_release(h3_backend *be) {
    cuda_impl *c = cuda_of(be);
    pthread_mutex_lock(&c->pin_lock);
    for (int i = 0; i < CUDA_PIN_CACHE; i++) {
        if (c->pin_ptr[i]) cudaFreeHost(c->pin_ptr[i]);
        c->pin_ptr[i] = NULL, c->pin_bytes[i] = 0, c->pin_used[i] = 0;
    }
    pthread_mutex_unlock(&c->pin_lock);
}

typedef struct vae_xfer {
    cudaStream_t copy;
    cudaEvent_t  ready[2], done[2];
    int          pending[2];
} vae_xfer;

extern "C" void *cuda_xfer_new(h3_backend *be) {
    vae_xfer *x = (vae_xfer *)calloc(1, sizeof *x);
    if (!x) return NULL;
    int ok = cudaStreamCreateWithFlags(&x->copy, cudaStreamNonBlocking) == cudaSuccess;
    for (int i = 0; i < 2 && ok; i++)
        ok = cudaEventCreateWithFlags(&x->ready[i], cudaEventDisableTiming) == cudaSuccess &&
             cudaEventCreateWithFlags(&x->done[i], cudaEventDisableTiming) == cudaSuccess;
    if (!ok) {
        cuda_record_error(be, "vae_xfer_new", cudaGetErrorString(cudaGetLastError()));
        free(x);
        return NULL;
    }
    return x;
}

extern "C" void cuda_xfer_free(h3_backend *be, void *p) {
    vae_xfer *x = (vae_xfer *)p;
    if (!x) return;
    CUDA_OK(be, cudaStreamSynchronize(x->copy));
    for (int i = 0; i < 2; i++) {
        cudaEventDestroy(x->ready[i]);
        cudaEventDestroy(x->done[i]);
    }
    cudaStreamDestroy(x->copy);
    free(x);
}

extern "C" void cuda_download_async(h3_backend *be, void *p, int slot, void *dst, const void *src, size_t bytes) {
    vae_xfer *x = (vae_xfer *)p;
    slot &= 1;
    CUDA_OK(be, cudaEventRecord(x->ready[slot], cuda_of(be)->stream));
    CUDA_OK(be, cudaStreamWaitEvent(x->copy, x->ready[slot], 0));
    CUDA_OK(be, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, x->copy));
    CUDA_OK(be, cudaEventRecord(x->done[slot], x->copy));
    x->pending[slot] = 1;
}

extern "C" void cuda_download_wait(h3_backend *be, void *p, int slot) {
    vae_xfer *x = (vae_xfer *)p;
    slot &= 1;
    if (!x->pending[slot]) return;
    CUDA_OK(be, cudaEventSynchronize(x->done[slot]));
    x->pending[slot] = 0;
}
