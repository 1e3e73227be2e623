/* One test harness for the backend ops (docs/testing.md), in the spirit of ggml's test-backend-ops: a table of
 * cases (op, shapes, dtypes, flags, tolerance or bit-identical) run on every backend present against the CPU
 * twin. The CPU pass (CI, `make test`) runs the CPU rows: 1 thread against n threads bit for bit, plus each
 * case's own assertions (double-precision references, aliasing, bf16-only outputs, the fp8 fixture). Built with
 * CUDA=1 the same binary then runs the CUDA pass: every row's CUDA op against its CPU twin within the row's
 * tolerance; without a GPU at run time it says so and runs the CPU pass only.
 *
 *   test_backend_ops [--perf [--reps N]] [--op NAME] [--backend cpu|cuda] [--big] [--list]
 *
 * --perf times each case (warm-up, then N calls between h3_sync; TFLOP/s or GB/s) and runs the release-shape
 * rows; it asserts nothing (timings are benchmarks, not tests). --op runs the rows of one op (the name without
 * h3_), --backend one pass (cuda: absent CUDA is a failure), --big the CUDA-sized rows on the CPU pass too.
 * Output: one line per check, "[backend] name ...", and RESULT <passed> <failed>.
 *
 * The rows replace tests/cuda/test_cuda_ops.c, test_cuda_ops2.c, test_cuda_bf16.c, test_cuda_fp8.c and the
 * per-op timings of bench_cuda_ops.c; docs/testing.md maps each of their checks to its row here. */
#include "backend_ops/bo_core.h"
#include "backend_ops/ops_f32.h"
#include "backend_ops/ops_enc.h"
#include "backend_ops/ops_bf16.h"
#include "backend_ops/ops_fp8.h"
#include "backend_ops/ops_int8.h"
#include "backend_ops/ops_sage8.h"
#include "backend_ops/ops_fusedq.h"
#include "backend_ops/ops_gguf.h"
#include "backend_ops/ops_lora.h"

#define F32 H3_F32
#define BF16 H3_BF16
#define F16 H3_F16
#define BO H3_BF16_OUT
#define CUDA_ONLY BO_CUDA
#define PERF (BO_CUDA | BO_PERF_ONLY)
/* conv3d geometries: cin, tin, hin, win, cout, kt, kh, kw, st, sh, sw, pt0, ph0, ph1, pw0, pw1, pad, bias */
#define K3_REFLECT(ci, t, h, w, co) ci, t, h, w, co, 3, 3, 3, 1, 1, 1, 2, 1, 1, 1, 1, H3_PAD_REFLECT

static const bo_row rows[] = {
    /* ---- test_cuda_ops.c: matmul (a: M N K wdtype bias bdtype x-offset widen-tile) ---- */
    {"matmul", "F32 w 77x130x96 +F32 bias (fp32 SGEMM)", c_matmul, {77, 130, 96, F32, 1, F32}, 0, 1e-5, BO_ALL, NULL},
    {"matmul", "F32 w 64x256x5376 (fp32 SGEMM, long K)", c_matmul, {64, 256, 5376, F32, 0, F32}, 0, 1e-5, BO_ALL, NULL},
    {"matmul", "F32 w, x misaligned by 4 bytes, +BF16 bias", c_matmul, {33, 40, 25, F32, 1, BF16, 1}, 0, 1e-5, BO_ALL, NULL},
    {"matmul", "BF16 w widened to fp32, 4 tiles, +BF16 bias", c_matmul, {77, 130, 96, BF16, 1, BF16, 0, 40 * 96}, 0, 1e-5, BO_ALL, NULL},
    {"matmul", "F16 w widened to fp32 300x384x512", c_matmul, {300, 384, 512, F16, 0, F32}, 0, 1e-5, BO_ALL, NULL},
    {"matmul", "BF16 w [bf16] tensor cores 300x384x512 +bias", c_matmul, {300, 384, 512, BF16, 1, BF16}, BO, 3e-2, BO_ALL, NULL},
    {"matmul", "BF16 w [bf16] tensor cores 257x1000x5376", c_matmul, {257, 1000, 5376, BF16, 0, F32}, BO, 3e-2, BO_ALL, NULL},
    {"matmul", "F32 w [bf16] (fp32 SGEMM + rounding)", c_matmul, {100, 96, 128, F32, 1, F32}, BO, 3e-2, BO_ALL, NULL},
    {"matmul", "F16 w, H3_F16_IN, fp16 tensor cores 1792x3072x2048 +F16 bias", c_matmul, {1792, 3072, 2048, F16, 1, F16}, H3_F16_IN, 1e-5, CUDA_ONLY, NULL},
    {"matmul", "F16 w, H3_F16_IN, 300x384x512 +F16 bias", c_matmul, {300, 384, 512, F16, 1, F16}, H3_F16_IN, 1e-5, BO_CPU, NULL},
    {"matmul", "F16 w, H3_F16_IN, 77x130x96, x misaligned", c_matmul, {77, 130, 96, F16, 1, F16, 1}, H3_F16_IN, 1e-5, BO_ALL, NULL},
    {"matmul", "F16 w, H3_F16_IN, H3_CUDA_PRECISION=fp32 300x384x512 +F16 bias", c_matmul, {300, 384, 512, F16, 1, F16}, H3_F16_IN, 1e-5, CUDA_ONLY, "H3_CUDA_PRECISION=fp32"},
    /* attention (a: Sq Skv Hq Hkv D causal amp*1000 no-cuDNN) */
    {"attention", "fp32 S150 Hq4 Hkv2 D64", c_attention, {150, 150, 4, 2, 64, 0, 1000}, 0, 1e-5, BO_ALL, NULL},
    {"attention", "fp32 causal S97 H3 D48", c_attention, {97, 97, 3, 3, 48, 1, 2000}, 0, 1e-5, BO_ALL, NULL},
    {"attention", "fp32 cross Sq37 Skv300 Hq2 Hkv1 D16", c_attention, {37, 300, 2, 1, 16, 0, 2000}, 0, 1e-5, BO_ALL, NULL},
    {"attention", "fp32 S200 H2 D128", c_attention, {200, 200, 2, 2, 128, 0, 2000}, 0, 1e-5, BO_ALL, NULL},
    {"attention", "fp32 S40 H1 D256", c_attention, {40, 40, 1, 1, 256, 0, 1000}, 0, 1e-5, BO_ALL, NULL},
    {"attention", "[bf16] flash S300 Hq4 Hkv2 D128 (cuDNN SDPA first)", c_attention, {300, 300, 4, 2, 128, 0, 2000}, BO, 3e-2, BO_ALL, NULL},
    {"attention", "[bf16] flash causal S257 H2 D128 (cuDNN first: own kernel)", c_attention, {257, 257, 2, 2, 128, 1, 2000}, BO, 3e-2, BO_ALL, NULL},
    {"attention", "[bf16] flash cross Sq100 Skv700 Hq4 Hkv1 D64 (cuDNN first)", c_attention, {100, 700, 4, 1, 64, 0, 2000}, BO, 3e-2, BO_ALL, NULL},
    {"attention", "[bf16] flash causal S200 H2 D64 (cuDNN first)", c_attention, {200, 200, 2, 2, 64, 1, 2000}, BO, 3e-2, BO_ALL, NULL},
    {"attention", "[bf16] flash S2122 H4 D128 (DiT S, cuDNN first)", c_attention, {2122, 2122, 4, 4, 128, 0, 3000}, BO, 3e-2, CUDA_ONLY, NULL},
    {"attention", "[bf16] flash S300 Hq4 Hkv2 D128 (own flash kernel)", c_attention, {300, 300, 4, 2, 128, 0, 2000, 1}, BO, 3e-2, CUDA_ONLY, NULL},
    {"attention", "[bf16] flash causal S257 H2 D128 (own flash kernel)", c_attention, {257, 257, 2, 2, 128, 1, 2000, 1}, BO, 3e-2, CUDA_ONLY, NULL},
    {"attention", "[bf16] flash cross Sq100 Skv700 Hq4 Hkv1 D64 (own flash kernel)", c_attention, {100, 700, 4, 1, 64, 0, 2000, 1}, BO, 3e-2, CUDA_ONLY, NULL},
    {"attention", "[bf16] flash causal S200 H2 D64 (own flash kernel)", c_attention, {200, 200, 2, 2, 64, 1, 2000, 1}, BO, 3e-2, CUDA_ONLY, NULL},
    {"attention", "[bf16] flash S2122 H4 D128 (DiT S, own flash kernel)", c_attention, {2122, 2122, 4, 4, 128, 0, 3000, 1}, BO, 3e-2, CUDA_ONLY, NULL},
    {"attention", "[bf16] D48 falls back to the fp32 kernel", c_attention, {90, 90, 2, 2, 48, 0, 2000}, BO, 3e-2, BO_ALL, NULL},
    /* norms (a: rows dim which N C groups) */
    {"rmsnorm", "37x5376 gain", c_norm, {37, 5376, 0}, 0, 1e-6, BO_ALL, NULL},
    {"rmsnorm", "in place 2072x128 no gain", c_norm, {2072, 128, 1}, 0, 1e-6, BO_ALL, NULL},
    {"layernorm", "37x5376 w+b", c_norm, {37, 5376, 2}, 0, 1e-6, BO_ALL, NULL},
    {"layernorm", "37x5376 plain", c_norm, {37, 5376, 3}, 0, 1e-6, BO_ALL, NULL},
    {"groupnorm", "N2 C64 L1554 g8", c_norm, {37, 5376, 4, 2, 64, 8}, 0, 1e-6, BO_ALL, NULL},
    {"rmsnorm", "37x5376 gain [bf16]", c_norm, {37, 5376, 0}, BO, 1e-2, BO_ALL, NULL},
    {"rmsnorm", "in place 2072x128 no gain [bf16]", c_norm, {2072, 128, 1}, BO, 1e-2, BO_ALL, NULL},
    {"layernorm", "37x5376 w+b [bf16]", c_norm, {37, 5376, 2}, BO, 1e-2, BO_ALL, NULL},
    {"layernorm", "37x5376 plain [bf16]", c_norm, {37, 5376, 3}, BO, 1e-2, BO_ALL, NULL},
    {"groupnorm", "N2 C64 L1554 g8 [bf16]", c_norm, {37, 5376, 4, 2, 64, 8}, BO, 1e-2, BO_ALL, NULL},
    /* rope (a: rows heads head_dim rot padding) */
    {"rope_half", "45 rows x 6x128, rot 96", c_rope, {45, 6, 128, 96, 40}, 0, 1e-6, BO_ALL, NULL},
    {"rope_half", "45 rows x 6x128, rot 96 [bf16]", c_rope, {45, 6, 128, 96, 40}, BO, 1e-2, BO_ALL, NULL},
    /* element-wise (a: which n rows dim), odd sizes: tails */
    {"silu", "n=1000003", c_eltwise, {0, 1000003}, 0, 1e-6, BO_ALL, NULL},
    {"gelu_tanh", "n=1000003", c_eltwise, {1, 1000003}, 0, 1e-6, BO_ALL, NULL},
    {"gelu_erf", "n=1000003", c_eltwise, {2, 1000003}, 0, 1e-6, BO_ALL, NULL},
    {"add", "n=1000003", c_eltwise, {3, 1000003}, 0, 1e-6, BO_ALL, NULL},
    {"mul", "n=1000003", c_eltwise, {4, 1000003}, 0, 1e-6, BO_ALL, NULL},
    {"scale", "n=1000003", c_eltwise, {5, 1000003}, 0, 1e-6, BO_ALL, NULL},
    {"add_bias", "211x4739 in place", c_eltwise, {6, 0, 211, 4739}, 0, 1e-6, BO_ALL, NULL},
    {"round_bf16_buf", "n=1000003 (exact)", c_eltwise, {7, 1000003}, 0, 0.0, BO_ALL, NULL},
    {"silu", "n=1000003 [bf16]", c_eltwise, {0, 1000003}, BO, 1e-2, BO_ALL, NULL},
    {"gelu_tanh", "n=1000003 [bf16]", c_eltwise, {1, 1000003}, BO, 1e-2, BO_ALL, NULL},
    {"gelu_erf", "n=1000003 [bf16]", c_eltwise, {2, 1000003}, BO, 1e-2, BO_ALL, NULL},
    {"add", "n=1000003 [bf16]", c_eltwise, {3, 1000003}, BO, 1e-2, BO_ALL, NULL},
    {"mul", "n=1000003 [bf16]", c_eltwise, {4, 1000003}, BO, 1e-2, BO_ALL, NULL},
    {"scale", "n=1000003 [bf16]", c_eltwise, {5, 1000003}, BO, 1e-2, BO_ALL, NULL},
    {"add_bias", "211x4739 in place [bf16]", c_eltwise, {6, 0, 211, 4739}, BO, 1e-2, BO_ALL, NULL},
    /* DiT ops (a: which rows dim table-rows) */
    {"adaln_modulate", "300x5376", c_dit, {0, 300, 5376, 9}, 0, 1e-6, BO_ALL, NULL},
    {"gated_residual", "300x5376", c_dit, {1, 300, 5376, 9}, 0, 1e-6, BO_ALL, NULL},
    {"swiglu", "n=1612800", c_dit, {2, 300, 5376, 9}, 0, 1e-6, BO_ALL, NULL},
    {"rows_gather", "100 of 300 rows", c_dit, {3, 300, 5376, 9}, 0, 0.0, BO_ALL, NULL},
    {"rows_scatter", "100 into 300 rows", c_dit, {4, 300, 5376, 9}, 0, 0.0, BO_ALL, NULL},
    {"qkv_deinterleave", "50 rows x 7 heads x 128", c_dit, {5, 50, 7 * 128, 9}, 0, 0.0, BO_ALL, NULL},
    /* copy_2d (a: rows width src-pitch dst-pitch, bytes): sequence parallelism's head pieces (docs/parallel.md) */
    {"copy_2d", "257 rows x 384 of 1152 into pitch 768", c_copy_2d, {257, 384, 1152, 768}, 0, 0.0, BO_ALL, NULL},
    {"copy_2d", "33 rows x 6 bytes, odd pitches 7 -> 11", c_copy_2d, {33, 6, 7, 11}, 0, 0.0, BO_ALL, NULL},
    {"adaln_modulate", "300x5376 [bf16]", c_dit, {0, 300, 5376, 9}, BO, 1e-2, BO_ALL, NULL},
    {"gated_residual", "300x5376 [bf16]", c_dit, {1, 300, 5376, 9}, BO, 1e-2, BO_ALL, NULL},
    {"swiglu", "n=1612800 [bf16]", c_dit, {2, 300, 5376, 9}, BO, 1e-2, BO_ALL, NULL},
    {"rows_gather", "100 of 300 rows [bf16 inputs]", c_dit, {3, 300, 5376, 9}, BO, 0.0, BO_ALL, NULL},
    {"rows_scatter", "100 into 300 rows [bf16]", c_dit, {4, 300, 5376, 9}, BO, 0.0, BO_ALL, NULL},
    /* matmul_rows (a: M K N block_rows block_stride block_offset weight-rows) */
    {"matmul_rows", "interleaved k rows", c_matmul_rows, {70, 96, 128, 32, 96, 32, 384}, 0, 1e-5, BO_ALL, NULL},
    {"matmul_rows", "contiguous rows 20..119", c_matmul_rows, {70, 96, 100, 100, 0, 20, 384}, 0, 1e-5, BO_ALL, NULL},
    {"matmul_rows", "interleaved k rows [bf16]", c_matmul_rows, {70, 96, 128, 32, 96, 32, 384}, BO, 3e-2, BO_ALL, NULL},
    {"matmul_rows", "contiguous rows 20..119 [bf16]", c_matmul_rows, {70, 96, 100, 100, 0, 20, 384}, BO, 3e-2, BO_ALL, NULL},

    /* ---- test_cuda_ops2.c ---- */
    {"supported", "audio and conv twins present", c_supported, {0}, 0, 0.0, BO_ALL, NULL},
    {"rmsnorm_qwen", "37x4096", c_rmsnorm_qwen, {37, 4096, 0}, 0, 0.0, BO_ALL, NULL},
    {"rmsnorm_qwen", "37x4096 [bf16]", c_rmsnorm_qwen, {37, 4096, 0}, BO, 0.0, BO_ALL, NULL},
    {"rmsnorm_qwen", "2000x128 in place", c_rmsnorm_qwen, {2000, 128, 1}, 0, 0.0, BO_ALL, NULL},
    {"rmsnorm_qwen", "2000x128 in place [bf16]", c_rmsnorm_qwen, {2000, 128, 1}, BO, 0.0, BO_ALL, NULL},
    {"rmsnorm_qwen", "5x1001", c_rmsnorm_qwen, {5, 1001, 0}, 0, 0.0, BO_ALL, NULL},
    {"rows_add", "33 of 90 rows x 1000", c_rows_add, {0}, 0, 0.0, BO_ALL, NULL},
    {"rows_add", "33 of 90 rows x 1000 [bf16]", c_rows_add, {0}, BO, 0.0, BO_ALL, NULL},
    {"attention_eager", "[bf16] causal S300 Hq8 Hkv2 D128 (text)", c_attention_eager, {300, 8, 2, 128, 1, 2000}, BO, 1e-2, BO_ALL, NULL},
    {"attention_eager", "[bf16] causal S77 Hq4 Hkv1 D64", c_attention_eager, {77, 4, 1, 64, 1, 3000}, BO, 1e-2, BO_ALL, NULL},
    {"attention_eager", "[bf16] S500 H4 D72 (vision)", c_attention_eager, {500, 4, 4, 72, 0, 2000}, BO, 1e-2, BO_ALL, NULL},
    {"attention_eager", "[bf16] S2100 H16 D72 (2 query blocks)", c_attention_eager, {2100, 16, 16, 72, 0, 2000}, BO, 1e-2, CUDA_ONLY, NULL},
    {"attention_eager", "[bf16] S300 H2 D72 (3 query blocks of the twin)", c_attention_eager, {300, 2, 2, 72, 0, 2000}, BO, 1e-2, BO_CPU, NULL},
    /* conv1d (a: B Cin L Cout K stride pad dilation bias) */
    {"conv1d", "B2 64->48 L1000 K7 s1 p9 d3 +bias", c_conv1d, {2, 64, 1000, 48, 7, 1, 9, 3, 1}, 0, 1e-5, BO_ALL, NULL},
    {"conv1d", "B2 32->40 L777 K1 (x read directly) +bias", c_conv1d, {2, 32, 777, 40, 1, 1, 0, 1, 1}, 0, 1e-5, BO_ALL, NULL},
    {"conv1d", "B2 64->128 L1000 K8 s4 p2 (downsample) +bias", c_conv1d, {2, 64, 1000, 128, 8, 4, 2, 1, 1}, 0, 1e-5, BO_ALL, NULL},
    {"conv1d", "B2 512->512 L600 K11 p25 d5 (large channels) +bias", c_conv1d, {2, 512, 600, 512, 11, 1, 25, 5, 1}, 0, 1e-5, BO_ALL, NULL},
    {"conv1d", "B1 256->32 L8000 K11 p5 (several im2col tiles)", c_conv1d, {1, 256, 8000, 32, 11, 1, 5, 1, 0}, 0, 1e-5, BO_ALL, NULL},
    {"conv1d", "B2 8->1 L5 K7 p3 (short, one channel) +bias", c_conv1d, {2, 8, 5, 1, 7, 1, 3, 1, 1}, 0, 1e-5, BO_ALL, NULL},
    /* conv_transpose1d (a: B Cin L Cout K stride pad bias) */
    {"conv_transpose1d", "B2 64->32 L300 K9 s5 p2 +bias", c_conv_transpose1d, {2, 64, 300, 32, 9, 5, 2, 1}, 0, 1e-5, BO_ALL, NULL},
    {"conv_transpose1d", "B2 16->8 L5000 K4 s2 p1 +bias", c_conv_transpose1d, {2, 16, 5000, 8, 4, 2, 1, 1}, 0, 1e-5, BO_ALL, NULL},
    {"conv_transpose1d", "B2 128->256 L2000 K10 s5 p3 (3 twin tiles) +bias", c_conv_transpose1d, {2, 128, 2000, 256, 10, 5, 3, 1}, 0, 1e-5, BO_ALL, NULL},
    {"conv_transpose1d", "B1 40->24 L17 K9 s5 p2", c_conv_transpose1d, {1, 40, 17, 24, 9, 5, 2, 0}, 0, 1e-5, BO_ALL, NULL},
    /* snake (a: B C L alias-free) */
    {"snake", "B2 C48 L3001 (+ in place)", c_snake, {2, 48, 3001, 0}, 0, 1e-6, BO_ALL, NULL},
    {"snake_alias_free", "B2 C20 L1234", c_snake, {2, 20, 1234, 1}, 0, 1e-6, BO_ALL, NULL},
    {"snake_alias_free", "B2 C5 L7", c_snake, {2, 5, 7, 1}, 0, 1e-6, BO_ALL, NULL},
    {"snake_alias_free", "B1 C3 L1", c_snake, {1, 3, 1, 1}, 0, 1e-6, BO_ALL, NULL},
    {"snake_alias_free", "B2 C64 L70001", c_snake, {2, 64, 70001, 1}, 0, 1e-6, BO_ALL, NULL},
    {"clamp", "[-1, 1] n=1000003 (+ in place)", c_scalar_op, {0, 1000003}, 0, 0.0, BO_ALL, NULL},
    {"div_scalar", "/3 n=1000003 (+ in place, /7 in place)", c_scalar_op, {1, 1000003}, 0, 0.0, BO_ALL, NULL},
    {"transpose_last2", "B2 130x77", c_transpose, {2, 130, 77}, 0, 0.0, BO_ALL, NULL},
    {"transpose_last2", "B1 2048x46", c_transpose, {1, 2048, 46}, 0, 0.0, BO_ALL, NULL},
    {"head_mean_pool", "50 rows H8 hd256 -> 32", c_head_mean_pool, {50, 8, 256, 32}, 0, 0.0, BO_ALL, NULL},
    {"head_mean_pool", "37 rows H8 hd100 -> 32", c_head_mean_pool, {37, 8, 100, 32}, 0, 0.0, BO_ALL, NULL},
    {"head_mean_pool", "9 rows H3 hd20 -> 7", c_head_mean_pool, {9, 3, 20, 7}, 0, 0.0, BO_ALL, NULL},
    /* conv3d (a: the geometry, then bias) */
    {"conv3d", "k3 causal reflect 8->16 5x20x24", c_conv3d, {K3_REFLECT(8, 5, 20, 24, 16), 1}, 0, 1e-5, BO_ALL, NULL},
    {"conv3d", "k3 causal zero 3->12 1x33x17", c_conv3d, {3, 1, 33, 17, 12, 3, 3, 3, 1, 1, 1, 2, 1, 1, 1, 1, H3_PAD_ZERO, 1}, 0, 1e-5, BO_ALL, NULL},
    {"conv3d", "k3 down s(2,2,2) pad b/r 16->16 9x20x22", c_conv3d, {16, 9, 20, 22, 16, 3, 3, 3, 2, 2, 2, 2, 0, 1, 0, 1, H3_PAD_REFLECT, 1}, 0, 1e-5, BO_ALL, NULL},
    {"conv3d", "k3 down s(1,2,2) 16->32 3x16x16", c_conv3d, {16, 3, 16, 16, 32, 3, 3, 3, 1, 2, 2, 2, 0, 1, 0, 1, H3_PAD_REFLECT, 0}, 0, 1e-5, BO_ALL, NULL},
    {"conv3d", "pointwise 32->24 4x15x13", c_conv3d, {32, 4, 15, 13, 24, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, H3_PAD_ZERO, 1}, 0, 1e-5, BO_ALL, NULL},
    {"conv3d", "k3 tiled (3 im2col tiles) 64->64 1x224x224", c_conv3d, {K3_REFLECT(64, 1, 224, 224, 64), 1}, 0, 1e-5, CUDA_ONLY, NULL},
    {"conv3d", "k3 reflect 16->16 2x40x36", c_conv3d, {K3_REFLECT(16, 2, 40, 36, 16), 1}, 0, 1e-5, BO_CPU, NULL},
    /* groupnorm_frames (a: C T HW groups affine silu in-place) */
    {"groupnorm_frames", "C64 T3 HW20000 g32 w+b silu", c_groupnorm_frames, {64, 3, 20000, 32, 1, 1, 0}, 0, 1e-6, BO_ALL, NULL},
    {"groupnorm_frames", "C64 T3 HW20000 g32 w+b in place", c_groupnorm_frames, {64, 3, 20000, 32, 1, 0, 1}, 0, 1e-6, BO_ALL, NULL},
    {"groupnorm_frames", "C128 T5 HW700 g32 silu in place", c_groupnorm_frames, {128, 5, 700, 32, 0, 1, 1}, 0, 1e-6, BO_ALL, NULL},
    {"groupnorm_frames", "C24 T1 HW9 g4 w+b silu", c_groupnorm_frames, {24, 1, 9, 4, 1, 1, 0}, 0, 1e-6, BO_ALL, NULL},

    /* ---- test_cuda_bf16.c ---- */
    {"bf16_rows_scatter", "300 of 500 rows", c_bf16_rows, {0}, 0, 0.0, BO_ALL, NULL},
    {"bf16_rows_scatter_f32", "300 of 500 rows (rounding)", c_bf16_rows, {1}, 0, 0.0, BO_ALL, NULL},
    {"bf16_rows_gather_f32", "300 of 500 rows (exact)", c_bf16_rows, {2}, 0, 0.0, BO_ALL, NULL},
    {"bf16_pack", "fp32 -> bf16", c_bf16_rows, {3}, 0, 0.0, BO_ALL, NULL},
    {"bf16_unpack", "bf16 -> fp32", c_bf16_rows, {4}, 0, 0.0, BO_ALL, NULL},
    {"bf16_rows_pool_pairs", "775 -> 390 rows x 5376", c_token_reduction, {0}, 0, 0.0, BO_ALL, NULL},
    {"bf16_rows_expand_delta", "390 -> 775 rows x 5376, scale 0.75", c_token_reduction, {1}, 0, 0.0, BO_ALL, NULL},
    /* bf16_matmul (a: M N K ldx ldy bias bdtype) */
    {"bf16_matmul", "300x384x512, strided x/y, F32 bias", c_bf16_matmul, {300, 384, 512, 520, 400, 1, F32}, 0, 1e-2, BO_ALL, NULL},
    {"bf16_matmul", "300x384x512, BF16 bias", c_bf16_matmul, {300, 384, 512, 512, 384, 1, BF16}, 0, 1e-2, BO_ALL, NULL},
    {"bf16_matmul", "257x3000x5376, no bias, y slice of 9000", c_bf16_matmul, {257, 3000, 5376, 5376, 9000, 0, F32}, 0, 1e-2, CUDA_ONLY, NULL},
    {"bf16_matmul", "2122x2048x2048 + bias (VAE width)", c_bf16_matmul, {2122, 2048, 2048, 2048, 2048, 1, F32}, 0, 1e-2, CUDA_ONLY, NULL},
    {"bf16_matmul", "64x700x1100, no bias, y slice of 900", c_bf16_matmul, {64, 700, 1100, 1100, 900, 0, F32}, 0, 1e-2, BO_CPU, NULL},
    /* bf16_rmsnorm_modulate (a: rows dim table gain), then in place */
    {"bf16_rmsnorm_modulate", "300x5376 (+ in place)", c_bf16_norm_modulate, {300, 5376, 1, 1}, 0, 1e-6, BO_ALL, NULL},
    {"bf16_rmsnorm_modulate", "no table 300x5376 (+ in place)", c_bf16_norm_modulate, {300, 5376, 0, 1}, 0, 1e-6, BO_ALL, NULL},
    {"bf16_rmsnorm_modulate", "77x100 unvectorized (+ in place)", c_bf16_norm_modulate, {77, 100, 1, 1}, 0, 1e-6, BO_ALL, NULL},
    {"bf16_rmsnorm_modulate", "no gain 50x2048 (+ in place)", c_bf16_norm_modulate, {50, 2048, 0, 0}, 0, 1e-6, BO_ALL, NULL},
    /* bf16_head_norm_rope (a: rows heads D rot interleaved rope) */
    {"bf16_head_norm_rope", "D128 rot96, planar", c_bf16_head_norm_rope, {200, 4, 128, 96, 0, 1}, 0, 1e-6, BO_ALL, NULL},
    {"bf16_head_norm_rope", "D128 rot96, interleaved", c_bf16_head_norm_rope, {200, 4, 128, 96, 1, 1}, 0, 1e-6, BO_ALL, NULL},
    {"bf16_head_norm_rope", "no rope D128, planar", c_bf16_head_norm_rope, {150, 3, 128, 96, 0, 0}, 0, 1e-6, BO_ALL, NULL},
    {"bf16_head_norm_rope", "D64 rot48 (VAE)", c_bf16_head_norm_rope, {180, 5, 64, 48, 0, 1}, 0, 1e-6, BO_ALL, NULL},
    {"bf16_head_norm_rope", "D32 rot12 (tiny model, generic kernel)", c_bf16_head_norm_rope, {90, 3, 32, 12, 1, 1}, 0, 1e-6, BO_ALL, NULL},
    {"bf16_head_norm_rope", "D128 rot40 (generic kernel)", c_bf16_head_norm_rope, {60, 2, 128, 40, 0, 1}, 0, 1e-6, BO_ALL, NULL},
    /* bf16_attention (a: Sq Skv Hq Hkv D interleaved) */
    {"bf16_attention", "S300 H4 D128, fused planar", c_bf16_attention, {300, 300, 4, 4, 128, 0}, 0, 1e-2, BO_ALL, NULL},
    {"bf16_attention", "S300 H4 D128, fused interleaved", c_bf16_attention, {300, 300, 4, 4, 128, 1}, 0, 1e-2, BO_ALL, NULL},
    {"bf16_attention", "Sq100 Skv700 H4/2 D64, separate", c_bf16_attention, {100, 700, 4, 2, 64, 0}, 0, 1e-2, BO_ALL, NULL},
    {"bf16_attention", "S2122 H56 D128, fused planar", c_bf16_attention, {2122, 2122, 56, 56, 128, 0}, 0, 1e-2, CUDA_ONLY, NULL},
    {"bf16_attention", "S77 H3 D32, fused interleaved (fp32 kernel)", c_bf16_attention, {77, 77, 3, 3, 32, 1}, 0, 1e-2, BO_ALL, NULL},
    {"bf16_attention", "S1797 H32 D64, fused planar (VAE tile)", c_bf16_attention, {1797, 1797, 32, 32, 64, 0}, 0, 1e-2, CUDA_ONLY, NULL},
    {"bf16_attention", "S400 H3 D64, fused planar", c_bf16_attention, {400, 400, 3, 3, 64, 0}, 0, 1e-2, BO_CPU, NULL},
    /* bf16_gated_residual (a: rows dim table) */
    {"bf16_gated_residual", "300x5376", c_bf16_gated_residual, {300, 5376, 1}, 0, 1e-6, BO_ALL, NULL},
    {"bf16_gated_residual", "residual add (no table) 300x5376", c_bf16_gated_residual, {300, 5376, 0}, 0, 1e-6, BO_ALL, NULL},
    {"bf16_gated_residual", "33x100 (unvectorized)", c_bf16_gated_residual, {33, 100, 1}, 0, 1e-6, BO_ALL, NULL},
    /* bf16_residual_norm: x and y bit for bit (a: rows dim tables gain next-block in-place y-offset) */
    {"bf16_residual_norm", "residual+norm2 19540x5376 (DiT table, gate 2, mod 3/4)", c_bf16_residual_norm, {19540, 5376, 1, 1, 0, 0, 0}, 0, 0.0, CUDA_ONLY, NULL},
    {"bf16_residual_norm", "residual+next norm1 19540x5376 (gate 5, next block 0/1)", c_bf16_residual_norm, {19540, 5376, 1, 1, 1, 0, 0}, 0, 0.0, CUDA_ONLY, NULL},
    {"bf16_residual_norm", "residual+norm2 2000x5376 (DiT table, gate 2, mod 3/4)", c_bf16_residual_norm, {2000, 5376, 1, 1, 0, 0, 0}, 0, 0.0, BO_CPU, NULL},
    {"bf16_residual_norm", "residual+next norm1 2000x5376 (gate 5, next block 0/1)", c_bf16_residual_norm, {2000, 5376, 1, 1, 1, 0, 0}, 0, 0.0, BO_CPU, NULL},
    {"bf16_residual_norm", "add+rmsnorm 300x5376 (refiner: no tables)", c_bf16_residual_norm, {300, 5376, 0, 1, 0, 0, 0}, 0, 0.0, BO_ALL, NULL},
    {"bf16_residual_norm", "add+rmsnorm in place 300x5376 (refiner final)", c_bf16_residual_norm, {300, 5376, 0, 1, 0, 1, 0}, 0, 0.0, BO_ALL, NULL},
    {"bf16_residual_norm", "no gain 50x2048", c_bf16_residual_norm, {50, 2048, 1, 0, 0, 0, 0}, 0, 0.0, BO_ALL, NULL},
    {"bf16_residual_norm", "33x100 (fallback: dim % 8)", c_bf16_residual_norm, {33, 100, 1, 1, 1, 0, 0}, 0, 0.0, BO_ALL, NULL},
    {"bf16_residual_norm", "50x2048, y unaligned (fallback)", c_bf16_residual_norm, {50, 2048, 1, 1, 0, 0, 1}, 0, 0.0, BO_ALL, NULL},
    /* the other CUDA bf16 rounding forms, each on a backend of its own: the same bits as the CPU twins */
    {"bf16_residual_norm", "300x5376, H3_BF16_ROUND=sw", c_bf16_residual_norm, {300, 5376, 1, 1, 1, 0, 0}, 0, 0.0, CUDA_ONLY, "H3_BF16_ROUND=sw"},
    {"bf16_rmsnorm_modulate", "300x5376, H3_BF16_ROUND=sw", c_bf16_norm_modulate, {300, 5376, 1, 1}, 0, 1e-6, CUDA_ONLY, "H3_BF16_ROUND=sw"},
    {"bf16_head_norm_rope", "D128 rot96, H3_BF16_ROUND=sw", c_bf16_head_norm_rope, {200, 4, 128, 96, 0, 1}, 0, 1e-6, CUDA_ONLY, "H3_BF16_ROUND=sw"},
    {"bf16_gated_residual", "300x5376, H3_BF16_ROUND=sw", c_bf16_gated_residual, {300, 5376, 1}, 0, 1e-6, CUDA_ONLY, "H3_BF16_ROUND=sw"},
    {"bf16_swiglu", "300x14336, H3_BF16_ROUND=sw", c_bf16_swiglu, {300, 14336, 0}, 0, 1e-3, CUDA_ONLY, "H3_BF16_ROUND=sw"},
    {"bf16_residual_norm", "300x5376, H3_BF16_ROUND=hw", c_bf16_residual_norm, {300, 5376, 1, 1, 1, 0, 0}, 0, 0.0, CUDA_ONLY, "H3_BF16_ROUND=hw"},
    {"bf16_rmsnorm_modulate", "300x5376, H3_BF16_ROUND=hw", c_bf16_norm_modulate, {300, 5376, 1, 1}, 0, 1e-6, CUDA_ONLY, "H3_BF16_ROUND=hw"},
    {"bf16_head_norm_rope", "D128 rot96, H3_BF16_ROUND=hw", c_bf16_head_norm_rope, {200, 4, 128, 96, 0, 1}, 0, 1e-6, CUDA_ONLY, "H3_BF16_ROUND=hw"},
    {"bf16_gated_residual", "300x5376, H3_BF16_ROUND=hw", c_bf16_gated_residual, {300, 5376, 1}, 0, 1e-6, CUDA_ONLY, "H3_BF16_ROUND=hw"},
    {"bf16_swiglu", "300x14336, H3_BF16_ROUND=hw", c_bf16_swiglu, {300, 14336, 0}, 0, 1e-3, CUDA_ONLY, "H3_BF16_ROUND=hw"},
    /* bf16_swiglu (a: rows ff gate-first) */
    {"bf16_swiglu", "300x14336 value first", c_bf16_swiglu, {300, 14336, 0}, 0, 1e-3, BO_ALL, NULL},
    {"bf16_swiglu", "300x1000 gate first", c_bf16_swiglu, {300, 1000, 1}, 0, 1e-3, BO_ALL, NULL},
    {"bf16_swiglu", "20x99 (unvectorized)", c_bf16_swiglu, {20, 99, 0}, 0, 1e-3, BO_ALL, NULL},

    /* ---- test_cuda_fp8.c ---- */
    {"fp8_quant_rows", "300 x 5376 (vectorized)", c_fp8_quant, {300, 5376, 5376}, 0, 0.0, BO_ALL, NULL},
    {"fp8_quant_rows", "64 x 14336, row stride 28672", c_fp8_quant, {64, 14336, 28672}, 0, 0.0, BO_ALL, NULL},
    {"fp8_quant_rows", "77 x 100 (unvectorized)", c_fp8_quant, {77, 100, 100}, 0, 0.0, BO_ALL, NULL},
    {"fp8_quant_rows", "5 x 7 with stride 9", c_fp8_quant, {5, 7, 9}, 0, 0.0, BO_ALL, NULL},
    {"fp8_matmul", "300 x 512 x 5376", c_fp8_matmul, {300, 512, 5376, 512}, 0, 2e-3, BO_ALL, NULL},
    {"fp8_matmul", "257 x 1040 x 1024, y slice of 1104", c_fp8_matmul, {257, 1040, 1024, 1104}, 0, 2e-3, BO_ALL, NULL},
    {"fp8_matmul", "33 x 48 x 64 (tiny model widths)", c_fp8_matmul, {33, 48, 64, 48}, 0, 2e-3, BO_ALL, NULL},
    {"fp8_matmul", "bias, 300 x 6144 x 2048 (video decoder q|k|v)", c_fp8_matmul, {300, 6144, 2048, 6144, 1}, 0, 2e-3, BO_CUDA, NULL},
    {"fp8_matmul", "bias, 96 x 640 x 256", c_fp8_matmul, {96, 640, 256, 640, 1}, 0, 2e-3, BO_ALL, NULL},
    {"fp8_matmul", "bias, 77 x 48 x 64, y slice of 56", c_fp8_matmul, {77, 48, 64, 56, 1}, 0, 2e-3, BO_ALL, NULL},
    {"fp8_matmul", "bias, 41 x 24 x 8 (tiny decoder q|k|v: K not a multiple of 16)", c_fp8_matmul, {41, 24, 8, 24, 1}, 0, 2e-3, BO_ALL, NULL},
    {"fp8_matmul", "37 x 13 x 24, y slice of 14 (N, K, ldy unaligned)", c_fp8_matmul, {37, 13, 24, 14}, 0, 2e-3, BO_ALL, NULL},
    {"fp8_fixture", "torch codes and torch._scaled_mm", c_fp8_fixture, {0}, 0, 2e-3, BO_ALL, NULL},

    /* sage8_attention (a: Sq Skv Hq Hkv D outliers variant; >= cuda_sage8_sm90_variants(): the plain CUDA kernel) */
    {"sage8_attention", "Sq300 Skv300 H4 D128", c_sage8, {300, 300, 4, 4, 128, 0, -1}, 0, 2e-2, BO_ALL, NULL},
    {"sage8_attention", "Sq100 Skv700 H4/2 D128, K outliers", c_sage8, {100, 700, 4, 2, 128, 1, -1}, 0, 2e-2, BO_ALL, NULL},
    {"sage8_attention", "Sq130 Skv257 H2 D64", c_sage8, {130, 257, 2, 2, 64, 1, -1}, 0, 2e-2, BO_ALL, NULL},
    {"sage8_attention", "Sq77 Skv77 H3 D32", c_sage8, {77, 77, 3, 3, 32, 0, -1}, 0, 2e-2, BO_ALL, NULL},
    {"sage8_attention", "Sq50 Skv90 H2/1 D18 (scalar column stats)", c_sage8, {50, 90, 2, 1, 18, 1, -1}, 0, 2e-2, BO_ALL, NULL},
    {"sage8_attention", "Sq300 Skv300 H4 D128, plain kernel", c_sage8, {300, 300, 4, 4, 128, 1, 99}, 0, 2e-2, CUDA_ONLY, NULL},
#define SAGE8_VARIANT(v) {"sage8_attention", "Sq1000 Skv1000 H2 D128, K outliers, sm90 variant " #v, c_sage8, {1000, 1000, 2, 2, 128, 1, v}, 0, 2e-2, CUDA_ONLY, NULL}
    SAGE8_VARIANT(0), SAGE8_VARIANT(1), SAGE8_VARIANT(2), SAGE8_VARIANT(3), SAGE8_VARIANT(4), SAGE8_VARIANT(5),
    SAGE8_VARIANT(6), SAGE8_VARIANT(7), SAGE8_VARIANT(8), SAGE8_VARIANT(9), SAGE8_VARIANT(10), SAGE8_VARIANT(11),
    SAGE8_VARIANT(12), SAGE8_VARIANT(13), SAGE8_VARIANT(14), SAGE8_VARIANT(15), SAGE8_VARIANT(16), SAGE8_VARIANT(17),
    SAGE8_VARIANT(18), SAGE8_VARIANT(19), SAGE8_VARIANT(20), SAGE8_VARIANT(21), SAGE8_VARIANT(22),
    {"sage8_attention", "Sq1500 Skv1500 H8/4 D128", c_sage8, {1500, 1500, 8, 4, 128, 0, -1}, 0, 2e-2, CUDA_ONLY, NULL},
    {"sage8_attention", "S19540 H56 D128", c_sage8, {19540, 19540, 56, 56, 128, 0, -1}, 0, 0, PERF, NULL},
    /* ---- INT8 W8A8 (docs/int8.md): everything bit for bit (tolerance 0) ---- */
    {"int8_quant_rows", "77 x 100 per token", c_int8_quant, {77, 100, 100, 0}, 0, 0.0, BO_ALL, NULL},
    {"int8_quant_rows", "64 x 2048, stride 4096, groups of 1024", c_int8_quant, {64, 2048, 4096, 1024}, 0, 0.0, BO_ALL, NULL},
    {"int8_quant_rows", "5 x 7 with stride 9", c_int8_quant, {5, 7, 9, 0}, 0, 0.0, BO_ALL, NULL},
    {"int8_quant_rows", "300 x 5376 (vectorized)", c_int8_quant, {300, 5376, 5376, 0}, 0, 0.0, BO_ALL, NULL},
    {"int8_quant_rows", "64 x 14336, stride 28672, groups of 1024", c_int8_quant, {64, 14336, 28672, 1024}, 0, 0.0, BO_ALL, NULL},
    {"int8_matmul", "33 x 48 x 64 (tiny widths), bias", c_int8_matmul, {33, 48, 64, 48, 0, 1}, 0, 0.0, BO_ALL, NULL},
    {"int8_matmul", "130 x 256 x 384, y slice of 300", c_int8_matmul, {130, 256, 384, 300, 0, 0}, 0, 0.0, BO_ALL, NULL},
    {"int8_matmul", "7 x 20 x 30 (K not a multiple of 4: tiled kernel)", c_int8_matmul, {7, 20, 30, 20, 0, 1}, 0, 0.0, BO_ALL, NULL},
    {"int8_matmul", "40 x 96 x 2048, groups of 1024", c_int8_matmul, {40, 96, 2048, 96, 1024, 0}, 0, 0.0, BO_ALL, NULL},
    /* the release's four block linears at M = 200 (rows past a 128 multiple), CUDA vs the twin bit for bit */
    {"int8_matmul", "release qkv 21504 x 5376, M=200", c_int8_matmul, {200, 21504, 5376, 21504, 0, 0}, 0, 0.0, CUDA_ONLY, NULL},
    {"int8_matmul", "release attn out 5376 x 7168, M=200", c_int8_matmul, {200, 5376, 7168, 5376, 0, 0}, 0, 0.0, CUDA_ONLY, NULL},
    {"int8_matmul", "release ffn up 28672 x 5376, M=200", c_int8_matmul, {200, 28672, 5376, 28672, 0, 0}, 0, 0.0, CUDA_ONLY, NULL},
    {"int8_matmul", "release ffn down 5376 x 14336, M=200", c_int8_matmul, {200, 5376, 14336, 5376, 0, 0}, 0, 0.0, CUDA_ONLY, NULL},
    {"int8_matmul", "release ffn down, groups of 1024, M=200", c_int8_matmul, {200, 5376, 14336, 5376, 1024, 0}, 0, 0.0, CUDA_ONLY, NULL},
    /* H3_INT8_GEMM=sm90: the own wgmma kernel with the fused dequantization (cuda_int8_sm90.cu), K % 128 == 0 */
#define SM90 "H3_INT8_GEMM=sm90"
    {"int8_matmul", "[sm90] 130 x 256 x 384, y slice of 300", c_int8_matmul, {130, 256, 384, 300, 0, 0}, 0, 0.0, CUDA_ONLY, SM90},
    {"int8_matmul", "[sm90] 333 x 520 x 640 (row and column tails), bias", c_int8_matmul, {333, 520, 640, 520, 0, 1}, 0, 0.0, CUDA_ONLY, SM90},
    {"int8_matmul", "[sm90] release qkv 21504 x 5376, M=200", c_int8_matmul, {200, 21504, 5376, 21504, 0, 0}, 0, 0.0, CUDA_ONLY, SM90},
    {"int8_matmul", "[sm90] release attn out 5376 x 7168, M=200", c_int8_matmul, {200, 5376, 7168, 5376, 0, 0}, 0, 0.0, CUDA_ONLY, SM90},
    {"int8_matmul", "[sm90] release ffn up 28672 x 5376, M=200", c_int8_matmul, {200, 28672, 5376, 28672, 0, 0}, 0, 0.0, CUDA_ONLY, SM90},
    {"int8_matmul", "[sm90] release ffn down 5376 x 14336, M=200", c_int8_matmul, {200, 5376, 14336, 5376, 0, 0}, 0, 0.0, CUDA_ONLY, SM90},

    /* ---- fused quantization (ops.h, docs/fast.md): the fused op = its two ops, bit for bit on every side
     * (a: producer rows dim kind group variant code-offset; FP8 / INT8 = H3_ROWQ_*) ---- */
#define FQ_RMS "bf16_rmsnorm_modulate_q"
#define FQ_RES "bf16_gated_residual_rmsnorm_modulate_q"
#define FQ_SWI "bf16_swiglu_q"
#define FQ_VAE "vae_residual_rmsnorm_q"
#define FP8 H3_ROWQ_FP8
#define INT8 H3_ROWQ_INT8
    {FQ_RMS, "fp8 300x5376, DiT table (norm1 -> q|k|v)", c_fusedq, {FQ_NORM, 300, 5376, FP8, 0, 1, 0}, 0, 1e-6, BO_ALL, NULL},
    {FQ_RMS, "int8 300x5376, DiT table", c_fusedq, {FQ_NORM, 300, 5376, INT8, 0, 1, 0}, 0, 1e-6, BO_ALL, NULL},
    {FQ_RMS, "fp8 50x2048, no table", c_fusedq, {FQ_NORM, 50, 2048, FP8, 0, 0, 0}, 0, 1e-6, BO_ALL, NULL},
    {FQ_RMS, "int8 77x100 (fallback: dim % 8)", c_fusedq, {FQ_NORM, 77, 100, INT8, 0, 1, 0}, 0, 1e-6, BO_ALL, NULL},
    {FQ_RMS, "fp8 300x5376, codes at offset 3 (fallback)", c_fusedq, {FQ_NORM, 300, 5376, FP8, 0, 1, 3}, 0, 1e-6, BO_ALL, NULL},
    {FQ_RES, "fp8 300x5376, gate 2 + mod 3/4 (norm2 -> FFN up)", c_fusedq, {FQ_RESIDUAL_NORM, 300, 5376, FP8, 0, 0, 0}, 0, 0.0, BO_ALL, NULL},
    {FQ_RES, "int8 300x5376, gate 5 + next block 0/1", c_fusedq, {FQ_RESIDUAL_NORM, 300, 5376, INT8, 0, 1, 0}, 0, 0.0, BO_ALL, NULL},
    {FQ_RES, "fp8 300x5376, next block 0/1", c_fusedq, {FQ_RESIDUAL_NORM, 300, 5376, FP8, 0, 1, 0}, 0, 0.0, BO_ALL, NULL},
    {FQ_RES, "int8 300x5376, no tables", c_fusedq, {FQ_RESIDUAL_NORM, 300, 5376, INT8, 0, 2, 0}, 0, 0.0, BO_ALL, NULL},
    {FQ_RES, "fp8 33x100 (fallback: dim % 8)", c_fusedq, {FQ_RESIDUAL_NORM, 33, 100, FP8, 0, 1, 0}, 0, 0.0, BO_ALL, NULL},
    {FQ_RES, "fp8 2122x5376, gate 2 + mod 3/4", c_fusedq, {FQ_RESIDUAL_NORM, 2122, 5376, FP8, 0, 0, 0}, 0, 0.0, CUDA_ONLY, NULL},
    {FQ_SWI, "fp8 300x14336 value first (-> FFN down)", c_fusedq, {FQ_SWIGLU, 300, 14336, FP8, 0, 0, 0}, 0, 1e-3, BO_ALL, NULL},
    {FQ_SWI, "int8 300x14336 value first", c_fusedq, {FQ_SWIGLU, 300, 14336, INT8, 0, 0, 0}, 0, 1e-3, BO_ALL, NULL},
    {FQ_SWI, "int8 300x14336, groups of 1024 (--int8-fc2-groups)", c_fusedq, {FQ_SWIGLU, 300, 14336, INT8, 1024, 0, 0}, 0, 1e-3, BO_ALL, NULL},
    {FQ_SWI, "int8 100x1000 gate first, groups of 200", c_fusedq, {FQ_SWIGLU, 100, 1000, INT8, 200, 1, 0}, 0, 1e-3, BO_ALL, NULL},
    {FQ_SWI, "fp8 300x1000 gate first", c_fusedq, {FQ_SWIGLU, 300, 1000, FP8, 0, 1, 0}, 0, 1e-3, BO_ALL, NULL},
    {FQ_SWI, "fp8 20x99 (fallback: unvectorized)", c_fusedq, {FQ_SWIGLU, 20, 99, FP8, 0, 0, 0}, 0, 1e-3, BO_ALL, NULL},
    {FQ_SWI, "int8 64x1000, codes at offset 5 (fallback)", c_fusedq, {FQ_SWIGLU, 64, 1000, INT8, 0, 0, 5}, 0, 1e-3, BO_ALL, NULL},
    {FQ_VAE, "fp8 300x2048 + branch (decoder norm2 -> FFN)", c_fusedq, {FQ_VAE_NORM, 300, 2048, FP8, 0, 1, 0}, 0, 1e-5, BO_ALL, NULL},
    {FQ_VAE, "fp8 300x2048, no branch (first norm1)", c_fusedq, {FQ_VAE_NORM, 300, 2048, FP8, 0, 0, 0}, 0, 1e-5, BO_ALL, NULL},
    {FQ_VAE, "int8 70x1024 + branch", c_fusedq, {FQ_VAE_NORM, 70, 1024, INT8, 0, 1, 0}, 0, 1e-5, BO_ALL, NULL},
    {FQ_VAE, "fp8 40x100 + branch (fallback: dim % 8)", c_fusedq, {FQ_VAE_NORM, 40, 100, FP8, 0, 1, 0}, 0, 1e-5, BO_ALL, NULL},
    /* the other CUDA bf16 rounding forms (the kernels' HW 0 / 1 instances) */
    {FQ_RMS, "fp8 300x5376, H3_BF16_ROUND=sw", c_fusedq, {FQ_NORM, 300, 5376, FP8, 0, 1, 0}, 0, 1e-6, CUDA_ONLY, "H3_BF16_ROUND=sw"},
    {FQ_RES, "int8 300x5376, H3_BF16_ROUND=sw", c_fusedq, {FQ_RESIDUAL_NORM, 300, 5376, INT8, 0, 1, 0}, 0, 0.0, CUDA_ONLY, "H3_BF16_ROUND=sw"},
    {FQ_SWI, "int8 300x14336 groups, H3_BF16_ROUND=sw", c_fusedq, {FQ_SWIGLU, 300, 14336, INT8, 1024, 0, 0}, 0, 1e-3, CUDA_ONLY, "H3_BF16_ROUND=sw"},
    {FQ_RMS, "int8 300x5376, H3_BF16_ROUND=hw", c_fusedq, {FQ_NORM, 300, 5376, INT8, 0, 1, 0}, 0, 1e-6, CUDA_ONLY, "H3_BF16_ROUND=hw"},
    {FQ_RES, "fp8 300x5376, H3_BF16_ROUND=hw", c_fusedq, {FQ_RESIDUAL_NORM, 300, 5376, FP8, 0, 0, 0}, 0, 0.0, CUDA_ONLY, "H3_BF16_ROUND=hw"},
    {FQ_SWI, "fp8 300x14336, H3_BF16_ROUND=hw", c_fusedq, {FQ_SWIGLU, 300, 14336, FP8, 0, 0, 0}, 0, 1e-3, CUDA_ONLY, "H3_BF16_ROUND=hw"},
    /* --perf: the release shapes (M = 19540 DiT rows; the decoder's 18-tile batch of 2048-wide rows) */
    {FQ_RES, "fp8 19540x5376", c_fusedq, {FQ_RESIDUAL_NORM, 19540, 5376, FP8, 0, 0, 0}, 0, 0, PERF, NULL},
    {FQ_RES, "int8 19540x5376", c_fusedq, {FQ_RESIDUAL_NORM, 19540, 5376, INT8, 0, 0, 0}, 0, 0, PERF, NULL},
    {FQ_RMS, "fp8 19540x5376", c_fusedq, {FQ_NORM, 19540, 5376, FP8, 0, 1, 0}, 0, 0, PERF, NULL},
    {FQ_SWI, "fp8 19540x14336", c_fusedq, {FQ_SWIGLU, 19540, 14336, FP8, 0, 0, 0}, 0, 0, PERF, NULL},
    {FQ_SWI, "int8 19540x14336", c_fusedq, {FQ_SWIGLU, 19540, 14336, INT8, 0, 0, 0}, 0, 0, PERF, NULL},
    {FQ_SWI, "int8 19540x14336, groups of 1024", c_fusedq, {FQ_SWIGLU, 19540, 14336, INT8, 1024, 0, 0}, 0, 0, PERF, NULL},
    {FQ_VAE, "fp8 32400x2048 + branch", c_fusedq, {FQ_VAE_NORM, 32400, 2048, FP8, 0, 1, 0}, 0, 0, PERF, NULL},
#undef FP8
#undef INT8
    /* ---- LoRA merge into a weight (ops_linear.def; a: dtype n k rank row-group group-stride weight-rows slot): bit for bit ---- */
    {"lora_merge_into", "BF16 77x130 rank 16", c_lora_merge, {BF16, 77, 130, 16}, 0, 0.0, BO_ALL, NULL},
    {"lora_merge_into", "BF16 odd 131x97 rank 1", c_lora_merge, {BF16, 131, 97, 1}, 0, 0.0, BO_ALL, NULL},
    {"lora_merge_into", "BF16 odd 257x333 rank 64", c_lora_merge, {BF16, 257, 333, 64}, 0, 0.0, BO_ALL, NULL},
    {"lora_merge_into", "BF16 1024x1536 rank 64 (128-row heads every 384 rows of 3072)", c_lora_merge, {BF16, 1024, 1536, 64, 128, 384, 3072}, 0, 0.0, BO_ALL, NULL},
    {"lora_merge_into", "BF16 odd 301x263 rank 23 through a slot", c_lora_merge, {BF16, 301, 263, 23, 0, 0, 0, 1}, 0, 0.0, BO_ALL, NULL},
    {"lora_merge_into", "F32 odd 129x201 rank 16", c_lora_merge, {F32, 129, 201, 16}, 0, 0.0, BO_ALL, NULL},
    {"lora_merge_into", "F32 odd 67x45 rank 1", c_lora_merge, {F32, 67, 45, 1}, 0, 0.0, BO_ALL, NULL},
    {"lora_merge_into", "F32 255x511 rank 64 through a slot", c_lora_merge, {F32, 255, 511, 64, 0, 0, 0, 1}, 0, 0.0, BO_ALL, NULL},
    {"lora_merge_into", "F16 odd 99x171 rank 64", c_lora_merge, {F16, 99, 171, 64}, 0, 0.0, BO_ALL, NULL},
    {"lora_merge_into", "F16 17x33 rank 1", c_lora_merge, {F16, 17, 33, 1}, 0, 0.0, BO_ALL, NULL},
    {"lora_merge_into", "BF16 release to_q 7168x5376 rank 64", c_lora_merge, {BF16, 7168, 5376, 64}, 0, 0.0, CUDA_ONLY, NULL},
    {"lora_merge_into", "BF16 release ffn in 28672x5376 rank 64", c_lora_merge, {BF16, 28672, 5376, 64}, 0, 0, PERF, NULL},
    {"lora_merge_into", "BF16 release ffn down 5376x14336 rank 64", c_lora_merge, {BF16, 5376, 14336, 64}, 0, 0, PERF, NULL},
    {"lora_merge_into", "BF16 release to_q 7168x5376 rank 64", c_lora_merge, {BF16, 7168, 5376, 64}, 0, 0, PERF, NULL},
    /* ---- GGUF blocks (ops_linear.h; a: ggml type, values, 1: from h3_gguf_fill_random): bit for bit ---- */
#define GG(t, name, n) {"gguf_dequant", name " random bytes, n=" #n, c_gguf_dequant, {t, n, 0}, 0, 0.0, BO_ALL, NULL}, \
                       {"gguf_dequant", name " random blocks, n=" #n, c_gguf_dequant, {t, n, 1}, 0, 0.0, BO_ALL, NULL}
    GG(0, "F32", 4099), GG(1, "F16", 4099), GG(30, "BF16", 4099), GG(2, "Q4_0", 32 * 1031), GG(3, "Q4_1", 32 * 1031),
    GG(6, "Q5_0", 32 * 1031), GG(7, "Q5_1", 32 * 1031), GG(8, "Q8_0", 32 * 1031), GG(12, "Q4_K", 256 * 131),
    GG(13, "Q5_K", 256 * 131), GG(14, "Q6_K", 256 * 131),
    {"gguf_dequant", "Q8_0 release ffn up 28672 x 5376 random blocks", c_gguf_dequant, {8, 28672LL * 5376, 1}, 0, 0.0, CUDA_ONLY, NULL},
    {"gguf_dequant", "Q4_K release ffn up 28672 x 5376 random blocks", c_gguf_dequant, {12, 28672LL * 5376, 1}, 0, 0.0, CUDA_ONLY, NULL},
#undef GG
    {"gguf_dequant", "Q8_0 ffn up 28672 x 5376 (a slot fill's largest part)", c_gguf_dequant, {8, 28672LL * 5376, 1}, 0, 0, PERF, NULL},
    {"gguf_dequant", "Q4_K ffn up 28672 x 5376", c_gguf_dequant, {12, 28672LL * 5376, 1}, 0, 0, PERF, NULL},
    {"gguf_dequant", "Q6_K ffn up 28672 x 5376", c_gguf_dequant, {14, 28672LL * 5376, 1}, 0, 0, PERF, NULL},

    /* ---- --perf only: release shapes (bench_cuda_ops.c's per-op part, test_cuda_ops2.c's and test_cuda_fp8.c's
     * timings). The DiT block GEMMs: qkv 21504x5376, attn out 5376x7168, ffn up 28672x5376, ffn down 5376x14336 */
#define GEMMS(M)                                                                                                  \
    {"bf16_matmul", "qkv (fused to_q/k/v) M=" #M, c_bf16_matmul, {M, 21504, 5376, 5376, 21504}, 0, 0, PERF, NULL},       \
    {"bf16_matmul", "attn out (to_out) M=" #M, c_bf16_matmul, {M, 5376, 7168, 7168, 5376}, 0, 0, PERF, NULL},           \
    {"bf16_matmul", "ffn up (W1 value+gate) M=" #M, c_bf16_matmul, {M, 28672, 5376, 5376, 28672}, 0, 0, PERF, NULL},    \
    {"bf16_matmul", "ffn down (W2) M=" #M, c_bf16_matmul, {M, 5376, 14336, 14336, 5376}, 0, 0, PERF, NULL}
    GEMMS(2122), GEMMS(19540), GEMMS(37966),
    {"matmul", "fp32 act, BF16 w [bf16] 19540x21504x5376", c_matmul, {19540, 21504, 5376, BF16, 0, F32}, BO, 0, PERF, NULL},
    {"matmul", "fp32 exact (BF16 widened) 2122x21504x5376", c_matmul, {2122, 21504, 5376, BF16, 0, F32}, 0, 0, PERF, NULL},
    {"bf16_attention", "S2122 H56 D128, strided qkv", c_bf16_attention, {2122, 2122, 56, 56, 128, 0}, 0, 0, PERF, NULL},
    {"bf16_attention", "S19400 H56 D128, strided qkv", c_bf16_attention, {19400, 19400, 56, 56, 128, 0}, 0, 0, PERF, NULL},
    {"bf16_attention", "S19540 H56 D128, strided qkv", c_bf16_attention, {19540, 19540, 56, 56, 128, 0}, 0, 0, PERF, NULL},
    {"bf16_attention", "S37966 H56 D128, strided qkv", c_bf16_attention, {37966, 37966, 56, 56, 128, 0}, 0, 0, PERF, NULL},
    {"bf16_attention", "S2122 H56 D128, packed copies", c_bf16_attention, {2122, 2122, 56, 56, 128, 0}, 0, 0, PERF, "H3_ATTN_STRIDED=0"},
    {"bf16_attention", "S19400 H56 D128, packed copies", c_bf16_attention, {19400, 19400, 56, 56, 128, 0}, 0, 0, PERF, "H3_ATTN_STRIDED=0"},
    {"bf16_attention", "S19540 H56 D128, packed copies", c_bf16_attention, {19540, 19540, 56, 56, 128, 0}, 0, 0, PERF, "H3_ATTN_STRIDED=0"},
    {"bf16_attention", "S37966 H56 D128, packed copies", c_bf16_attention, {37966, 37966, 56, 56, 128, 0}, 0, 0, PERF, "H3_ATTN_STRIDED=0"},
#ifdef H3_CUDA /* the kernels behind h3_bf16_attention on head-major bf16 copies (a: S H D, 1: cuDNN SDPA) */
    {"cuda_flash_attention_bf16", "S2122 H56 D128", c_cuda_attention, {2122, 56, 128, 0}, 0, 0, PERF, NULL},
    {"cuda_flash_attention_bf16", "S19400 H56 D128", c_cuda_attention, {19400, 56, 128, 0}, 0, 0, PERF, NULL},
    {"cuda_flash_attention_bf16", "S19540 H56 D128", c_cuda_attention, {19540, 56, 128, 0}, 0, 0, PERF, NULL},
    {"cuda_flash_attention_bf16", "S37966 H56 D128", c_cuda_attention, {37966, 56, 128, 0}, 0, 0, PERF, NULL},
    {"cuda_cudnn_attention_bf16", "S2122 H56 D128", c_cuda_attention, {2122, 56, 128, 1}, 0, 0, PERF, NULL},
    {"cuda_cudnn_attention_bf16", "S19400 H56 D128", c_cuda_attention, {19400, 56, 128, 1}, 0, 0, PERF, NULL},
    {"cuda_cudnn_attention_bf16", "S19540 H56 D128", c_cuda_attention, {19540, 56, 128, 1}, 0, 0, PERF, NULL},
    {"cuda_cudnn_attention_bf16", "S37966 H56 D128", c_cuda_attention, {37966, 56, 128, 1}, 0, 0, PERF, NULL},
#endif
    {"attention", "fp32 rows [bf16] S19400 H56 D128", c_attention, {19400, 19400, 56, 56, 128, 0, 2000}, BO, 0, PERF, NULL},
    {"attention", "fp32 exact kernel S2122 H56 D128", c_attention, {2122, 2122, 56, 56, 128, 0, 2000}, 0, 0, PERF, NULL},
    {"rmsnorm", "(+gain) [bf16] 37966x5376", c_norm, {37966, 5376, 0}, BO, 0, PERF, NULL},
    {"adaln_modulate", "[bf16] 37966x5376", c_dit, {0, 37966, 5376, 3}, BO, 0, PERF, NULL},
    {"gated_residual", "[bf16] 37966x5376", c_dit, {1, 37966, 5376, 3}, BO, 0, PERF, NULL},
    /* backend_check.h: the result checks after the DiT and each decoder (docs/robustness.md) */
    {"count_nonfinite", "n=1 all finite", c_count_nonfinite, {1, 0, 0}, 0, 0, BO_ALL, NULL},
    {"count_nonfinite", "n=1000003 (tail), 9 planted, finite extremes", c_count_nonfinite, {1000003, 9, 1}, 0, 0, BO_ALL, NULL},
    {"count_nonfinite", "n=4097 (tail), 1 planted", c_count_nonfinite, {4097, 1, 1}, 0, 0, BO_ALL, NULL},
    {"count_nonfinite", "n=20000000, 1000 planted (many blocks)", c_count_nonfinite, {20000000, 1000, 0}, 0, 0, CUDA_ONLY, NULL},
    {"count_nonfinite", "latents 24x32x68x120 (release 544x960x124)", c_count_nonfinite, {24LL * 32 * 68 * 120, 0, 0}, 0, 0, PERF, NULL},
    {"count_nonfinite", "bf16 n=1000003 (tail), 9 planted, finite extremes", c_count_nonfinite, {1000003, 9, 1, 1}, 0, 0, BO_ALL, NULL},
    {"count_nonfinite", "bf16 n=4097 (tail), 1 planted", c_count_nonfinite, {4097, 1, 1, 1}, 0, 0, BO_ALL, NULL},
    {"count_nonfinite", "bf16 residual 14880x5120 (release 544x960x124)", c_count_nonfinite, {14880LL * 5120, 0, 0, 1}, 0, 0, PERF, NULL},
    {"tally_nonfinite", "n=4097 (tail), 5 planted", c_tally_nonfinite, {4097, 5, 0}, 0, 0, BO_ALL, NULL},
    {"tally_nonfinite", "bf16 n=1000003 (tail), 9 planted", c_tally_nonfinite, {1000003, 9, 0, 1}, 0, 0, BO_ALL, NULL},
    {"tally_nonfinite", "bf16 n=20000000, 1000 planted (many blocks)", c_tally_nonfinite, {20000000, 1000, 0, 1}, 0, 0, CUDA_ONLY, NULL},
    {"tally_nonfinite", "bf16 residual 14880x5120 (release 544x960x124)", c_tally_nonfinite, {14880LL * 5120, 0, 0, 1}, 0, 0, PERF, NULL},
    {"copy", "device copy (ceiling) 37966x5376", c_copy, {37966LL * 5376}, 0, 0, PERF, NULL},
    {"rmsnorm", "128-wide rows (q/k) [bf16] 1594572x128", c_norm, {37966 * 42, 128, 1}, BO, 0, PERF, NULL},
    {"conv3d", "128->128 k3 1x544x960 (level 0)", c_conv3d, {K3_REFLECT(128, 1, 544, 960, 128), 1}, 0, 0, PERF, NULL},
    {"conv3d", "256->256 k3 9x272x480 (level 1)", c_conv3d, {K3_REFLECT(256, 9, 272, 480, 256), 1}, 0, 0, PERF, NULL},
    {"conv3d", "3->128 k3 1x544x960 (conv_in)", c_conv3d, {K3_REFLECT(3, 1, 544, 960, 128), 1}, 0, 0, PERF, NULL},
    {"groupnorm_frames", "C128 T5 544x960 silu in place", c_groupnorm_frames, {128, 5, 544 * 960, 32, 1, 1, 1}, 0, 0, PERF, NULL},
    {"conv1d", "B2 512->512 K11 d5 L5175", c_conv1d, {2, 512, 5175, 512, 11, 1, 25, 5, 1}, 0, 0, PERF, NULL},
    {"snake_alias_free", "B2 C512 L5175", c_snake, {2, 512, 5175, 1}, 0, 0, PERF, NULL},
    {"conv_transpose1d", "B2 1024->512 K9 s5 L207", c_conv_transpose1d, {2, 1024, 207, 512, 9, 5, 2, 1}, 0, 0, PERF, NULL},
    {"attention_eager", "[bf16] causal S1000 32/8 x 128", c_attention_eager, {1000, 32, 8, 128, 1, 1000}, BO, 0, PERF, NULL},
    {"attention_eager", "[bf16] S4096 16 x 72 (vision)", c_attention_eager, {4096, 16, 16, 72, 0, 1000}, BO, 0, PERF, NULL},
    {"rmsnorm_qwen", "[bf16] 32000 x 128 in place", c_rmsnorm_qwen, {32000, 128, 1}, BO, 0, PERF, NULL},
    {"rmsnorm_qwen", "[bf16] 1000 x 4096", c_rmsnorm_qwen, {1000, 4096, 0}, BO, 0, PERF, NULL},
    {"fp8_quant_rows", "19540 x 5376", c_fp8_quant, {19540, 5376, 5376}, 0, 0, PERF, NULL},
    {"fp8_quant_rows", "19540 x 14336", c_fp8_quant, {19540, 14336, 14336}, 0, 0, PERF, NULL},
#define FP8_GEMMS(env)                                                                                      \
    {"fp8_matmul", "qkv 21504 x 5376, M=19540", c_fp8_matmul, {19540, 21504, 5376, 21504}, 0, 0, PERF, env}, \
    {"fp8_matmul", "attn out 5376 x 7168, M=19540", c_fp8_matmul, {19540, 5376, 7168, 5376}, 0, 0, PERF, env}, \
    {"fp8_matmul", "ffn up 28672 x 5376, M=19540", c_fp8_matmul, {19540, 28672, 5376, 28672}, 0, 0, PERF, env}, \
    {"fp8_matmul", "ffn down 5376 x 14336, M=19540", c_fp8_matmul, {19540, 5376, 14336, 5376}, 0, 0, PERF, env}
    FP8_GEMMS(NULL), FP8_GEMMS("H3_FP8_FAST_ACCUM=1"),
    {"int8_quant_rows", "19540 x 5376", c_int8_quant, {19540, 5376, 5376, 0}, 0, 0, PERF, NULL},
    {"int8_quant_rows", "19540 x 14336", c_int8_quant, {19540, 14336, 14336, 0}, 0, 0, PERF, NULL},
    {"int8_quant_rows", "19540 x 14336, groups of 1024", c_int8_quant, {19540, 14336, 14336, 1024}, 0, 0, PERF, NULL},
    {"int8_matmul", "qkv 21504 x 5376, M=19540", c_int8_matmul, {19540, 21504, 5376, 21504, 0, 0}, 0, 0, PERF, NULL},
    {"int8_matmul", "attn out 5376 x 7168, M=19540", c_int8_matmul, {19540, 5376, 7168, 5376, 0, 0}, 0, 0, PERF, NULL},
    {"int8_matmul", "ffn up 28672 x 5376, M=19540", c_int8_matmul, {19540, 28672, 5376, 28672, 0, 0}, 0, 0, PERF, NULL},
    {"int8_matmul", "ffn down 5376 x 14336, M=19540", c_int8_matmul, {19540, 5376, 14336, 5376, 0, 0}, 0, 0, PERF, NULL},
    {"int8_matmul", "ffn down 5376 x 14336, groups of 1024, M=19540", c_int8_matmul, {19540, 5376, 14336, 5376, 1024, 0}, 0, 0, PERF, NULL},
    {"int8_matmul", "[sm90] qkv 21504 x 5376, M=19540", c_int8_matmul, {19540, 21504, 5376, 21504, 0, 0}, 0, 0, PERF, SM90},
    {"int8_matmul", "[sm90] attn out 5376 x 7168, M=19540", c_int8_matmul, {19540, 5376, 7168, 5376, 0, 0}, 0, 0, PERF, SM90},
    {"int8_matmul", "[sm90] ffn up 28672 x 5376, M=19540", c_int8_matmul, {19540, 28672, 5376, 28672, 0, 0}, 0, 0, PERF, SM90},
    {"int8_matmul", "[sm90] ffn down 5376 x 14336, M=19540", c_int8_matmul, {19540, 5376, 14336, 5376, 0, 0}, 0, 0, PERF, SM90},
};

enum { NROWS = (int)(sizeof rows / sizeof rows[0]) };

static void restore_env(const char *name, char *prev) {
    if (prev) setenv(name, prev, 1);
    else unsetenv(name);
    free(prev);
}

/* one row on one pass; returns 1 when it ran */
static int run_row(bo_ctx *c, const bo_row *r, h3_backend *target, int big) {
    int want = target->kind == H3_BACKEND_CUDA ? BO_CUDA : BO_CPU;
    if (!(r->where & want) && !(big && want == BO_CPU && (r->where & BO_CUDA) && !r->env)) return 0;
    if ((r->where & BO_PERF_ONLY) && !c->perf) return 0;
    char name[64] = "", *val = NULL, *prev = NULL;
    h3_backend *own = NULL;
    if (r->env) { /* a knob read when the backend is made (or at call time): a backend of its own */
        snprintf(name, sizeof name, "%s", r->env);
        val = strchr(name, '=');
        *val++ = 0;
        if (getenv(name)) prev = strdup(getenv(name));
        setenv(name, val, 1);
        if (target->kind == H3_BACKEND_CUDA) {
            h3_err e;
            own = h3_backend_new(H3_BACKEND_CUDA, 0, &e);
            CHECK(own != NULL, "[cuda] %s %s: a second CUDA backend: %s", r->op, r->name, own ? "" : e.msg);
            if (!own) {
                restore_env(name, prev);
                return 1;
            }
        }
    }
    c->be[1] = own ? own : target;
    c->row = r, c->checks = 0, c->label = NULL, c->flop = c->bytes = 0, c->thread_tol = 0.0;
    int failed0 = h3t_failed;
    if (!c->perf) printf("[%s] %s %s\n", c->tag, r->op, r->name);
    r->fn(c, r);
    bo_use(c, 1);
    bo_release(c);
    h3_sync(c->be[1]);
    h3_err e = {{0}};
    int bad = h3_backend_check(c->be[1], &e);
    CHECK(bad == 0, "[%s] %s %s: the backend recorded an error: %s", c->tag, r->op, r->name, e.msg);
    if (!c->perf) printf("[%s] %s %s: %s (%d checks)\n", c->tag, r->op, r->name, h3t_failed > failed0 ? "FAIL" : "ok", c->checks);
    if (own) h3_backend_free(own);
    if (r->env) restore_env(name, prev);
    c->be[1] = target;
    return 1;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* a crash keeps the lines before it */
    int perf = 0, reps = 0, big = 0, list = 0;
    const char *op = NULL, *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--perf")) perf = 1;
        else if (!strcmp(argv[i], "--big")) big = 1;
        else if (!strcmp(argv[i], "--list")) list = 1;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--op") && i + 1 < argc) op = argv[++i];
        else if (!strcmp(argv[i], "--backend") && i + 1 < argc) only = argv[++i];
        else {
            fprintf(stderr, "test_backend_ops: unknown argument '%s' (usage: [--perf [--reps N]] [--op NAME] "
                            "[--backend cpu|cuda] [--big] [--list])\n", argv[i]);
            return 2;
        }
    }
    if (only && strcmp(only, "cpu") && strcmp(only, "cuda")) {
        fprintf(stderr, "test_backend_ops: --backend must be cpu or cuda, got '%s'\n", only);
        return 2;
    }
    if (reps < 0 || reps > 1000) {
        fprintf(stderr, "test_backend_ops: --reps must be 1..1000\n");
        return 2;
    }
    int known = 0;
    for (int i = 0; i < NROWS; i++) {
        known |= !op || !strcmp(op, rows[i].op);
        if (list && (!op || !strcmp(op, rows[i].op)))
            printf("%-24s %-72s %s%s%s\n", rows[i].op, rows[i].name, rows[i].where & BO_CPU ? "cpu " : "",
                   rows[i].where & BO_CUDA ? "cuda " : "", rows[i].where & BO_PERF_ONLY ? "perf-only" : "");
    }
    if (!known) {
        fprintf(stderr, "test_backend_ops: --op %s: no such op in the table (--list shows them)\n", op);
        return 2;
    }
    if (list) return 0;
    h3_err e;
    h3_backend *cpu = h3_backend_new(H3_BACKEND_CPU, 0, &e);
    if (!cpu) {
        fprintf(stderr, "test_backend_ops: %s\n", e.msg);
        return 1;
    }
    const int nt = omp_get_max_threads() > 1 ? omp_get_max_threads() : 2;
    for (int pass = 0; pass < 2; pass++) {
        const char *tag = pass ? "cuda" : "cpu";
        if (only && strcmp(only, tag)) continue;
        h3_backend *target = cpu;
        if (pass) {
            target = h3_backend_new(H3_BACKEND_CUDA, 0, &e);
            if (!target) {
                if (only) CHECK(0, "no CUDA backend: %s", e.msg);
                else printf("note: no CUDA backend (%s): CPU cases only\n", e.msg);
                break;
            }
        }
        bo_ctx c;
        memset(&c, 0, sizeof c);
        c.be[0] = cpu, c.be[1] = target, c.cpu_pass = !pass, c.threads[0] = pass ? nt : 1, c.threads[1] = nt;
        c.perf = perf, c.reps = reps ? reps : pass ? 10 : 3, c.tag = tag;
        test_seed(pass ? 0x9E3779B97F4A7C15ull : 0x2545F4914F6CDD1Dull);
        printf("== backend %s%s (%s)\n", tag, perf ? " --perf" : "",
               perf ? "timings, nothing asserted but backend errors"
               : pass ? "vs the CPU twin, the rows' tolerances"
                      : "1 thread vs n threads bit for bit (BLAS rows within 1e-6 / 2e-4), references, aliasing");
        int ran = 0;
        for (int i = 0; i < NROWS; i++)
            if (!op || !strcmp(op, rows[i].op)) ran += run_row(&c, &rows[i], target, big);
        omp_set_num_threads(nt);
        printf("== backend %s: %d rows\n", tag, ran);
        if (pass) h3_backend_free(target);
    }
    h3_backend_free(cpu);
    TEST_END();
}
