/* `h3 probe dit` (the probe contract, docs/probe.md): one DiT forward on named inputs.
 *
 * Which weights: --model is one of
 *   - a diffusers snapshot root: --component transformer (default) or transformer_ref picks the folder;
 *   - an original partition tree (FL2VA/ or Ref2VA/, model_index.json class MiniMaxH3Pipeline, or any
 *     folder holding transformer/): its transformer/ (original names, fused qkv_proj) is used; an
 *     explicit --component must match the partition (FL2VA = transformer, Ref2VA = transformer_ref);
 *   - a transformer folder itself (config.json + shards), in either layout.
 * Batch: every batch item shares the structural inputs (docs/model/dit.md 3); items run one after another. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "io/config.h"
#include "io/snapshot.h"
#include "model/dit.h"
#include "model/dit_parallel.h"
#include "model/dit_int8.h"
#include "probe.h"

/* "fl2va" / "ref2va" from an original partition's model_index.json, or from the folder name. */
static const char *partition_of(const char *dir) {
    char p[4096];
    snapshot_path(p, sizeof p, dir, "model_index.json");
    h3_err ignored;
    json_t *root = h3_json_load(p, &ignored);
    const char *part = NULL;
    if (root) {
        const char *v = json_string_value(json_object_get(json_object_get(root, "_minimax_h3"), "partition"));
        if (v && !strcasecmp(v, "ref2va")) part = "ref2va";
        else if (v && !strcasecmp(v, "fl2va")) part = "fl2va";
        json_decref(root);
    }
    if (!part) {
        size_t n = strlen(dir);
        while (n > 1 && dir[n - 1] == '/') n--;
        const char *b = dir + n;
        while (b > dir && b[-1] != '/') b--;
        if (!strncasecmp(b, "Ref2VA", 6)) part = "ref2va";
        else if (!strncasecmp(b, "FL2VA", 5)) part = "fl2va";
    }
    return part;
}

static int resolve_dit_dir(probe_ctx *p, char *out, size_t cap, h3_err *e) {
    if (!p->model) return h3_fail(e, "--model is required (a snapshot root, an FL2VA/Ref2VA tree or a transformer folder)");
    char t[4096];
    int ref = p->component && !strcmp(p->component, "transformer_ref");
    if (snapshot_exists(snapshot_path(t, sizeof t, p->model, "config.json")) &&
        !snapshot_exists(snapshot_path(t, sizeof t, p->model, "model_index.json"))) {
        snprintf(out, cap, "%s", p->model); /* a transformer folder */
        return 0;
    }
    snap_kind kind = SNAP_UNKNOWN;
    h3_err tmp;
    if (snapshot_exists(snapshot_path(t, sizeof t, p->model, "model_index.json")) &&
        snapshot_kind(p->model, &kind, &tmp) == 0 && kind == SNAP_DIFFUSERS_ROOT)
        return snapshot_dit_dir(p->model, ref, out, cap, e);
    /* an original partition, or a folder with only transformer/ */
    if (snapshot_is_dir(snapshot_path(out, cap, p->model, "transformer")) && !ref &&
        !snapshot_is_dir(snapshot_path(t, sizeof t, p->model, "transformer_ref"))) {
        const char *part = partition_of(p->model);
        if (p->component && part && strcmp(part, "ref2va") == 0 && !ref)
            return h3_fail(e, "--component transformer does not match the Ref2VA partition %s (its weights are "
                              "transformer_ref)", p->model);
        return 0;
    }
    if (ref && snapshot_is_dir(snapshot_path(out, cap, p->model, "transformer_ref"))) return 0;
    if (ref && snapshot_is_dir(snapshot_path(out, cap, p->model, "transformer"))) {
        const char *part = partition_of(p->model);
        if (part && !strcmp(part, "fl2va"))
            return h3_fail(e, "--component transformer_ref does not match the FL2VA partition %s (use Ref2VA/)",
                           p->model);
        return 0;
    }
    if (snapshot_is_dir(snapshot_path(out, cap, p->model, "transformer"))) return 0;
    return h3_fail(e, "--model %s: no DiT weights found (expected transformer/ or transformer_ref/, an FL2VA/Ref2VA "
                      "tree, or a folder with config.json)", p->model);
}

static const char *in_names[10] = {"hidden_states", "audio_hidden_states", "encoder_hidden_states", "timestep",
                                   "timestep_indices", "token_tags", "position_ids", "video_indices",
                                   "audio_indices", "text_indices"};
static const h3_dtype in_types[10] = {H3_F32, H3_F32, H3_F32, H3_F32, H3_I64, H3_I64, H3_F64, H3_I64, H3_I64, H3_I64};

int probe_dit(probe_ctx *p, h3_err *e) {
    h3_tensor *t[10] = {0};
    dit_model *m = NULL, *peers[8] = {0};
    h3_backend *pbe[8] = {0};
    dit_team *team = NULL;
    float *video = NULL, *audio = NULL;
    int rc = -1;
    for (int i = 0; i < 10; i++)
        if (probe_input(p, in_names[i], in_types[i], -1, &t[i], e) != 0) goto done;
    char dir[4096];
    if (resolve_dit_dir(p, dir, sizeof dir, e) != 0) goto done;
    dit_config cfg;
    if (dit_config_load(dir, &cfg, e) != 0) goto done;
    dit_tensors dt = {t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9]};
    dit_inputs in;
    if (dit_inputs_from_tensors(&cfg, &dt, 0, &in, e) != 0) goto done; /* shapes first: no model load on bad input */
    const char *part = partition_of(p->model);
    const int ref = (p->component && !strcmp(p->component, "transformer_ref")) || (part && !strcmp(part, "ref2va"));
    if (!(m = dit_load_lora(p->be, dir, p->transformer, p->bf16, p->loras, p->n_loras, ref, e))) goto done;
    if ((p->quant_int8 || p->int8_fc2_groups || dit_int8_profile(m)) &&
        dit_quantize_int8(m, p->int8_fc2_groups, e) != 0) /* an int8 snapshot keeps its codes */
        goto done;
    dit_set_attention(m, p->attention_sage8);
    if (p->parallel > 1) { /* --parallel: ranks 1.. loaded the same way on their own backends (docs/parallel.md) */
        peers[0] = m;
        for (int r = 1; r < p->parallel; r++) {
            if (!(pbe[r] = h3_backend_new_on(p->be->kind, 0, r, e)) ||
                !(peers[r] = dit_load_lora(pbe[r], dir, p->transformer, p->bf16, p->loras, p->n_loras, ref, e)) ||
                ((p->quant_int8 || p->int8_fc2_groups || dit_int8_profile(peers[r])) &&
                 dit_quantize_int8(peers[r], p->int8_fc2_groups, e) != 0))
                goto done;
            dit_set_attention(peers[r], p->attention_sage8);
        }
        if (!(team = dit_team_new(peers, p->parallel, p->be->kind == H3_BACKEND_CUDA ? H3_COMM_NCCL : H3_COMM_CPU, e)))
            goto done;
    }
    int64_t B = t[0]->shape[0];
    int64_t VP = t[0]->shape[2], CA = cfg.audio_in_channels;
    video = malloc((size_t)(B * in.Nv * VP + 1) * sizeof(float));
    audio = malloc((size_t)(B * in.Na * CA + 1) * sizeof(float));
    if (!video || !audio) {
        h3_fail(e, "out of memory");
        goto done;
    }
    for (int64_t b = 0; b < B; b++) {
        if (dit_inputs_from_tensors(&cfg, &dt, b, &in, e) != 0) goto done;
        float *vo = video + b * in.Nv * VP, *ao = audio + b * in.Na * CA;
        if ((team ? dit_team_forward(team, &in, vo, ao, e) : dit_forward(m, &in, vo, ao, e)) != 0) goto done;
    }
    if (probe_output_f32(p, "sample", video, 3, (int64_t[]){B, in.Nv, VP}, e) != 0) goto done;
    if (probe_output_f32(p, "audio_sample", audio, 3, (int64_t[]){B, in.Na, CA}, e) != 0) goto done;
    rc = 0;
done:
    free(video);
    free(audio);
    dit_team_free(team);
    for (int r = 1; r < 8; r++) dit_free(peers[r]), h3_backend_free(pbe[r]);
    dit_free(m);
    for (int i = 0; i < 10; i++) h3_tensor_free(t[i]);
    return rc;
}
