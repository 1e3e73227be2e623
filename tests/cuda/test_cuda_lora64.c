/* tests/test_lora_random.c on CUDA at the release width (tests/fixtures/skeleton/transformer, 1 block) with a rank-64
 * random LoRA: merged at load == merged by hand, bit for bit, and the merge's cost. Run from the repo root. */
#define LORA_CUDA 1
#include "../test_lora_random.c"
