/* The components `h3 info` knows, per layout: folder, config keys worth printing, where the
 * expected tensor list comes from, and extra checks. */
#ifndef H3_INFO_COMPONENTS_H
#define H3_INFO_COMPONENTS_H

#include "core/error.h"
#include "io/expect.h"

typedef struct info_component_def {
    const char        *subdir;
    const char        *what;
    const char        *config_file;  /* relative to subdir, or NULL */
    const char        *keys_in;      /* config sub-object holding the keys (e.g. "text_config"), or NULL */
    const char *const *keys;         /* config keys to print, NULL-terminated */
    int                has_weights;
    const char        *weights_file; /* the single-file name when there is no index */
    int (*expected)(const char *dir, h3_expect_list *out, h3_err *e);
    void (*check)(const char *dir, int index_only, int *problems);
    int optional; /* a missing folder is a note, not a problem (VAEs of the Ref2VA partition) */
} info_component_def;

const info_component_def *info_diffusers_components(int *n);
const info_component_def *info_original_components(int *n);

#endif
