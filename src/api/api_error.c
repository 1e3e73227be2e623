/* Errors of the public API (include/h3.h): the status of a pipeline failure and its message in the API's terms.
 * The pipeline's messages name the CLI's flags (they are the h3 tool's one-line errors, docs/robustness.md); an API
 * caller set fields, so unless h3_engine_options.flag_messages asks for the CLI's wording, each flag is replaced
 * by the field that carries it (the table below: a flag and its field). */
#include "api_internal.h"

#include <string.h>

int api_status_of(int rc, const char *msg, int cancelled) {
    if (rc == 0) return H3_OK;
    if (cancelled || strstr(msg, "cancelled")) return H3_ERR_CANCELLED;
    if (rc == H3_GENERATE_BAD_INPUT) return H3_ERR_BAD_INPUT;
    if (strstr(msg, "out of memory") || strstr(msg, "cudaErrorMemoryAllocation")) return H3_ERR_OUT_OF_MEMORY;
    if (strstr(msg, "--backend") || strstr(msg, "CUDA") || strstr(msg, "cuda") || strstr(msg, "cuBLAS") ||
        strstr(msg, "cuDNN"))
        return H3_ERR_BACKEND;
    if (strstr(msg, "write") || strstr(msg, "rename") || strstr(msg, "cannot create") || strstr(msg, "read failed"))
        return H3_ERR_IO;
    return H3_ERR_FAILED;
}

/* longest first where one flag is the prefix of another (--ref-image-size before --ref-image) */
static const char *const words[][2] = {
    {"--model-dir", "snapshot_dir"},       {"--prompt", "prompt"},
    {"--output", "output_mp4"},            {"--frames-dir", "frames_dir"},
    {"--wav", "wav"},                      {"--dump-latents", "dump_latents"},
    {"--render-width", "render_width"},    {"--render-height", "render_height"},
    {"--width", "width"},                  {"--height", "height"},
    {"--frames", "frames"},                {"--seconds", "seconds"},
    {"--steps", "steps"},                  {"--reuse", "reuse"},
    {"--layers", "layers"},                {"--core-reuse", "core_reuse"},
    {"--seed", "seed"},                    {"--first-frame", "first_frame"},
    {"--last-frame", "last_frame"},        {"--ref-image-size", "ref_image_size"},
    {"--ref-image", "refs (image)"},       {"--ref-silent-video", "refs (silent video)"},
    {"--ref-video-audio", "refs (video + audio)"}, {"--ref-video", "refs (video)"},
    {"--ref-audio", "refs (audio)"},       {"--ref-*", "refs"},
    {"--precision", "precision"},          {"--quant", "quant"}, {"--int8-fc2-groups", "int8_fc2_groups"}, {"--transformer", "transformer"},
    {"--lora-ref", "loras[].ref"},          {"--lora", "loras"},                   {"--shift", "shift_video/shift_audio"},
    {"--step-update", "step_update"},
    {"--backend", "backend"},              {"--threads", "threads"},
    {"--device", "device"},                {"--attention", "attention"},
    {"--token-reduction", "token_reduction"}, {"--ssd-streaming", "ssd_streaming"},
    {"--use-reference-rope", "reference_rope"}, {"--resident", "memory"},
    {"--random-weights", "random_weights"}, {"--profile", "profile"},
    {"--show", "the preview sink"},        {"-o/--frames-dir/--wav", "output_mp4/frames_dir/wav"},
    {"-o", "output_mp4"},                  {"-d", "snapshot_dir"},
    {" (Ctrl-C)", ""},
};

static int is_word_char(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_'; }

void api_reword(char *msg, size_t cap) {
    char out[sizeof ((h3_err *)0)->msg];
    size_t o = 0, n = strlen(msg);
    for (size_t i = 0; i < n && o + 1 < sizeof out;) {
        int hit = -1;
        size_t len = 0;
        if (msg[i] == '-' || msg[i] == ' ')
            for (size_t k = 0; k < sizeof words / sizeof words[0]; k++) {
                size_t l = strlen(words[k][0]);
                if (strncmp(msg + i, words[k][0], l)) continue;
                if (words[k][0][0] == '-' && ((i > 0 && is_word_char(msg[i - 1])) || is_word_char(msg[i + l]))) continue;
                if (l > len) hit = (int)k, len = l;
            }
        if (hit < 0) {
            out[o++] = msg[i++];
            continue;
        }
        for (const char *w = words[hit][1]; *w && o + 1 < sizeof out;) out[o++] = *w++;
        i += len;
    }
    out[o] = 0;
    snprintf(msg, cap, "%s", out);
}
