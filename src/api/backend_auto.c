/* The backend "auto" picks (include/h3.h h3_engine_options.backend; docs/api.md "Backend auto"): CUDA when this build
 * has it and the device asked for (h3_engine_options.device, 0 by default) is usable (compute capability 8.0 or newer, as cuda_backend.cu requires), else the CPU, with
 * the reason in one phrase. Only the CUDA runtime's C entry points are called; their prototypes are declared here
 * (cudaError_t and cudaDeviceAttr are C enums, int-sized), so the host build needs no CUDA header. */
#include "api_internal.h"

#include <stdio.h>

#ifdef H3_CUDA
extern int         cudaGetDeviceCount(int *count);
extern int         cudaDeviceGetAttribute(int *value, int attr, int device);
extern const char *cudaGetErrorString(int error);
enum { CUDA_SUCCESS = 0, CUDA_ERROR_INSUFFICIENT_DRIVER = 35, CUDA_ERROR_NO_DEVICE = 100,
       CUDA_ATTR_CC_MAJOR = 75, CUDA_ATTR_CC_MINOR = 76 };

int api_backend_auto(int device, char *why, size_t cap) {
    int n = 0, err = cudaGetDeviceCount(&n);
    if (err == CUDA_ERROR_NO_DEVICE || (err == CUDA_SUCCESS && n == 0)) {
        snprintf(why, cap, "no GPU");
        return 0;
    }
    if (err != CUDA_SUCCESS) {
        snprintf(why, cap, "driver error: %s", cudaGetErrorString(err));
        return 0;
    }
    if (device >= n) {
        snprintf(why, cap, "no GPU %d (this machine has %d: 0..%d)", device, n, n - 1);
        return 0;
    }
    int major = 0, minor = 0;
    if ((err = cudaDeviceGetAttribute(&major, CUDA_ATTR_CC_MAJOR, device)) != CUDA_SUCCESS ||
        (err = cudaDeviceGetAttribute(&minor, CUDA_ATTR_CC_MINOR, device)) != CUDA_SUCCESS) {
        snprintf(why, cap, "driver error: %s", cudaGetErrorString(err));
        return 0;
    }
    if (major < 8) {
        snprintf(why, cap, "GPU %d has compute capability %d.%d, h3 needs 8.0 or newer", device, major, minor);
        return 0;
    }
    why[0] = 0;
    return 1;
}
#else
int api_backend_auto(int device, char *why, size_t cap) {
    (void)device;
    snprintf(why, cap, "no CUDA in this build");
    return 0;
}
#endif
