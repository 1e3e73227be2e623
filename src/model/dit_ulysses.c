/* Ulysses sequence parallelism's exchange (dit_ulysses.h, docs/parallel.md). Layouts, per rank r with R rows and
 * nh heads, I = NH D, e-byte elements:
 *   send      to peer p: its heads' q/k/v of this rank's rows, [R][nh_p 3 D] (per-head [q k v]) or [R][3][nh_p D]
 *   heads     from peer p at row0[p]: [S][nh 3 D] or [S][3][nh D]: every row's q/k/v of this rank's heads
 *   att       [S][nh D]; rows of peer p go back to p
 *   send      (reused) from peer p: [R][nh_p D] at R head0[p] D, copied into out's columns head0[p] D.. */
#include "dit_ulysses.h"

#include <stdlib.h>
#include <string.h>

#include "../backend/ops.h"

void dit_ulysses_split(int64_t S, int NH, int n, int64_t *row0, int *head0) {
    row0[0] = 0, head0[0] = 0;
    for (int r = 0; r < n; r++) {
        row0[r + 1] = row0[r] + S / n + (r < S % n);
        head0[r + 1] = head0[r] + NH / n + (r < NH % n);
    }
}

int dit_ulysses_init(dit_ulysses *u, h3_backend *be, h3_comm *c, int64_t S, int NH, int D, size_t es, h3_err *e) {
    memset(u, 0, sizeof *u);
    u->comm = c, u->rank = h3_comm_rank(c), u->n = h3_comm_size(c);
    u->S = S, u->NH = NH, u->D = D, u->es = es;
    dit_ulysses_split(S, NH, u->n, u->row0, u->head0);
    const int64_t R = dit_ulysses_rows(u), nh = u->head0[u->rank + 1] - u->head0[u->rank], I = (int64_t)NH * D;
    u->send = h3_alloc(be, (size_t)(R * 3 * I) * es + 1);
    u->heads = h3_alloc(be, (size_t)(S * 3 * nh * D) * es + 1);
    u->att = h3_alloc(be, (size_t)(S * nh * D) * es + 1);
    if (!u->send || !u->heads || !u->att) {
        dit_ulysses_free(u, be);
        return h3_fail(e, "dit --parallel: rank %d: out of memory for the attention exchange (%lld rows, %lld heads)",
                       u->rank, (long long)R, (long long)nh);
    }
    return 0;
}

void dit_ulysses_free(dit_ulysses *u, h3_backend *be) {
    h3_free(be, u->send), h3_free(be, u->heads), h3_free(be, u->att);
    u->send = u->heads = u->att = NULL;
}

void dit_ulysses_attention(dit_ulysses *u, h3_backend *be, void *out, int64_t ldo, const void *q, const void *k,
                           const void *v, int64_t ld, int64_t hs, dit_attend_fn fn, void *arg) {
    if (u->failed) return;
    const int n = u->n, me = u->rank, D = u->D;
    const size_t es = u->es;
    const int64_t R = dit_ulysses_rows(u), nh = u->head0[me + 1] - u->head0[me];
    const char *qc = q, *kc = k, *vc = v;
    const int inter = hs == 3 * D && kc == qc + (size_t)D * es && vc == qc + (size_t)(2 * D) * es;
    size_t soff[H3_COMM_MAX_RANKS] = {0}, sb[H3_COMM_MAX_RANKS] = {0}, roff[H3_COMM_MAX_RANKS] = {0};
    size_t rb[H3_COMM_MAX_RANKS] = {0};
    size_t at = 0;
    for (int p = 0; p < n; p++) { /* pack: peer p's heads of this rank's rows, contiguous */
        const int64_t h0 = u->head0[p], np = u->head0[p + 1] - h0, w = np * D;
        char *dst = (char *)u->send + at;
        if (inter) {
            h3_copy_2d(be, dst, (size_t)(3 * w) * es, qc + (size_t)(h0 * 3 * D) * es, (size_t)ld * es, (size_t)(3 * w) * es,
                       (size_t)R);
        } else {
            const char *src[3] = {qc, kc, vc};
            for (int j = 0; j < 3; j++)
                h3_copy_2d(be, dst + (size_t)(j * w) * es, (size_t)(3 * w) * es, src[j] + (size_t)(h0 * hs) * es,
                           (size_t)ld * es, (size_t)w * es, (size_t)R);
        }
        soff[p] = at, sb[p] = (size_t)(R * 3 * w) * es, at += sb[p];
        const int64_t rp = u->row0[p + 1] - u->row0[p];
        roff[p] = (size_t)(u->row0[p] * 3 * nh * D) * es, rb[p] = (size_t)(rp * 3 * nh * D) * es;
    }
    if (h3_comm_alltoallv(u->comm, u->heads, roff, rb, u->send, soff, sb, &u->err) != 0) {
        u->failed = 1;
        return;
    }
    if (nh > 0) { /* a rank with no head has nothing to attend */
        const char *h = u->heads;
        const int64_t hld = 3 * nh * D;
        if (inter) fn(arg, be, u->att, nh * D, h, h + (size_t)D * es, h + (size_t)(2 * D) * es, hld, 3 * D, u->S, (int)nh, D);
        else fn(arg, be, u->att, nh * D, h, h + (size_t)(nh * D) * es, h + (size_t)(2 * nh * D) * es, hld, D, u->S, (int)nh, D);
    }
    at = 0;
    for (int p = 0; p < n; p++) { /* back: peer p's rows of this rank's heads; this rank's rows of p's heads */
        const int64_t rp = u->row0[p + 1] - u->row0[p], np = u->head0[p + 1] - u->head0[p];
        soff[p] = (size_t)(u->row0[p] * nh * D) * es, sb[p] = (size_t)(rp * nh * D) * es;
        roff[p] = at, rb[p] = (size_t)(R * np * D) * es, at += rb[p];
    }
    if (h3_comm_alltoallv(u->comm, u->send, roff, rb, u->att, soff, sb, &u->err) != 0) {
        u->failed = 1;
        return;
    }
    for (int p = 0; p < n; p++) {
        const int64_t w = (u->head0[p + 1] - u->head0[p]) * D;
        h3_copy_2d(be, (char *)out + (size_t)(u->head0[p] * D) * es, (size_t)ldo * es, (char *)u->send + roff[p],
                   (size_t)w * es, (size_t)w * es, (size_t)R);
    }
}

/* the two exchanges' sizes and offsets of this rank (dit_ulysses_attention's, without the packing) */
void dit_ulysses_idle(dit_ulysses *u) {
    if (u->failed) return;
    const int n = u->n, me = u->rank, D = u->D;
    const size_t es = u->es;
    const int64_t R = dit_ulysses_rows(u), nh = u->head0[me + 1] - u->head0[me];
    size_t soff[H3_COMM_MAX_RANKS] = {0}, sb[H3_COMM_MAX_RANKS] = {0}, roff[H3_COMM_MAX_RANKS] = {0};
    size_t rb[H3_COMM_MAX_RANKS] = {0}, at = 0;
    for (int p = 0; p < n; p++) {
        const int64_t np = u->head0[p + 1] - u->head0[p], rp = u->row0[p + 1] - u->row0[p];
        soff[p] = at, sb[p] = (size_t)(R * 3 * np * D) * es, at += sb[p];
        roff[p] = (size_t)(u->row0[p] * 3 * nh * D) * es, rb[p] = (size_t)(rp * 3 * nh * D) * es;
    }
    if (h3_comm_alltoallv(u->comm, u->heads, roff, rb, u->send, soff, sb, &u->err) != 0) {
        u->failed = 1;
        return;
    }
    at = 0;
    for (int p = 0; p < n; p++) {
        const int64_t rp = u->row0[p + 1] - u->row0[p], np = u->head0[p + 1] - u->head0[p];
        soff[p] = (size_t)(u->row0[p] * nh * D) * es, sb[p] = (size_t)(rp * nh * D) * es;
        roff[p] = at, rb[p] = (size_t)(R * np * D) * es, at += rb[p];
    }
    if (h3_comm_alltoallv(u->comm, u->send, roff, rb, u->att, soff, sb, &u->err) != 0) u->failed = 1;
}

/* ---- one rank's share of the inputs ---- */

/* the entries of idx[0..n) in [r0, r1): their positions (src) and values - r0 (dst) */
static int64_t select_rows(const int64_t *idx, int64_t n, int64_t r0, int64_t r1, int64_t *src, int64_t *dst) {
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++)
        if (idx[i] >= r0 && idx[i] < r1) src[k] = i, dst[k] = idx[i] - r0, k++;
    return k;
}

int dit_local_make(const dit_inputs *in, int64_t r0, int64_t r1, int64_t VP, int64_t CA, dit_local *l, h3_err *e) {
    memset(l, 0, sizeof *l);
    l->in = *in;
    l->in.S = r1 - r0;
    l->in.timestep_indices = in->timestep_indices + r0;
    l->in.token_tags = in->token_tags + r0;
    l->in.position_ids = in->position_ids + 3 * r0;
    const int64_t nv = in->Nv ? in->Nv : 1, na = in->Na ? in->Na : 1, nt = in->Nt ? in->Nt : 1;
    l->v_src = malloc((size_t)nv * sizeof(int64_t)), l->v_dst = malloc((size_t)nv * sizeof(int64_t));
    l->a_src = malloc((size_t)na * sizeof(int64_t)), l->a_dst = malloc((size_t)na * sizeof(int64_t));
    l->t_src = malloc((size_t)nt * sizeof(int64_t)), l->t_dst = malloc((size_t)nt * sizeof(int64_t));
    if (!l->v_src || !l->v_dst || !l->a_src || !l->a_dst || !l->t_src || !l->t_dst) goto oom;
    l->in.Nv = select_rows(in->video_indices, in->Nv, r0, r1, l->v_src, l->v_dst);
    l->in.Na = select_rows(in->audio_indices, in->Na, r0, r1, l->a_src, l->a_dst);
    l->nt = select_rows(in->text_indices, in->Nt, r0, r1, l->t_src, l->t_dst);
    l->video = malloc((size_t)((l->in.Nv ? l->in.Nv : 1) * VP) * sizeof(float));
    l->audio = malloc((size_t)((l->in.Na ? l->in.Na : 1) * CA) * sizeof(float));
    if (!l->video || !l->audio) goto oom;
    for (int64_t i = 0; i < l->in.Nv; i++)
        memcpy(l->video + i * VP, in->video + l->v_src[i] * VP, (size_t)VP * sizeof(float));
    for (int64_t i = 0; i < l->in.Na; i++)
        memcpy(l->audio + i * CA, in->audio + l->a_src[i] * CA, (size_t)CA * sizeof(float));
    l->in.video = l->video, l->in.audio = l->audio;
    l->in.video_indices = l->v_dst, l->in.audio_indices = l->a_dst;
    return 0;
oom:
    dit_local_free(l);
    return h3_fail(e, "dit --parallel: out of memory (rows %lld..%lld)", (long long)r0, (long long)r1);
}

void dit_local_put(const dit_local *l, float *video_out, float *audio_out, int64_t VP, int64_t CA) {
    for (int64_t i = 0; i < l->in.Nv; i++)
        memcpy(video_out + l->v_src[i] * VP, l->video + i * VP, (size_t)VP * sizeof(float));
    for (int64_t i = 0; i < l->in.Na; i++)
        memcpy(audio_out + l->a_src[i] * CA, l->audio + i * CA, (size_t)CA * sizeof(float));
}

void dit_local_free(dit_local *l) {
    free(l->v_src), free(l->v_dst), free(l->a_src), free(l->a_dst), free(l->t_src), free(l->t_dst);
    free(l->video), free(l->audio);
    memset(l, 0, sizeof *l);
}

int dit_local_text(h3_backend *be, const dit_local *l, void *X, const void *xt, int64_t H, int bf16, h3_err *e) {
    if (!l->nt) return 0;
    int32_t *src = h3_alloc(be, (size_t)l->nt * 4), *dst = h3_alloc(be, (size_t)l->nt * 4);
    int32_t *hs = malloc((size_t)l->nt * 4), *hd = malloc((size_t)l->nt * 4);
    float *tmp = h3_alloc(be, (size_t)(l->nt * H) * sizeof(float));
    int rc = 0;
    if (!src || !dst || !hs || !hd || !tmp) {
        rc = h3_fail(e, "dit --parallel: out of memory (%lld text rows)", (long long)l->nt);
    } else {
        for (int64_t i = 0; i < l->nt; i++) hs[i] = (int32_t)l->t_src[i], hd[i] = (int32_t)l->t_dst[i];
        h3_upload(be, src, hs, (size_t)l->nt * 4);
        h3_upload(be, dst, hd, (size_t)l->nt * 4);
        if (bf16) { /* bf16 -> fp32 -> bf16: exact */
            h3_bf16_rows_gather_f32(be, tmp, xt, src, l->nt, H);
            h3_bf16_rows_scatter_f32(be, X, tmp, dst, l->nt, H);
        } else {
            h3_rows_gather(be, tmp, xt, src, l->nt, H);
            h3_rows_scatter(be, X, tmp, dst, l->nt, H, 0);
        }
        h3_sync(be);
    }
    h3_free(be, src), h3_free(be, dst), h3_free(be, tmp);
    free(hs), free(hd);
    return rc;
}
