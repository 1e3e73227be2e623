/* Ulysses sequence parallelism inside one DiT forward (docs/parallel.md): rank r of N holds the packed rows
 * [row0[r], row0[r+1]) and, for attention only, the heads [head0[r], head0[r+1]) of every row. q, k and v go from
 * sequence-sharded to head-sharded with one all-to-all, the attention output comes back with a second. The split:
 * the first S mod N ranks one row more, the first H mod N ranks one head more (a rank may hold no head). Called by
 * dit.c and dit_block.c; calls only the backend and the communicator. */
#ifndef H3_DIT_ULYSSES_H
#define H3_DIT_ULYSSES_H

#include <stddef.h>
#include <stdint.h>

#include "../backend/comm.h"
#include "dit.h"

/* the attention of nh heads over all S rows on head-sharded buffers: q/k/v rows of stride ld, heads hs apart;
 * out [S][nh * D] (row stride ldo) */
typedef void (*dit_attend_fn)(void *arg, h3_backend *be, void *out, int64_t ldo, const void *q, const void *k,
                              const void *v, int64_t ld, int64_t hs, int64_t S, int nh, int D);

typedef struct dit_ulysses {
    h3_comm *comm;
    int      rank, n;
    int64_t  S, row0[H3_COMM_MAX_RANKS + 1];
    int      NH, D, head0[H3_COMM_MAX_RANKS + 1];
    size_t   es;         /* bytes per element: 4 (fp32 mode) or 2 (bf16) */
    void    *send;       /* [rows][3 I]: this rank's q/k/v pieces by peer; then the attention pieces received */
    void    *heads;      /* [S][3 nh D]: every row's q/k/v of this rank's heads */
    void    *att;        /* [S][nh D]: their attention output */
    int      failed;     /* an exchange failed (on every rank: the communicator agrees); err says why */
    h3_err   err;
} dit_ulysses;

/* The split of S rows and NH heads over n ranks (no communicator needed: the tests and the drivers use it too). */
void dit_ulysses_split(int64_t S, int NH, int n, int64_t *row0, int *head0);
/* rank's handle c, S packed rows, NH heads of D, es-byte elements: the split and the exchange buffers on be. */
int  dit_ulysses_init(dit_ulysses *u, h3_backend *be, h3_comm *c, int64_t S, int NH, int D, size_t es, h3_err *e);
void dit_ulysses_free(dit_ulysses *u, h3_backend *be);
static inline int64_t dit_ulysses_rows(const dit_ulysses *u) { return u->row0[u->rank + 1] - u->row0[u->rank]; }

/* The attention of this rank's rows (q, k, v of every head, row stride ld, heads hs apart: hs == 3 D with k = q + D
 * and v = q + 2 D is the original layout's per-head [q k v], else hs == D) -> out [rows][NH D] (row stride ldo):
 * exchange, attend on this rank's heads (fn), exchange back. A failed exchange sets u->failed (the same on every
 * rank), and later calls then do nothing. */
void dit_ulysses_attention(dit_ulysses *u, h3_backend *be, void *out, int64_t ldo, const void *q, const void *k,
                           const void *v, int64_t ld, int64_t hs, dit_attend_fn fn, void *arg);

/* Both exchanges of a block with whatever the buffers hold: a rank whose block failed (--ssd-streaming's copy)
 * keeps its peers' exchanges matched until the forward ends, then reports its error. */
void dit_ulysses_idle(dit_ulysses *u);

/* One rank's share of a forward's inputs (host): `in` with the rank's rows [r0, r1): S = r1 - r0, the per-row
 * arrays offset to r0, the video and audio input rows whose packed row falls there (copied; indices made local);
 * the text stays whole (the token refiner attends over every text row), its rows in the range listed in
 * t_src (rows of the text stream) and t_dst (local packed rows). */
typedef struct dit_local {
    dit_inputs in;
    int64_t   *v_src, *a_src, *t_src; /* input rows of the rank's video / audio / text rows */
    int64_t   *v_dst, *a_dst, *t_dst; /* their local packed rows */
    int64_t    nt;                    /* text rows in the range */
    float     *video, *audio;         /* the input rows, then (dit_local_put) the outputs of those rows */
} dit_local;
int  dit_local_make(const dit_inputs *in, int64_t r0, int64_t r1, int64_t VP, int64_t CA, dit_local *l, h3_err *e);
/* The outputs in l->video / l->audio ([n][VP], [n][CA]) to their rows of video_out / audio_out. */
void dit_local_put(const dit_local *l, float *video_out, float *audio_out, int64_t VP, int64_t CA);
void dit_local_free(dit_local *l);
/* X[t_dst[i]] = xt[t_src[i]] ([rows][H], fp32, or bf16 when bf16): the rank's text rows into its packed rows. */
int  dit_local_text(h3_backend *be, const dit_local *l, void *X, const void *xt, int64_t H, int bf16, h3_err *e);

#endif
