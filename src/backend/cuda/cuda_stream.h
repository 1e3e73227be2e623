/* CUDA twin of backend_stream.h (weight slots): a copy stream with its own pinned staging buffers. */
#ifndef H3_CUDA_STREAM_H
#define H3_CUDA_STREAM_H

#ifdef __cplusplus
extern "C" {
#endif

#include "../backend_stream.h" /* C linkage: cuda_stream.cu calls h3_slot_impl */

int  cuda_slot_init(h3_backend *be, void **data, void **impl, size_t bytes);
void cuda_slot_release_all(h3_backend *be, void *data, void *impl);
int  cuda_slot_fill(h3_backend *be, void *data, void *impl, const h3_slot_piece *p, int n, h3_err *e);
void cuda_slot_acquire(h3_backend *be, void *impl);
void cuda_slot_mark_released(h3_backend *be, void *impl);
/* At backend shutdown: the copy stream and its staging buffers. */
void cuda_copier_release(h3_backend *be);

#ifdef __cplusplus
}
#endif

#endif
