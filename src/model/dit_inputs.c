/* The probe's DiT tensors (PROBE.md `dit`) -> dit_inputs (dit.h dit_inputs_from_tensors): the shape checks the
 * reference makes or relies on (docs/model/dit.md 3), one-line errors naming the tensor. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dit_internal.h"

/* ---------------------------------------------------------------- probe tensors -> inputs */

static int shape_is(const h3_tensor *t, int ndim, const int64_t *shape) {
    if (t->ndim != ndim) return 0;
    for (int i = 0; i < ndim; i++)
        if (shape[i] >= 0 && t->shape[i] != shape[i]) return 0;
    return 1;
}

static int bad_shape(h3_err *e, const char *name, const h3_tensor *t, const char *rule) {
    char s[128];
    return h3_fail(e, "input '%s': shape %s, %s", name, h3_shape_str(t->shape, t->ndim, s, sizeof s), rule);
}

int dit_inputs_from_tensors(const dit_config *c, const dit_tensors *t, int64_t b, dit_inputs *out, h3_err *e) {
    const h3_tensor *req[10] = {t->hidden_states, t->audio_hidden_states, t->encoder_hidden_states, t->timestep,
                                t->timestep_indices, t->token_tags, t->position_ids, t->video_indices,
                                t->audio_indices, t->text_indices};
    static const char *names[10] = {"hidden_states", "audio_hidden_states", "encoder_hidden_states", "timestep",
                                    "timestep_indices", "token_tags", "position_ids", "video_indices",
                                    "audio_indices", "text_indices"};
    static const h3_dtype want[10] = {H3_F32, H3_F32, H3_F32, H3_F32, H3_I64, H3_I64, H3_F64, H3_I64, H3_I64, H3_I64};
    for (int i = 0; i < 10; i++) {
        if (!req[i]) return h3_fail(e, "input '%s': missing", names[i]);
        if (req[i]->dtype != want[i])
            return h3_fail(e, "input '%s': dtype %s, expected %s", names[i], h3_dtype_name(req[i]->dtype),
                           h3_dtype_name(want[i]));
    }
    const h3_tensor *pos = t->position_ids;
    if (pos->ndim != 2 || pos->shape[1] != 3) return bad_shape(e, "position_ids", pos, "must be (seq_len, 3)");
    int64_t S = pos->shape[0];
    if (!shape_is(t->token_tags, 1, (int64_t[]){S}))
        return bad_shape(e, "token_tags", t->token_tags, "must be (seq_len,) matching position_ids");
    if (!shape_is(t->timestep_indices, 1, (int64_t[]){S}))
        return bad_shape(e, "timestep_indices", t->timestep_indices, "must be (seq_len,) matching position_ids");
    if (t->timestep->ndim != 1) return bad_shape(e, "timestep", t->timestep, "must be 1-D (the distinct values)");
    if (t->timestep->shape[0] < 1 || t->timestep->shape[0] > 1024)
        return bad_shape(e, "timestep", t->timestep, "must hold 1..1024 values");
    for (int i = 7; i < 10; i++)
        if (req[i]->ndim != 1) return bad_shape(e, names[i], req[i], "must be 1-D");
    int64_t Nv = t->video_indices->shape[0], Na = t->audio_indices->shape[0], Nt = t->text_indices->shape[0];
    int64_t VP = (int64_t)c->in_channels * c->patch_size[0] * c->patch_size[1] * c->patch_size[2];
    const h3_tensor *hv = t->hidden_states, *ha = t->audio_hidden_states, *ht = t->encoder_hidden_states;
    if (hv->ndim != 3 || hv->shape[0] < 1) return bad_shape(e, "hidden_states", hv, "must be (batch, video rows, patch dim)");
    int64_t B = hv->shape[0];
    char rule[160];
    snprintf(rule, sizeof rule, "must be (%lld, %lld, %lld): batch, len(video_indices), in_channels*prod(patch)",
             (long long)B, (long long)Nv, (long long)VP);
    if (!shape_is(hv, 3, (int64_t[]){B, Nv, VP})) return bad_shape(e, "hidden_states", hv, rule);
    snprintf(rule, sizeof rule, "must be (%lld, %lld, %d): batch, len(audio_indices), audio_in_channels",
             (long long)B, (long long)Na, c->audio_in_channels);
    if (!shape_is(ha, 3, (int64_t[]){B, Na, c->audio_in_channels})) return bad_shape(e, "audio_hidden_states", ha, rule);
    snprintf(rule, sizeof rule, "must be (%lld, %lld, %d): batch, len(text_indices), text_dim", (long long)B,
             (long long)Nt, c->text_dim);
    if (!shape_is(ht, 3, (int64_t[]){B, Nt, c->text_dim})) return bad_shape(e, "encoder_hidden_states", ht, rule);
    if (Nv + Na + Nt != S)
        return h3_fail(e, "input 'position_ids': %lld rows, but video (%lld) + audio (%lld) + text (%lld) indices "
                          "address %lld rows", (long long)S, (long long)Nv, (long long)Na, (long long)Nt,
                       (long long)(Nv + Na + Nt));
    if (b < 0 || b >= B) return h3_fail(e, "dit: batch item %lld outside [0, %lld)", (long long)b, (long long)B);
    memset(out, 0, sizeof *out);
    out->video = (const float *)hv->data + b * Nv * VP;
    out->audio = (const float *)ha->data + b * Na * c->audio_in_channels;
    out->text = (const float *)ht->data + b * Nt * c->text_dim;
    out->Nv = Nv, out->Na = Na, out->Nt = Nt, out->S = S;
    out->timestep = t->timestep->data;
    out->K = (int)t->timestep->shape[0];
    out->timestep_indices = t->timestep_indices->data;
    out->token_tags = t->token_tags->data;
    out->position_ids = pos->data;
    out->video_indices = t->video_indices->data;
    out->audio_indices = t->audio_indices->data;
    out->text_indices = t->text_indices->data;
    return 0;
}

/* ---------------------------------------------------------------- checks of a forward's inputs (dit_internal.h) */

/* Input checks the reference does (docs/model/dit.md 3) plus the ones it leaves out: tags in {0,1,2}, the three
 * index sets partition 0..S-1, timestep values finite, distinct and ascending. */
int dit_validate_inputs(const dit_inputs *in, h3_err *e, int rows_only) {
    if (in->S <= 0) return h3_fail(e, "dit: packed sequence length S must be positive, got %lld", (long long)in->S);
    if (rows_only) goto rows;
    if (in->Nv < 0 || in->Na < 0 || in->Nt < 0 || in->Nv + in->Na + in->Nt != in->S)
        return h3_fail(e, "dit: video (%lld) + audio (%lld) + text (%lld) rows must add up to S = %lld",
                       (long long)in->Nv, (long long)in->Na, (long long)in->Nt, (long long)in->S);
    if (in->S > INT32_MAX) return h3_fail(e, "dit: S = %lld is too large", (long long)in->S);
    if (in->K < 1) return h3_fail(e, "dit: 'timestep' must hold at least one value");
    if ((in->Nv && !in->video) || (in->Na && !in->audio) || (in->Nt && !in->text))
        return h3_fail(e, "dit: missing input array");
rows:
    if (in->K < 1) return h3_fail(e, "dit: 'timestep' must hold at least one value");
    if (!in->timestep || !in->timestep_indices || !in->token_tags || !in->position_ids)
        return h3_fail(e, "dit: missing input array");
    for (int k = 0; k < in->K; k++) {
        if (!isfinite(in->timestep[k])) return h3_fail(e, "dit: 'timestep'[%d] is not finite", k);
        if (k > 0 && !(in->timestep[k] > in->timestep[k - 1]))
            return h3_fail(e, "dit: 'timestep' values must be distinct and ascending (index %d: %.9g after %.9g)", k,
                           (double)in->timestep[k], (double)in->timestep[k - 1]);
    }
    for (int64_t s = 0; s < in->S; s++) {
        if (in->timestep_indices[s] < 0 || in->timestep_indices[s] >= in->K)
            return h3_fail(e, "dit: 'timestep_indices'[%lld] = %lld is outside [0, %d) (K = len(timestep))",
                           (long long)s, (long long)in->timestep_indices[s], in->K);
        if (in->token_tags[s] < 0 || in->token_tags[s] > 2)
            return h3_fail(e, "dit: 'token_tags'[%lld] = %lld must be 0 (video), 1 (text) or 2 (audio)",
                           (long long)s, (long long)in->token_tags[s]);
        for (int a = 0; a < 3; a++)
            if (!isfinite(in->position_ids[s * 3 + a]))
                return h3_fail(e, "dit: 'position_ids'[%lld] is not finite", (long long)s);
    }
    if (rows_only) return 0;
    uint8_t *seen = calloc((size_t)in->S, 1);
    if (!seen) return h3_fail(e, "out of memory");
    const struct { const char *name; const int64_t *idx; int64_t n; } sets[3] = {
        {"text_indices", in->text_indices, in->Nt},
        {"video_indices", in->video_indices, in->Nv},
        {"audio_indices", in->audio_indices, in->Na},
    };
    for (int j = 0; j < 3; j++) {
        if (sets[j].n && !sets[j].idx) {
            free(seen);
            return h3_fail(e, "dit: missing '%s'", sets[j].name);
        }
        for (int64_t i = 0; i < sets[j].n; i++) {
            int64_t r = sets[j].idx[i];
            if (r < 0 || r >= in->S || seen[r]) {
                free(seen);
                return h3_fail(e, "dit: '%s'[%lld] = %lld %s", sets[j].name, (long long)i, (long long)r,
                               r < 0 || r >= in->S ? "is outside [0, S)" : "addresses a row already taken "
                                                                         "(the index sets must partition 0..S-1)");
            }
            seen[r] = 1;
        }
    }
    free(seen);
    return 0;
}

/* Host int32 copy of an index list, uploaded. */
int32_t *dit_upload_index(h3_backend *be, const int64_t *src, int64_t n, int64_t mul, const int64_t *add) {
    int32_t *host = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    int32_t *dev = h3_alloc(be, (size_t)(n ? n : 1) * sizeof(int32_t));
    if (!host || !dev) {
        free(host);
        h3_free(be, dev);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) host[i] = (int32_t)(src[i] * mul + (add ? add[i] : 0));
    h3_upload(be, dev, host, (size_t)n * sizeof(int32_t));
    free(host);
    return dev;
}
