/* `h3 generate`: parses the flags into the public API's engine options and generation parameters (include/h3.h,
 * docs/api.md), opens an engine on -d, checks the parameters and generates. Flag errors exit 2 with one line;
 * generation errors exit 1 (2 when the inputs were bad). Without -p (but with -d) the flags seed an interactive
 * session instead (cmd_session.c). Generation goes through h3.h only. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "core/text.h"
#include "terminal.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: h3 generate -d SNAPSHOT -p PROMPT [-o OUT.mp4] [options]\n"
            "       h3 generate -d SNAPSHOT [options]   interactive session: one prompt per line on stdin,\n"
            "                           videos numbered in a fresh $TMPDIR/h3-XXXXXX (docs/session.md; !help)\n"
            "  -d, --model-dir DIR      MiniMax-H3 snapshot (diffusers layout at the root)\n"
            "  -p, --prompt TEXT        the prompt (used verbatim, no template)\n"
            "  -o, --output PATH        MP4 (H.264 + AAC 32 kHz stereo); '' writes no MP4 [h3.mp4]\n"
            "  --width N --height N     canvas, multiples of 32, at most 768x1344 pixels\n"
            "                           [t2va/ref2va 1344x768; fl2va from the first keyframe's aspect]\n"
            "  --frames N | --seconds S output length at 24 fps, rounded up to 17n+5 frames that must last 5..15 s:\n"
            "                           --frames 108..345, --seconds 4.5..14.375 (345 frames = 14.375 s is the longest) [124]\n"
            "  --steps N                denoising passes (diffusers num_inference_steps = N + 1) [20]\n"
            "  --reuse R                1..3: evaluate the model at pass 0, every R-th pass and the last one;\n"
            "                           the others extrapolate the velocity (20 passes: R 2 -> 11 evaluations) [1]\n"
            "  --layers L               35..50: keep L of the 50 DiT blocks, skipping the ones whose AdaLN gates are\n"
            "                           smallest (blocks 0, 1 and 49 always run; 45 fast, 40 aggressive) [50]\n"
            "  --core-reuse C           1..6: run the 50 blocks on the first, every C-th and the last pass only, the\n"
            "                           others add the stored core residual (4 fast, 6 preview); not with --reuse [1]\n"
            "  --render-width/--render-height W H  run the DiT and the VAE at this smaller canvas (multiples of 32,\n"
            "                           the output's aspect exactly) and upscale the frames (Lanczos) to --width/--height\n"
            "  --seed N                 unsigned 64-bit seed (torch.Generator().manual_seed) [42]\n"
            "  --first-frame IMG, --last-frame IMG       fl2va keyframes\n"
            "  --ref-image IMG, --ref-silent-video VID, --ref-video VID, --ref-video-audio VID AUD,\n"
            "  --ref-audio AUD          ref2va references, in order (max 12: 9 images, 3 videos, 3 audio)\n"
            "  --ref-image-size P       image references: reference (2048 short edge, as diffusers) [default], match\n"
            "                           (down to the canvas's pixel area) or max (down to a 2048 short edge)\n"
            "  --frames-dir DIR         also write PNG frames; --wav PATH also write the audio\n"
            "  --dump-latents PATH      write final latents, frames and audio (safetensors, docs/probe.md)\n"
            "  --precision bf16|fp32    bf16 as the release runs (default) or the fp32 reference\n"
            "  --quant none|fp8|int8    fp8: the DiT blocks' linears as FP8 W8A8 (faster, not the reference's numerics);\n"
            "                           int8: INT8 W8A8 quantized at load (docs/int8.md)\n"
            "  --vae-quant none|fp8     fp8: the video decoder's block GEMMs as FP8 W8A8 (faster, not the reference's numerics)\n"
            "  --preset exact|fast      fast: --quant fp8 --attention sage8 --vae-quant fp8 (a flag given a non-default value wins; docs/fast.md)\n"
            "  --int8-fc2-groups        int8: the FFN down input scaled per 1024 channels instead of per token\n"
            "  --attention exact|sage8  sage8: the DiT's attention with INT8 Q K^T and FP8 P V (SageAttention2's scheme,\n"
            "                           docs/fast.md; faster, not the reference's numerics; bf16) [exact]\n"
            "  --transformer FILE       a single-file transformer (safetensors or GGUF, the published single files'\n"
            "                           layout) instead of the snapshot's transformer/ weights (docs/checkpoints.md)\n"
            "  --lora FILE[:SCALE]      a LoRA merged into the transformer at load (every layout diffusers' MiniMax-H3\n"
            "                           loader reads; repeatable, at most 8, in order; SCALE [1]; docs/lora.md)\n"
            "  --lora-ref FILE[:SCALE]  the same for the ref2va partition (transformer_ref) only\n"
            "  --shift VIDEO[:AUDIO]    the schedulers' shifts [the snapshot's: 12:3]; LightX2V's Turbo LoRAs: 6:3\n"
            "  --step-update euler|training_euler  the Euler step as diffusers writes it [euler] or as LightX2V's Turbo\n"
            "                           configs do (x + (sigma - sigma_next) v: the same step, other fp32 roundings)\n"
            "  --resident               sessions: keep each phase's model loaded for the next generation (!resident)\n"
            "  --token-reduction        DiT blocks 4..29 on averaged pairs of video tokens (docs/model/features.md 5.5; bf16;\n"
            "                           H3_TOKEN_REDUCTION_BLOCKS=B:E, _EARLY=STEPS:END|0, _SCALE=S override)\n"
            "  --ssd-streaming          keep the DiT blocks' linears in host memory (the file mapping) and copy them\n"
            "                           block by block into two GPU slots while the previous block computes (docs/model/features.md\n"
            "                           7.3; same output; automatic with --backend cuda when the resident DiT does not fit)\n"
            "  --backend cpu|cuda|auto  auto: CUDA when this build has it and GPU --device is usable, else the CPU\n"
            "                           with a note saying why [auto]    --threads N   CPU threads [all cores]\n"
            "  --device N               the CUDA runtime's device index (after CUDA_VISIBLE_DEVICES) [0]\n"
            "  --parallel N             the DiT on N ranks, 1..8 (Ulysses sequence parallelism, docs/parallel.md): GPUs\n"
            "                           device..device+N-1 through NCCL, or N CPU ranks with --backend cpu [1]\n"
            "  --profile                per-phase time and peak memory report; each DiT block's output checked for NaN/Inf\n"
            "  --info                   describe and check the snapshot (h3 info) first; without -p nothing else\n"
            "  --use-reference-rope     at a 256x256 render canvas keep the released spatial RoPE (default: its h/w\n"
            "                           coordinates halved against lattice artefacts, docs/model/features.md 5.7)\n"
            "  --show                   terminal previews: a frame after every denoising pass, then every final frame\n"
            "                           (Kitty/Ghostty or iTerm2/WezTerm/Konsole inline images; keeps a preview VAE)\n"
            "  --zoom N                 previews shown at N x their pixel size (>= 1; 2 suits Retina) [2]\n"
            "  --x264-preset NAME       the MP4's x264 preset, ultrafast .. placebo [fast; veryfast with --preset fast]\n"
            "  --preview-width N        pass previews at most N pixels wide; at most half the width: half-size previews\n"
            "                           from 2x2-averaged latents, a quarter of the preview decoder's work [canvas]\n"
            "  --random-weights         no checkpoint: every model made with random weights at the shapes of -d's\n"
            "                           configs (a release skeleton works), in backend memory; t2va only. A benchmark\n"
            "                           of the whole pipeline: the output is noise. -o '' then writes nothing\n");
}

static int parse_int(const char *flag, const char *s, long lo, long hi, int *out) {
    long v;
    if (h3_parse_int(s, lo, hi, &v))
        return cli_error("generate: %s expects an integer in %ld..%ld, got '%s'", flag, lo, hi, h3_quote(s));
    *out = (int)v;
    return 0;
}

/* The flags that take a value (the next argument); --ref-video-audio takes two. */
static const char *const value_flags[] = {
    "-d", "--model-dir", "-p", "--prompt", "-o", "--output", "--frames-dir", "--wav", "--dump-latents", "--first-frame",
    "--last-frame", "--width", "--height", "--frames", "--steps", "--reuse", "--layers", "--core-reuse",
    "--render-width", "--render-height", "--threads", "--zoom", "--preview-width", "--x264-preset", "--seconds", "--seed", "--precision",
    "--ref-image-size", "--quant", "--vae-quant", "--attention", "--preset", "--backend", "--device", "--parallel", "--transformer", "--ref-image", "--ref-silent-video", "--ref-video",
    "--ref-video-audio", "--ref-audio", "--lora", "--lora-ref", "--shift", "--step-update", NULL};
static const char *const switch_flags[] = {"--profile", "--random-weights", "--resident", "--token-reduction",
                                           "--ssd-streaming", "--show", "--info", "--use-reference-rope",
                                           "--int8-fc2-groups", NULL};

static int in_list(const char *const *list, const char *a, size_t n) {
    for (int i = 0; list[i]; i++)
        if (strlen(list[i]) == n && !strncmp(list[i], a, n)) return 1;
    return 0;
}

/* an argument that is no flag of `h3 generate`: one line saying what is wrong with it */
static int flag_error(const char *a) {
    const char *eq = strchr(a, '=');
    if (a[0] == '-' && eq && in_list(switch_flags, a, (size_t)(eq - a)))
        return cli_error("generate: '%s': %.*s takes no value", h3_quote(a), (int)(eq - a), a);
    if (a[0] == '-' && eq && in_list(value_flags, a, (size_t)(eq - a)))
        return cli_error("generate: '%s': write the value as the next argument (%.*s %s), not with '='", h3_quote(a),
                         (int)(eq - a), a, h3_quote(eq + 1));
    if (a[0] != '-')
        return cli_error("generate: unexpected argument '%s' (every value follows its flag; see h3 generate --help)",
                         h3_quote(a));
    return cli_error("generate: unknown option '%s' (see h3 generate --help)", h3_quote(a));
}

int cmd_generate(int argc, char **argv) {
    cli_generate g;
    memset(&g, 0, sizeof g);
    h3_engine_options *o = &g.opt;
    h3_params *p = &g.par;
    h3_engine_options_init(o);
    h3_params_init(p);
    o->log = cli_log, o->progress_stream = stderr; /* the library prints nothing itself */
    o->flag_messages = 1;                           /* its messages name this tool's flags */
    p->output_mp4 = "h3.mp4";
    g.zoom = 2;
    const char *model_dir = NULL;
    int info = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--profile")) {
            p->profile = 1;
            continue;
        }
        if (!strcmp(a, "--random-weights")) {
            o->random_weights = 1;
            continue;
        }
        if (!strcmp(a, "--resident")) {
            g.resident = 1;
            continue;
        }
        if (!strcmp(a, "--token-reduction")) {
            p->token_reduction = 1;
            continue;
        }
        if (!strcmp(a, "--int8-fc2-groups")) {
            o->int8_fc2_groups = 1;
            continue;
        }
        if (!strcmp(a, "--ssd-streaming")) {
            o->ssd_streaming = 1;
            continue;
        }
        if (!strcmp(a, "--show")) {
            g.show = 1;
            continue;
        }
        if (!strcmp(a, "--info")) {
            info = 1;
            continue;
        }
        if (!strcmp(a, "--use-reference-rope")) {
            p->reference_rope = 1;
            continue;
        }
        if (!in_list(value_flags, a, strlen(a))) return flag_error(a);
        if (i + 1 >= argc) return cli_error("generate: %s needs a value (see h3 generate --help)", a);
        const char *v = argv[++i];
        if (!strcmp(a, "-d") || !strcmp(a, "--model-dir")) model_dir = v;
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) p->prompt = v;
        else if (!strcmp(a, "-o") || !strcmp(a, "--output")) p->output_mp4 = v, g.output_given = 1;
        else if (!strcmp(a, "--frames-dir")) p->frames_dir = v;
        else if (!strcmp(a, "--wav")) p->wav = v;
        else if (!strcmp(a, "--dump-latents")) p->dump_latents = v;
        else if (!strcmp(a, "--transformer")) o->transformer = v;
        else if (!strcmp(a, "--lora") || !strcmp(a, "--lora-ref")) {
            if (p->nloras == H3_MAX_LORAS) return cli_error("generate: %s: at most %d LoRAs", a, H3_MAX_LORAS);
            if (cli_parse_lora(argv[i], a, &p->loras[p->nloras])) return 2;
            p->loras[p->nloras++].ref = !strcmp(a, "--lora-ref");
        } else if (!strcmp(a, "--step-update")) {
            if (strcmp(v, "euler") && strcmp(v, "training_euler"))
                return cli_error("generate: --step-update must be euler or training_euler, got '%s'", h3_quote(v));
            p->step_update = !strcmp(v, "training_euler") ? H3_STEP_TRAINING_EULER : H3_STEP_EULER;
        } else if (!strcmp(a, "--shift")) {
            if (cli_parse_shift(v, "generate: --shift", &p->shift_video, &p->shift_audio)) return 2;
        }
        else if (!strcmp(a, "--first-frame")) p->first_frame = v;
        else if (!strcmp(a, "--last-frame")) p->last_frame = v;
        else if (!strcmp(a, "--width")) { if (parse_int(a, v, 1, 1 << 20, &p->width)) return 2; }
        else if (!strcmp(a, "--height")) { if (parse_int(a, v, 1, 1 << 20, &p->height)) return 2; }
        else if (!strcmp(a, "--frames")) { if (parse_int(a, v, 1, 1 << 20, &p->frames)) return 2; }
        else if (!strcmp(a, "--steps")) { if (parse_int(a, v, 1, 1000, &p->steps)) return 2; }
        else if (!strcmp(a, "--reuse")) { if (parse_int(a, v, 1, 3, &p->reuse)) return 2; }
        else if (!strcmp(a, "--layers")) { if (parse_int(a, v, 35, 50, &p->layers)) return 2; }
        else if (!strcmp(a, "--core-reuse")) { if (parse_int(a, v, 1, 6, &p->core_reuse)) return 2; }
        else if (!strcmp(a, "--render-width")) { if (parse_int(a, v, 1, 1 << 20, &p->render_width)) return 2; }
        else if (!strcmp(a, "--render-height")) { if (parse_int(a, v, 1, 1 << 20, &p->render_height)) return 2; }
        else if (!strcmp(a, "--threads")) { if (parse_int(a, v, 1, 4096, &o->threads)) return 2; }
        else if (!strcmp(a, "--parallel")) { if (parse_int(a, v, 1, 8, &o->parallel)) return 2; }
        else if (!strcmp(a, "--device")) { if (parse_int(a, v, 0, 1023, &o->device)) return 2; }
        else if (!strcmp(a, "--zoom")) { if (parse_int(a, v, 1, 64, &g.zoom)) return 2; }
        else if (!strcmp(a, "--x264-preset")) p->x264_preset = v;
        else if (!strcmp(a, "--preview-width")) { if (parse_int(a, v, 1, 4096, &p->preview_width)) return 2; }
        else if (!strcmp(a, "--seconds")) {
            if (h3_parse_decimal(v, &p->seconds)) {
                char *end;
                (void)strtod(v, &end); /* C's syntax (signs, spaces, hex, exponents, inf, nan) is not taken */
                return cli_error(*v && !*end ? "generate: --seconds must be a finite number > 0 in plain decimal "
                                               "(e.g. 10 or 14.375: no sign, spaces, hex or exponent), got '%s'"
                                             : "generate: --seconds expects a number (decimal, e.g. 10 or 14.375), got '%s'",
                                 h3_quote(v));
            }
            if (p->seconds == 0) return cli_error("generate: --seconds must be a finite number > 0");
        } else if (!strcmp(a, "--seed")) {
            if (h3_parse_u64(v, &p->seed))
                return cli_error("generate: --seed expects an unsigned 64-bit integer, got '%s'", h3_quote(v));
            g.seed_given = 1;
        } else if (!strcmp(a, "--precision")) {
            if (strcmp(v, "bf16") && strcmp(v, "fp32"))
                return cli_error("generate: --precision must be bf16 or fp32, got '%s'", h3_quote(v));
            o->precision = v;
        } else if (!strcmp(a, "--ref-image-size")) {
            if (!strcmp(v, "reference")) p->ref_image_size = H3_REF_SIZE_REFERENCE;
            else if (!strcmp(v, "match")) p->ref_image_size = H3_REF_SIZE_MATCH;
            else if (!strcmp(v, "max")) p->ref_image_size = H3_REF_SIZE_MAX;
            else return cli_error("generate: --ref-image-size must be reference, match or max, got '%s'", h3_quote(v));
        } else if (!strcmp(a, "--quant")) {
            /* a string the library parses (more schemes may come); the CLI's message names the ones this build has */
            if (strcmp(v, "fp8") && strcmp(v, "int8") && strcmp(v, "none"))
                return cli_error("generate: --quant must be none, fp8 or int8, got '%s'", h3_quote(v));
            o->quant = v;
        } else if (!strcmp(a, "--preset")) {
            if (strcmp(v, "exact") && strcmp(v, "fast"))
                return cli_error("generate: --preset must be exact or fast, got '%s'", h3_quote(v));
            o->preset = v;
        } else if (!strcmp(a, "--vae-quant")) {
            if (strcmp(v, "fp8") && strcmp(v, "none"))
                return cli_error("generate: --vae-quant must be none or fp8, got '%s'", h3_quote(v));
            o->vae_quant = v;
        } else if (!strcmp(a, "--attention")) {
            if (strcmp(v, "exact") && strcmp(v, "sage8"))
                return cli_error("generate: --attention must be exact or sage8, got '%s'", h3_quote(v));
            o->attention = v;
        } else if (!strcmp(a, "--backend")) {
            if (strcmp(v, "auto") && strcmp(v, "cpu") && strcmp(v, "cuda"))
                return cli_error("generate: --backend must be cpu or cuda (or auto, the default), got '%s'", h3_quote(v));
            o->backend = v;
        } else if (!strncmp(a, "--ref-", 6)) {
            int k;
            if (!strcmp(a, "--ref-image")) k = H3_REFERENCE_IMAGE;
            else if (!strcmp(a, "--ref-silent-video")) k = H3_REFERENCE_SILENT_VIDEO;
            else if (!strcmp(a, "--ref-video")) k = H3_REFERENCE_VIDEO;
            else if (!strcmp(a, "--ref-video-audio")) k = H3_REFERENCE_VIDEO_AUDIO;
            else if (!strcmp(a, "--ref-audio")) k = H3_REFERENCE_AUDIO;
            else return flag_error(a);
            if (p->nrefs == H3_MAX_REFERENCES)
                return cli_error("generate: %s: at most %d references in total", a, H3_MAX_REFERENCES);
            h3_reference *f = &p->refs[p->nrefs++];
            f->kind = k;
            f->path = v;
            if (k == H3_REFERENCE_VIDEO_AUDIO) {
                if (i + 1 >= argc || argv[i + 1][0] == '-')
                    return cli_error("generate: --ref-video-audio takes two paths: VIDEO AUDIO");
                f->audio_path = argv[++i];
            }
        } else {
            return flag_error(a);
        }
    }
    /* --info (docs/model/features.md 2): `h3 info -d DIR` first; alone it only inspects, with -p a clean snapshot then generates */
    if (info) {
        if (!model_dir || !model_dir[0]) return cli_error("generate: --info needs -d SNAPSHOT_DIR");
        char *iargv[] = {"info", "-d", (char *)model_dir, NULL};
        int irc = cmd_info(3, iargv);
        fflush(stdout);
        if (irc != 0 || !p->prompt) return irc;
    }
    /* --show: previews on stdout through the terminal's graphics protocol, when there is one */
    term_preview tp = {term_graphics_detect(), g.zoom, stdout};
    if (g.show && tp.g == TERM_NONE) {
        fprintf(stderr, "h3: warning: --show: no graphics terminal detected (Kitty/Ghostty or iTerm2/WezTerm/Konsole): "
                        "no previews\n");
        g.show = 0;
    }
    /* -d must name a snapshot root (h3_engine_open's check, with info's message and exit 2): a session does not
     * start otherwise; without -d the one-shot path below says that -d is required */
    h3_engine *eng = NULL;
    if (model_dir && model_dir[0] && h3_engine_open(model_dir, o, &eng) != H3_OK) {
        int st = h3_engine_status(eng);
        int rc = st == H3_ERR_BAD_INPUT ? cli_error("generate: %s", h3_engine_error(eng))
                                        : (fprintf(stderr, "h3: generate: %s\n", h3_engine_error(eng)), 1);
        h3_engine_close(eng);
        return rc;
    }
    if (!p->prompt && eng) {
        int rc = cmd_session(eng, &g);
        h3_engine_close(eng);
        return rc;
    }
    if (g.resident) {
        h3_engine_close(eng);
        return cli_error("generate: --resident keeps the models between a session's generations: start a session (no -p)");
    }
    if (!eng && h3_engine_open(model_dir, o, &eng) != H3_OK) { /* no -d: the API's "-d SNAPSHOT_DIR is required" */
        int rc = cli_error("generate: %s", h3_engine_error(eng));
        h3_engine_close(eng);
        return rc;
    }
    int rc = 0;
    h3_sinks sinks = {.preview = term_preview_frame, .user = &tp};
    if (h3_engine_check(eng, p, NULL) != H3_OK) {
        rc = cli_error("generate: %s", h3_engine_error(eng));
    } else if (h3_engine_generate(eng, p, g.show ? &sinks : NULL) != H3_OK) {
        fprintf(stderr, "h3: generate: %s\n", h3_engine_error(eng));
        rc = h3_engine_status(eng) == H3_ERR_BAD_INPUT ? 2 : 1;
    }
    h3_engine_close(eng);
    return rc;
}
