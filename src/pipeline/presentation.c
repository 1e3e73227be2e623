/* Prompt presentations and rope positions (docs/model/text_encoder.md sections 2.8 and 4). */
#include "presentation.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/tokenizer.h"

void presentation_free(presentation *p) {
    if (!p) return;
    free(p->ids);
    free(p->tags);
    memset(p, 0, sizeof *p);
}

int presentation_tokenizer_encode(void *tokenizer, const char *text, int64_t **ids, int64_t *n, h3_err *e) {
    int32_t *v = NULL;
    size_t cnt = 0;
    *ids = NULL;
    *n = 0;
    if (tokenizer_encode((const h3_tokenizer *)tokenizer, text, strlen(text), &v, &cnt, e)) return -1;
    *ids = malloc((cnt + 1) * sizeof(int64_t));
    if (!*ids) {
        free(v);
        return h3_fail(e, "presentation: out of memory");
    }
    for (size_t i = 0; i < cnt; i++) (*ids)[i] = v[i];
    *n = (int64_t)cnt;
    free(v);
    return 0;
}

static int push(presentation *p, int64_t *cap, const int64_t *ids, int64_t n, int64_t fill_id, int tag, h3_err *e) {
    if (p->L + n > *cap) {
        int64_t c = *cap ? *cap : 256;
        while (c < p->L + n) c *= 2;
        int64_t *a = realloc(p->ids, (size_t)c * sizeof(int64_t));
        if (!a) return h3_fail(e, "presentation: out of memory");
        p->ids = a;
        int64_t *b = realloc(p->tags, (size_t)c * sizeof(int64_t));
        if (!b) return h3_fail(e, "presentation: out of memory");
        p->tags = b;
        *cap = c;
    }
    for (int64_t i = 0; i < n; i++) {
        p->ids[p->L + i] = ids ? ids[i] : fill_id;
        p->tags[p->L + i] = tag;
    }
    p->L += n;
    return 0;
}

static int text(pres_encode_fn enc, void *ctx, const char *s, presentation *p, int64_t *cap, h3_err *e) {
    int64_t *ids = NULL, n = 0;
    if (enc(ctx, s, &ids, &n, e)) return -1;
    int rc = push(p, cap, ids, n, 0, PRES_TAG_TEXT, e);
    free(ids);
    return rc;
}

/* VB(pad, n) = <|vision_start|> pad x n <|vision_end|>, every row tagged as video (docs/model/text_encoder.md 4). */
static int vision_block(int64_t pad, int64_t n, presentation *p, int64_t *cap, h3_err *e) {
    if (n <= 0) return h3_fail(e, "presentation: a vision block needs at least one token, got %lld", (long long)n);
    int64_t s = PRES_VISION_START, end = PRES_VISION_END;
    if (push(p, cap, &s, 1, 0, PRES_TAG_VIDEO, e) || push(p, cap, NULL, n, pad, PRES_TAG_VIDEO, e) ||
        push(p, cap, &end, 1, 0, PRES_TAG_VIDEO, e))
        return -1;
    return 0;
}

int presentation_check_prompt(const char *prompt, h3_err *e) {
    static const char *const banned[] = {"<|vision_start|>", "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>",
                                         "<|video_pad|>"};
    if (!prompt) return h3_fail(e, "prompt: missing");
    for (size_t i = 0; i < sizeof banned / sizeof banned[0]; i++)
        if (strstr(prompt, banned[i]))
            return h3_fail(e, "prompt: must not contain the vision special token %s (it would desynchronize rows "
                              "and vision features)", banned[i]);
    return 0;
}

int presentation_check_prompt_tokens(pres_encode_fn enc, void *ctx, const char *prompt, h3_err *e) {
    int64_t *ids = NULL, n = 0;
    if (enc(ctx, prompt, &ids, &n, e)) return -1;
    free(ids);
    if (n > PRES_MAX_PROMPT_TOKENS)
        return h3_fail(e, "-p: the prompt is %lld tokens (%zu bytes), more than the %d h3 accepts (docs/robustness.md)",
                       (long long)n, strlen(prompt), PRES_MAX_PROMPT_TOKENS);
    return 0;
}

int presentation_t2va(pres_encode_fn enc, void *ctx, const char *prompt, presentation *out, h3_err *e) {
    memset(out, 0, sizeof *out);
    if (presentation_check_prompt(prompt, e)) return -1;
    if (!prompt[0]) return h3_fail(e, "prompt: empty (t2va needs at least one token)");
    int64_t cap = 0;
    if (text(enc, ctx, prompt, out, &cap, e)) {
        presentation_free(out);
        return -1;
    }
    return 0;
}

int presentation_fl2va(pres_encode_fn enc, void *ctx, const char *prompt, int n_keyframes, const int64_t *tokens,
                       presentation *out, h3_err *e) {
    memset(out, 0, sizeof *out);
    if (presentation_check_prompt(prompt, e)) return -1;
    if (n_keyframes == 0) return presentation_t2va(enc, ctx, prompt, out, e);
    if (n_keyframes < 0 || n_keyframes > 2) return h3_fail(e, "fl2va: %d keyframes (0..2 allowed)", n_keyframes);
    int64_t cap = 0;
    for (int i = 0; i < n_keyframes; i++) {
        char label[64];
        snprintf(label, sizeof label, "<Picture %d>: ", i + 1);
        if (text(enc, ctx, label, out, &cap, e) || vision_block(PRES_IMAGE_PAD, tokens[i], out, &cap, e)) goto fail;
    }
    if (text(enc, ctx, prompt, out, &cap, e)) goto fail;
    return 0;
fail:
    presentation_free(out);
    return -1;
}

int presentation_ref2va(pres_encode_fn enc, void *ctx, const char *prompt, const pres_ref *refs, int n_refs,
                        presentation *out, h3_err *e) {
    memset(out, 0, sizeof *out);
    if (presentation_check_prompt(prompt, e)) return -1;
    int64_t cap = 0;
    int n_img = 0, n_vid = 0, n_aud = 0;
    char label[96];
    for (int r = 0; r < n_refs; r++) {
        const pres_ref *ref = &refs[r];
        if (ref->has_audio) { /* the audio label precedes the video label of the same video (trap 28) */
            snprintf(label, sizeof label, "<Audio %d>: ", ++n_aud);
            if (text(enc, ctx, label, out, &cap, e)) goto fail;
        }
        if (ref->kind == PRES_REF_IMAGE) {
            snprintf(label, sizeof label, "<Picture %d>: ", ++n_img);
            if (text(enc, ctx, label, out, &cap, e) || vision_block(PRES_IMAGE_PAD, ref->tokens, out, &cap, e)) goto fail;
        } else if (ref->kind == PRES_REF_VIDEO) {
            snprintf(label, sizeof label, "<Video %d>: ", ++n_vid);
            if (text(enc, ctx, label, out, &cap, e)) goto fail;
            if (ref->n_blocks < 1 || !ref->block_timestamps) {
                h3_fail(e, "ref2va: video reference %d has no vision blocks", n_vid);
                goto fail;
            }
            for (int b = 0; b < ref->n_blocks; b++) {
                /* Python "{:.1f}" = correctly rounded half-even on the binary value; glibc agrees */
                snprintf(label, sizeof label, "<%.1f seconds>", ref->block_timestamps[b]);
                if (text(enc, ctx, label, out, &cap, e) || vision_block(PRES_VIDEO_PAD, ref->tokens, out, &cap, e))
                    goto fail;
            }
        } else if (ref->kind != PRES_REF_AUDIO) {
            h3_fail(e, "ref2va: reference %d has an unknown kind", r);
            goto fail;
        }
    }
    if (text(enc, ctx, prompt, out, &cap, e)) goto fail;
    return 0;
fail:
    presentation_free(out);
    return -1;
}

int presentation_rope_index(const int64_t *ids, int64_t L, const int64_t *image_grid, int n_images,
                            const int64_t *video_grid, int n_videos, int merge, int64_t *pos, h3_err *e) {
    int64_t cur = 0;
    int img = 0, vid = 0, vid_block = 0;
    int64_t r = 0;
    while (r < L) {
        int mm = ids[r] == PRES_IMAGE_PAD ? 1 : ids[r] == PRES_VIDEO_PAD ? 2 : 0;
        int64_t end = r + 1;
        while (end < L && (ids[end] == PRES_IMAGE_PAD ? 1 : ids[end] == PRES_VIDEO_PAD ? 2 : 0) == mm) end++;
        int64_t n = end - r;
        if (mm == 0) {
            for (int64_t i = 0; i < n; i++) pos[r + i] = pos[L + r + i] = pos[2 * L + r + i] = cur + i;
            cur += n;
        } else {
            const int64_t *g;
            if (mm == 1) {
                if (img >= n_images) return h3_fail(e, "rope index: more image-pad runs than image grids (%d)", n_images);
                g = image_grid + 3 * img++;
            } else {
                if (vid >= n_videos) return h3_fail(e, "rope index: more video-pad runs than video blocks");
                g = video_grid + 3 * vid;
                if (++vid_block >= g[0]) vid++, vid_block = 0;
            }
            int64_t hh = g[1] / merge, ww = g[2] / merge;
            if (hh * ww != n)
                return h3_fail(e, "rope index: a %s run of %lld rows at row %lld does not match its grid %lldx%lld/%d^2",
                               mm == 1 ? "image-pad" : "video-pad", (long long)n, (long long)r, (long long)g[1],
                               (long long)g[2], merge);
            for (int64_t y = 0, i = 0; y < hh; y++)
                for (int64_t x = 0; x < ww; x++, i++) {
                    pos[r + i] = cur;
                    pos[L + r + i] = cur + y;
                    pos[2 * L + r + i] = cur + x;
                }
            cur += hh > ww ? hh : ww;
        }
        r = end;
    }
    if (img != n_images || vid != n_videos)
        return h3_fail(e, "rope index: %d of %d image grids and %d of %d videos were used by the pad runs", img,
                       n_images, vid, n_videos);
    return 0;
}
