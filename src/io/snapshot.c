#include "snapshot.h"

#include "config.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

char *snapshot_path(char *out, size_t cap, const char *dir, const char *name) {
    snprintf(out, cap, "%s/%s", dir, name);
    return out;
}

int snapshot_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

int snapshot_is_dir(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

int snapshot_kind(const char *dir, snap_kind *kind, h3_err *e) {
    char p[4096];
    *kind = SNAP_UNKNOWN;
    snapshot_path(p, sizeof p, dir, "model_index.json");
    if (!snapshot_exists(p)) return h3_fail(e, "%s: no model_index.json (not a MiniMax-H3 snapshot folder)", dir);
    json_t *root = h3_json_load(p, e);
    if (!root) return -1;
    const char *cls = json_string_value(json_object_get(root, "_class_name"));
    int rc = 0;
    if (!cls) rc = h3_fail(e, "%s: no \"_class_name\"", p);
    else if (!strcmp(cls, "MiniMaxH3ModularPipeline")) *kind = SNAP_DIFFUSERS_ROOT;
    else if (!strcmp(cls, "MiniMaxH3Pipeline")) *kind = SNAP_ORIGINAL_PARTITION;
    else rc = h3_fail(e, "%s: _class_name \"%s\" is not a MiniMax-H3 pipeline", p, cls);
    json_decref(root);
    return rc;
}

int snapshot_dit_dir(const char *root, int ref2va, char *out, size_t cap, h3_err *e) {
    snap_kind k;
    if (snapshot_kind(root, &k, e) != 0) return -1;
    if (k == SNAP_DIFFUSERS_ROOT) snapshot_path(out, cap, root, ref2va ? "transformer_ref" : "transformer");
    else snapshot_path(out, cap, root, "transformer");
    if (!snapshot_is_dir(out)) return h3_fail(e, "%s: missing transformer folder", out);
    return 0;
}
