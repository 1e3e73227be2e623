/* The output phase (gen_output.h). */
#include "gen_output.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../io/safetensors.h"

/* The conditioning of fl2va/ref2va, for step-by-step parity checks: the presentation ids and
 * tags, every condition's normalized latents (1, 24, Lt, lh, lw) and reference audio rows
 * (2N, 32), and the prepared pixels of single-frame conditions (H, W, 3) uint8. */
static int dump_conditioning(gen *s, st_writer *w, h3_err *e) {
    if (s->task == H3_T2VA) return 0;
    int64_t L[1] = {s->pres.L};
    if (st_writer_add(w, "prompt_ids", H3_I64, 1, L, s->pres.ids, e) ||
        st_writer_add(w, "text_token_tags", H3_I64, 1, L, s->pres.tags, e))
        return -1;
    for (int i = 0; i < s->cond.n; i++) {
        const cond_item *it = &s->cond.items[i];
        char name[64];
        if (it->latents) {
            int64_t sh[5] = {1, VIDEO_CHANNELS, it->Lt, it->lh, it->lw};
            snprintf(name, sizeof name, "condition.%d.latents", i);
            if (st_writer_add(w, name, H3_F32, 5, sh, it->latents, e)) return -1;
        }
        if (it->audio_rows) {
            int64_t sh[2] = {2 * it->audio_latents, AUDIO_CHANNELS};
            snprintf(name, sizeof name, "condition.%d.audio_rows", i);
            if (st_writer_add(w, name, H3_F32, 2, sh, it->audio_rows, e)) return -1;
        }
        if (it->pixels && it->T == 1) {
            int64_t sh[3] = {it->H, it->W, 3};
            snprintf(name, sizeof name, "condition.%d.pixels", i);
            if (st_writer_add(w, name, H3_U8, 3, sh, it->pixels, e)) return -1;
        }
    }
    return 0;
}

/* ---- phase 4: outputs, each written atomically ---- */
int phase_outputs(gen *s, h3_err *e) {
    const h3_request *r = s->r;
    const layout_geometry *g = &s->g;
    if (r->dump_latents) {
        st_writer *w = st_writer_new();
        int64_t vs[5] = {1, VIDEO_CHANNELS, g->num_latent_frames, g->latent_height, g->latent_width};
        int64_t as[3] = {2, AUDIO_CHANNELS, g->num_audio_latents};
        int64_t fs[4] = {s->nframes, s->out_h, s->out_w, 3};
        int64_t ws[2] = {2, s->samples};
        int rc = st_writer_add(w, "video_latents", H3_F32, 5, vs, s->video_latents, e) ||
                 st_writer_add(w, "audio_latents", H3_F32, 3, as, s->audio_latents, e) ||
                 st_writer_add(w, "frames", H3_F32, 4, fs, s->frames, e) ||
                 st_writer_add(w, "audio", H3_F32, 2, ws, s->audio, e) ||
                 dump_conditioning(s, w, e) || st_writer_save_to(w, s->o_dump, NULL, e) ||
                 h3_outfile_commit(s->o_dump, 1, e);
        st_writer_free(w);
        if (rc) return -1;
    }
    h3_frames_view fv = {.frames = (int)s->nframes, .height = s->out_h, .width = s->out_w, .f32 = s->frames};
    if (r->output && r->output[0]) { /* encoded during the decode; flushed and renamed into place here */
        progress_begin(&s->pg, "mux MP4", 0);
        int rc = !s->mp4 || s->mp4_frames != s->nframes
                     ? h3_fail(e, "-o %s: %lld of %lld frames were encoded", r->output, (long long)s->mp4_frames,
                               (long long)s->nframes)
                     : h3_mp4_writer_close(s->mp4, e);
        h3_mp4_writer_free(s->mp4);
        s->mp4 = NULL;
        if (!rc) rc = h3_outfile_commit(s->o_mp4, 1, e);
        if (rc) return -1;
        progress_end(&s->pg);
    }
    if (r->frames_dir && (h3_write_png_frames_to(s->o_frames, &fv, e) || h3_outfile_commit(s->o_frames, 1, e))) return -1;
    if (r->wav && (h3_write_wav_to(s->o_wav, s->audio, 2, s->samples, H3_MEDIA_SAMPLE_RATE, 16, e) ||
                   h3_outfile_commit(s->o_wav, 1, e)))
        return -1;
    return 0;
}

/* Every output location checked and its temporary made before the first phase: a FIFO, a directory, an
 * unwritable folder or a --frames-dir holding other files fails here, not after hours of compute. */
int outputs_open(gen *s, h3_err *e) {
    const h3_request *r = s->r;
    if (r->dump_latents && !(s->o_dump = h3_outfile_open("--dump-latents", r->dump_latents, H3_OUT_FILE, NULL, e))) return -1;
    if (r->output && r->output[0] && !(s->o_mp4 = h3_outfile_open("-o", r->output, H3_OUT_FILE, NULL, e))) return -1;
    if (r->frames_dir &&
        !(s->o_frames = h3_outfile_open("--frames-dir", r->frames_dir, H3_OUT_DIR, h3_out_frame_name, e)))
        return -1;
    if (r->wav && !(s->o_wav = h3_outfile_open("--wav", r->wav, H3_OUT_FILE, NULL, e))) return -1;
    return 0;
}

void outputs_free(gen *s) { /* the uncommitted temporaries go */
    h3_outfile_free(s->o_dump), h3_outfile_free(s->o_mp4), h3_outfile_free(s->o_frames), h3_outfile_free(s->o_wav);
}

void profile_log(gen *s) {
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) return;
    progress_report(&s->pg, m);
    fclose(m);
    for (char *line = buf, *nl; line && *line; line = nl + 1) {
        if (!(nl = strchr(line, '\n'))) nl = line + strlen(line) - 1;
        else *nl = 0;
        if (s->r->log) s->r->log(s->r->log_user, 1, line);
    }
    free(buf);
}
