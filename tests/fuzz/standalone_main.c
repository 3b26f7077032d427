/* Standalone driver for fuzz targets outside `--config=fuzz`: replays inputs through
 * LLVMFuzzerTestOneInput, like libFuzzer does for file arguments, without libFuzzer.
 *
 * Usage: <fuzz_target> [-flag ...] PATH...
 *   A file PATH is run once; a directory PATH runs each regular file in it (not recursive,
 *   in name order). Arguments starting with '-' (libFuzzer flags) are ignored.
 * Each input is copied into a buffer of exactly its size, so ASan catches reads past the end.
 * Prints how many inputs ran; exits 0, or 1 if a path could not be read (a crash in the target
 * aborts the process as usual). */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Optional, as in libFuzzer. */
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path, unsigned long *ran)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "standalone_main: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 4096, len = 0;
    uint8_t *buf = malloc(cap);
    if (!buf) {
        fclose(f);
        fprintf(stderr, "standalone_main: out of memory reading %s\n", path);
        return -1;
    }
    for (;;) {
        if (len == cap) {
            uint8_t *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                fclose(f);
                fprintf(stderr, "standalone_main: out of memory reading %s\n", path);
                return -1;
            }
            buf = nb;
            cap *= 2;
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        fprintf(stderr, "standalone_main: read error on %s\n", path);
        return -1;
    }
    /* Exact-size copy: an over-read by the target hits ASan's redzone. */
    uint8_t *exact = malloc(len ? len : 1);
    if (!exact) {
        free(buf);
        fprintf(stderr, "standalone_main: out of memory reading %s\n", path);
        return -1;
    }
    if (len) memcpy(exact, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    (*ran)++;
    return 0;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_dir(const char *dir, unsigned long *ran)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "standalone_main: cannot open directory %s: %s\n", dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 64;
            char **nn = realloc(names, nc * sizeof *nn);
            if (!nn) {
                rc = -1;
                break;
            }
            names = nn;
            cap = nc;
        }
        size_t need = strlen(dir) + 1 + strlen(e->d_name) + 1;
        char *p = malloc(need);
        if (!p) {
            rc = -1;
            break;
        }
        snprintf(p, need, "%s/%s", dir, e->d_name);
        names[n++] = p;
    }
    closedir(d);
    if (rc) fprintf(stderr, "standalone_main: out of memory listing %s\n", dir);
    if (n) qsort(names, n, sizeof *names, cmp_names);
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (rc == 0 && stat(names[i], &st) == 0 && S_ISREG(st.st_mode))
            if (run_file(names[i], ran) != 0) rc = -1;
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv)
{
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    unsigned long ran = 0;
    int failed = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] == '-') continue; /* libFuzzer flag */
        struct stat st;
        if (stat(a, &st) != 0) {
            fprintf(stderr, "standalone_main: cannot stat %s: %s\n", a, strerror(errno));
            failed = 1;
        } else if (S_ISDIR(st.st_mode)) {
            if (run_dir(a, &ran) != 0) failed = 1;
        } else if (run_file(a, &ran) != 0) {
            failed = 1;
        }
    }
    printf("standalone_main: ran %lu input%s\n", ran, ran == 1 ? "" : "s");
    return failed ? 1 : 0;
}
