/* libFuzzer target: the media readers (image, audio, video) on untrusted bytes, through the
 * in-memory AVIOContext path of src/media/media_read.c. Every input goes to all three readers;
 * whatever decodes is checked for consistent sizes. Limits keep single inputs cheap.
 * Build: make fuzz; run: build-fuzz/fuzz_media -max_len=65536 fuzz/corpus/media */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "media/media.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    h3_err e;
    h3_read_opts o = {.max_frames = 48, .max_seconds = 20, .max_bytes = 64 << 20, .max_pixels = 1 << 22};
    volatile uint8_t acc = 0;

    h3_image im;
    if (h3_read_image_mem(data, size, "fuzz", &o, &im, &e) == 0) {
        if (im.width <= 0 || im.height <= 0 || !im.rgb) __builtin_trap();
        acc ^= im.rgb[(size_t)im.width * im.height * 3 - 1];
        h3_image_free(&im);
    } else if (!e.msg[0] || strchr(e.msg, '\n')) {
        __builtin_trap();   /* every failure is exactly one line */
    }

    h3_audio au;
    if (h3_read_audio_mem(data, size, "fuzz", &o, &au, &e) == 0) {
        if (au.channels != 2 || au.samples <= 0 || au.sample_rate != 32000) __builtin_trap();
        acc ^= *(const uint8_t *)&au.data[2 * au.samples - 1];   /* any float is valid data */
        h3_audio_free(&au);
    }

    h3_video vi;
    if (h3_read_video_mem(data, size, "fuzz", &o, &vi, &e) == 0) {
        if (vi.frames <= 0 || vi.frames > 48 || vi.width <= 0 || vi.height <= 0 || !vi.rgb) __builtin_trap();
        acc ^= vi.rgb[(size_t)vi.frames * vi.width * vi.height * 3 - 1];
        if (vi.has_audio) acc ^= *(const uint8_t *)&vi.audio.data[2 * vi.audio.samples - 1];
        h3_video_free(&vi);
    }
    (void)acc;
    return 0;
}
