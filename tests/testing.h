/* Minimal test harness shared by the C tests: CHECK records a failure and continues, so one
 * run reports every broken property; main returns sl_test_finish() (non-zero on failure). */
#ifndef SL_TESTING_H
#define SL_TESTING_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct sl_test_state {
    int checks, failures;
} sl_test_state;

static sl_test_state sl_test_g; /* per test binary; tests are single-purpose programs */

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        sl_test_g.checks++;                                                                \
        if (!(cond)) {                                                                     \
            sl_test_g.failures++;                                                          \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);       \
        }                                                                                  \
    } while (0)

#define CHECK_MSG(cond, ...)                                                               \
    do {                                                                                   \
        sl_test_g.checks++;                                                                \
        if (!(cond)) {                                                                     \
            sl_test_g.failures++;                                                          \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);       \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fputc('\n', stderr);                                                           \
        }                                                                                  \
    } while (0)

/* Substring check for error messages: they must name the field/offset at fault. */
#define CHECK_CONTAINS(hay, needle)                                                        \
    CHECK_MSG(strstr((hay), (needle)) != NULL, "\"%s\" lacks \"%s\"", (hay), (needle))

/* max |a - b| over n values, relative to max |a| (1 when a is all zero): how far b is from
 * the reference a. */
/* Deterministic test data: splitmix64 over *state (the same stream for the same seed), and a
 * float uniform in [-1, 1) from it. */
static inline uint64_t sl_test_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline float sl_test_unit_float(uint64_t *state)
{
    return (float)((double)(sl_test_splitmix64(state) >> 11) * 0x1p-53 * 2.0 - 1.0);
}

static inline double sl_test_rel_diff(const float *a, const float *b, size_t n)
{
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        const double x = (double)a[i] - (double)b[i], y = (double)a[i];
        if ((x < 0 ? -x : x) > d) d = x < 0 ? -x : x;
        if ((y < 0 ? -y : y) > m) m = y < 0 ? -y : y;
    }
    return d / (m > 0 ? m : 1);
}

static inline int sl_test_finish(const char *name)
{
    printf("%s: %d checks, %d failed\n", name, sl_test_g.checks, sl_test_g.failures);
    return sl_test_g.failures ? 1 : 0;
}

#endif
