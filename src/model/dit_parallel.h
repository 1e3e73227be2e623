/* --parallel N (docs/parallel.md): a DiT forward on N ranks, one thread per rank, each rank a model of its own on
 * its own backend (N CPU backends through the CPU communicator, or N GPUs through NCCL). The models are loaded the
 * same way (same weights, mode, quantization, attention, --layers); the AdaLN tables are needed on rank 0's model
 * only (dit_prepare_timesteps there: computed once, broadcast per forward). */
#ifndef H3_DIT_PARALLEL_H
#define H3_DIT_PARALLEL_H

#include "../backend/comm.h"
#include "dit.h"

typedef struct dit_team dit_team;

/* n 1..H3_COMM_MAX_RANKS ranks over models[0..n) (not owned: the caller frees them after the team); kind: H3_COMM_CPU
 * (CPU backends) or H3_COMM_NCCL (CUDA backends, one GPU each). Every rank's thread joins the communicator here. */
dit_team  *dit_team_new(dit_model *const *models, int n, h3_comm_kind kind, h3_err *e);
void       dit_team_free(dit_team *t);
int        dit_team_size(const dit_team *t);
dit_model *dit_team_model(const dit_team *t, int rank);
/* dit_forward on the team: each rank computes its rows of the outputs; an error of any rank is the call's error. */
int        dit_team_forward(dit_team *t, const dit_inputs *in, float *video_out, float *audio_out, h3_err *e);

#endif
