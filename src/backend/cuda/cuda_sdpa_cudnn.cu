/* Attention through cuDNN's fused flash SDPA, built with the cuDNN backend (graph) C API.
 *
 * The graph is the one cuDNN's runtime fusion engine recognizes as scaled dot-product attention
 * (inference, no mask, no dropout):
 *   S = Q . K^T (fp32)  ->  S * scale  ->  softmax(S) = exp(S - max(S)) / sum(exp(S - max(S)))  (fp32;
 *   the probabilities are a bf16 virtual tensor)  ->  O = P . V (bf16 out)
 * plus the log-sum-exp statistics max + log(sum) into a virtual tensor: cuDNN 9.14 rejects the graph
 * without them ("Dropout set of ops not configured correctly", seen on the H200), and with fp32
 * probabilities ("A and B need to have the same datatype").
 * Q is [1, Hq, Sq, D], K^T [1, Hkv, D, Skv] (K's strides swapped), V [1, Hkv, Skv, D], all bf16
 * head-major; O is written as rows [Sq][Hq*D] (strides {.., D, Hq*D, 1}). Grouped-query attention is
 * expressed by Hkv < Hq. One plan is built per shape and cached; the scale is a by-value tensor, so
 * it can change between calls. When no engine accepts the graph, the caller falls back to the own
 * flash kernel (cuda_attention.cu). */
#include "cuda_internal.h"
#include "cuda_vae.h"

#include <cudnn.h>
#include <stdlib.h>
#include <string.h>

enum { SDPA_MAX_DESC = 64, SDPA_CACHE = 16, SDPA_DEFAULT_VARIANT = 1 };
enum { UID_Q = 1, UID_K = 2, UID_V = 3, UID_O = 4, UID_SCALE = 5, UID_STATS = 6 };

typedef struct sdpa_plan {
    int64_t                  Sq, Skv;
    int64_t                  st[7]; /* element strides: q row, q head, k row, k head, v row, v head, o row */
    int64_t                  B, bst[4]; /* batch (cuda_cudnn_attention_bf16_batched) and its q, k, v, o strides */
    int                      Hq, Hkv, D;
    cudnnBackendDescriptor_t plan;
    int64_t                  workspace;
    cudnnBackendDescriptor_t owned[SDPA_MAX_DESC]; /* every descriptor the plan was built from */
    int                      n_owned;
    int                      failed; /* no engine for this shape: use the own kernel */
    int                      variant; /* graph variant (H3_CUDNN_VARIANT, tuning): bit 0 stats ops, bit 1
                                         stats written to memory, bit 2 fp32 probabilities */
} sdpa_plan;

typedef struct sdpa_state {
    cudnnHandle_t handle;
    int           disabled; /* H3_ATTN=own, or cudnnCreate failed */
    sdpa_plan     plans[SDPA_CACHE];
    int           next;
} sdpa_state;

/* The fprintf calls of this file say why a cuDNN plan was not built; the op then falls back to the own kernel
 * (not an error). Kept on stderr: the plan is built inside an op, which has no log callback (docs/tuning.md). */
#define CK(call)                                                                     \
    do {                                                                             \
        cudnnStatus_t st_ = (call);                                                  \
        if (st_ != CUDNN_STATUS_SUCCESS) {                                           \
            char msg_[256];                                                          \
            cudnnGetLastErrorString(msg_, sizeof msg_);                              \
            fprintf(stderr, "h3: cudnn sdpa: %s failed: %s (%s)\n", #call, cudnnGetErrorString(st_), msg_); \
            return -1;                                                               \
        }                                                                            \
    } while (0)

static int new_desc(sdpa_plan *p, cudnnBackendDescriptorType_t type, cudnnBackendDescriptor_t *d) {
    if (p->n_owned >= SDPA_MAX_DESC) {
        fprintf(stderr, "h3: cudnn sdpa: more than %d descriptors\n", SDPA_MAX_DESC);
        return -1;
    }
    CK(cudnnBackendCreateDescriptor(type, d));
    p->owned[p->n_owned++] = *d;
    return 0;
}

static int tensor(sdpa_plan *p, cudnnBackendDescriptor_t *t, int64_t uid, cudnnDataType_t dt, const int64_t dims[4],
                  const int64_t strides[4], bool is_virtual, bool by_value) {
    int64_t align = 16;
    if (new_desc(p, CUDNN_BACKEND_TENSOR_DESCRIPTOR, t)) return -1;
    CK(cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt));
    CK(cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims));
    CK(cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides));
    CK(cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
    CK(cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align));
    CK(cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual));
    if (by_value) CK(cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value));
    CK(cudnnBackendFinalize(*t));
    return 0;
}

/* y = mode(x[, b]) in fp32 */
static int pointwise(sdpa_plan *p, cudnnBackendDescriptor_t *op, cudnnPointwiseMode_t mode,
                     cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t y) {
    cudnnBackendDescriptor_t pw;
    cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    if (new_desc(p, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, &pw)) return -1;
    CK(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode));
    CK(cudnnBackendSetAttribute(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec));
    CK(cudnnBackendFinalize(pw));
    if (new_desc(p, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, op)) return -1;
    CK(cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw));
    CK(cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x));
    if (b) CK(cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b));
    CK(cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y));
    CK(cudnnBackendFinalize(*op));
    return 0;
}

static int reduction(sdpa_plan *p, cudnnBackendDescriptor_t *op, cudnnReduceTensorOp_t mode,
                     cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    cudnnBackendDescriptor_t rd;
    cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    if (new_desc(p, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, &rd)) return -1;
    CK(cudnnBackendSetAttribute(rd, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode));
    CK(cudnnBackendSetAttribute(rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &prec));
    CK(cudnnBackendFinalize(rd));
    if (new_desc(p, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, op)) return -1;
    CK(cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &rd));
    CK(cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x));
    CK(cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y));
    CK(cudnnBackendFinalize(*op));
    return 0;
}

static int matmul(sdpa_plan *p, cudnnBackendDescriptor_t *op, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
                  cudnnBackendDescriptor_t c) {
    cudnnBackendDescriptor_t mm;
    cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    if (new_desc(p, CUDNN_BACKEND_MATMUL_DESCRIPTOR, &mm)) return -1;
    CK(cudnnBackendSetAttribute(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &prec));
    CK(cudnnBackendFinalize(mm));
    if (new_desc(p, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, op)) return -1;
    CK(cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a));
    CK(cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b));
    CK(cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c));
    CK(cudnnBackendSetAttribute(*op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm));
    CK(cudnnBackendFinalize(*op));
    return 0;
}

static int build_plan(cudnnHandle_t handle, sdpa_plan *p) {
    int64_t Sq = p->Sq, Skv = p->Skv, Hq = p->Hq, Hkv = p->Hkv, D = p->D;
    const cudnnDataType_t BF = CUDNN_DATA_BFLOAT16, F = CUDNN_DATA_FLOAT;
    cudnnBackendDescriptor_t q, kt, v, o, scale, s, ss, mx, sub, ex, sum, prob;
    const int64_t *t = p->st; /* [1, H, S, D] views with the caller's row and head strides */
    const int64_t B = p->B > 1 ? p->B : 1, *b = p->bst; /* batch strides only matter for B > 1 */
    int64_t qd[4] = {B, Hq, Sq, D}, qs[4] = {B > 1 ? b[0] : Sq * t[0] + Hq * t[1], t[1], t[0], 1};
    int64_t kd[4] = {B, Hkv, D, Skv}, ks[4] = {B > 1 ? b[1] : Skv * t[2] + Hkv * t[3], t[3], 1, t[2]};
    int64_t vd[4] = {B, Hkv, Skv, D}, vs[4] = {B > 1 ? b[2] : Skv * t[4] + Hkv * t[5], t[5], t[4], 1};
    int64_t od[4] = {B, Hq, Sq, D}, os[4] = {B > 1 ? b[3] : Sq * t[6] + Hq * D, D, t[6], 1};
    int64_t one[4] = {1, 1, 1, 1};
    int64_t sd[4] = {B, Hq, Sq, Skv}, sst[4] = {Hq * Sq * Skv, Sq * Skv, Skv, 1};
    int64_t rd[4] = {B, Hq, Sq, 1}, rs[4] = {Hq * Sq, Sq, 1, 1};
    if (tensor(p, &q, UID_Q, BF, qd, qs, false, false) || tensor(p, &kt, UID_K, BF, kd, ks, false, false) ||
        tensor(p, &v, UID_V, BF, vd, vs, false, false) || tensor(p, &o, UID_O, BF, od, os, false, false) ||
        tensor(p, &scale, UID_SCALE, F, one, one, false, true) || tensor(p, &s, 100, F, sd, sst, true, false) ||
        tensor(p, &ss, 101, F, sd, sst, true, false) || tensor(p, &mx, 102, F, rd, rs, true, false) ||
        tensor(p, &sub, 103, F, sd, sst, true, false) || tensor(p, &ex, 104, F, sd, sst, true, false) ||
        tensor(p, &sum, 105, F, rd, rs, true, false) ||
        tensor(p, &prob, 106, (p->variant & 4) ? F : BF, sd, sst, true, false))
        return -1;
    cudnnBackendDescriptor_t ops[10];
    int nops = 0;
    if (matmul(p, &ops[nops++], q, kt, s) || pointwise(p, &ops[nops++], CUDNN_POINTWISE_MUL, s, scale, ss) ||
        reduction(p, &ops[nops++], CUDNN_REDUCE_TENSOR_MAX, ss, mx) ||
        pointwise(p, &ops[nops++], CUDNN_POINTWISE_SUB, ss, mx, sub) ||
        pointwise(p, &ops[nops++], CUDNN_POINTWISE_EXP, sub, NULL, ex) ||
        reduction(p, &ops[nops++], CUDNN_REDUCE_TENSOR_ADD, ex, sum))
        return -1;
    if (p->variant & 1) { /* log-sum-exp statistics: max + log(sum) */
        cudnnBackendDescriptor_t lg, st;
        if (tensor(p, &lg, 107, F, rd, rs, true, false) ||
            tensor(p, &st, UID_STATS, F, rd, rs, (p->variant & 2) == 0, false) ||
            pointwise(p, &ops[nops++], CUDNN_POINTWISE_LOG, sum, NULL, lg) ||
            pointwise(p, &ops[nops++], CUDNN_POINTWISE_ADD, mx, lg, st))
            return -1;
    }
    if (pointwise(p, &ops[nops++], CUDNN_POINTWISE_DIV, ex, sum, prob) || matmul(p, &ops[nops++], prob, v, o)) return -1;

    cudnnBackendDescriptor_t graph;
    if (new_desc(p, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &graph)) return -1;
    CK(cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, nops, ops));
    CK(cudnnBackendSetAttribute(graph, (cudnnBackendAttributeName_t)800 /* OPERATIONGRAPH_HANDLE */, CUDNN_TYPE_HANDLE,
                                1, &handle));
    CK(cudnnBackendFinalize(graph));

    /* heuristics: mode A, then the fallback list */
    cudnnBackendDescriptor_t heur = NULL;
    int64_t n_cfg = 0;
    cudnnBackendHeurMode_t modes[2] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
    for (int mi = 0; mi < 2 && n_cfg <= 0; mi++) {
        if (new_desc(p, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur)) return -1;
        CK(cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                    &graph));
        CK(cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &modes[mi]));
        CK(cudnnBackendFinalize(heur));
        CK(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n_cfg,
                                    NULL));
        if (h3_knob_get(H3_KNOB_CUDNN_VERBOSE))
            fprintf(stderr, "h3: cudnn sdpa: heuristic mode %d lists %lld configurations\n", (int)modes[mi],
                    (long long)n_cfg);
    }
    if (n_cfg <= 0) {
        fprintf(stderr, "h3: cudnn sdpa: no engine configuration for Sq %lld Skv %lld Hq %lld Hkv %lld D %lld\n",
                (long long)Sq, (long long)Skv, (long long)Hq, (long long)Hkv, (long long)D);
        return -1;
    }
    if (n_cfg > 16) n_cfg = 16;
    cudnnBackendDescriptor_t cfg[16];
    for (int64_t i = 0; i < n_cfg; i++)
        if (new_desc(p, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg[i])) return -1;
    int64_t got = 0;
    CK(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n_cfg, &got, cfg));
    for (int64_t i = 0; i < got; i++) {
        cudnnBackendDescriptor_t plan;
        if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan) != CUDNN_STATUS_SUCCESS) continue;
        if (cudnnBackendSetAttribute(plan, (cudnnBackendAttributeName_t)400 /* EXECUTION_PLAN_HANDLE */,
                                     CUDNN_TYPE_HANDLE, 1, &handle) == CUDNN_STATUS_SUCCESS &&
            cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                     &cfg[i]) == CUDNN_STATUS_SUCCESS &&
            cudnnBackendFinalize(plan) == CUDNN_STATUS_SUCCESS) {
            int64_t ws = 0, n = 0;
            cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &ws);
            p->plan = plan;
            p->workspace = ws;
            return 0;
        }
        char msg[256];
        cudnnGetLastErrorString(msg, sizeof msg);
        fprintf(stderr, "h3: cudnn sdpa: engine config %lld rejected (%s)\n", (long long)i, msg);
        cudnnBackendDestroyDescriptor(plan);
    }
    fprintf(stderr, "h3: cudnn sdpa: none of %lld engine configurations finalized\n", (long long)got);
    return -1;
}

static void release_plan(sdpa_plan *p) {
    if (p->plan) cudnnBackendDestroyDescriptor(p->plan);
    for (int i = p->n_owned - 1; i >= 0; i--) cudnnBackendDestroyDescriptor(p->owned[i]);
    memset(p, 0, sizeof *p);
}

static sdpa_state *state_of(h3_backend *be) {
    cuda_impl *c = cuda_of(be);
    if (!c->sdpa) {
        sdpa_state *s = (sdpa_state *)calloc(1, sizeof *s);
        if (!s) return NULL;
        const char *impl = h3_knob_get(H3_KNOB_ATTN);
        s->disabled = impl && strcmp(impl, "own") == 0;
        if (!s->disabled && (cudnnCreate(&s->handle) != CUDNN_STATUS_SUCCESS ||
                             cudnnSetStream(s->handle, c->stream) != CUDNN_STATUS_SUCCESS))
            s->disabled = 1;
        c->sdpa = s;
    }
    return (sdpa_state *)c->sdpa;
}

extern "C" void cuda_sdpa_release(h3_backend *be) {
    sdpa_state *s = (sdpa_state *)cuda_of(be)->sdpa;
    if (!s) return;
    for (int i = 0; i < SDPA_CACHE; i++) release_plan(&s->plans[i]);
    if (s->handle) cudnnDestroy(s->handle);
    free(s);
    cuda_of(be)->sdpa = NULL;
}

extern "C" void cuda_set_attention_cudnn(h3_backend *be, int enable) {
    sdpa_state *s = state_of(be);
    if (s) s->disabled = !enable || !s->handle;
}

extern "C" int cuda_cudnn_attention_bf16(h3_backend *be, uint16_t *o, const uint16_t *q, const uint16_t *k,
                                         const uint16_t *v, int64_t Sq, int64_t Skv, int Hq, int Hkv, int D,
                                         float scale) {
    return cuda_cudnn_attention_bf16_strided(be, o, (int64_t)Hq * D, q, D, Sq * D, k, D, Skv * D, v, D, Skv * D, Sq,
                                             Skv, Hq, Hkv, D, scale);
}

extern "C" int cuda_cudnn_attention_bf16_strided(h3_backend *be, uint16_t *o, int64_t o_rs, const uint16_t *q,
                                                 int64_t q_rs, int64_t q_hs, const uint16_t *k, int64_t k_rs,
                                                 int64_t k_hs, const uint16_t *v, int64_t v_rs, int64_t v_hs,
                                                 int64_t Sq, int64_t Skv, int Hq, int Hkv, int D, float scale) {
    const int64_t bst[4] = {0, 0, 0, 0};
    return cuda_cudnn_attention_bf16_batched(be, 1, bst, o, o_rs, q, q_rs, q_hs, k, k_rs, k_hs, v, v_rs, v_hs, Sq, Skv,
                                             Hq, Hkv, D, scale);
}

/* B independent attentions in one call (the video VAE decoder's tiles): batch b's q/k/v/o start bst[0..3] elements
 * after batch b-1's; otherwise as the strided form. */
extern "C" int cuda_cudnn_attention_bf16_batched(h3_backend *be, int64_t B, const int64_t bst[4], uint16_t *o,
                                                 int64_t o_rs, const uint16_t *q, int64_t q_rs, int64_t q_hs,
                                                 const uint16_t *k, int64_t k_rs, int64_t k_hs, const uint16_t *v,
                                                 int64_t v_rs, int64_t v_hs, int64_t Sq, int64_t Skv, int Hq, int Hkv,
                                                 int D, float scale) {
    const int64_t st[7] = {q_rs, q_hs, k_rs, k_hs, v_rs, v_hs, o_rs};
    if (B < 1) B = 1;
    sdpa_state *s = state_of(be);
    if (!s || s->disabled) return -1;
    sdpa_plan *p = NULL;
    for (int i = 0; i < SDPA_CACHE; i++) {
        sdpa_plan *c = &s->plans[i];
        if ((c->plan || c->failed) && c->Sq == Sq && c->Skv == Skv && c->Hq == Hq && c->Hkv == Hkv && c->D == D &&
            memcmp(c->st, st, sizeof st) == 0 && c->B == B && (B == 1 || memcmp(c->bst, bst, sizeof c->bst) == 0)) {
            p = c;
            break;
        }
    }
    if (!p) {
        p = &s->plans[s->next];
        s->next = (s->next + 1) % SDPA_CACHE;
        release_plan(p);
        p->Sq = Sq, p->Skv = Skv, p->Hq = Hq, p->Hkv = Hkv, p->D = D;
        memcpy(p->st, st, sizeof st);
        p->B = B;
        memcpy(p->bst, bst, sizeof p->bst);
        const char *var = h3_knob_get(H3_KNOB_CUDNN_VARIANT);
        p->variant = var ? atoi(var) : SDPA_DEFAULT_VARIANT;
        if (build_plan(s->handle, p) != 0) {
            for (int i = p->n_owned - 1; i >= 0; i--) cudnnBackendDestroyDescriptor(p->owned[i]);
            p->n_owned = 0;
            p->failed = 1;
        }
    }
    if (p->failed) return -1;
    void *ws = p->workspace > 0 ? cuda_scratch(be, (size_t)p->workspace) : NULL;
    if (p->workspace > 0 && !ws) return -1;
    int has_stats = (p->variant & 3) == 3;
    void *stats = has_stats ? cuda_scratch(be, (size_t)(B * Hq * Sq) * sizeof(float)) : NULL;
    int64_t uids[6] = {UID_Q, UID_K, UID_V, UID_O, UID_SCALE, UID_STATS};
    void *ptrs[6] = {(void *)q, (void *)k, (void *)v, (void *)o, &scale, stats};
    int n_ptr = has_stats ? 6 : 5;
    cudnnBackendDescriptor_t pack;
    int rc = -1;
    if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack) == CUDNN_STATUS_SUCCESS) {
        cudnnStatus_t st;
        if ((st = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n_ptr, uids)) ==
                CUDNN_STATUS_SUCCESS &&
            (st = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n_ptr, ptrs)) ==
                CUDNN_STATUS_SUCCESS &&
            (st = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws)) ==
                CUDNN_STATUS_SUCCESS &&
            (st = cudnnBackendFinalize(pack)) == CUDNN_STATUS_SUCCESS &&
            (st = cudnnBackendExecute(s->handle, p->plan, pack)) == CUDNN_STATUS_SUCCESS)
            rc = 0;
        if (rc) {
            char msg[256];
            cudnnGetLastErrorString(msg, sizeof msg);
            cuda_record_error(be, "cudnn sdpa execute", msg[0] ? msg : cudnnGetErrorString(st));
        }
        cudnnBackendDestroyDescriptor(pack);
    }
    if (ws) cuda_free(be, ws);
    if (stats) cuda_free(be, stats);
    return rc;
}
