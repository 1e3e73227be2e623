/* Packed layouts, row timestep plans and request geometry (docs/model/dit.md 5, 6, 10). All position arithmetic
 * is fp64 and follows the reference's operation order (numpy linspace, torch cumsum, numpy pairwise
 * sum, Python sum) so every coordinate is bit-identical. */
#include "layout.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- geometry ---- */

enum { FRAMES_PER_CHUNK = 17, LATENTS_PER_CHUNK = 5, AUDIO_LATENTS_PER_SECOND = 40 };

int layout_align_num_frames(int num_frames, int *aligned, h3_err *e) {
    if (num_frames < 1) return h3_fail(e, "num_frames: must be positive, got %d", num_frames);
    if (num_frames > 1000000) return h3_fail(e, "num_frames: %d is out of range", num_frames);
    while (num_frames % FRAMES_PER_CHUNK != LATENTS_PER_CHUNK) num_frames++;
    *aligned = num_frames;
    return 0;
}

int layout_check_duration(int requested, int aligned, h3_err *e) {
    /* 5.0 <= aligned / 24 <= 15.0, i.e. 120 <= aligned <= 360 (exact in integers). */
    if (aligned < 5 * LAYOUT_FPS || aligned > 15 * LAYOUT_FPS)
        return h3_fail(e,
                       "num_frames: MiniMax-H3 generates between 5 and 15 seconds at 24 fps, so num_frames, rounded "
                       "up to the next 17 * n + 5, must be between 120 and 360, got %d (rounded up to %d)",
                       requested, aligned);
    return 0;
}

int layout_latent_frames(int aligned, int *num_latent_frames, h3_err *e) {
    if (aligned < 1 || aligned % FRAMES_PER_CHUNK != LATENTS_PER_CHUNK)
        return h3_fail(e, "num_frames: must be of the form 17 * n + 5, got %d", aligned);
    *num_latent_frames = (aligned - LATENTS_PER_CHUNK) / FRAMES_PER_CHUNK * LATENTS_PER_CHUNK + 2;
    return 0;
}

int layout_audio_latents(int num_frames) {
    /* int(round(n / 24 * 40)) in doubles; 5n/3 never ends in .5, so round-half-to-even never decides. */
    return (int)nearbyint((double)num_frames / LAYOUT_FPS * AUDIO_LATENTS_PER_SECOND);
}

int layout_resolve_canvas(double aspect_width, double aspect_height, int *height, int *width, h3_err *e) {
    if (!(aspect_width > 0) || !(aspect_height > 0))
        return h3_fail(e, "aspect ratio: must be positive, got %g:%g", aspect_width, aspect_height);
    const double ratio = aspect_width / aspect_height;
    if (!(ratio >= 1.0 / 4 && ratio <= 4.0))
        return h3_fail(e, "aspect ratio: MiniMax-H3 supports aspect ratios from 1:4 to 4:1, got %g:%g (%g)",
                       aspect_width, aspect_height, ratio);
    double w, h;
    if (ratio >= 1.0) { w = LAYOUT_CANVAS_SHORT_EDGE * ratio; h = LAYOUT_CANVAS_SHORT_EDGE; }
    else              { w = LAYOUT_CANVAS_SHORT_EDGE; h = LAYOUT_CANVAS_SHORT_EDGE / ratio; }
    const double area = w * h;
    if (area > LAYOUT_CANVAS_MAX_PIXELS) {
        const double scale = pow(LAYOUT_CANVAS_MAX_PIXELS / area, 0.5); /* Python's `** 0.5` is C pow */
        w = w * scale;
        h = h * scale;
    }
    /* Python round() is round-half-to-even: nearbyint in the default rounding mode. */
    const int m = LAYOUT_CANVAS_MULTIPLE;
    int hh = (int)nearbyint(h / m) * m, ww = (int)nearbyint(w / m) * m;
    *height = hh > m ? hh : m;
    *width = ww > m ? ww : m;
    return 0;
}

int layout_check_canvas(int have_height, int have_width, int height, int width, h3_err *e) {
    if (!!have_height != !!have_width)
        return h3_fail(e, "--height/--width: have to be passed together, or neither of them");
    if (have_height) {
        if (height <= 0 || width <= 0 || height % LAYOUT_CANVAS_MULTIPLE || width % LAYOUT_CANVAS_MULTIPLE)
            return h3_fail(e, "--height/--width: must be positive multiples of %d, got %dx%d", LAYOUT_CANVAS_MULTIPLE,
                           height, width);
    }
    return 0;
}

int layout_resolve_geometry(int height, int width, int num_frames, layout_geometry *g, h3_err *e) {
    memset(g, 0, sizeof *g);
    if (layout_check_canvas(height > 0, width > 0, height, width, e)) return -1;
    if (height <= 0 && layout_resolve_canvas(16, 9, &height, &width, e)) return -1;
    int aligned = 0;
    if (layout_align_num_frames(num_frames, &aligned, e)) return -1;
    if (layout_check_duration(num_frames, aligned, e)) return -1;
    g->height = height;
    g->width = width;
    g->num_frames = aligned;
    if (layout_latent_frames(aligned, &g->num_latent_frames, e)) return -1;
    g->latent_height = height / 16;
    g->latent_width = width / 16;
    g->num_audio_latents = layout_audio_latents(aligned);
    return 0;
}

/* ---- grids ---- */

static const double ROPE_FRAME_RESCALE = 5.0 / 3.0;
static const int ROPE_FRAMES_PER_LATENT[5] = {1, 4, 4, 4, 4};
static const double ROPE_SPATIAL_SCALE = 32.0;

static double frame_span(int index) { return ROPE_FRAME_RESCALE * ROPE_FRAMES_PER_LATENT[index % 5]; }

void layout_spatial_grid(int dim, double sqrt_area, double *grid) {
    const int n = dim / LAYOUT_PATCH;
    const double ratio = (double)dim / sqrt_area;
    const double left = (1.0 - ratio) / 2.0;
    const double stop = left + ratio;
    const double step = (stop - left) / n;  /* numpy: delta / div, not ratio / n */
    for (int k = 0; k < n; k++) grid[k] = ((double)k * step + left) * ROPE_SPATIAL_SCALE;
}

void layout_temporal_grid(int num_latent_frames, double origin, double *times) {
    /* origin + cat([0], cumsum(spans[:-1])): the running sum is sequential and origin added last. */
    double c = 0.0;
    for (int f = 0; f < num_latent_frames; f++) {
        times[f] = origin + c;
        c += frame_span(f);
    }
}

/* numpy's pairwise summation (umath loops, PW_BLOCKSIZE 128) over spans[first .. first+n-1]. */
static double pairwise_span_sum(int first, int n) {
    if (n < 8) {
        double res = 0.0;
        for (int i = 0; i < n; i++) res += frame_span(first + i);
        return res;
    }
    if (n <= 128) {
        double r[8];
        for (int j = 0; j < 8; j++) r[j] = frame_span(first + j);
        int i;
        for (i = 8; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++) r[j] += frame_span(first + i + j);
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) res += frame_span(first + i);
        return res;
    }
    int n2 = n / 2;
    n2 -= n2 % 8;
    return pairwise_span_sum(first, n2) + pairwise_span_sum(first + n2, n - n2);
}

double layout_last_anchor_time(int64_t T, int num_latent_frames) {
    return ((double)T + pairwise_span_sum(0, num_latent_frames)) - ROPE_FRAME_RESCALE;
}

/* The (h, w) of every row of one latent frame (row-major patch order) and its width axis. */
typedef struct frame_grid {
    int     ph, pw;
    double *h, *w;  /* [ph], [pw] */
} frame_grid;

static int frame_grid_init(frame_grid *g, int lh, int lw, h3_err *e) {
    g->h = g->w = NULL;
    if (lh <= 0 || lw <= 0 || lh % LAYOUT_PATCH || lw % LAYOUT_PATCH)
        return h3_fail(e, "layout: latent grid %dx%d must be positive and divisible by the patch (2, 2)", lh, lw);
    g->ph = lh / LAYOUT_PATCH;
    g->pw = lw / LAYOUT_PATCH;
    g->h = malloc(sizeof(double) * (size_t)g->ph);
    g->w = malloc(sizeof(double) * (size_t)g->pw);
    if (!g->h || !g->w) {
        free(g->h);
        free(g->w);
        g->h = g->w = NULL;
        return h3_fail(e, "layout: out of memory");
    }
    const double sqrt_area = sqrt((double)lh * (double)lw);
    layout_spatial_grid(lh, sqrt_area, g->h);
    layout_spatial_grid(lw, sqrt_area, g->w);
    return 0;
}

static void frame_grid_free(frame_grid *g) {
    free(g->h);
    free(g->w);
}

/* Writes the rows of `frames` latent frames starting at packed row `row`: t from the temporal grid
 * with `origin` (6.2; or a constant t when `constant` is set), (h, w) from the frame grid. */
static void fill_video_block(layout *L, int64_t row, int frames, const frame_grid *g, double origin,
                             int constant, double constant_time) {
    double c = 0.0; /* the running span sum of layout_temporal_grid */
    for (int f = 0; f < frames; f++) {
        const double t = constant ? constant_time : origin + c;
        c += frame_span(f);
        for (int y = 0; y < g->ph; y++)
            for (int x = 0; x < g->pw; x++) {
                double *p = L->position_ids + 3 * row++;
                p[0] = t;
                p[1] = g->h[y];
                p[2] = g->w[x];
            }
    }
}

/* _fill_audio_positions: channel-major rows, t = origin + i, h = 0, w = the width grid's extremes. */
static void fill_audio_block(layout *L, int64_t row, int latents, double origin, const frame_grid *g) {
    for (int c = 0; c < LAYOUT_AUDIO_CHANNELS; c++)
        for (int i = 0; i < latents; i++) {
            double *p = L->position_ids + 3 * row++;
            p[0] = origin + (double)i;
            p[1] = 0.0;
            p[2] = c == 0 ? g->w[0] : g->w[g->pw - 1];
        }
}

static layout *layout_alloc(int64_t S, int64_t T, int64_t Nv, int64_t Na, h3_err *e) {
    layout *L = calloc(1, sizeof *L);
    if (!L) { h3_fail(e, "layout: out of memory"); return NULL; }
    L->S = S;
    L->T = T;
    L->Nv = Nv;
    L->Na = Na;
    L->position_ids = calloc((size_t)S * 3, sizeof(double));
    L->token_tags = calloc((size_t)(S > 0 ? S : 1), sizeof(int64_t));
    L->video_indices = calloc((size_t)(Nv > 0 ? Nv : 1), sizeof(int64_t));
    L->audio_indices = calloc((size_t)(Na > 0 ? Na : 1), sizeof(int64_t));
    L->text_indices = calloc((size_t)(T > 0 ? T : 1), sizeof(int64_t));
    if (!L->position_ids || !L->token_tags || !L->video_indices || !L->audio_indices || !L->text_indices) {
        layout_free(L);
        h3_fail(e, "layout: out of memory for %lld rows", (long long)S);
        return NULL;
    }
    return L;
}

void layout_free(layout *L) {
    if (!L) return;
    free(L->position_ids);
    free(L->token_tags);
    free(L->video_indices);
    free(L->audio_indices);
    free(L->text_indices);
    free(L);
}

static int check_text_tags(const int64_t *text_tags, int64_t T, h3_err *e) {
    if (T < 0) return h3_fail(e, "layout: negative text length %lld", (long long)T);
    for (int64_t i = 0; i < T; i++)
        if (text_tags[i] < 0 || text_tags[i] > 2)
            return h3_fail(e, "text_token_tags[%lld]: tag %lld is not 0 (video), 1 (text) or 2 (audio)", (long long)i,
                           (long long)text_tags[i]);
    return 0;
}

/* Text rows: t = row index, tags from the presentation; media tags from the index lists. */
static void finish_text_and_tags(layout *L, const int64_t *text_tags) {
    for (int64_t s = 0; s < L->T; s++) {
        L->position_ids[3 * s] = (double)s;
        L->text_indices[s] = s;
        L->token_tags[s] = text_tags[s];
    }
    for (int64_t i = 0; i < L->Na; i++) L->token_tags[L->audio_indices[i]] = LAYOUT_TAG_AUDIO;
    for (int64_t i = 0; i < L->Nv; i++) L->token_tags[L->video_indices[i]] = LAYOUT_TAG_VIDEO;
}

static int check_target(int F, int lh, int lw, int A, h3_err *e) {
    if (F < 1) return h3_fail(e, "layout: number of latent frames must be >= 1, got %d", F);
    if (A < 1) return h3_fail(e, "layout: number of audio latents must be >= 1, got %d", A);
    if (lh <= 0 || lw <= 0 || lh % LAYOUT_PATCH || lw % LAYOUT_PATCH)
        return h3_fail(e, "layout: latent grid %dx%d must be positive and divisible by the patch (2, 2)", lh, lw);
    if (F > (1 << 20) || lh > (1 << 20) || lw > (1 << 20) || (int64_t)F * lh * lw > ((int64_t)1 << 32) ||
        A > (1 << 24))
        return h3_fail(e, "layout: target geometry %dx%dx%d / %d audio latents is too large", F, lh, lw, A);
    return 0;
}

layout *layout_new_t2va(const int64_t *text_tags, int64_t T, int F, int lh, int lw, int A, const int *anchors,
                        int num_anchors, h3_err *e) {
    if (check_text_tags(text_tags, T, e) || check_target(F, lh, lw, A, e)) return NULL;
    if (num_anchors < 0 || num_anchors > 2) {
        h3_fail(e, "layout: at most two keyframe anchors (first, last), got %d", num_anchors);
        return NULL;
    }
    for (int k = 0; k < num_anchors; k++)
        if (anchors[k] != LAYOUT_ANCHOR_FIRST && anchors[k] != LAYOUT_ANCHOR_LAST) {
            h3_fail(e, "anchors[%d]: a keyframe anchor must be 'first' (0) or 'last' (1), got %d", k, anchors[k]);
            return NULL;
        }
    const int64_t P = (int64_t)(lh / LAYOUT_PATCH) * (lw / LAYOUT_PATCH);
    const int64_t ncond = num_anchors * P, naudio = (int64_t)A * LAYOUT_AUDIO_CHANNELS, nvideo = F * P;
    const int64_t cond_start = T, audio_start = cond_start + ncond, video_start = audio_start + naudio;
    layout *L = layout_alloc(video_start + nvideo, T, ncond + nvideo, naudio, e);
    if (!L) return NULL;
    L->num_condition_video_rows = ncond;
    L->num_condition_audio_rows = 0;
    L->num_latent_frames = F;
    L->latent_height = lh;
    L->latent_width = lw;
    L->num_audio_latents = A;

    frame_grid g;
    if (frame_grid_init(&g, lh, lw, e)) { layout_free(L); return NULL; }
    for (int k = 0; k < num_anchors; k++) {
        const double t = anchors[k] == LAYOUT_ANCHOR_FIRST ? (double)T : layout_last_anchor_time(T, F);
        fill_video_block(L, cond_start + k * P, 1, &g, 0.0, 1, t);
    }
    fill_audio_block(L, audio_start, A, (double)T, &g);
    fill_video_block(L, video_start, F, &g, (double)T, 0, 0.0);
    frame_grid_free(&g);

    int64_t v = 0;
    for (int64_t s = cond_start; s < audio_start; s++) L->video_indices[v++] = s;
    for (int64_t s = video_start; s < L->S; s++) L->video_indices[v++] = s;
    for (int64_t i = 0; i < naudio; i++) L->audio_indices[i] = audio_start + i;
    finish_text_and_tags(L, text_tags);
    return L;
}

int layout_check_references(const layout_ref *refs, int num_refs, h3_err *e) {
    if (num_refs < 1) return h3_fail(e, "ref2va: needs at least one reference; use t2va for text-only requests");
    int count[3] = {0, 0, 0};
    static const int limit[3] = {9, 3, 3};
    static const char *name[3] = {"image", "video", "audio"};
    for (int r = 0; r < num_refs; r++) {
        if (refs[r].kind < LAYOUT_REF_IMAGE || refs[r].kind > LAYOUT_REF_AUDIO)
            return h3_fail(e, "references[%d]: a reference must be an image, a video or an audio, got kind %d", r,
                           (int)refs[r].kind);
        count[refs[r].kind]++;
    }
    for (int k = 0; k < 3; k++)
        if (count[k] > limit[k])
            return h3_fail(e, "ref2va: MiniMax-H3 accepts at most %d %s references, got %d", limit[k], name[k], count[k]);
    if (num_refs > 12) return h3_fail(e, "ref2va: MiniMax-H3 accepts at most 12 references in total, got %d", num_refs);
    if (count[LAYOUT_REF_AUDIO] == num_refs)
        return h3_fail(e, "ref2va: an audio reference has to be paired with at least one image or video reference");
    return 0;
}

static int check_ref(const layout_ref *r, int index, h3_err *e) {
    switch (r->kind) {
    case LAYOUT_REF_IMAGE:
    case LAYOUT_REF_VIDEO:
        if (r->frames < 1 || (r->kind == LAYOUT_REF_IMAGE && r->frames != 1))
            return h3_fail(e, "references[%d]: %s reference with %d latent frames", index,
                           r->kind == LAYOUT_REF_IMAGE ? "an image" : "a video", r->frames);
        if (r->latent_height <= 0 || r->latent_width <= 0 || r->latent_height % LAYOUT_PATCH ||
            r->latent_width % LAYOUT_PATCH)
            return h3_fail(e, "references[%d]: latent grid %dx%d must be positive and divisible by the patch (2, 2)",
                           index, r->latent_height, r->latent_width);
        if (r->frames > (1 << 20) || r->latent_height > (1 << 20) || r->latent_width > (1 << 20) ||
            (int64_t)r->frames * r->latent_height * r->latent_width > ((int64_t)1 << 32))
            return h3_fail(e, "references[%d]: latent geometry %dx%dx%d is too large", index, r->frames,
                           r->latent_height, r->latent_width);
        if (r->audio_latents < 0 || r->audio_latents > (1 << 24) ||
            (r->kind == LAYOUT_REF_IMAGE && r->audio_latents != 0))
            return h3_fail(e, "references[%d]: bad audio latent count %d", index, r->audio_latents);
        return 0;
    case LAYOUT_REF_AUDIO:
        if (r->audio_latents < 1 || r->audio_latents > (1 << 24))
            return h3_fail(e, "references[%d]: an audio reference needs 1..2^24 audio latents, got %d", index,
                           r->audio_latents);
        return 0;
    }
    return h3_fail(e, "references[%d]: a reference must be an image, a video or an audio, got kind %d", index,
                   (int)r->kind);
}

layout *layout_new_ref2va(const int64_t *text_tags, int64_t T, const layout_ref *refs, int num_refs, int F, int lh,
                          int lw, int A, h3_err *e) {
    if (check_text_tags(text_tags, T, e) || check_target(F, lh, lw, A, e)) return NULL;
    if (num_refs < 0) { h3_fail(e, "layout: negative reference count"); return NULL; }
    int64_t ref_video = 0, ref_audio = 0;
    for (int r = 0; r < num_refs; r++) {
        if (check_ref(&refs[r], r, e)) return NULL;
        if (refs[r].kind != LAYOUT_REF_AUDIO)
            ref_video += (int64_t)refs[r].frames * (refs[r].latent_height / 2) * (refs[r].latent_width / 2);
        ref_audio += (int64_t)refs[r].audio_latents * LAYOUT_AUDIO_CHANNELS;
    }
    const int64_t P = (int64_t)(lh / LAYOUT_PATCH) * (lw / LAYOUT_PATCH);
    const int64_t naudio = (int64_t)A * LAYOUT_AUDIO_CHANNELS, nvideo = F * P;
    layout *L = layout_alloc(T + ref_video + ref_audio + naudio + nvideo, T, ref_video + nvideo, ref_audio + naudio, e);
    if (!L) return NULL;
    L->num_condition_video_rows = ref_video;
    L->num_condition_audio_rows = ref_audio;
    L->num_latent_frames = F;
    L->latent_height = lh;
    L->latent_width = lw;
    L->num_audio_latents = A;

    frame_grid target;
    if (frame_grid_init(&target, lh, lw, e)) { layout_free(L); return NULL; }
    int64_t cursor = T, nv = 0, na = 0;
    double rotary_time = (double)T;
    for (int r = 0; r < num_refs; r++) {
        const layout_ref *ref = &refs[r];
        if (ref->kind == LAYOUT_REF_AUDIO) {
            fill_audio_block(L, cursor, ref->audio_latents, rotary_time, &target);
            for (int64_t i = 0; i < 2 * (int64_t)ref->audio_latents; i++) L->audio_indices[na++] = cursor++;
            rotary_time += (double)ref->audio_latents;
            continue;
        }
        frame_grid g;
        if (frame_grid_init(&g, ref->latent_height, ref->latent_width, e)) {
            frame_grid_free(&target);
            layout_free(L);
            return NULL;
        }
        const int64_t rows = (int64_t)ref->frames * g.ph * g.pw;
        if (ref->kind == LAYOUT_REF_IMAGE) {
            /* One frame at one integer rotary slot (not 5/3). */
            fill_video_block(L, cursor, 1, &g, 0.0, 1, rotary_time);
            for (int64_t i = 0; i < rows; i++) L->video_indices[nv++] = cursor++;
            rotary_time += 1.0;
        } else {
            /* Soundtrack rows (its own width grid's extremes) right before the video rows; both share
             * the origin. The clock advances by max(Ar, sequential sum of the spans). */
            fill_audio_block(L, cursor, ref->audio_latents, rotary_time, &g);
            for (int64_t i = 0; i < 2 * (int64_t)ref->audio_latents; i++) L->audio_indices[na++] = cursor++;
            fill_video_block(L, cursor, ref->frames, &g, rotary_time, 0, 0.0);
            for (int64_t i = 0; i < rows; i++) L->video_indices[nv++] = cursor++;
            double span = 0.0; /* Python sum(): sequential, starting from 0 */
            for (int f = 0; f < ref->frames; f++) span += frame_span(f);
            const double audio = (double)ref->audio_latents;
            rotary_time += audio >= span ? audio : span; /* max(float(Ar), span): first wins ties */
        }
        frame_grid_free(&g);
    }
    const int64_t audio_start = cursor, video_start = audio_start + naudio;
    fill_audio_block(L, audio_start, A, rotary_time, &target);
    fill_video_block(L, video_start, F, &target, rotary_time, 0, 0.0);
    frame_grid_free(&target);
    for (int64_t s = video_start; s < L->S; s++) L->video_indices[nv++] = s;
    for (int64_t s = audio_start; s < video_start; s++) L->audio_indices[na++] = s;
    finish_text_and_tags(L, text_tags);
    return L;
}

layout *layout_new_from_tensors(int64_t S, const double *position_ids, const int64_t *token_tags,
                                const int64_t *video_indices, int64_t Nv, const int64_t *audio_indices, int64_t Na,
                                const int64_t *text_indices, int64_t T, int64_t ncv, int64_t nca, int F, int lh,
                                int lw, int A, h3_err *e) {
    if (S != T + Nv + Na) {
        h3_fail(e, "layout: %lld rows but text %lld + video %lld + audio %lld indices", (long long)S, (long long)T,
                (long long)Nv, (long long)Na);
        return NULL;
    }
    if (check_target(F, lh, lw, A, e)) return NULL;
    const int64_t P = (int64_t)(lh / 2) * (lw / 2);
    if (ncv < 0 || ncv + (int64_t)F * P != Nv) {
        h3_fail(e, "num_condition_video_rows: %lld condition rows + %d x %lld target rows != %lld video rows",
                (long long)ncv, F, (long long)P, (long long)Nv);
        return NULL;
    }
    if (nca < 0 || nca + 2 * (int64_t)A != Na) {
        h3_fail(e, "num_condition_audio_rows: %lld reference rows + 2 x %d target rows != %lld audio rows",
                (long long)nca, A, (long long)Na);
        return NULL;
    }
    char *seen = calloc((size_t)(S > 0 ? S : 1), 1);
    if (!seen) { h3_fail(e, "layout: out of memory"); return NULL; }
    const struct { const char *name; const int64_t *idx; int64_t n; int tag; } sets[3] = {
        {"text_indices", text_indices, T, -1},
        {"video_indices", video_indices, Nv, LAYOUT_TAG_VIDEO},
        {"audio_indices", audio_indices, Na, LAYOUT_TAG_AUDIO},
    };
    for (int k = 0; k < 3; k++)
        for (int64_t i = 0; i < sets[k].n; i++) {
            int64_t s = sets[k].idx[i];
            const char *why = NULL;
            if (s < 0 || s >= S) why = "is out of range";
            else if (seen[s]) why = "repeats a row (the three index sets must partition the rows)";
            else if (sets[k].tag >= 0 && token_tags[s] != sets[k].tag) why = "has the wrong token tag";
            if (why) {
                h3_fail(e, "%s[%lld] = %lld %s", sets[k].name, (long long)i, (long long)s, why);
                free(seen);
                return NULL;
            }
            seen[s] = 1;
        }
    free(seen);
    for (int64_t s = 0; s < S; s++)
        if (token_tags[s] < 0 || token_tags[s] > 2) {
            h3_fail(e, "token_tags[%lld]: tag %lld is not 0, 1 or 2", (long long)s, (long long)token_tags[s]);
            return NULL;
        }
    layout *L = layout_alloc(S, T, Nv, Na, e);
    if (!L) return NULL;
    memcpy(L->position_ids, position_ids, sizeof(double) * 3 * (size_t)S);
    memcpy(L->token_tags, token_tags, sizeof(int64_t) * (size_t)S);
    memcpy(L->video_indices, video_indices, sizeof(int64_t) * (size_t)Nv);
    memcpy(L->audio_indices, audio_indices, sizeof(int64_t) * (size_t)Na);
    memcpy(L->text_indices, text_indices, sizeof(int64_t) * (size_t)T);
    L->num_condition_video_rows = ncv;
    L->num_condition_audio_rows = nca;
    L->num_latent_frames = F;
    L->latent_height = lh;
    L->latent_width = lw;
    L->num_audio_latents = A;
    return L;
}

/* ---- row timestep plan ---- */

void layout_row_timesteps(const layout *L, float tv, float ta, float timestep[LAYOUT_MAX_TIMESTEPS], int *K,
                          int64_t *idx) {
    /* max(float(tv), 0.999) is taken in double and then stored as fp32; for fp32 tv this equals
     * taking tv when tv >= 0.999 (as a double) and fp32(0.999) otherwise. */
    const float tc = (double)tv >= LAYOUT_CONDITION_TIMESTEP ? tv : (float)LAYOUT_CONDITION_TIMESTEP;
    const float values[4] = {tv, tc, ta, 1.0f};
    const int used[4] = {1, L->num_condition_video_rows > 0, L->Na - L->num_condition_audio_rows > 0,
                         L->num_condition_audio_rows > 0};
    /* torch.unique(sorted=True): the distinct values present, ascending. */
    int k = 0;
    for (int j = 0; j < 4; j++) {
        if (!used[j]) continue;
        int dup = 0;
        for (int m = 0; m < k; m++) dup |= timestep[m] == values[j];
        if (!dup) timestep[k++] = values[j];
    }
    for (int a = 1; a < k; a++)
        for (int b = a; b > 0 && timestep[b - 1] > timestep[b]; b--) {
            float tmp = timestep[b];
            timestep[b] = timestep[b - 1];
            timestep[b - 1] = tmp;
        }
    *K = k;
    int slot[4];
    for (int j = 0; j < 4; j++) {
        slot[j] = 0;
        for (int m = 0; m < k; m++)
            if (timestep[m] == values[j]) slot[j] = m;
    }
    if (!idx) return;
    for (int64_t s = 0; s < L->S; s++) idx[s] = slot[0];
    for (int64_t i = 0; i < L->num_condition_video_rows; i++) idx[L->video_indices[i]] = slot[1];
    for (int64_t i = L->num_condition_audio_rows; i < L->Na; i++) idx[L->audio_indices[i]] = slot[2];
    for (int64_t i = 0; i < L->num_condition_audio_rows; i++) idx[L->audio_indices[i]] = slot[3];
}
