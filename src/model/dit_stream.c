/* --ssd-streaming (docs/model/features.md 7.3) and the host-resident AdaLN projections (7.1).
 *
 * With DIT_STREAM the four linears of each main block (q/k/v or the fused qkv_proj, the attention output, the FFN
 * input and output: 770 MB a block in the release) stay where they were loaded from, the read-only file mapping
 * (or, for random weights, host memory), and two backend slots take turns: while the backend runs block b out of
 * one slot, block b + 1 is copied into the other (backend_stream.h orders the copy after block b - 1's last
 * kernel and block b + 1's first kernel after the copy). Block b's fields in m->blocks are views into its slot
 * only between dit_stream_bind and dit_stream_unbind, so the very same block code runs on the same bytes as the
 * resident model: the output is bit-identical. A slot lays the parts out in the order q, k, v (or qkv), out,
 * FFN in, FFN down, each 256-byte aligned; q, k and v are adjacent, so on CUDA in bf16 mode they are the fused
 * [3I, H] matrix the resident model stacks at load. After the last block the first one is copied again, so the
 * next forward (the next denoising step) starts without a wait.
 *
 * Where the copies come from (H3_STREAM_READ=auto|map|direct, auto by default): the file mapping, i.e. the page cache
 * after the first forward; or, when the host's available memory could not keep the streamed bytes cached (auto) or
 * when asked (direct), the shard files themselves with uncached O_DIRECT reads, so the page cache holds no second
 * copy (docs/model/features.md 7.3; buffered reads where the file system refuses O_DIRECT). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../io/safetensors.h"
#include "dit_internal.h"
#include "dit_lora.h"

static const char *const part_suffix[2][DIT_PARTS] = {
    /* diffusers layout */
    {NULL, "attn.to_q.weight", "attn.to_k.weight", "attn.to_v.weight", "attn.to_out.0.weight", "ff.net.0.proj.weight",
     "ff.net.2.weight"},
    /* original layout */
    {"attn.qkv_proj.weight", NULL, NULL, NULL, "attn.out_proj.weight", "mlp.fc1.weight", "mlp.fc2.weight"},
};

int dit_stream_part(const dit_config *c, const char *name, int64_t *block) {
    const char *prefix = c->original_layout ? "blocks." : "transformer_blocks.";
    size_t n = strlen(prefix);
    *block = -1;
    if (strncmp(name, prefix, n)) return -1;
    char *end;
    long b = strtol(name + n, &end, 10);
    if (end == name + n || *end != '.' || b < 0 || b >= c->num_layers) return -1;
    for (int p = 0; p < DIT_PARTS; p++) {
        const char *s = part_suffix[c->original_layout ? 1 : 0][p];
        if (s && !strcmp(end + 1, s)) {
            *block = b;
            return p;
        }
    }
    return -1;
}

static int ends_with(const char *s, const char *tail) {
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && !strcmp(s + a - b, tail);
}

/* The AdaLN projections: the main blocks' and the final layer's (both layouts). */
static int is_adaln(const char *name) {
    return ends_with(name, "adaln_proj.linear.weight") || ends_with(name, "adaln_proj.linear.bias") ||
           !strncmp(name, "norm_out.linear.", 16);
}

int dit_host_tensor(const dit_model *m, const char *name, int *part, int64_t *block) {
    *part = dit_stream_part(&m->cfg, name, block);
    if (m->be->kind == H3_BACKEND_CPU) return 0; /* every weight is a view of host memory there anyway */
    if (m->stream && *part >= 0) return 1;
    return is_adaln(name);
}

static int fill(dit_model *m, int s, int64_t b, h3_err *e);

/* One LoRA piece of a streamed part (docs/lora.md "--ssd-streaming"): the factors in backend memory, in the part's
 * dtype, merged into the part's rows row0.. of a slot by h3_lora_merge_into after each fill with its block. */
typedef struct dit_stream_lora {
    int64_t       index; /* block * DIT_PARTS + part */
    int64_t       row0;
    h3_dtype      dtype;
    h3_lora_delta d;     /* d.A, d.B: backend memory */
} dit_stream_lora;

int dit_stream_lora_add(dit_model *m, const char *name, int64_t slot_index, const h3_tensor *view, h3_err *e) {
    dit_stream *st = m->stream;
    dit_lora_piece *p;
    int np;
    /* the dtype the resident model's merged copy has (dit_lora_view): the stored one in bf16 mode, F32 in fp32 mode */
    const h3_dtype out = m->act == H3_BF16 ? view->dtype : H3_F32;
    if (dit_lora_pieces(m->lora, &m->cfg, name, view, out, &p, &np, e) != 0) return -1;
    if (np && out != view->dtype) { /* held F32 in the slot, widened as it is filled (backend_stream.h) */
        if (view->dtype != H3_BF16) {
            dit_lora_pieces_free(p, np);
            return h3_fail(e, "--lora with --ssd-streaming --precision fp32: '%s' is %s, the slots widen BF16 weights "
                              "only", name, h3_dtype_name(view->dtype));
        }
        if (!st->wide[slot_index]) st->stats.lora_f32_parts++;
        st->wide[slot_index] = 1, st->wide_part[slot_index % DIT_PARTS] = 1;
    }
    const size_t esz = h3_dtype_size(out);
    for (int i = 0; i < np; i++) {
        if (st->n_lora == st->cap_lora) {
            const int cap = st->cap_lora ? 2 * st->cap_lora : 64;
            dit_stream_lora *v = realloc(st->lora, (size_t)cap * sizeof *v);
            if (!v) goto oom;
            st->lora = v, st->cap_lora = cap;
        }
        const size_t na = (size_t)p[i].rank * (size_t)p[i].k, nb = (size_t)p[i].rank * (size_t)p[i].n;
        void *hA = malloc(na * esz), *hB = malloc(nb * esz), *dA = NULL, *dB = NULL;
        if (hA && hB && (dA = h3_alloc(m->be, na * esz)) && (dB = h3_alloc(m->be, nb * esz))) {
            h3_convert_from_f32(hA, out, p[i].A, na); /* exact: the values are rounded to that dtype */
            h3_convert_from_f32(hB, out, p[i].B, nb);
            h3_upload(m->be, dA, hA, na * esz);
            h3_upload(m->be, dB, hB, nb * esz);
        }
        const int ok = dA && dB;
        if (!ok) h3_free(m->be, dA);
        free(hA), free(hB);
        if (!ok) {
            dit_lora_pieces_free(p, np);
            return h3_fail(e, "--lora: out of backend memory for the LoRA factors of '%s'", name);
        }
        st->lora[st->n_lora++] = (dit_stream_lora){
            .index = slot_index, .row0 = p[i].row0, .dtype = out,
            .d = {.A = dA, .B = dB, .n = p[i].n, .k = p[i].k, .row_group = p[i].row_group,
                  .group_stride = p[i].group_stride, .rank = p[i].rank, .scaling = p[i].scaling}};
        st->stats.lora_bytes += (double)((na + nb) * esz);
    }
    dit_lora_pieces_free(p, np);
    return 0;
oom:
    dit_lora_pieces_free(p, np);
    return h3_fail(e, "out of memory");
}

int dit_stream_note_file(dit_model *m, const char *name, int64_t slot_index, h3_err *e) {
    dit_stream *st = m->stream;
    const st_file *f = NULL;
    char full[256]; /* a single file's names may carry a prefix (docs/checkpoints.md) */
    snprintf(full, sizeof full, "%s%s", m->name_prefix, name);
    const st_entry *en = st_set_entry(m->st, full, &f);
    if (!en || !f) return h3_fail(e, "internal: --ssd-streaming: '%s' not in the shards", full);
    int idx = -1;
    for (int i = 0; i < st->n_paths && idx < 0; i++)
        if (!strcmp(st->paths[i], f->path)) idx = i;
    if (idx < 0) {
        if (st->n_paths == DIT_STREAM_FILES)
            return h3_fail(e, "--ssd-streaming: the transformer has more than %d shards", DIT_STREAM_FILES);
        if (!(st->paths[st->n_paths] = strdup(f->path))) return h3_fail(e, "out of memory");
        idx = st->n_paths++;
    }
    st->file_of[slot_index] = (int16_t)idx;
    st->file_off[slot_index] = (uint64_t)f->data_off + en->begin;
    return 0;
}

/* MemAvailable of /proc/meminfo in bytes, -1 when unknown. */
static double mem_available(void) {
    FILE *fp = fopen("/proc/meminfo", "r");
    if (!fp) return -1;
    char line[256];
    double kb = -1;
    while (fgets(line, sizeof line, fp))
        if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1) break;
    fclose(fp);
    return kb < 0 ? -1 : kb * 1024.0;
}

/* Where the copies come from (the file comment): opens the shards for reading when they are to be read. */
static int choose_reads(dit_model *m, double streamed_bytes, h3_err *e) {
    dit_stream *st = m->stream;
    const char *env = h3_knob_get(H3_KNOB_STREAM_READ);
    if (env && strcmp(env, "auto") && strcmp(env, "map") && strcmp(env, "direct"))
        return h3_fail(e, "H3_STREAM_READ must be auto, map or direct, got '%s'", env);
    int files = 0;
    if (env && !strcmp(env, "direct")) files = 1;
    else if (!env || !strcmp(env, "auto")) {
        const double avail = mem_available(); /* the streamed bytes and 8 GiB for everything else */
        files = m->be->kind != H3_BACKEND_CPU && avail >= 0 && avail < streamed_bytes + 8.0 * (1u << 30);
    }
    if (!files || !m->st || !st->n_paths) return 0;
    int direct = 1;
    for (int i = 0; i < st->n_paths; i++) {
        if (h3_read_file_open(&st->files[i], st->paths[i], 1, e) != 0) return -1;
        direct &= st->files[i].direct;
    }
    st->reads = direct ? 1 : 2;
    return 0;
}

static size_t align256(size_t x) { return (x + 255) / 256 * 256; }

static h3_tensor **src_of(dit_model *m, int64_t b) { return m->stream->src + b * DIT_PARTS; }

/* A view of `bytes` of slot s at offset off with the shape of t, kept in the model's owned list. */
static h3_tensor *slot_view(dit_model *m, int s, const h3_tensor *t, size_t off, int64_t rows, h3_err *e) {
    int64_t shape[2] = {rows, t->shape[1]};
    h3_tensor *v = h3_tensor_view(t->dtype, 2, shape, (char *)h3_slot_data(m->stream->slot[s]) + off, e);
    if (!v) return NULL;
    v->owns_data = 0;
    const int cap = (int)(sizeof m->stream->view_list / sizeof m->stream->view_list[0]);
    if (m->stream->n_views == cap) { /* 8 views a slot at most (q, k, v, out, FFN in, value, gate, down) */
        h3_tensor_free(v);
        h3_fail(e, "internal: --ssd-streaming: more than %d slot views", cap);
        return NULL;
    }
    m->stream->view_list[m->stream->n_views++] = v;
    return v;
}

int dit_stream_alloc(dit_model *m, h3_err *e) {
    const size_t n = (size_t)(m->cfg.num_layers > 0 ? m->cfg.num_layers : 1) * DIT_PARTS;
    if (!(m->stream = calloc(1, sizeof *m->stream)) || !(m->stream->src = calloc(n, sizeof(h3_tensor *))) ||
        !(m->stream->file_of = malloc(n * sizeof(int16_t))) || !(m->stream->file_off = calloc(n, sizeof(uint64_t))) ||
        !(m->stream->wide = calloc(n, 1)))
        return h3_fail(e, "out of memory");
    for (size_t i = 0; i < n; i++) m->stream->file_of[i] = -1;
    for (int i = 0; i < DIT_STREAM_FILES; i++) m->stream->files[i].fd = -1;
    m->stream->rand_type = -1;
    return 0;
}

int dit_stream_setup(dit_model *m, h3_err *e) {
    dit_stream *st = m->stream;
    const dit_config *c = &m->cfg;
    const int orig = c->original_layout;
    int64_t first = -1;
    for (int64_t b = 0; b < c->num_layers && first < 0; b++)
        if (src_of(m, b)[DIT_PART_OUT]) first = b;
    if (first < 0) return h3_fail(e, "--ssd-streaming: no main block has streamed weights");
    h3_tensor **f = src_of(m, first);
    size_t off = 0;
    for (int p = 0; p < DIT_PARTS; p++) { /* a part some block holds F32 (wide) takes twice its stored bytes */
        st->offset[p] = off;
        if (f[p]) off = align256(off + h3_tensor_nbytes(f[p]) * (st->wide_part[p] ? 2 : 1));
    }
    const int fused = !orig && m->act == H3_BF16 && m->be->kind != H3_BACKEND_CPU; /* q, k, v as one [3I, H] matrix */
    /* adjacent in the slot, so they serve as that fused matrix: true when each is a multiple of 256 bytes */
    if (fused && (st->offset[DIT_PART_K] != st->offset[DIT_PART_Q] + h3_tensor_nbytes(f[DIT_PART_Q]) ||
                  st->offset[DIT_PART_V] != st->offset[DIT_PART_K] + h3_tensor_nbytes(f[DIT_PART_K])))
        return h3_fail(e, "--ssd-streaming: to_q / to_k / to_v of %lld bytes do not pack into one matrix",
                       (long long)h3_tensor_nbytes(f[DIT_PART_Q]));
    st->slot_bytes = off;
    for (int64_t b = 0; b < c->num_layers; b++) {
        h3_tensor **t = src_of(m, b);
        for (int p = 0; p < DIT_PARTS; p++) {
            if (!t[p] && !f[p]) continue;
            if (!t[p] || !f[p] || t[p]->dtype != f[p]->dtype || t[p]->ndim != 2 || t[p]->shape[0] != f[p]->shape[0] ||
                t[p]->shape[1] != f[p]->shape[1])
                return h3_fail(e, "--ssd-streaming: block %lld's %s differs in shape or dtype from block %lld's",
                               (long long)b, part_suffix[orig][p], (long long)first);
        }
    }
    const int64_t FF = c->ffn_dim;
    for (int s = 0; s < 2; s++) {
        if (!(st->slot[s] = h3_slot_new(m->be, st->slot_bytes)))
            return h3_fail(e, "--ssd-streaming: out of backend memory for a %.2f GiB weight slot",
                           (double)st->slot_bytes / (1u << 30));
        st->holds[s] = -1;
        dit_block_w *v = &st->view[s];
        if (orig && c->qkv_stacked) { /* a single file's [q; k; v] (docs/checkpoints.md) */
            v->attn.qkv_planar = slot_view(m, s, f[DIT_PART_QKV], st->offset[DIT_PART_QKV], f[DIT_PART_QKV]->shape[0], e);
        } else if (orig) {
            v->attn.qkv = slot_view(m, s, f[DIT_PART_QKV], st->offset[DIT_PART_QKV], f[DIT_PART_QKV]->shape[0], e);
        } else if (fused) {
            v->attn.qkv_planar = slot_view(m, s, f[DIT_PART_Q], st->offset[DIT_PART_Q],
                                           f[DIT_PART_Q]->shape[0] + f[DIT_PART_K]->shape[0] + f[DIT_PART_V]->shape[0], e);
        } else {
            v->attn.to_q = slot_view(m, s, f[DIT_PART_Q], st->offset[DIT_PART_Q], f[DIT_PART_Q]->shape[0], e);
            v->attn.to_k = slot_view(m, s, f[DIT_PART_K], st->offset[DIT_PART_K], f[DIT_PART_K]->shape[0], e);
            v->attn.to_v = slot_view(m, s, f[DIT_PART_V], st->offset[DIT_PART_V], f[DIT_PART_V]->shape[0], e);
        }
        v->attn.to_out = slot_view(m, s, f[DIT_PART_OUT], st->offset[DIT_PART_OUT], f[DIT_PART_OUT]->shape[0], e);
        v->ff_in = slot_view(m, s, f[DIT_PART_FF_IN], st->offset[DIT_PART_FF_IN], 2 * FF, e);
        /* FFN input: original [gate; value], diffusers [value; gate] (docs/model/dit.md 2.4), as load_block's row views */
        const size_t row = (size_t)f[DIT_PART_FF_IN]->shape[1] * h3_dtype_size(f[DIT_PART_FF_IN]->dtype);
        v->ff_value = slot_view(m, s, f[DIT_PART_FF_IN], st->offset[DIT_PART_FF_IN] + (orig ? FF : 0) * row, FF, e);
        v->ff_gate = slot_view(m, s, f[DIT_PART_FF_IN], st->offset[DIT_PART_FF_IN] + (orig ? 0 : FF) * row, FF, e);
        v->ff_down = slot_view(m, s, f[DIT_PART_FF_DOWN], st->offset[DIT_PART_FF_DOWN], f[DIT_PART_FF_DOWN]->shape[0], e);
        if (!v->attn.to_out || !v->ff_in || !v->ff_value || !v->ff_gate || !v->ff_down ||
            !(v->attn.qkv || v->attn.qkv_planar || (v->attn.to_q && v->attn.to_k && v->attn.to_v)))
            return h3_fail(e, "out of memory");
    }
    st->bound = -1;
    st->stats.slot_bytes = 2.0 * (double)st->slot_bytes;
    double streamed = 0;
    for (int64_t i = 0; i < (int64_t)c->num_layers * DIT_PARTS; i++)
        if (st->src[i]) streamed += (double)h3_tensor_nbytes(st->src[i]);
    if (choose_reads(m, streamed, e) != 0) return -1;
    st->stats.reads = st->reads;
    return fill(m, 0, first, e); /* the first forward starts on a filled slot (--layers keeps block 0) */
}

void dit_stream_free(dit_model *m) {
    dit_stream *st = m->stream;
    if (!st) return;
    for (int s = 0; s < 2; s++) h3_slot_free(m->be, st->slot[s]);
    for (int i = 0; i < st->n_views; i++) h3_tensor_free(st->view_list[i]);
    for (int i = 0; i < st->n_paths; i++) {
        if (st->files[i].fd >= 0) h3_read_file_close(&st->files[i]);
        free(st->paths[i]);
    }
    for (int64_t i = 0; st->qsrc && i < (int64_t)(m->cfg.num_layers > 0 ? m->cfg.num_layers : 1) * DIT_PARTS; i++)
        if (st->qsrc[i]) {
            h3_free(m->be, st->qsrc[i]->data);
            h3_tensor_free(st->qsrc[i]);
        }
    free(st->qsrc), free(st->qtype), free(st->qbytes);
    for (int i = 0; i < st->n_lora; i++) {
        h3_free(m->be, (void *)st->lora[i].d.A);
        h3_free(m->be, (void *)st->lora[i].d.B);
    }
    free(st->lora);
    free(st->src), free(st->file_of), free(st->file_off), free(st->wide);
    free(st);
    m->stream = NULL;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The views of slot s as block b's parts: a wide part of b is F32, of another block the stored dtype (so fc1's row
 * views move with the row width). Nothing to do without wide parts. */
static void retype_views(dit_model *m, int s, int64_t b) {
    dit_stream *st = m->stream;
    dit_block_w *v = &st->view[s];
    h3_tensor **t = src_of(m, b);
    char *base = h3_slot_data(st->slot[s]);
    for (int p = 0; p < DIT_PARTS; p++) {
        if (!st->wide_part[p] || !t[p]) continue;
        const h3_dtype dt = st->wide[b * DIT_PARTS + p] ? H3_F32 : t[p]->dtype;
        h3_tensor *one = p == DIT_PART_QKV ? (v->attn.qkv ? v->attn.qkv : v->attn.qkv_planar)
                       : p == DIT_PART_Q   ? v->attn.to_q
                       : p == DIT_PART_K   ? v->attn.to_k
                       : p == DIT_PART_V   ? v->attn.to_v
                       : p == DIT_PART_OUT ? v->attn.to_out
                       : p == DIT_PART_FF_IN ? v->ff_in : v->ff_down;
        if (one) one->dtype = dt;
        if (p == DIT_PART_FF_IN) { /* FFN input: original [gate; value], diffusers [value; gate] (dit_stream_setup) */
            const int orig = m->cfg.original_layout;
            const size_t row = (size_t)t[p]->shape[1] * h3_dtype_size(dt), FF = (size_t)m->cfg.ffn_dim;
            v->ff_value->dtype = v->ff_gate->dtype = dt;
            v->ff_value->data = base + st->offset[p] + (orig ? FF : 0) * row;
            v->ff_gate->data = base + st->offset[p] + (orig ? 0 : FF) * row;
        }
    }
}

static int fill(dit_model *m, int s, int64_t b, h3_err *e) {
    dit_stream *st = m->stream;
    h3_tensor **t = src_of(m, b);
    h3_slot_piece pc[DIT_PARTS];
    int n = 0;
    double bytes = 0;
    for (int p = 0; p < DIT_PARTS; p++)
        if (t[p]) {
            const int64_t i = b * DIT_PARTS + p;
            const int from_file = st->reads && st->file_of[i] >= 0;
            pc[n++] = (h3_slot_piece){.src = t[p]->data, .bytes = h3_tensor_nbytes(t[p]), .offset = st->offset[p],
                                      .file = from_file ? &st->files[st->file_of[i]] : NULL, .file_off = st->file_off[i],
                                      .gguf = st->quant, .gguf_type = st->quant ? st->qtype[i] : 0, .wide = st->wide[i]};
            bytes += st->quant ? (double)st->qbytes[i] : (double)h3_tensor_nbytes(t[p]);
        }
    if (!n) return h3_fail(e, "internal: --ssd-streaming: block %lld has no streamed weights (dropped by --layers)",
                           (long long)b);
    const double t0 = now_s();
    st->holds[s] = -1;
    if (h3_slot_fill(m->be, st->slot[s], pc, n, e) != 0) return -1;
    retype_views(m, s, b);
    /* --lora: the block's LoRA pieces merged into the slot's copy, in load order (each LoRA onto the previous one's
     * result), before any reader: the bits of the merge at load (docs/lora.md) */
    for (int i = 0; i < st->n_lora; i++) {
        const dit_stream_lora *l = &st->lora[i];
        if (l->index / DIT_PARTS != b) continue;
        char *W = (char *)h3_slot_data(st->slot[s]) + st->offset[l->index % DIT_PARTS] +
                  (size_t)(l->row0 * l->d.k) * h3_dtype_size(l->dtype);
        h3_lora_merge_into(m->be, st->slot[s], W, l->dtype, &l->d);
        if (h3_backend_check(m->be, e) != 0) return -1; /* a flag read: no sync */
        st->stats.lora_merges++;
    }
    st->holds[s] = b;
    st->stats.fills++;
    st->stats.bytes += bytes;
    st->stats.host_seconds += now_s() - t0;
    return 0;
}

static void set_fields(dit_block_w *w, const dit_block_w *v) {
    w->attn.qkv = v->attn.qkv, w->attn.qkv_planar = v->attn.qkv_planar;
    w->attn.to_q = v->attn.to_q, w->attn.to_k = v->attn.to_k, w->attn.to_v = v->attn.to_v;
    w->attn.to_out = v->attn.to_out;
    w->ff_in = v->ff_in, w->ff_value = v->ff_value, w->ff_gate = v->ff_gate, w->ff_down = v->ff_down;
}

/* The first block a forward runs (--layers keeps block 0, but say what is meant). */
static int64_t first_active(const dit_model *m) {
    for (int64_t b = 0; b < m->cfg.num_layers; b++)
        if (!(m->skip && m->skip[b])) return b;
    return -1;
}

int dit_stream_bind(dit_model *m, int64_t b, h3_err *e) {
    dit_stream *st = m->stream;
    int s = st->holds[0] == b ? 0 : st->holds[1] == b ? 1 : -1;
    if (s < 0) { /* not prefetched (dit_block_forward on some block): copy it now, keeping the next forward's first */
        s = st->holds[0] == first_active(m) ? 1 : 0;
        if (fill(m, s, b, e) != 0) return -1;
    }
    h3_slot_acquire(m->be, st->slot[s]);
    set_fields(&m->blocks[b], &st->view[s]);
    st->bound = s;
    return 0;
}

int dit_stream_unbind(dit_model *m, int64_t b, int64_t prefetch, h3_err *e) {
    dit_stream *st = m->stream;
    const int s = st->bound;
    if (s < 0) return h3_fail(e, "internal: --ssd-streaming: block %lld was not bound", (long long)b);
    h3_slot_release(m->be, st->slot[s]);
    static const dit_block_w none;
    set_fields(&m->blocks[b], &none);
    st->bound = -1;
    if (prefetch < 0 || st->holds[0] == prefetch || st->holds[1] == prefetch) return 0;
    return fill(m, s ^ 1, prefetch, e); /* the other slot: its block ran before this one */
}

void dit_get_stream_stats(const dit_model *m, dit_stream_stats *out) {
    static const dit_stream_stats zero;
    *out = m->stream ? m->stream->stats : zero;
}

/* Memory planning (generate.c's automatic --ssd-streaming): the backend bytes of a model's weights on a GPU backend
 * in `mode`, and of one forward's activations over S rows (bf16: X, the norm and branch outputs, the widest GEMM
 * output and its consumer; fp32: the same in fp32 plus separate q / k / v / attention outputs). */
size_t dit_gpu_weight_bytes(const dit_config *c, int mode, h3_err *e) {
    h3_expect_list ex = {0};
    if (dit_expected_tensors(c, &ex, e) != 0) return 0;
    size_t bytes = 0;
    for (int i = 0; i < ex.n; i++) {
        const h3_expect *x = &ex.v[i];
        int64_t blk;
        const int part = dit_stream_part(c, x->name, &blk);
        if (((mode & DIT_STREAM) && part >= 0) || is_adaln(x->name)) continue;
        size_t n = h3_dtype_size(x->dtype);
        for (int d = 0; d < x->ndim; d++) n *= (size_t)x->shape[d];
        bytes += n;
    }
    h3_expect_list_free(&ex);
    if (mode & DIT_STREAM) { /* the two slots: one block's parts each */
        const size_t H = (size_t)c->hidden_size, I = (size_t)c->num_attention_heads * c->attention_head_dim,
                     FF = (size_t)c->ffn_dim;
        bytes += 2 * 2 * (3 * I * H + H * I + 2 * FF * H + H * FF) + 4096;
    }
    return bytes;
}

size_t dit_activation_bytes(const dit_config *c, int mode, int64_t S) {
    const size_t H = (size_t)c->hidden_size, I = (size_t)c->num_attention_heads * c->attention_head_dim,
                 FF = (size_t)c->ffn_dim;
    const size_t big = 3 * I > 2 * FF ? 3 * I : 2 * FF, mid = I > FF ? I : FF;
    const size_t row = (mode & DIT_BF16) ? 2 * (3 * H + big + mid) : 4 * (2 * H + 4 * I + big) + 4 * H;
    return (size_t)(S > 0 ? S : 0) * row;
}

int dit_should_stream(const dit_config *c, int mode, int64_t S, double available, double *need) {
    h3_err e;
    const int m = mode & ~DIT_STREAM;
    *need = (double)dit_gpu_weight_bytes(c, m, &e) + (double)dit_activation_bytes(c, m, S) + 3.0 * (1u << 30);
    return *need > available;
}
