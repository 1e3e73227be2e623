/* Probe ops of the conditioner (the probe contract, docs/probe.md):
 *   text-encode  input_ids [1,L] (+ optional vision inputs) -> hidden_states[50] [1,L,hidden]
 *   vision       pixel_values [N,C*tp*p*p], grid_thw [k,3] -> image_embeds, deepstack_features
 * (`tokenize` belongs to the tokenizer's probe file.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/snapshot.h"
#include "model/text_encoder.h"
#include "model/vision.h"
#include "pipeline/presentation.h"
#include "probe.h"

static text_encoder *open_te(probe_ctx *p, h3_err *e) {
    char dir[4096];
    snapshot_path(dir, sizeof dir, p->model, "text_encoder");
    return text_encoder_load(p->be, dir, p->bf16, e);
}

/* Reads an optional [k,3] grid and its pixel values; n_items = 0 when absent. */
static int read_vision_input(probe_ctx *p, const char *pv_name, const char *grid_name, int64_t vec, h3_tensor **pv,
                             h3_tensor **grid, h3_err *e) {
    *pv = *grid = NULL;
    int has_pv = probe_has_input(p, pv_name), has_grid = probe_has_input(p, grid_name);
    if (!has_pv && !has_grid) return 0;
    if (has_pv != has_grid) return h3_fail(e, "input '%s' and '%s' must be given together", pv_name, grid_name);
    if (probe_input(p, pv_name, H3_F32, 2, pv, e) || probe_input(p, grid_name, H3_I64, 2, grid, e)) return -1;
    if ((*grid)->shape[1] != 3 || (*grid)->shape[0] < 1)
        return h3_fail(e, "input '%s': shape must be [k,3] with k >= 1", grid_name);
    if ((*pv)->shape[1] != vec)
        return h3_fail(e, "input '%s': rows must have %lld values (channels x temporal patch x patch^2), got %lld", pv_name,
                       (long long)vec, (long long)(*pv)->shape[1]);
    return 0;
}

/* Runs the tower on one input; merged [N/4,O], deep [n_deep][N/4][O] (malloc'd). */
static int run_vision(probe_ctx *p, text_encoder *te, const h3_tensor *pv, const h3_tensor *grid, float **merged,
                      float **deep, int64_t *G, h3_err *e) {
    const te_config *cfg = text_encoder_get_config(te);
    const vision_config *vc = &cfg->vision;
    int64_t U = (int64_t)vc->spatial_merge_size * vc->spatial_merge_size, N = pv->shape[0];
    if (N % U) return h3_fail(e, "input pixel_values: %lld rows is not a multiple of %lld", (long long)N, (long long)U);
    *G = N / U;
    *merged = malloc((size_t)(*G * vc->out_hidden_size) * sizeof(float));
    *deep = malloc((size_t)(vc->n_deepstack * *G * vc->out_hidden_size) * sizeof(float) + 1);
    if (!*merged || !*deep) return h3_fail(e, "vision: out of memory");
    vision_model *vm = vision_new(p->be, vc, text_encoder_weights(te), p->bf16, e);
    if (!vm) return -1;
    int rc = vision_forward(vm, pv->data, N, grid->data, (int)grid->shape[0], *merged, *deep, e);
    vision_free(vm);
    return rc;
}

int probe_vision(probe_ctx *p, h3_err *e) {
    int rc = -1;
    h3_tensor *pv = NULL, *grid = NULL;
    float *merged = NULL, *deep = NULL;
    text_encoder *te = open_te(p, e);
    if (!te) return -1;
    const vision_config *vc = &text_encoder_get_config(te)->vision;
    int64_t vec = (int64_t)vc->in_channels * vc->temporal_patch_size * vc->patch_size * vc->patch_size, G;
    if (!probe_has_input(p, "pixel_values")) {
        h3_fail(e, "input 'pixel_values': missing from --in");
        goto done;
    }
    if (read_vision_input(p, "pixel_values", "grid_thw", vec, &pv, &grid, e)) goto done;
    if (run_vision(p, te, pv, grid, &merged, &deep, &G, e)) goto done;
    int64_t O = vc->out_hidden_size;
    if (probe_output_f32(p, "image_embeds", merged, 2, (int64_t[]){G, O}, e) ||
        probe_output_f32(p, "deepstack_features", deep, 3, (int64_t[]){vc->n_deepstack, G, O}, e))
        goto done;
    rc = 0;
done:
    h3_tensor_free(pv);
    h3_tensor_free(grid);
    free(merged);
    free(deep);
    text_encoder_free(te);
    return rc;
}

int probe_text_encode(probe_ctx *p, h3_err *e) {
    int rc = -1;
    h3_tensor *ids = NULL, *pos_in = NULL, *ipv = NULL, *igrid = NULL, *vpv = NULL, *vgrid = NULL;
    float *out = NULL, *im = NULL, *idp = NULL, *vm = NULL, *vdp = NULL;
    int64_t *pos = NULL;
    text_encoder *te = open_te(p, e);
    if (!te) return -1;
    const te_config *cfg = text_encoder_get_config(te);
    const vision_config *vc = &cfg->vision;
    int64_t vec = (int64_t)vc->in_channels * vc->temporal_patch_size * vc->patch_size * vc->patch_size;
    if (probe_input(p, "input_ids", H3_I64, 2, &ids, e)) goto done;
    if (ids->shape[0] != 1) {
        h3_fail(e, "input 'input_ids': batch must be 1, got shape [%lld,%lld]", (long long)ids->shape[0],
                (long long)ids->shape[1]);
        goto done;
    }
    int64_t L = ids->shape[1], H = cfg->text.hidden_size;
    if (read_vision_input(p, "pixel_values", "image_grid_thw", vec, &ipv, &igrid, e) ||
        read_vision_input(p, "pixel_values_videos", "video_grid_thw", vec, &vpv, &vgrid, e))
        goto done;
    te_vision_rows vis = {0};
    vis.n_deep = vc->n_deepstack;
    if (ipv && run_vision(p, te, ipv, igrid, &im, &idp, &vis.n_image, e)) goto done;
    if (vpv && run_vision(p, te, vpv, vgrid, &vm, &vdp, &vis.n_video, e)) goto done;
    vis.image_embeds = im, vis.image_deep = idp, vis.video_embeds = vm, vis.video_deep = vdp;
    /* positions: given, or get_rope_index when vision is present, or 0..L-1 */
    if (probe_has_input(p, "position_ids")) {
        if (probe_input(p, "position_ids", H3_I64, 2, &pos_in, e)) goto done;
        if (pos_in->shape[0] != 3 || pos_in->shape[1] != L) {
            h3_fail(e, "input 'position_ids': shape must be [3,%lld]", (long long)L);
            goto done;
        }
    } else if (ipv || vpv) {
        pos = malloc((size_t)(3 * L) * sizeof(int64_t));
        if (!pos) {
            h3_fail(e, "out of memory");
            goto done;
        }
        if (presentation_rope_index(ids->data, L, igrid ? igrid->data : NULL, igrid ? (int)igrid->shape[0] : 0,
                                    vgrid ? vgrid->data : NULL, vgrid ? (int)vgrid->shape[0] : 0,
                                    vc->spatial_merge_size, pos, e))
            goto done;
    }
    out = malloc((size_t)(L * H) * sizeof(float));
    if (!out) {
        h3_fail(e, "out of memory for the output");
        goto done;
    }
    if (text_encoder_forward(te, ids->data, L, pos_in ? pos_in->data : pos, (ipv || vpv) ? &vis : NULL,
                             TE_OUTPUT_LAYER, out, e))
        goto done;
    if (probe_output_f32(p, "hidden_states", out, 3, (int64_t[]){1, L, H}, e)) goto done;
    rc = 0;
done:
    h3_tensor_free(ids);
    h3_tensor_free(pos_in);
    h3_tensor_free(ipv);
    h3_tensor_free(igrid);
    h3_tensor_free(vpv);
    h3_tensor_free(vgrid);
    free(out);
    free(im);
    free(idp);
    free(vm);
    free(vdp);
    free(pos);
    text_encoder_free(te);
    return rc;
}
