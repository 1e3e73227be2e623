/* `h3 probe OP --model DIR --in IN.safetensors --out OUT.safetensors [--component C]
 *  [--precision fp32|bf16] [--backend cpu|cuda]`: the parity contract of docs/probe.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "core/text.h"
#include "probe.h"

static const struct {
    const char *name;
    probe_fn    fn;
} probe_ops[] = {
    {"dit", probe_dit},
    {"sigmas", probe_sigmas},
    {"layout", probe_layout},
    {"denoise", probe_denoise},
    {"noise", probe_noise},
    {"vae-decode", probe_vae_decode},
    {"vae-encode", probe_vae_encode},
    {"audio-decode", probe_audio_decode},
    {"audio-encode", probe_audio_encode},
    {"text-encode", probe_text_encode},
    {"tokenize", probe_tokenize},
    {"vision", probe_vision},
};

int probe_has_input(probe_ctx *p, const char *name) {
    return p->in && st_set_entry(p->in, name, NULL) != NULL;
}

int probe_input(probe_ctx *p, const char *name, h3_dtype want, int ndim, h3_tensor **out, h3_err *e) {
    *out = NULL;
    h3_tensor view;
    h3_err tmp;
    if (st_set_get(p->in, name, &view, &tmp) != 0)
        return h3_fail(e, "input '%s': missing from --in %s", name, st_set_path(p->in));
    if (ndim >= 0 && view.ndim != ndim) {
        char s[128];
        return h3_fail(e, "input '%s': expected %d dimensions, got shape %s", name, ndim,
                       h3_shape_str(view.shape, view.ndim, s, sizeof s));
    }
    int ok;
    switch (want) {
    case H3_F32: ok = view.dtype == H3_F32 || view.dtype == H3_BF16 || view.dtype == H3_F16 || view.dtype == H3_F64; break;
    case H3_I64: ok = view.dtype == H3_I64 || view.dtype == H3_I32; break;
    case H3_F64: ok = view.dtype == H3_F64 || view.dtype == H3_F32; break;
    default: ok = view.dtype == want; break;
    }
    if (!ok)
        return h3_fail(e, "input '%s': dtype %s not accepted (want %s)", name, h3_dtype_name(view.dtype),
                       h3_dtype_name(want));
    h3_tensor *t = h3_tensor_new(want, view.ndim, view.shape, e);
    if (!t) return -1;
    int64_t n = h3_tensor_numel(&view);
    if (view.dtype == want) {
        memcpy(t->data, view.data, h3_tensor_nbytes(t));
    } else if (want == H3_F32) {
        h3_convert_to_f32(t->data, view.data, view.dtype, (size_t)n);
    } else if (want == H3_I64) {
        const int32_t *s = view.data;
        int64_t *d = t->data;
        for (int64_t i = 0; i < n; i++) d[i] = s[i];
    } else if (want == H3_F64) {
        const float *s = view.data;
        double *d = t->data;
        for (int64_t i = 0; i < n; i++) d[i] = s[i];
    }
    *out = t;
    return 0;
}

int probe_output(probe_ctx *p, const char *name, const h3_tensor *t, h3_err *e) {
    return st_writer_add_tensor(p->out, name, t, e);
}

int probe_output_f32(probe_ctx *p, const char *name, const float *data, int ndim, const int64_t *shape,
                     h3_err *e) {
    return st_writer_add(p->out, name, H3_F32, ndim, shape, data, e);
}

static void probe_usage(FILE *f) {
    fprintf(f, "usage: h3 probe OP --model DIR --in IN.safetensors --out OUT.safetensors\n"
               "                [--component transformer|transformer_ref] [--precision fp32|bf16]\n"
               "                [--transformer FILE]   (dit: the weights from a single-file transformer)\n"
               "                [--lora FILE[:SCALE]]... [--lora-ref FILE[:SCALE]]... (dit, denoise: docs/lora.md)\n"
               "                [--quant none|int8] [--int8-fc2-groups] (dit, docs/int8.md)\n"
               "                [--vae-quant none|fp8] (vae-decode: the FP8 decoder, docs/fast.md)\n"
               "                [--attention exact|sage8] (dit with bf16: 8-bit attention, docs/fast.md)\n"
               "                [--backend cpu|cuda]\nops:");
    for (size_t i = 0; i < sizeof probe_ops / sizeof probe_ops[0]; i++) fprintf(f, " %s", probe_ops[i].name);
    fprintf(f, "\n");
}

int cmd_probe(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        probe_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    probe_ctx p = {0};
    p.op = argv[1];
    const char *in_path = NULL, *out_path = NULL, *precision = "fp32", *backend = "cpu", *quant = "none", *vae_quant = "none";
    const char *attention = "exact", *parallel = "1";
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char **dst = NULL;
        if (!strcmp(a, "--model")) dst = &p.model;
        else if (!strcmp(a, "--in")) dst = &in_path;
        else if (!strcmp(a, "--out")) dst = &out_path;
        else if (!strcmp(a, "--component")) dst = &p.component;
        else if (!strcmp(a, "--transformer")) dst = &p.transformer;
        else if (!strcmp(a, "--precision")) dst = &precision;
        else if (!strcmp(a, "--backend")) dst = &backend;
        else if (!strcmp(a, "--quant")) dst = &quant;
        else if (!strcmp(a, "--vae-quant")) dst = &vae_quant;
        else if (!strcmp(a, "--attention")) dst = &attention;
        else if (!strcmp(a, "--parallel")) dst = &parallel;
        else if (!strcmp(a, "--lora") || !strcmp(a, "--lora-ref")) {
            if (i + 1 >= argc) return cli_error("probe: option '%s' needs a value", a);
            if (p.n_loras == DIT_LORA_MAX) return cli_error("probe: %s: at most %d LoRAs", a, DIT_LORA_MAX);
            h3_err le = {{0}};
            if (dit_lora_parse_arg(argv[++i], a, &p.loras[p.n_loras], &le) != 0) return cli_error("probe: %s", le.msg);
            p.loras[p.n_loras++].to_ref = !strcmp(a, "--lora-ref");
            continue;
        } else if (!strcmp(a, "--int8-fc2-groups")) {
            p.int8_fc2_groups = 1;
            continue;
        } else return cli_error("probe: unknown option '%s'", a);
        if (i + 1 >= argc) return cli_error("probe: option '%s' needs a value", a);
        *dst = argv[++i];
    }
    probe_fn fn = NULL;
    for (size_t i = 0; i < sizeof probe_ops / sizeof probe_ops[0]; i++)
        if (!strcmp(probe_ops[i].name, p.op)) fn = probe_ops[i].fn;
    if (!fn) return cli_error("probe: unknown op '%s' (see h3 probe --help)", p.op);
    if (!in_path) return cli_error("probe: --in is required");
    if (!out_path) return cli_error("probe: --out is required");
    if (strcmp(precision, "fp32") && strcmp(precision, "bf16"))
        return cli_error("probe: --precision must be fp32 or bf16, got '%s'", precision);
    p.bf16 = !strcmp(precision, "bf16");
    if (p.transformer && strcmp(p.op, "dit")) return cli_error("probe: --transformer is an option of the dit op only");
    if (p.n_loras && strcmp(p.op, "dit") && strcmp(p.op, "denoise"))
        return cli_error("probe: --lora is an option of the dit and denoise ops only");
    if (strcmp(quant, "none") && strcmp(quant, "int8"))
        return cli_error("probe: --quant must be none or int8, got '%s'", quant);
    p.quant_int8 = !strcmp(quant, "int8");
    if ((p.quant_int8 || p.int8_fc2_groups) && !p.bf16)
        return cli_error("probe: --quant int8 and --int8-fc2-groups need --precision bf16");
    if (strcmp(vae_quant, "none") && strcmp(vae_quant, "fp8"))
        return cli_error("probe: --vae-quant must be none or fp8, got '%s'", vae_quant);
    p.vae_fp8 = !strcmp(vae_quant, "fp8");
    if (p.vae_fp8 && strcmp(p.op, "vae-decode")) return cli_error("probe: --vae-quant is an option of the vae-decode op only");
    if (p.vae_fp8 && !p.bf16) return cli_error("probe: --vae-quant fp8 needs --precision bf16");
    if (strcmp(attention, "exact") && strcmp(attention, "sage8"))
        return cli_error("probe: --attention must be exact or sage8, got '%s'", attention);
    p.attention_sage8 = !strcmp(attention, "sage8");
    if (p.attention_sage8 && (!p.bf16 || strcmp(p.op, "dit")))
        return cli_error("probe: --attention sage8 is an option of the dit op with --precision bf16");
    long np;
    if (h3_parse_int(parallel, 1, 8, &np)) return cli_error("probe: --parallel must be an integer in 1..8, got '%s'", parallel);
    p.parallel = (int)np;
    if (p.parallel > 1 && strcmp(p.op, "dit")) return cli_error("probe: --parallel is an option of the dit op only");
    if (p.component && strcmp(p.component, "transformer") && strcmp(p.component, "transformer_ref"))
        return cli_error("probe: --component must be transformer or transformer_ref, got '%s'", p.component);
    h3_backend_kind kind;
    if (!strcmp(backend, "cpu")) kind = H3_BACKEND_CPU;
    else if (!strcmp(backend, "cuda")) kind = H3_BACKEND_CUDA;
    else return cli_error("probe: --backend must be cpu or cuda, got '%s'", backend);

    h3_err e = {{0}};
    int rc = 2;
    p.in = st_set_open(in_path, &e);
    if (!p.in) { cli_error("probe %s: %s", p.op, e.msg); goto done; }
    p.be = h3_backend_new(kind, 0, &e);
    if (!p.be) { cli_error("probe %s: %s", p.op, e.msg); goto done; }
    p.out = st_writer_new();
    if (fn(&p, &e) != 0) { cli_error("probe %s: %s", p.op, e.msg); goto done; }
    h3_sync(p.be); /* a failure recorded by a void op (no twin on this backend, a CUDA error) */
    if (h3_backend_check(p.be, &e) != 0) { cli_error("probe %s: %s", p.op, e.msg); goto done; }
    if (st_writer_save(p.out, out_path, NULL, &e) != 0) { cli_error("probe %s: %s", p.op, e.msg); goto done; }
    rc = 0;
done:
    st_writer_free(p.out);
    h3_backend_free(p.be);
    st_set_free(p.in);
    return rc;
}
