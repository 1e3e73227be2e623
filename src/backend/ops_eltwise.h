/* Element-wise ops (the table's lines are in ops_eltwise.def; the rules shared by
 * every group are in ops.h). */
#ifndef H3_OPS_ELTWISE_H
#define H3_OPS_ELTWISE_H

#include <stdint.h>

#include "backend.h"

#define H3_OP(name, params, args) void h3_##name params;
#include "ops_eltwise.def"
#undef H3_OP

#endif
