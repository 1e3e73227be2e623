/* Every op of the table (backend.h "The op table"), one header for the model code: the six groups by what they
 * compute. The rules they share:
 *
 * - Buffers are backend memory (host memory on the CPU backend, device memory on CUDA); strides are in elements;
 *   every op accepts rows = 0.
 * - fp32-buffer ops compute in fp32; with H3_BF16_OUT in `flags` they round to bf16 once per PyTorch op of the
 *   reference's bf16 mode, in the order each op's comment gives (docs/model/dit.md 0).
 * - h3_bf16_* ops keep activations as bf16 buffers (h3_bf16): the bf16 mode with half the bytes and tensor-core
 *   operands as they are. Tables (AdaLN rows, norm gains, rotary cos/sin) stay fp32. Their CPU twins widen, run the
 *   fp32 code of the fp32-buffer ops and round, so on the CPU the two forms are bit-identical; the CUDA twins use
 *   tensor cores (bf16 x bf16, fp32 accumulate) and fused kernels.
 * - Per-row tables (the DiT's AdaLN, docs/model/dit.md 4.5-4.9): `table` holds table rows of `table_stride` floats
 *   and packed row r reads table row row_index[r] (row_index in backend memory).
 * - The tile-batched video decoder (docs/model/video_vae.md 7, 11, 13) stacks the token rows of equally shaped tiles
 *   (each `period` rows) so that every linear is one GEMM while attention stays per tile (h3_vae_* ops); its
 *   residual stream is fp32, its GEMM and attention operands bf16, and on the CPU it is bit-identical to the
 *   per-tile decoder.
 * - The audio VAE's ops (docs/model/audio_vae.md 4) are channel-major [B][C][L] fp32 with PyTorch's weight layouts
 *   (weight norm folded by the model); every item b is independent (stereo = 2 items).
 * - The video encoder's 3-D ops (docs/model/video_vae.md 4) are one item, channel-major [C, T, H, W]; outputs never
 *   alias inputs. */
#ifndef H3_OPS_H
#define H3_OPS_H

#include "ops_attention.h"
#include "ops_conv.h"
#include "ops_eltwise.h"
#include "ops_linear.h"
#include "ops_norm.h"
#include "ops_transfer.h"

#endif
