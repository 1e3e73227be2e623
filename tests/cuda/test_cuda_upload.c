/* Uploads of large pageable host buffers (cuda_upload's staged path: pinned double buffer, OpenMP copies) against
 * the driver's plain pageable path (H3_UPLOAD_STAGED=0): the bytes on the device must be the source's, and the
 * rates are printed for a malloc'd buffer and for a file mapping with its pages cached ("warm") and evicted
 * with posix_fadvise ("cold": the copy reads the disk). Built with CUDA=1 (make cuda-tests), run on the GPU machine:
 *   test_cuda_upload [MiB, default 2048] [file path, default /tmp/h3_upload_test.bin] */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "test.h"
#include "backend/backend.h"
#include "backend/backend_stream.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void fill(uint8_t *p, size_t n, uint64_t seed) {
    uint64_t x = seed;
    for (size_t i = 0; i + 8 <= n; i += 8) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        memcpy(p + i, &x, 8);
    }
    for (size_t i = n & ~(size_t)7; i < n; i++) p[i] = (uint8_t)(i * 131u);
}

/* uploads src (n bytes) with the staged path or the plain one, times it, and checks the device copy */
static double upload_check(h3_backend *gpu, void *dev, const uint8_t *src, size_t n, int staged, uint8_t *back,
                           const char *what) {
    setenv("H3_UPLOAD_STAGED", staged ? "1" : "0", 1);
    h3_sync(gpu);
    double t0 = now_s();
    h3_upload(gpu, dev, src, n);
    h3_sync(gpu);
    double dt = now_s() - t0;
    memset(back, 0, n);
    h3_download(gpu, back, dev, n);
    int same = memcmp(back, src, n) == 0;
    printf("  %-34s %-7s %7.3f s  %6.2f GB/s  %s\n", what, staged ? "staged" : "plain", dt, (double)n / dt / 1e9,
           same ? "bytes equal" : "BYTES DIFFER");
    CHECK(same, "%s (%s): the device copy differs from the source", what, staged ? "staged" : "plain");
    return dt;
}

int main(int argc, char **argv) {
    const size_t mib = argc > 1 ? (size_t)atol(argv[1]) : 2048;
    const char *path = argc > 2 ? argv[2] : "/tmp/h3_upload_test.bin";
    const size_t n = mib * ((size_t)1 << 20) + 12345; /* not a multiple of the staging chunk */
    h3_err e;
    h3_backend *gpu = h3_backend_new(H3_BACKEND_CUDA, 0, &e);
    if (!gpu) {
        fprintf(stderr, "test_cuda_upload: %s\n", e.msg);
        return 2;
    }
    uint8_t *host = malloc(n), *back = malloc(n);
    void *dev = h3_alloc(gpu, n);
    if (!host || !back || !dev) {
        fprintf(stderr, "test_cuda_upload: out of memory for %zu bytes\n", n);
        return 2;
    }
    printf("uploads of %.2f GB:\n", (double)n / 1e9);
    fill(host, n, 0x9E3779B97F4A7C15ull);
    upload_check(gpu, dev, host, n, 0, back, "malloc'd buffer");
    upload_check(gpu, dev, host, n, 1, back, "malloc'd buffer");

    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0, "cannot create %s", path);
    if (fd >= 0) {
        size_t w = 0;
        while (w < n) {
            ssize_t k = write(fd, host + w, n - w > ((size_t)1 << 30) ? (size_t)1 << 30 : n - w);
            if (k <= 0) break;
            w += (size_t)k;
        }
        CHECK(w == n, "short write to %s", path);
        fsync(fd);
        const uint8_t *map = mmap(NULL, n, PROT_READ, MAP_SHARED, fd, 0);
        CHECK(map != MAP_FAILED, "mmap %s", path);
        if (map != MAP_FAILED) {
            for (int staged = 0; staged < 2; staged++) {
                upload_check(gpu, dev, map, n, staged, back, "file mapping, pages cached");
                munmap((void *)map, n);
                posix_fadvise(fd, 0, (off_t)n, POSIX_FADV_DONTNEED); /* evict: the next copy reads the disk */
                map = mmap(NULL, n, PROT_READ, MAP_SHARED, fd, 0);
                upload_check(gpu, dev, map, n, staged, back, "file mapping, pages evicted");
            }
            munmap((void *)map, n);
        }
        /* --ssd-streaming's file reads: a weight slot filled from the file with O_DIRECT reads (pages evicted first, so
         * both read the disk) against the copy from the mapping, the device bytes checked */
        h3_slot *slot = h3_slot_new(gpu, n);
        for (int reads = 0; reads < 2 && slot; reads++) {
            h3_err e = {{0}};
            h3_read_file rf;
            const uint8_t *m2 = reads ? NULL : mmap(NULL, n, PROT_READ, MAP_SHARED, fd, 0);
            if (reads && h3_read_file_open(&rf, path, 1, &e) != 0) {
                CHECK(0, "%s", e.msg);
                break;
            }
            posix_fadvise(fd, 0, (off_t)n, POSIX_FADV_DONTNEED);
            h3_slot_piece pc = {.src = m2, .bytes = n, .offset = 0, .file = reads ? &rf : NULL, .file_off = 0};
            h3_sync(gpu);
            double t0 = now_s();
            int rc = h3_slot_fill(gpu, slot, &pc, 1, &e);
            h3_slot_acquire(gpu, slot);
            h3_sync(gpu);
            double dt = now_s() - t0;
            memset(back, 0, n);
            h3_download(gpu, back, h3_slot_data(slot), n);
            int same = rc == 0 && memcmp(back, host, n) == 0;
            printf("  %-34s %-7s %7.3f s  %6.2f GB/s  %s\n", reads ? (rf.direct ? "slot fill, O_DIRECT file reads" : "slot fill, buffered file reads")
                                                            : "slot fill, mapping, pages evicted", "slot", dt, (double)n / dt / 1e9,
                   same ? "bytes equal" : "BYTES DIFFER");
            CHECK(same, "slot fill (%s): %s", reads ? "file reads" : "mapping", rc ? e.msg : "bytes differ");
            if (reads) h3_read_file_close(&rf);
            else munmap((void *)m2, n);
        }
        h3_slot_free(gpu, slot);
        close(fd);
        unlink(path);
    }
    h3_err ce = {{0}};
    CHECK(h3_backend_check(gpu, &ce) == 0, "%s", ce.msg);
    h3_free(gpu, dev);
    free(host), free(back);
    h3_backend_free(gpu);
    TEST_END();
}
