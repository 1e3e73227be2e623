/* Convolution ops (the table's lines are in ops_conv.def; the rules shared by every group are in ops.h). Their
 * output lengths and geometry checks live in conv_shapes.h, below both twins. */
#ifndef H3_OPS_CONV_H
#define H3_OPS_CONV_H

#include <stdint.h>

#include "backend.h"
#include "conv_shapes.h" /* h3_conv3d_geom, h3_conv3d_check, h3_conv1d_out_len, H3_AF_TAPS */

#define H3_OP(name, params, args) void h3_##name params;
#include "ops_conv.def"
#undef H3_OP

#endif
