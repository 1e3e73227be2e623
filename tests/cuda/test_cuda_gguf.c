/* tests/test_gguf_dit.c on the CUDA backend (a GGUF transformer kept quantized on the GPU, docs/checkpoints.md):
 * the tiny GGUF's blocks expanded per block by the CUDA kernels on the copy stream give the dequantize-at-load bytes,
 * and the random GGUF models agree with the CPU's. Run from the repo root on the GPU machine. */
#define GGUF_DIT_CUDA 1
#include "../test_gguf_dit.c"
