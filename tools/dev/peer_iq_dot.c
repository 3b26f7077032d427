/* tools/dev/peer_iq_dot.c: llama.cpp's CPU dot kernels of the codebook types (ggml's
 * ggml_vec_dot_<type>_q8_K, the ones its decode runs) timed on one thread over a ROWS x COLS
 * matrix of random codes, row by row, min of REPS passes: the peer's number beside
 * `sluice bench kernels --types <T> --rows ROWS --cols COLS --hot --threads 1`, on the same
 * machine, for the kernels alone (speed does not depend on the codes).
 *
 * Not built by Bazel: it links the static CPU backend that tools/peer/llama.cpp builds.
 *   B=.peer/build-0.3.36-cpu/ggml/src
 *   cc -O2 -Wall -Wextra tools/dev/peer_iq_dot.c -o /tmp/peer_iq_dot \
 *      $B/libggml-cpu.a $B/libggml-base.a -lm -lpthread -fopenmp -lstdc++
 *   /tmp/peer_iq_dot [ROWS [COLS [REPS]]]     (defaults 2048 4096 25)
 * The signatures are ggml-cpu's (quants.h); a peer of another version may differ. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef void (*dot_fn)(int, float *, size_t, const void *, size_t, const void *, size_t, int);
#define DECL(t)                                                                                    \
    void ggml_vec_dot_##t##_q8_K(int, float *, size_t, const void *, size_t, const void *, size_t, \
                                 int);
DECL(iq2_xxs) DECL(iq2_xs) DECL(iq2_s) DECL(iq3_xxs) DECL(iq3_s) DECL(iq1_s) DECL(iq1_m)
#undef DECL
void ggml_cpu_init(void);

enum { QK = 256, Q8K_BYTES = 292 };

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    const int rows = argc > 1 ? atoi(argv[1]) : 2048, cols = argc > 2 ? atoi(argv[2]) : 4096;
    const int reps = argc > 3 ? atoi(argv[3]) : 25;
    if (rows < 1 || cols < QK || cols % QK || reps < 1) {
        fprintf(stderr, "usage: %s [ROWS [COLS (a multiple of 256) [REPS]]]\n", argv[0]);
        return 2;
    }
    ggml_cpu_init();
    /* name, kernel, block bytes, offset of the fp16 scale (IQ1_M: none, its scale is split) */
    const struct { const char *name; dot_fn f; int bytes, d_at;
    } T[] = {{"IQ2_XXS", ggml_vec_dot_iq2_xxs_q8_K, 66, 0},
             {"IQ2_XS", ggml_vec_dot_iq2_xs_q8_K, 74, 0},
             {"IQ2_S", ggml_vec_dot_iq2_s_q8_K, 82, 0},
             {"IQ3_XXS", ggml_vec_dot_iq3_xxs_q8_K, 98, 0},
             {"IQ3_S", ggml_vec_dot_iq3_s_q8_K, 110, 0},
             {"IQ1_S", ggml_vec_dot_iq1_s_q8_K, 50, 0},
             {"IQ1_M", ggml_vec_dot_iq1_m_q8_K, 56, -1}};
    const int nb = cols / QK;
    uint8_t *y = malloc((size_t)Q8K_BYTES * nb);
    if (!y) return 1;
    srand(1);
    for (int i = 0; i < Q8K_BYTES * nb; i++) y[i] = (uint8_t)rand();
    for (int b = 0; b < nb; b++) {
        const float d = 0.01f;
        memcpy(y + (size_t)b * Q8K_BYTES, &d, 4);
    }
    printf("ggml vec_dot, 1 thread, %d x %d, min of %d passes\n", rows, cols, reps);
    for (size_t t = 0; t < sizeof T / sizeof T[0]; t++) {
        const size_t rb = (size_t)T[t].bytes * nb;
        uint8_t *w = malloc(rb * rows);
        if (!w) return 1;
        for (size_t i = 0; i < rb * rows; i++) w[i] = (uint8_t)rand();
        const uint16_t h = 0x211f; /* fp16 0.01 */
        for (size_t b = 0; T[t].d_at >= 0 && b < (size_t)rows * nb; b++)
            memcpy(w + b * T[t].bytes + T[t].d_at, &h, 2);
        double best = 1e30, sink = 0;
        for (int r = 0; r < reps; r++) {
            const double t0 = now_ms();
            for (int i = 0; i < rows; i++) {
                float s;
                T[t].f(cols, &s, 0, w + (size_t)i * rb, 0, y, 0, 1);
                sink += s;
            }
            const double dt = now_ms() - t0;
            if (dt < best) best = dt;
        }
        printf("%-8s %8.3f ms%s\n", T[t].name, best, sink == 12345.678 ? " " : "");
        free(w);
    }
    free(y);
    return 0;
}
