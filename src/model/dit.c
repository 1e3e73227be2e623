/* MiniMax-H3 diffusion transformer, docs/model/dit.md sections 1-4 (numbers in comments
 * refer to that page). Matches diffusers' MiniMaxH3Transformer3DModel.
 *
 * Weights stay in their stored dtype (zero-copy views of the mmap'd shards on the CPU); the ops
 * widen them to fp32. fp32 mode computes everything in fp32; bf16 mode adds the reference's bf16
 * rounding after every op on bf16 tensors (the "[bf16]" marks of section 4).
 *
 * Both checkpoint layouts load into the same structure: the diffusers layout has to_q/to_k/to_v
 * and ff.net.0.proj = [value; gate]; the original layout has a per-head interleaved qkv_proj
 * (de-interleaved after its matmul) and mlp.fc1 = [gate; value]. The FFN halves are row views,
 * so both layouts run the very same matmuls. The blocks, attention, FFN and text stream of both modes are in
 * dit_block.c, on activation buffers of the model's dtype (m->act: bf16 buffers in bf16 mode); the timestep
 * embedding and AdaLN tables are in dit_adaln.c, --ssd-streaming in dit_stream.c, the probe tensors -> inputs
 * conversion in dit_inputs.c, the config, tensor lists and single-file layout in dit_config.c; the structures they
 * share are in dit_internal.h. */
#include "dit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backend/backend_bench.h"
#include "../backend/ops.h"
#include "../backend/ops_act.h"
#include "../backend/backend_check.h"
#include "../io/gguf.h"
#include "../io/safetensors.h"
#include "dit_int8.h"
#include "dit_internal.h"
#include "dit_lora.h"
#include "dit_ulysses.h"


/* ---------------------------------------------------------------- model */


const dit_config *dit_get_config(const dit_model *m) { return &m->cfg; }
void dit_set_attention(dit_model *m, int sage8) { m->attention_sage8 = sage8 != 0; }

int dit_get_mode(const dit_model *m) { return (m->act == H3_BF16 ? DIT_BF16 : 0) | (m->stream && !m->stream->quant ? DIT_STREAM : 0); }

static int keep_tensor(dit_model *m, h3_tensor *t, int is_view) {
    if (m->n_owned == m->cap_owned) {
        int cap = m->cap_owned ? 2 * m->cap_owned : 256;
        h3_tensor **v = realloc(m->owned, (size_t)cap * sizeof *v);
        if (!v) return -1;
        m->owned = v;
        uint8_t *f = realloc(m->owned_is_view, (size_t)cap);
        if (!f) return -1;
        m->owned_is_view = f, m->cap_owned = cap;
    }
    m->owned_is_view[m->n_owned] = (uint8_t)is_view;
    m->owned[m->n_owned++] = t;
    return 0;
}

static const char *source_name(const dit_model *m) {
    return m->st ? st_set_path(m->st) : m->gguf ? m->gguf->path : "random weights";
}

/* A GGUF tensor dequantized into the dtype the model expects (docs/checkpoints.md), its buffer kept with the model. */
static int gguf_view(dit_model *m, const char *name, h3_dtype want, h3_tensor *view, h3_err *e) {
    char full[256];
    snprintf(full, sizeof full, "%s%s", m->name_prefix, name);
    const gguf_tensor *t = gguf_find(m->gguf, full);
    if (!t) return h3_fail(e, "%s: tensor '%s' not found", m->gguf->path, full);
    void **v = realloc(m->gguf_bufs, (size_t)(m->n_gguf_bufs + 1) * sizeof *v);
    if (!v) return h3_fail(e, "out of memory");
    m->gguf_bufs = v;
    if (gguf_view_as(m->gguf, t, want, view, &m->gguf_bufs[m->n_gguf_bufs], e) != 0) return -1;
    m->n_gguf_bufs++;
    return 0;
}

/* A view of a stored tensor: from the shards, or from dit_new_random's memory (*mem_index = its
 * index there, else -1). */
static int get_view_at(dit_model *m, const char *name, h3_tensor *view, int *mem_index, h3_err *e) {
    *mem_index = -1;
    if (m->st && m->name_prefix[0]) {
        char full[256];
        snprintf(full, sizeof full, "%s%s", m->name_prefix, name);
        return st_set_get(m->st, full, view, e);
    }
    if (m->st) return st_set_get(m->st, name, view, e);
    for (int i = 0; i < m->mem_names.n; i++)
        if (!strcmp(m->mem_names.v[i].name, name)) {
            *view = *m->mem[i];
            view->owns_data = 0;
            *mem_index = i;
            return 0;
        }
    return h3_fail(e, "random weights: tensor '%s' not found", name);
}

/* want: the dtype a GGUF tensor is dequantized into (the stored dtype of every other source) */
static int get_view(dit_model *m, const char *name, h3_dtype want, h3_tensor *view, h3_err *e) {
    int i;
    return m->gguf ? gguf_view(m, name, want, view, e) : get_view_at(m, name, view, &i, e);
}

/* Looks a tensor up, checks its shape against the expected list and makes it backend resident. */
/* The view of a stored tensor, checked against the expected list (shape) and the dtypes the ops take. */
static int lookup_checked(dit_model *m, const h3_expect_list *ex, const char *name, h3_tensor *view, int *mi,
                          h3_err *e) {
    const h3_expect *x = h3_expect_find(ex, name);
    if (!x) return h3_fail(e, "internal: tensor '%s' not in the expected list", name);
    *mi = -1;
    if (m->gguf ? gguf_view(m, name, x->dtype, view, e) != 0 : get_view_at(m, name, view, mi, e) != 0) return -1;
    if (h3_expect_check(x, view->dtype, view->ndim, view->shape, source_name(m), e) != 0) return -1;
    return m->lora ? dit_lora_view(m, name, view, mi, e) : 0;
}

/* Makes a weight usable: backend resident (uploaded, or taken over from dit_new_random's device memory), or for the
 * tensors dit_host_tensor names a view of host memory (kept as owned kind 2). A streamed part is also recorded as its
 * block's source (dit_stream.c). */
static h3_tensor *load_w(dit_model *m, const h3_expect_list *ex, const char *name, h3_err *e) {
    h3_tensor view;
    int mi, part;
    int64_t blk;
    if (dit_gguf_part(m, name)) return dit_gguf_load(m, ex, name, e); /* kept in GGUF block form (dit_gguf.c) */
    if (lookup_checked(m, ex, name, &view, &mi, e) != 0) return NULL;
    const int host = dit_host_tensor(m, name, &part, &blk);
    h3_tensor *w;
    if (host) {
        if (mi >= 0 && m->mem_on_backend && m->mem_on_backend[mi]) { /* random, made on the device: bring it over */
            const size_t nb = h3_tensor_nbytes(&view);
            void *hb = malloc(nb ? nb : 1);
            if (!hb) {
                h3_fail(e, "out of host memory for '%s' (%zu bytes)", name, nb);
                return NULL;
            }
            h3_download(m->be, hb, view.data, nb);
            h3_free(m->be, m->mem[mi]->data);
            m->mem[mi]->data = view.data = hb;
            m->mem[mi]->owns_data = 1;
            m->mem_on_backend[mi] = 0;
        }
        w = h3_tensor_view(view.dtype, view.ndim, view.shape, view.data, e);
    } else if (mi >= 0 && m->mem_on_backend && m->mem_on_backend[mi]) {
        /* already in backend memory (made there by dit_new_random): the model takes it over */
        w = h3_tensor_view(view.dtype, view.ndim, view.shape, view.data, e);
        if (!w) return NULL;
        m->mem_on_backend[mi] = 0;
        m->mem[mi]->data = NULL;
    } else {
        w = h3_weight_upload(m->be, &view, e);
    }
    if (!w) return NULL;
    m->total_bytes += h3_tensor_nbytes(&view);
    if (keep_tensor(m, w, host ? 2 : 0) != 0) {
        if (host) h3_tensor_free(w);
        else h3_weight_free(m->be, w);
        h3_fail(e, "out of memory");
        return NULL;
    }
    if (m->stream && part >= 0) {
        m->stream->src[blk * DIT_PARTS + part] = w;
        /* a LoRA on a streamed part is merged into the slot as it is filled: the part streams from its file as stored */
        if (m->st && !dit_lora_owns(m, view.data) &&
            dit_stream_note_file(m, name, blk * DIT_PARTS + part, e) != 0)
            return NULL;
    }
    return w;
}

/* A fp32 backend copy of a small vector weight (norm gains, inv_freq). */
static float *load_vec(dit_model *m, const h3_expect_list *ex, const char *name, h3_err *e) {
    h3_tensor *w = load_w(m, ex, name, e);
    if (!w) return NULL;
    int64_t n = h3_tensor_numel(w);
    float *host = malloc((size_t)n * sizeof(float));
    h3_tensor view;
    if (!host || get_view(m, name, w->dtype, &view, e) != 0) {
        if (!host) h3_fail(e, "out of memory");
        free(host);
        return NULL;
    }
    h3_convert_to_f32(host, view.data, view.dtype, (size_t)n);
    float *dev = h3_alloc(m->be, (size_t)n * sizeof(float));
    if (dev && m->n_fbufs == m->cap_fbufs) {
        int cap = m->cap_fbufs ? 2 * m->cap_fbufs : 128;
        float **v = realloc(m->fbufs, (size_t)cap * sizeof *v);
        if (!v) {
            h3_free(m->be, dev);
            dev = NULL;
        } else {
            m->fbufs = v, m->cap_fbufs = cap;
        }
    }
    if (!dev) {
        free(host);
        h3_fail(e, "out of memory");
        return NULL;
    }
    h3_upload(m->be, dev, host, (size_t)n * sizeof(float));
    free(host);
    m->fbufs[m->n_fbufs++] = dev;
    return dev;
}

/* A view of rows [r0, r0 + n) of a 2-D weight (no copy, also on the device). */
static h3_tensor *row_view(dit_model *m, const h3_tensor *w, int64_t r0, int64_t n, h3_err *e) {
    int64_t shape[2] = {n, w->shape[1]};
    uint8_t *base = w->data;
    h3_tensor *v = h3_tensor_view(w->dtype, 2, shape, base + (size_t)(r0 * w->shape[1]) * h3_dtype_size(w->dtype), e);
    if (v && keep_tensor(m, v, 1) != 0) {
        h3_tensor_free(v);
        h3_fail(e, "out of memory");
        return NULL;
    }
    return v;
}

static size_t stored_bytes(const h3_tensor *t) { return h3_tensor_nbytes(t); }

/* Rows of several tensors (same column count and dtype) stacked into one backend matrix, so one GEMM
 * computes what their separate GEMMs would (the CUDA bf16 mode's fused q/k/v). */
static h3_tensor *load_w_stacked(dit_model *m, const h3_expect_list *ex, const char *const *names, int n, h3_err *e) {
    h3_tensor view[3];
    int mi[3];
    int64_t rows = 0;
    for (int i = 0; i < n; i++) {
        if (lookup_checked(m, ex, names[i], &view[i], &mi[i], e) != 0) return NULL;
        if (view[i].ndim != 2 || view[i].dtype != view[0].dtype || view[i].shape[1] != view[0].shape[1]) {
            h3_fail(e, "%s: tensor '%s' (%s) cannot be stacked with '%s' (%s): 2-D, same dtype and width needed",
                    source_name(m), names[i], h3_dtype_name(view[i].dtype), names[0], h3_dtype_name(view[0].dtype));
            return NULL;
        }
        rows += view[i].shape[0];
    }
    int64_t shape[2] = {rows, view[0].shape[1]};
    h3_tensor *w = h3_tensor_view(view[0].dtype, 2, shape, NULL, e);
    if (!w) return NULL;
    if (!(w->data = h3_alloc(m->be, h3_tensor_nbytes(w)))) {
        h3_tensor_free(w);
        h3_fail(e, "out of backend memory for '%s' (stacked)", names[0]);
        return NULL;
    }
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        size_t nb = h3_tensor_nbytes(&view[i]);
        if (mi[i] >= 0 && m->mem_on_backend && m->mem_on_backend[mi[i]]) { /* random, already on the device */
            h3_copy(m->be, (uint8_t *)w->data + off, view[i].data, nb);
            h3_free(m->be, m->mem[mi[i]]->data);
            m->mem[mi[i]]->data = NULL;
            m->mem_on_backend[mi[i]] = 0;
        } else {
            h3_upload(m->be, (uint8_t *)w->data + off, view[i].data, nb);
        }
        off += nb;
        m->total_bytes += nb;
    }
    if (keep_tensor(m, w, 0) != 0) {
        h3_weight_free(m->be, w);
        h3_fail(e, "out of memory");
        return NULL;
    }
    return w;
}

static int load_block(dit_model *m, const h3_expect_list *ex, dit_block_w *b, int refiner, int idx, h3_err *e) {
    const dit_config *c = &m->cfg;
    int orig = c->original_layout;
    char p[96], n[192];
    if (orig) snprintf(p, sizeof p, refiner ? "token_refiner.blocks.%d" : "blocks.%d", idx);
    else snprintf(p, sizeof p, refiner ? "token_refiner.refiner_blocks.%d" : "transformer_blocks.%d", idx);
#define NAME(suffix) (snprintf(n, sizeof n, "%s.%s", p, suffix), n)
    if (!(b->norm1 = load_vec(m, ex, NAME("norm1.weight"), e))) return -1;
    if (!(b->norm2 = load_vec(m, ex, NAME("norm2.weight"), e))) return -1;
    if (!(b->attn.norm_q = load_vec(m, ex, NAME(orig ? "attn.q_norm.weight" : "attn.norm_q.weight"), e))) return -1;
    if (!(b->attn.norm_k = load_vec(m, ex, NAME(orig ? "attn.k_norm.weight" : "attn.norm_k.weight"), e))) return -1;
    const int streamed = !refiner && m->stream; /* --ssd-streaming: host sources, bound to a slot per forward */
    if (!(b->attn.to_out = load_w(m, ex, NAME(orig ? "attn.out_proj.weight" : "attn.to_out.0.weight"), e))) return -1;
    if (orig && c->qkv_stacked) { /* [q; k; v]: the diffusers layout's planar matrix (docs/checkpoints.md) */
        if (!(b->attn.qkv_planar = load_w(m, ex, NAME("attn.qkv_proj.weight"), e))) return -1;
    } else if (orig) {
        if (!(b->attn.qkv = load_w(m, ex, NAME("attn.qkv_proj.weight"), e))) return -1;
    } else if (m->act == H3_BF16 && m->be->kind != H3_BACKEND_CPU && !streamed) {
        char q[192], k[192], v[192];
        snprintf(q, sizeof q, "%s.attn.to_q.weight", p);
        snprintf(k, sizeof k, "%s.attn.to_k.weight", p);
        snprintf(v, sizeof v, "%s.attn.to_v.weight", p);
        const char *names[3] = {q, k, v};
        if (!(b->attn.qkv_planar = load_w_stacked(m, ex, names, 3, e))) return -1;
    } else {
        if (!(b->attn.to_q = load_w(m, ex, NAME("attn.to_q.weight"), e))) return -1;
        if (!(b->attn.to_k = load_w(m, ex, NAME("attn.to_k.weight"), e))) return -1;
        if (!(b->attn.to_v = load_w(m, ex, NAME("attn.to_v.weight"), e))) return -1;
    }
    /* FFN input: original [gate; value], diffusers [value; gate] (docs/model/dit.md 2.4, trap 2) */
    h3_tensor *fc1 = load_w(m, ex, NAME(orig ? "mlp.fc1.weight" : "ff.net.0.proj.weight"), e);
    if (!fc1) return -1;
    int64_t FF = c->ffn_dim;
    b->ff_in = fc1;
    if (!streamed) {
        b->ff_value = row_view(m, fc1, orig ? FF : 0, FF, e);
        b->ff_gate = row_view(m, fc1, orig ? 0 : FF, FF, e);
        if (!b->ff_value || !b->ff_gate) return -1;
    }
    if (!(b->ff_down = load_w(m, ex, NAME(orig ? "mlp.fc2.weight" : "ff.net.2.weight"), e))) return -1;
    if (streamed) /* the host tensors are in m->stream->src; the fields point into a slot only while bound */
        b->attn.to_out = b->attn.qkv = b->attn.qkv_planar = b->attn.to_q = b->attn.to_k = b->attn.to_v = b->ff_in =
            b->ff_down = NULL;
    if (!refiner) {
        if (!(b->adaln_w = load_w(m, ex, NAME("adaln_proj.linear.weight"), e))) return -1;
        if (!(b->adaln_b = load_w(m, ex, NAME("adaln_proj.linear.bias"), e))) return -1;
        m->adaln_bytes += stored_bytes(b->adaln_w) + stored_bytes(b->adaln_b);
    }
#undef NAME
    return 0;
}


/* Loads every weight of m->cfg from m->st or m->mem. */
static int load_all(dit_model *m, h3_err *e) {
    const dit_config *c = &m->cfg;
    h3_expect_list ex = {.max = m->st ? st_set_count(m->st) : m->gguf ? (int)m->gguf->n_tensors : 0}; /* more tensors than stored: rejected early */
    int rc = -1;
    if (c->rope_freq_dim > 64) {
        h3_fail(e, "rope_freq_dim %d is larger than this engine supports (64)", c->rope_freq_dim);
        goto done;
    }
    if (dit_expected_tensors(c, &ex, e) != 0 || dit_int8_expect(c, m->st, &ex, &m->int8_profile, e) != 0) goto done;
    int orig = c->original_layout;
#define W(field, dname, oname) \
    if (!(m->field = load_w(m, &ex, orig ? oname : dname, e))) goto done
    W(proj_in_w, "proj_in.weight", "video_patch_proj.weight");
    W(proj_in_b, "proj_in.bias", "video_patch_proj.bias");
    W(audio_in_w, "audio_proj_in.weight", "audio_patch_proj.weight");
    W(audio_in_b, "audio_proj_in.bias", "audio_patch_proj.bias");
    W(ctx_w, "context_embedder.weight", "condition_proj.weight");
    W(ctx_b, "context_embedder.bias", "condition_proj.bias");
    W(te1_w, "time_embedder.linear_1.weight", "time_embedder.proj_in.weight");
    W(te1_b, "time_embedder.linear_1.bias", "time_embedder.proj_in.bias");
    W(te2_w, "time_embedder.linear_2.weight", "time_embedder.proj_out.weight");
    W(te2_b, "time_embedder.linear_2.bias", "time_embedder.proj_out.bias");
    W(out_ada_w, "norm_out.linear.weight", "final_layer.adaln_proj.linear.weight");
    W(out_ada_b, "norm_out.linear.bias", "final_layer.adaln_proj.linear.bias");
    W(proj_out_w, "proj_out.weight", "final_layer.video_out.weight");
    W(proj_out_b, "proj_out.bias", "final_layer.video_out.bias");
    W(audio_out_w, "audio_proj_out.weight", "final_layer.audio_out.weight");
    W(audio_out_b, "audio_proj_out.bias", "final_layer.audio_out.bias");
#undef W
    m->adaln_bytes += stored_bytes(m->out_ada_w) + stored_bytes(m->out_ada_b);
    if (!(m->refiner_final_norm = load_vec(m, &ex, "token_refiner.final_norm.weight", e))) goto done;
    if (!(m->out_norm = load_vec(m, &ex, orig ? "final_layer.norm.weight" : "norm_out.norm.weight", e))) goto done;
    m->refiner = calloc((size_t)(c->num_refiner_layers + 1), sizeof *m->refiner);
    m->blocks = calloc((size_t)(c->num_layers + 1), sizeof *m->blocks);
    if (!m->refiner || !m->blocks) {
        h3_fail(e, "out of memory");
        goto done;
    }
    for (int r = 0; r < c->num_refiner_layers; r++)
        if (load_block(m, &ex, &m->refiner[r], 1, r, e) != 0) goto done;
    for (int i = 0; i < c->num_layers; i++)
        if (load_block(m, &ex, &m->blocks[i], 0, i, e) != 0) goto done;
    dit_rope_inv_freq(m->inv_freq, c->rope_freq_dim, c->rope_theta);
    if (orig && !c->qkv_stacked) {
        /* The original checkpoint ships the table it used (docs/model/dit.md 2.4, trap 27); use its bits. */
        h3_tensor view;
        if (get_view(m, "rope.inv_freq", H3_F32, &view, e) != 0) goto done;
        if (view.dtype != H3_F32 || view.ndim != 1 || view.shape[0] != c->rope_freq_dim) {
            h3_fail(e, "%s: tensor 'rope.inv_freq' must be F32 [%d]", source_name(m), c->rope_freq_dim);
            goto done;
        }
        memcpy(m->inv_freq, view.data, (size_t)c->rope_freq_dim * sizeof(float));
    }
    rc = 0;
done:
    h3_expect_list_free(&ex);
    return rc;
}

/* The mode's fields (dit.h DIT_BF16, DIT_STREAM); cfg must be set. */
static int set_mode(dit_model *m, int mode, h3_err *e) {
    m->act = (mode & DIT_BF16) ? H3_BF16 : H3_F32;
    m->adaln_host = m->be->kind != H3_BACKEND_CPU;
    return (mode & DIT_STREAM) ? dit_stream_alloc(m, e) : 0;
}

dit_model *dit_load(h3_backend *be, const char *dir, int mode, h3_err *e) {
    return dit_load_lora(be, dir, NULL, mode, NULL, 0, 0, e);
}

static dit_model *load_dir(h3_backend *be, const char *dir, int mode, const dit_lora_spec *loras, int n_loras, int ref,
                           h3_err *e) {
    dit_model *m = calloc(1, sizeof *m);
    if (!m) {
        h3_fail(e, "out of memory");
        return NULL;
    }
    m->be = be;
    if (dit_config_load(dir, &m->cfg, e) != 0 || set_mode(m, mode, e) != 0 || !(m->st = st_set_open(dir, e)) ||
        dit_lora_begin(m, loras, n_loras, ref, mode, e) != 0 || load_all(m, e) != 0 || dit_lora_end(m, e) != 0 ||
        dit_int8_adopt(m, e) != 0 || (m->stream && dit_stream_setup(m, e) != 0)) {
        dit_free(m);
        return NULL;
    }
    return m;
}

dit_model *dit_load_single_file(h3_backend *be, const char *dir, const char *file, int mode, h3_err *e) {
    return dit_load_lora(be, dir, file, mode, NULL, 0, 0, e);
}

static dit_model *load_single(h3_backend *be, const char *dir, const char *file, int mode, const dit_lora_spec *loras,
                              int n_loras, h3_err *e) {
    dit_model *m = calloc(1, sizeof *m);
    if (!m) {
        h3_fail(e, "out of memory");
        return NULL;
    }
    m->be = be;
    if (dit_config_load(dir, &m->cfg, e) != 0) goto fail;
    if (m->cfg.original_layout) {
        h3_fail(e, "%s: a single-file transformer needs the diffusers config (MiniMaxH3Transformer3DModel), not the "
                   "original one", dir);
        goto fail;
    }
    /* a safetensors file streams its blocks' linears from its mapping like the snapshot's shards; a GGUF's are kept
     * quantized on the GPU instead (docs/checkpoints.md) */
    if ((mode & DIT_STREAM) && dit_is_gguf(file)) {
        h3_fail(e, "%s: --ssd-streaming cannot be combined with a GGUF transformer (its blocks stay quantized on the "
                   "GPU instead, docs/checkpoints.md)", file);
        goto fail;
    }
    if (set_mode(m, mode, e) != 0) goto fail;
    if (dit_is_gguf(file)) { /* a GGUF repackaging of the same layout (docs/checkpoints.md "GGUF") */
        if (!(m->gguf = gguf_open(file, e))) goto fail;
    } else if (!(m->st = st_set_open(file, e))) {
        goto fail;
    }
    const char *found = dit_single_file_prefix(m->st, m->gguf, file, e);
    if (!found) goto fail;
    snprintf(m->name_prefix, sizeof m->name_prefix, "%s", found);
    if ((m->gguf && dit_gguf_begin(m, -1, e) != 0) || dit_lora_begin(m, loras, n_loras, 0, mode, e) != 0) goto fail;
    m->cfg.original_layout = 1, m->cfg.qkv_stacked = 1;
    if (load_all(m, e) != 0 || dit_lora_end(m, e) != 0 || (m->stream && dit_stream_setup(m, e) != 0)) goto fail;
    return m;
fail:
    dit_free(m);
    return NULL;
}

dit_model *dit_load_lora(h3_backend *be, const char *dir, const char *file, int mode, const dit_lora_spec *loras,
                         int n_loras, int ref, h3_err *e) {
    return file ? load_single(be, dir, file, mode, loras, n_loras, e) : load_dir(be, dir, mode, loras, n_loras, ref, e);
}

static dit_model *new_random(h3_backend *be, const dit_config *cfg, int mode, uint64_t seed, int gguf_type,
                             const dit_lora_spec *loras, int n_loras, h3_err *e);
dit_model *dit_new_random(h3_backend *be, const dit_config *cfg, int mode, uint64_t seed, h3_err *e) {
    return new_random(be, cfg, mode, seed, -1, NULL, 0, e);
}
dit_model *dit_new_random_gguf(h3_backend *be, const dit_config *cfg, int mode, uint64_t seed, int gguf_type, h3_err *e) {
    return new_random(be, cfg, mode, seed, gguf_type, NULL, 0, e);
}
dit_model *dit_new_random_lora(h3_backend *be, const dit_config *cfg, int mode, uint64_t seed, const dit_lora_spec *loras,
                               int n_loras, h3_err *e) {
    return new_random(be, cfg, mode, seed, -1, loras, n_loras, e);
}
dit_model *dit_new_random_gguf_lora(h3_backend *be, const dit_config *cfg, int mode, uint64_t seed, int gguf_type,
                                    const dit_lora_spec *loras, int n_loras, h3_err *e) {
    return new_random(be, cfg, mode, seed, gguf_type, loras, n_loras, e);
}

static dit_model *new_random(h3_backend *be, const dit_config *cfg, int mode, uint64_t seed, int gguf_type,
                             const dit_lora_spec *loras, int n_loras, h3_err *e) {
    dit_model *m = calloc(1, sizeof *m);
    if (!m) {
        h3_fail(e, "out of memory");
        return NULL;
    }
    m->be = be;
    m->cfg = *cfg;
    if (set_mode(m, mode, e) != 0 || (gguf_type >= 0 && dit_gguf_begin(m, gguf_type, e) != 0) ||
        dit_lora_begin(m, loras, n_loras, 0, mode, e) != 0)
        goto fail;
    if (dit_expected_tensors(cfg, &m->mem_names, e) != 0) goto fail;
    m->mem = calloc((size_t)m->mem_names.n, sizeof *m->mem);
    m->mem_on_backend = calloc((size_t)m->mem_names.n, 1);
    if (!m->mem || !m->mem_on_backend) goto oom;
    for (int i = 0; i < m->mem_names.n; i++) {
        const h3_expect *x = &m->mem_names.v[i];
        /* uniform with the variance of N(0, 1/fan_in) for matrices; gains near 1, small biases */
        int is_norm = x->ndim == 1 && strstr(x->name, "norm") != NULL;
        int is_freq = !strcmp(x->name, "rope.inv_freq");
        float scale = x->ndim == 2 ? sqrtf(3.0f / (float)x->shape[1]) : is_norm ? 0.2f : 0.1f;
        float offset = is_norm ? 1.0f : 0.0f;
        uint64_t base = seed ^ ((uint64_t)i * 0x9e3779b97f4a7c15ull);
        h3_tensor *t;
        int part;
        int64_t blk;
        if (dit_gguf_part(m, x->name)) continue; /* made in GGUF block form by dit_gguf_load */
        if (m->gguf_rand_dequant && dit_stream_part(cfg, x->name, &blk) >= 0) { /* the same blocks, dequantized */
            if (!(m->mem[i] = dit_gguf_random_dequant(m, x, e))) goto fail;
            continue;
        }
        /* a LoRA's weights are made in host memory, where the merge reads them (docs/lora.md) */
        const int merged = m->lora && dit_lora_touches(m->lora, cfg, x->name);
        if (be->kind != H3_BACKEND_CPU && x->ndim == 2 && !merged && !dit_host_tensor(m, x->name, &part, &blk)) {
            /* matrices (all but a few MB of the 66 GB) are made on the device: no host copy */
            t = h3_tensor_view(x->dtype, x->ndim, x->shape, NULL, e);
            if (!t) goto fail;
            m->mem[i] = t;
            if (!(t->data = h3_alloc(be, h3_tensor_nbytes(t)))) {
                h3_fail(e, "random weights: out of device memory for '%s'", x->name);
                goto fail;
            }
            m->mem_on_backend[i] = 1;
            if (h3_fill_random(be, t->data, t->dtype, h3_tensor_numel(t), base, scale, offset) != 0) {
                h3_fail(e, "random weights: tensor '%s' has dtype %s (want F32 or BF16)", x->name,
                        h3_dtype_name(t->dtype));
                goto fail;
            }
            continue;
        }
        t = h3_tensor_new(x->dtype, x->ndim, x->shape, e);
        if (!t) goto fail;
        m->mem[i] = t;
        if (h3_fill_random_host(t->data, t->dtype, h3_tensor_numel(t), base, scale, offset) != 0) {
            h3_fail(e, "random weights: tensor '%s' has dtype %s (want F32 or BF16)", x->name,
                    h3_dtype_name(t->dtype));
            goto fail;
        }
        if (is_freq) dit_rope_inv_freq(t->data, cfg->rope_freq_dim, cfg->rope_theta);
    }
    if (load_all(m, e) != 0 || dit_lora_end(m, e) != 0 || (m->stream && dit_stream_setup(m, e) != 0)) goto fail;
    return m;
oom:
    h3_fail(e, "out of memory");
fail:
    dit_free(m);
    return NULL;
}


static void block_free_fp8(h3_backend *be, dit_block_w *w) {
    h3_fp8_linear *ls[] = {&w->attn.f8_qkv, &w->attn.f8_q, &w->attn.f8_k, &w->attn.f8_v, &w->attn.f8_out, &w->f8_in,
                           &w->f8_down};
    for (size_t i = 0; i < sizeof ls / sizeof ls[0]; i++) h3_fp8_linear_free(be, ls[i]);
    dit_int8_block_free(be, w);
}

void dit_free(dit_model *m) {
    if (!m) return;
    dit_stream_free(m);
    for (int b = 0; m->blocks && b < m->cfg.num_layers; b++) block_free_fp8(m->be, &m->blocks[b]);
    for (int i = 0; i < m->n_cache; i++) dit_free_cache_entry(m, &m->cache[i]);
    free(m->cache);
    for (int i = m->n_owned - 1; i >= 0; i--) {
        /* row views and host tensors never own data; uploads own device memory on CUDA */
        if (m->owned_is_view[i]) h3_tensor_free(m->owned[i]);
        else h3_weight_free(m->be, m->owned[i]);
    }
    free(m->owned);
    free(m->owned_is_view);
    for (int i = 0; i < m->n_fbufs; i++) h3_free(m->be, m->fbufs[i]);
    free(m->fbufs);
    free(m->refiner);
    free(m->blocks);
    free(m->skip);
    h3_free(m->be, m->core_res);
    st_set_free(m->st);
    gguf_close(m->gguf);
    for (int i = 0; i < m->n_gguf_bufs; i++) free(m->gguf_bufs[i]);
    free(m->gguf_bufs);
    dit_lora_release(m);
    for (int i = 0; m->mem && i < m->mem_names.n; i++) {
        if (m->mem[i] && m->mem_on_backend && m->mem_on_backend[i]) h3_free(m->be, m->mem[i]->data);
        h3_tensor_free(m->mem[i]);
    }
    free(m->mem);
    free(m->mem_on_backend);
    h3_expect_list_free(&m->mem_names);
    free(m);
}

int dit_select_layers(dit_model *m, int active, h3_err *e) {
    const int L = m->cfg.num_layers;
    if (active >= L) return 0;
    if (m->skip) { /* a resident model (sessions): the same selection again is a no-op */
        int kept = 0;
        for (int b = 0; b < L; b++) kept += !m->skip[b];
        if (kept == active) return 0;
        return h3_fail(e, "dit: %d layers already selected, cannot select %d", kept, active);
    }
    if (L - active > L - 3)
        return h3_fail(e, "--layers %d: at most %d of the %d blocks can be skipped (blocks 0, 1 and %d are kept)",
                       active, L - 3, L, L - 1);
    double *score = malloc(sizeof(double) * (size_t)L);
    int *order = malloc(sizeof(int) * (size_t)L);
    m->skip = calloc((size_t)L, 1);
    if (!score || !order || !m->skip) {
        free(score), free(order), free(m->skip);
        m->skip = NULL;
        return h3_fail(e, "out of memory");
    }
    if (dit_gate_scores(m, score, e)) {
        free(score), free(order), free(m->skip);
        m->skip = NULL;
        return -1;
    }
    /* candidates 2 .. L-2 by ascending score (ties: the lower index first), the first L - active skipped */
    int n = 0;
    for (int b = 2; b <= L - 2; b++) order[n++] = b;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && score[order[j]] < score[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1], order[j - 1] = t;
        }
    for (int i = 0; i < L - active; i++) {
        dit_block_w *w = &m->blocks[order[i]];
        m->skip[order[i]] = 1;
        /* the block's weights are never needed again (docs/model/features.md 5.3: memory falls with compute) */
        h3_tensor *ws[] = {w->attn.to_q, w->attn.to_k, w->attn.to_v, w->attn.qkv, w->attn.qkv_planar,
                           w->attn.to_out, w->ff_in, w->ff_down, w->adaln_w, w->adaln_b};
        for (size_t k = 0; k < sizeof ws / sizeof ws[0]; k++) dit_drop_tensor(m, ws[k]);
        for (int p = 0; m->stream && p < DIT_PARTS; p++) { /* --ssd-streaming: the block's host sources */
            dit_drop_tensor(m, m->stream->src[(int64_t)order[i] * DIT_PARTS + p]);
            m->stream->src[(int64_t)order[i] * DIT_PARTS + p] = NULL;
        }
        block_free_fp8(m->be, w);
        dit_block_w kept = {.norm1 = w->norm1, .norm2 = w->norm2};
        *w = kept;
    }
    free(score), free(order);
    return 0;
}

/* linear j of dit_quantize_blocks as FP8 W8A8 */
static int fp8_copy(h3_backend *be, dit_block_w *w, int j, const h3_tensor *src, h3_err *e) {
    h3_fp8_linear *dst[DIT_QUANT_LINEARS] = {&w->attn.f8_qkv, &w->attn.f8_qkv, &w->attn.f8_q, &w->attn.f8_k,
                                             &w->attn.f8_v, &w->attn.f8_out, &w->f8_in, &w->f8_down};
    return h3_fp8_linear_new(be, dst[j], src, e);
}

/* --quant fp8: the linears of the main blocks become FP8 W8A8 (ops_linear.h), block by block (dit_quantize_blocks). */
int dit_quantize_fp8(dit_model *m, h3_err *e) {
    if (m->fp8) return 0;
    if (m->act != H3_BF16) return h3_fail(e, "--quant fp8 needs the bf16 mode (--precision bf16)");
    if (m->int8_profile) return h3_fail(e, "--quant fp8 cannot be combined with int8 weights (profile %s)", dit_int8_profile_name(m->int8_profile));
    if (m->stream) return h3_fail(e, "--quant fp8 cannot be combined with --ssd-streaming (the FP8 blocks are resident)");
    if (dit_quantize_blocks(m, "--quant fp8", fp8_copy, block_free_fp8, e) != 0) return -1;
    m->fp8 = 1;
    return 0;
}


/* ---------------------------------------------------------------- forward (docs/model/dit.md 4) */


static void fwd_ctx_free(dit_model *m, fwd_ctx *x) {
    if (x->have_scratch) dit_free_scratch(m->be, &x->s);
    for (int i = 0; i < x->n_tmp; i++) dit_free_cache_entry(m, &x->tmp[i]);
    free(x->tmp);
    h3_free(m->be, x->tab), h3_free(m->be, x->tab_f), h3_free(m->be, x->ada_idx), h3_free(m->be, x->t_idx);
    h3_free(m->be, x->cos), h3_free(m->be, x->sin);
    memset(x, 0, sizeof *x);
}

/* tables 0 (--parallel, ranks other than 0): the AdaLN tables are allocated and left for rank 0's broadcast */
static int fwd_ctx_init(dit_model *m, const dit_inputs *in, fwd_ctx *x, int tables, h3_err *e) {
    const dit_config *c = &m->cfg;
    h3_backend *be = m->be;
    int64_t S = in->S, H = c->hidden_size, L = c->num_layers, K = in->K, R = 6 * c->rope_freq_dim;
    int64_t row18 = (int64_t)MODALITIES * ADALN_SLOTS * H;
    size_t f = sizeof(float);
    memset(x, 0, sizeof *x);
    x->S = S, x->K = K;
    float *cos_h = NULL, *sin_h = NULL;
    /* AdaLN tables from the cache, or computed now for values never prepared (docs/model/dit.md 4.5) */
    const dit_adaln_entry **ent = calloc((size_t)K, sizeof *ent);
    x->tmp = calloc((size_t)K, sizeof *x->tmp);
    if (!ent || !x->tmp) goto oom;
    float *missing = malloc((size_t)K * sizeof(float));
    if (!missing) goto oom;
    for (int64_t k = 0; k < K && tables; k++)
        if (!(ent[k] = dit_find_cached(m, in->timestep[k]))) missing[x->n_tmp++] = in->timestep[k];
    if (x->n_tmp) { /* values never prepared: one pass now, dropped after this forward */
        int nt = x->n_tmp;
        x->n_tmp = 0;
        if (dit_compute_adaln(m, missing, nt, x->tmp, e) != 0) {
            free(missing);
            goto fail;
        }
        x->n_tmp = nt;
        for (int64_t k = 0, j = 0; k < K; k++)
            if (!ent[k]) ent[k] = &x->tmp[j++];
    }
    free(missing);
    x->tab = h3_alloc(be, (size_t)(L * K * row18) * f);
    x->tab_f = h3_alloc(be, (size_t)(K * 2 * H) * f);
    if (!x->tab || !x->tab_f) goto oom;
    for (int64_t b = 0; b < L && tables; b++)
        for (int64_t k = 0; k < K; k++)
            h3_copy(be, x->tab + (b * K + k) * row18, ent[k]->blocks + b * row18, (size_t)row18 * f);
    for (int64_t k = 0; k < K && tables; k++) h3_copy(be, x->tab_f + k * 2 * H, ent[k]->final, (size_t)(2 * H) * f);
    x->ada_idx = dit_upload_index(be, in->timestep_indices, S, MODALITIES, in->token_tags);
    x->t_idx = dit_upload_index(be, in->timestep_indices, S, 1, NULL);
    cos_h = malloc((size_t)(S * R) * f);
    sin_h = malloc((size_t)(S * R) * f);
    x->cos = h3_alloc(be, (size_t)(S * R) * f);
    x->sin = h3_alloc(be, (size_t)(S * R) * f);
    if (!x->ada_idx || !x->t_idx || !cos_h || !sin_h || !x->cos || !x->sin) goto oom;
    dit_rope_tables(m, in->position_ids, S, cos_h, sin_h);
    h3_upload(be, x->cos, cos_h, (size_t)(S * R) * f);
    h3_upload(be, x->sin, sin_h, (size_t)(S * R) * f);
    if (dit_alloc_scratch(m, S, &x->s) != 0) goto oom;
    x->have_scratch = 1;
    free(cos_h), free(sin_h), free(ent);
    return 0;
oom:
    h3_fail(e, "dit: out of memory (S = %lld)", (long long)S);
fail:
    free(cos_h), free(sin_h), free(ent);
    fwd_ctx_free(m, x);
    return -1;
}

/* ---- --core-reuse (docs/model/features.md 5.4): the core's residual, fp32, from the (bf16 or fp32) packed rows ---- */

/* The packed rows X [S, H] (h3_bf16 in bf16 mode) as a new fp32 buffer. */
static float *core_input(dit_model *m, const void *X, int64_t S) {
    int64_t n = S * m->cfg.hidden_size;
    float *x0 = h3_alloc(m->be, (size_t)n * sizeof(float));
    if (!x0) return NULL;
    h3_act_to_f32(m->be, m->act, x0, X, n);
    return x0;
}

/* residual = X (core output) - X0 (core input); frees X0. */
static int core_store(dit_model *m, const void *X, float *X0, int64_t S) {
    int64_t n = S * m->cfg.hidden_size;
    if (m->core_rows != S) {
        h3_free(m->be, m->core_res);
        m->core_rows = 0;
        if (!(m->core_res = h3_alloc(m->be, (size_t)n * sizeof(float)))) {
            h3_free(m->be, X0);
            return -1;
        }
        m->core_rows = S;
    }
    h3_act_to_f32(m->be, m->act, m->core_res, X, n);
    h3_scale(m->be, X0, X0, -1.0f, n, 0);                 /* exact */
    h3_add(m->be, m->core_res, m->core_res, X0, n, 0);    /* out - in, one fp32 rounding */
    h3_free(m->be, X0);
    return 0;
}

/* X = X + residual (the fresh packed input plus the stored residual), rounded to bf16 in bf16 mode. */
static int core_reuse(dit_model *m, void *X, int64_t S, h3_err *e) {
    int64_t n = S * m->cfg.hidden_size;
    if (!m->core_res || m->core_rows != S)
        return h3_fail(e, "dit: --core-reuse: no stored core residual for %lld rows (run a DIT_CORE_RUN_STORE "
                          "forward first)", (long long)S);
    if (m->act == H3_F32) {
        h3_add(m->be, X, X, m->core_res, n, 0);
        return 0;
    }
    float *x = h3_alloc(m->be, (size_t)n * sizeof(float));
    if (!x) return h3_fail(e, "dit: out of memory (S = %lld)", (long long)S);
    h3_bf16_unpack(m->be, x, X, n);
    h3_add(m->be, x, x, m->core_res, n, 0);
    h3_bf16_pack(m->be, X, x, n);
    h3_free(m->be, x);
    return 0;
}

/* The block that runs right after block b on the same rows, -1 if none: the next one --layers keeps, unless the
 * --token-reduction pool or restore (before blocks reduce_begin / reduce_end) comes first. Block b's last residual
 * is fused with that block's norm1 (dit_run_block). */
static int64_t next_block_on_same_rows(const dit_model *m, const dit_inputs *in, int reduce, int64_t b) {
    for (int64_t n = b + 1; n < m->cfg.num_layers; n++) {
        if (reduce && (n == in->reduce_begin || n == in->reduce_end)) return -1;
        if (!(m->skip && m->skip[n])) return n;
    }
    return -1;
}

/* --ssd-streaming's prefetch after block b: the next active block, after the last the first (the next forward's). */
static int64_t next_active_block(const dit_model *m, int64_t b) {
    const int64_t L = m->cfg.num_layers;
    for (int64_t i = 1; i <= L; i++) {
        int64_t n = (b + i) % L;
        if (!(m->skip && m->skip[n])) return n;
    }
    return -1;
}

/* --profile (docs/robustness.md "Flags, numbers, results and messages"): the residual stream after every block is
 * counted on the device into that block's counter, without a sync; the counters are read once after the last
 * block and the first block whose output has a non-finite value is named, so that broken weights are found where
 * they are. tally[b] counts rows [0, S) of block b's output X (bf16 or fp32 as the model runs). */
static int check_block_tallies(dit_model *m, const uint64_t *tally_dev, const int64_t *rows, h3_err *e) {
    const int64_t L = m->cfg.num_layers;
    uint64_t *tally = calloc((size_t)L, sizeof *tally);
    if (!tally) return h3_fail(e, "dit: out of memory (the per-block non-finite counters)");
    h3_download(m->be, tally, tally_dev, (size_t)L * sizeof *tally);
    int rc = h3_backend_check(m->be, e);
    for (int64_t b = 0; b < L && rc == 0; b++)
        if (tally[b])
            rc = h3_fail(e, "DiT block %lld (from 0, of %lld): its output has %llu of %lld values not finite (NaN or Inf): "
                            "broken weights or inputs in or before this block", (long long)b, (long long)L,
                         (unsigned long long)tally[b], (long long)(rows[b] * m->cfg.hidden_size));
    free(tally);
    return rc;
}

int dit_forward(dit_model *m, const dit_inputs *in, float *video_out, float *audio_out, h3_err *e) {
    return dit_forward_rank(m, in, NULL, video_out, audio_out, e);
}

/* With a communicator (docs/parallel.md) the rank runs its rows [row0, row1) of the packed sequence (`in` becomes its
 * share, dit_local), attention through dit_ulysses; the tables come from rank 0. A rank that fails before the
 * blocks stops its peers at h3_comm_agree; one that fails in a block keeps exchanging until the end. */
int dit_forward_rank(dit_model *m, const dit_inputs *gin, h3_comm *comm, float *video_out, float *audio_out, h3_err *e) {
    if (dit_validate_inputs(gin, e, 0) != 0) return -1;
    const dit_config *c = &m->cfg;
    h3_backend *be = m->be;
    const h3_dtype act = m->act;
    int agreed = !comm, rc = -1;
    int64_t H = c->hidden_size, L = c->num_layers, CA = c->audio_in_channels;
    int64_t VP = (int64_t)c->in_channels * c->patch_size[0] * c->patch_size[1] * c->patch_size[2];
    if (comm && (gin->reduce_end > gin->reduce_begin || gin->S < h3_comm_size(comm)))
        return h3_fail(e, "dit --parallel %d: %s", h3_comm_size(comm), gin->S < h3_comm_size(comm) ?
                       "needs at least one packed row per rank" : "--token-reduction's pairs would cross the ranks' rows: "
                       "use one of the two");
    fwd_ctx x;
    dit_ulysses u;
    dit_local loc;
    memset(&x, 0, sizeof x), memset(&u, 0, sizeof u), memset(&loc, 0, sizeof loc);
    const dit_inputs *in = gin;
    float *X = NULL, *xt = NULL, *rows_in = NULL, *rows_h = NULL, *rows_out = NULL;
    int32_t *ti_dev = NULL, *vi_dev = NULL, *ai_dev = NULL;
    if (comm && (dit_ulysses_init(&u, be, comm, gin->S, c->num_attention_heads, c->attention_head_dim, (int)h3_dtype_size(act),
                                  e) != 0 || dit_local_make(gin, u.row0[u.rank], u.row0[u.rank + 1], VP, CA, &loc, e) != 0))
        goto done;
    if (comm) in = &loc.in;
    int64_t S = in->S, nmax = in->Nv > in->Na ? in->Nv : in->Na, cmax = VP > CA ? VP : CA;
    size_t f = sizeof(float);
    if (fwd_ctx_init(m, in, &x, !comm || u.rank == 0, e) != 0) goto done;
    x.par = comm ? &u : NULL;
    ti_dev = dit_upload_index(be, in->text_indices, in->Nt, 1, NULL);
    vi_dev = dit_upload_index(be, in->video_indices, in->Nv, 1, NULL);
    ai_dev = dit_upload_index(be, in->audio_indices, in->Na, 1, NULL);
    X = h3_alloc(be, (size_t)(S * H) * h3_dtype_size(act)); /* rows of the activation dtype */
    rows_in = h3_alloc(be, (size_t)((nmax ? nmax : 1) * cmax) * f);
    rows_h = h3_alloc(be, (size_t)((nmax ? nmax : 1) * H) * f);
    rows_out = h3_alloc(be, (size_t)((nmax ? nmax : 1) * cmax) * f);
    if (!ti_dev || !vi_dev || !ai_dev || !X || !rows_in || !rows_h || !rows_out) goto oom;

    /* packed sequence (docs/model/dit.md 4.2): text stream, then video and audio embeddings (fp32, cast on scatter) */
    if (in->Nt && (!comm || loc.nt)) { /* --parallel: each rank with text rows runs the whole (short) text stream */
        xt = h3_alloc(be, (size_t)(in->Nt * H) * h3_dtype_size(act));
        if (!xt) goto oom;
        if (dit_text_stream(m, in->text, in->Nt, xt, e) != 0) goto done;
        if (!comm) h3_act_rows_scatter(be, act, X, xt, ti_dev, in->Nt, H);
        if (comm && dit_local_text(be, &loc, X, xt, H, act == H3_BF16, e) != 0) goto done;
    }
    const struct { int64_t n, ch; const float *host; const int32_t *idx; h3_tensor *w, *b; } emb[2] = {
        {in->Nv, VP, in->video, vi_dev, m->proj_in_w, m->proj_in_b},
        {in->Na, CA, in->audio, ai_dev, m->audio_in_w, m->audio_in_b},
    };
    for (int i = 0; i < 2; i++) {
        if (!emb[i].n) continue;
        h3_upload(be, rows_in, emb[i].host, (size_t)(emb[i].n * emb[i].ch) * f);
        h3_matmul(be, rows_h, rows_in, emb[i].n, emb[i].w, emb[i].b, 0);
        h3_act_rows_scatter_f32(be, act, X, rows_h, emb[i].idx, emb[i].n, H);
    }

    if (comm) { /* every rank ready: rank 0's AdaLN tables to the others */
        agreed = 1;
        if (h3_comm_agree(comm, 1, NULL, e) != 0 ||
            h3_comm_broadcast(comm, x.tab, (size_t)(L * in->K * MODALITIES * ADALN_SLOTS * H) * f, 0, e) != 0 ||
            h3_comm_broadcast(comm, x.tab_f, (size_t)(in->K * 2 * H) * f, 0, e) != 0)
            goto done;
    }
    if (in->core == DIT_CORE_REUSE) {
        if (core_reuse(m, X, S, e)) goto done;
    } else {
        float *X0 = NULL; /* --core-reuse: the core's input, fp32 */
        if (in->core == DIT_CORE_RUN_STORE && !(X0 = core_input(m, X, S))) goto oom;
        const int reduce = in->reduce_end > in->reduce_begin && in->reduce_begin < L;
        dit_reduction red;
        memset(&red, 0, sizeof red);
        if (reduce && dit_reduce_new(m, in, &x, &red, e) != 0) {
            h3_free(be, X0);
            goto done;
        }
        int reduced = 0, stream_failed = 0;
        uint64_t *tally = NULL;    /* --profile: per-block non-finite counters, backend memory (zeroed) */
        int64_t *tally_rows = NULL; /* the rows each block's counter covers */
        if (in->check_blocks) {
            tally = h3_alloc(be, (size_t)L * sizeof *tally);
            tally_rows = calloc((size_t)L, sizeof *tally_rows);
            if (!tally || !tally_rows) {
                h3_free(be, tally), free(tally_rows), h3_free(be, X0);
                dit_reduce_free(m, &red);
                goto oom;
            }
        }
        int64_t norm1_ready = -1; /* bf16: the block whose norm1 output the last block left in x.s.n (-1: none) */
        for (int64_t b = 0; b < L && !(comm && u.failed) && (!stream_failed || comm); b++) {
            if (reduce && b == in->reduce_begin) { /* docs/model/features.md 5.5: enter, the full rows kept in X as the bypass */
                h3_bf16_rows_pool_pairs(be, red.X, (h3_bf16 *)X, red.pairs, red.S_red, H);
                h3_copy(be, red.base, red.X, (size_t)(red.S_red * H) * 2);
                reduced = 1;
            }
            if (reduced && b == in->reduce_end) { /* restore: own value + scale x the reduced stack's update */
                h3_bf16_rows_expand_delta(be, (h3_bf16 *)X, red.X, red.base, red.parent, S, red.prefix, H, in->reduce_scale);
                reduced = 0;
            }
            if (m->skip && m->skip[b]) continue; /* --layers (docs/model/features.md 5.3) */
            if (!stream_failed && m->stream && dit_stream_bind(m, b, e) != 0) stream_failed = 1;
            if (stream_failed) { /* --parallel: the peers' exchanges stay matched to the end */
                if (comm) dit_ulysses_idle(&u);
                continue;
            }
            /* fp32 (the reference) runs every norm in its own block: no block is told the next one's norm1 */
            const int64_t next = act == H3_BF16 ? next_block_on_same_rows(m, in, reduce, b) : -1;
            dit_run_block(m, reduced ? &red.ctx : &x, b, reduced ? (void *)red.X : X, norm1_ready == b, next);
            norm1_ready = next;
            if (m->stream && dit_stream_unbind(m, b, next_active_block(m, b), e) != 0) stream_failed = 1;
            if (tally && !stream_failed) {
                tally_rows[b] = reduced ? red.S_red : S;
                if (h3_tally_nonfinite(be, tally + b, reduced ? (const void *)red.X : X, act,
                                       tally_rows[b] * H) != 0) {
                    if (h3_backend_check(be, e) == 0)
                        h3_fail(e, "DiT block %lld: the non-finite check could not run", (long long)b);
                    stream_failed = 1;
                }
            }
        }
        if (comm && u.failed && !stream_failed) stream_failed = h3_fail(e, "%s", u.err.msg) != 0;
        if (tally && !stream_failed && check_block_tallies(m, tally, tally_rows, e) != 0)
            stream_failed = 1; /* the error names the block; the forward stops like a failed stream */
        h3_free(be, tally), free(tally_rows);
        if (reduced)
            h3_bf16_rows_expand_delta(be, (h3_bf16 *)X, red.X, red.base, red.parent, S, red.prefix, H, in->reduce_scale);
        dit_reduce_free(m, &red);
        if (stream_failed) {
            h3_free(be, X0);
            goto done;
        }
        if (X0 && core_store(m, X, X0, S) != 0) goto oom;
    }

    /* output norm, shift then scale per timestep (docs/model/dit.md 4.9), and the fp32 heads on the needed rows */
    h3_act_rmsnorm_modulate(be, act, x.s.n, X, S, H, m->out_norm, c->final_norm_eps, x.tab_f, 2 * H, x.t_idx, 0, H,
                            NULL);
    const struct { int64_t n, ch; float *host; const int32_t *idx; h3_tensor *w, *b; } head[2] = {
        {in->Nv, VP, comm ? loc.video : video_out, vi_dev, m->proj_out_w, m->proj_out_b},
        {in->Na, CA, comm ? loc.audio : audio_out, ai_dev, m->audio_out_w, m->audio_out_b},
    };
    for (int i = 0; i < 2; i++) {
        if (!head[i].n) continue;
        h3_act_rows_gather_f32(be, act, rows_h, x.s.n, head[i].idx, head[i].n, H);
        h3_matmul(be, rows_out, rows_h, head[i].n, head[i].w, head[i].b, 0);
        h3_download(be, head[i].host, rows_out, (size_t)(head[i].n * head[i].ch) * f);
    }
    h3_sync(be);
    if (comm) dit_local_put(&loc, video_out, audio_out, VP, CA);
    rc = 0;
    goto done;
oom:
    h3_fail(e, "dit: out of memory (S = %lld)", (long long)S);
done:
    if (!agreed) { /* failed before the blocks: the peers stop at the agreement too */
        h3_err ignored;
        (void)h3_comm_agree(comm, 0, e->msg, &ignored);
    }
    fwd_ctx_free(m, &x);
    dit_ulysses_free(&u, be), dit_local_free(&loc);
    h3_free(be, X), h3_free(be, xt), h3_free(be, rows_in), h3_free(be, rows_h), h3_free(be, rows_out);
    h3_free(be, ti_dev), h3_free(be, vi_dev), h3_free(be, ai_dev);
    return rc;
}

int dit_block_forward(dit_model *m, int block, float *X, const dit_inputs *in, h3_err *e) {
    if (block < 0 || block >= m->cfg.num_layers)
        return h3_fail(e, "dit: block %d outside [0, %d)", block, m->cfg.num_layers);
    if (dit_layer_skipped(m, block)) return h3_fail(e, "dit: block %d was dropped by --layers", block);
    if (dit_validate_inputs(in, e, 1) != 0) return -1;
    fwd_ctx x;
    int rc = 0;
    if (fwd_ctx_init(m, in, &x, 1, e) != 0) return -1;
    const int64_t n = in->S * m->cfg.hidden_size;
    void *Xa = X; /* bf16 mode: a bf16 copy (X holds bf16 values: the copy is exact) */
    if (m->act == H3_BF16) {
        if (!(Xa = h3_alloc(m->be, (size_t)n * 2))) {
            fwd_ctx_free(m, &x);
            return h3_fail(e, "dit: out of memory (S = %lld)", (long long)in->S);
        }
        h3_bf16_pack(m->be, Xa, X, n);
    }
    if (m->stream && dit_stream_bind(m, block, e) != 0) rc = -1;
    if (!rc) dit_run_block(m, &x, block, Xa, 0, -1);
    if (m->act == H3_BF16) h3_bf16_unpack(m->be, X, Xa, n);
    if (!rc && m->stream && dit_stream_unbind(m, block, -1, e) != 0) rc = -1;
    h3_sync(m->be);
    if (Xa != X) h3_free(m->be, Xa);
    fwd_ctx_free(m, &x);
    return rc;
}
