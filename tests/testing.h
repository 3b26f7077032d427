/* Minimal test harness shared by the C tests: CHECK records a failure and continues, so one
 * run reports every broken property; main returns sl_test_finish() (non-zero on failure). */
#ifndef SL_TESTING_H
#define SL_TESTING_H

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

static inline int sl_test_finish(const char *name)
{
    printf("%s: %d checks, %d failed\n", name, sl_test_g.checks, sl_test_g.failures);
    return sl_test_g.failures ? 1 : 0;
}

#endif
