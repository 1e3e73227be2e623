/* Normalization ops (the table's lines are in ops_norm.def; the rules shared by
 * every group are in ops.h). */
#ifndef H3_OPS_NORM_H
#define H3_OPS_NORM_H

#include <stdint.h>

#include "backend.h"

#define H3_OP(name, params, args) void h3_##name params;
#include "ops_norm.def"
#undef H3_OP

#endif
