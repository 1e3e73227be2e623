/* A minimal test harness: CHECK counts passes and failures; each test binary ends with
 * TEST_END(), which prints "RESULT <passed> <failed>" for tests/run_tests.sh to add up. */
#ifndef H3_TEST_H
#define H3_TEST_H

#include <stdio.h>
#include <stdlib.h>

static int h3t_passed, h3t_failed;

#define CHECK(cond, ...)                                                          \
    do {                                                                          \
        if (cond) {                                                               \
            h3t_passed++;                                                         \
        } else {                                                                  \
            h3t_failed++;                                                         \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);       \
            fprintf(stderr, __VA_ARGS__);                                         \
            fputc('\n', stderr);                                                  \
        }                                                                         \
    } while (0)

/* Parity check with the numbers printed either way, so logs carry the measured errors. */
#define CHECK_CLOSE(name, rel, tol)                                               \
    do {                                                                          \
        double r_ = (rel);                                                        \
        printf("  %-48s rel_l2 %.3e (tol %.0e)\n", (name), r_, (double)(tol));    \
        CHECK(r_ <= (tol), "%s: relative L2 %.3e > %.1e", (name), r_, (double)(tol)); \
    } while (0)

#define TEST_END()                                                                \
    do {                                                                          \
        printf("RESULT %d %d\n", h3t_passed, h3t_failed);                         \
        return h3t_failed ? 1 : 0;                                                \
    } while (0)

#endif
