/* Every line of the op table, for the files that generate code from it (ops.c, cpu/cpu_ops.h, cuda/cuda_ops.h):
 * the includer defines H3_OP(name, params, args) first and includes ops.h (the types) before this. No guard. */
#include "ops_linear.def"
#include "ops_attention.def"
#include "ops_norm.def"
#include "ops_eltwise.def"
#include "ops_conv.def"
#include "ops_transfer.def"
