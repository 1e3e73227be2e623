/* Audio VAE timing: bench_audio_vae AUDIO_VAE_DIR T [decode_chunk [encode_chunk]]
 * Loads the model, decodes [2, C, T] random latents and encodes 2 x hop*T random samples (stereo),
 * printing wall times. Not a test: numbers depend on the machine. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "model/audio_vae.h"

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s AUDIO_VAE_DIR T [decode_chunk [encode_chunk]]\n", argv[0]);
        return 2;
    }
    int64_t T = atoll(argv[2]), dchunk = argc > 3 ? atoll(argv[3]) : 0, echunk = argc > 4 ? atoll(argv[4]) : 0;
    h3_err e = {{0}};
    h3_backend *be = h3_backend_new(H3_BACKEND_CPU, 0, &e);
    double t0 = omp_get_wtime();
    audio_vae *m = be ? audio_vae_load(be, argv[1], AVAE_ALL, &e) : NULL;
    if (!m) {
        fprintf(stderr, "%s\n", e.msg);
        return 2;
    }
    double t1 = omp_get_wtime();
    const audio_vae_config *c = audio_vae_get_config(m);
    int64_t C = c->latent_channels, S = T * c->hop;
    float *z = malloc((size_t)(2 * C * T) * sizeof(float)), *wav = malloc((size_t)(2 * S) * sizeof(float));
    for (int64_t i = 0; i < 2 * C * T; i++) z[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
    if (audio_vae_decode(m, z, 2, T, dchunk, wav, NULL, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    double t2 = omp_get_wtime();
    if (audio_vae_encode(m, wav, 2, S, echunk, z, NULL, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    double t3 = omp_get_wtime();
    printf("threads %d  load %.2f s  decode [2,%lld,%lld] (chunk %lld) %.2f s  encode [2,1,%lld] (chunk %lld) %.2f s\n",
           omp_get_max_threads(), t1 - t0, (long long)C, (long long)T, (long long)dchunk, t2 - t1, (long long)S,
           (long long)echunk, t3 - t2);
    free(z);
    free(wav);
    audio_vae_free(m);
    h3_backend_free(be);
    return 0;
}
