/* Tests of base/file.c and of the GGUF reader and writer that follow its rules, on hostile
 * paths: a FIFO with no writer (open must not block), /dev/zero and /dev/full, a directory,
 * symbolic links (to a regular file, to a device, to nothing), a stale temporary. alarm() turns
 * a hang into a failure. Everything is created under $TEST_TMPDIR; nothing outside is written
 * (the device nodes are only looked at). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "base/file.h"
#include "tests/testing.h"

static char g_dir[512];

static void in_dir(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", g_dir, name);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    CHECK(fclose(f) == 0);
}

static bool is_type(const char *path, mode_t type)
{
    struct stat st;
    return lstat(path, &st) == 0 && (st.st_mode & S_IFMT) == type;
}

/* PREFIX.fifo (no writer), PREFIX.dir, a regular PREFIX.gguf of 5 bytes and PREFIX.link to it. */
typedef struct fixtures {
    char fifo[600], dir[600], reg[600], link[600];
} fixtures;

static void make_fixtures(const char *prefix, fixtures *f)
{
    char name[64];
    const char *ext[4] = {"fifo", "dir", "gguf", "link"};
    char *out[4] = {f->fifo, f->dir, f->reg, f->link};
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "%s.%s", prefix, ext[i]);
        in_dir(out[i], sizeof f->fifo, name);
    }
    CHECK(mkfifo(f->fifo, 0600) == 0);
    CHECK(mkdir(f->dir, 0700) == 0);
    write_file(f->reg, "hello");
    CHECK(symlink(f->reg, f->link) == 0);
}

static void test_inputs(void)
{
    fixtures fx;
    make_fixtures("in", &fx);
    const char *fifo = fx.fifo, *dir = fx.dir, *link = fx.link;

    sl_error err = {0};
    struct stat st;
    int fd = 7;
    CHECK(sl_file_open_input(fifo, &fd, &st, &err) == SL_ERR_INVALID && fd == -1);
    CHECK_CONTAINS(err.msg, fifo);
    CHECK_CONTAINS(err.msg, "is a FIFO, not a regular file");
    CHECK(sl_file_open_input(dir, &fd, &st, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "is a directory");
    CHECK(sl_file_open_input("/dev/zero", &fd, &st, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "/dev/zero: is a character device");
    CHECK(sl_file_open_input(g_dir, &fd, &st, &err) == SL_ERR_INVALID);
    CHECK(sl_file_open_input("/nonexistent-sluice/x", &fd, &st, &err) == SL_ERR_NOT_FOUND);
    CHECK_CONTAINS(err.msg, strerror(ENOENT));

    /* a link to a regular file is that file, opened in blocking mode */
    CHECK_MSG(sl_file_open_input(link, &fd, &st, &err) == SL_OK, "%s", err.msg);
    if (fd >= 0) {
        CHECK(st.st_size == 5 && S_ISREG(st.st_mode));
        CHECK(!(fcntl(fd, F_GETFL) & O_NONBLOCK));
        CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        close(fd);
    }

    /* the GGUF reader takes its files through the same door */
    sl_gguf *g = NULL;
    CHECK(sl_gguf_open(fifo, NULL, &g, &err) == SL_ERR_INVALID && !g);
    CHECK_CONTAINS(err.msg, "is a FIFO");
    CHECK(sl_gguf_open("/dev/zero", NULL, &g, &err) == SL_ERR_INVALID && !g);
    CHECK(sl_gguf_open(dir, NULL, &g, &err) == SL_ERR_INVALID && !g);
    CHECK_CONTAINS(err.msg, "is a directory");
    CHECK(is_type(fifo, S_IFIFO));
}

static void test_outputs(void)
{
    char reg[600], fifo[600], dir[600], to_reg[600], to_dev[600], dangling[600], fresh[600];
    in_dir(reg, sizeof reg, "out.bin");
    in_dir(fifo, sizeof fifo, "out.fifo");
    in_dir(dir, sizeof dir, "out.dir");
    in_dir(to_reg, sizeof to_reg, "out.link");
    in_dir(to_dev, sizeof to_dev, "full.link");
    in_dir(dangling, sizeof dangling, "dangling.link");
    in_dir(fresh, sizeof fresh, "fresh.bin");
    write_file(reg, "old");
    CHECK(mkfifo(fifo, 0600) == 0);
    CHECK(mkdir(dir, 0700) == 0);
    CHECK(symlink("out.bin", to_reg) == 0);
    CHECK(symlink("/dev/full", to_dev) == 0);
    CHECK(symlink("missing.bin", dangling) == 0);

    sl_error err = {0};
    char *t = NULL;
    bool exists = true;
    struct stat st;
    CHECK(sl_file_output_resolve(fresh, &t, &exists, &st, &err) == SL_OK && t && !exists);
    if (t) CHECK(!strcmp(t, fresh));
    free(t);
    CHECK(sl_file_output_resolve(reg, &t, &exists, &st, &err) == SL_OK && exists);
    if (t) CHECK(!strcmp(t, reg) && st.st_size == 3);
    free(t);
    /* a link is followed to the file it names */
    CHECK(sl_file_output_resolve(to_reg, &t, &exists, &st, &err) == SL_OK && exists);
    char real[4096];
    if (t && realpath(reg, real)) CHECK(!strcmp(t, real));
    free(t);

    const struct {
        const char *path, *msg;
    } refused[] = {
        {"/dev/full", "/dev/full: is a character device, not a regular file"},
        {"/dev/null", "is a character device"},
        {fifo, "is a FIFO, not a regular file"},
        {dir, "is a directory"},
        {to_dev, "is a symbolic link to /dev/full, a character device"},
        {dangling, "is a symbolic link to a missing file"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        t = (char *)1;
        CHECK(sl_file_output_resolve(refused[i].path, &t, &exists, &st, &err) == SL_ERR_INVALID);
        CHECK(t == NULL);
        CHECK_CONTAINS(err.msg, refused[i].msg);
    }
    CHECK(sl_file_output_resolve("/nonexistent-sluice/x.bin", &t, &exists, &st, &err) ==
          SL_ERR_IO);
    CHECK_CONTAINS(err.msg, "directory /nonexistent-sluice");

    /* the temporary: a stale one is replaced, the target's permission bits are kept */
    CHECK(chmod(reg, 0640) == 0);
    char stale[700];
    snprintf(stale, sizeof stale, "%s.partial", reg);
    write_file(stale, "stale");
    char *tmp = NULL;
    int fd = -1;
    CHECK_MSG(sl_file_temp_create(reg, &tmp, &fd, &err) == SL_OK, "%s", err.msg);
    if (tmp) {
        CHECK(!strcmp(tmp, stale));
        CHECK(fstat(fd, &st) == 0 && st.st_size == 0 && (st.st_mode & 0777) == 0640);
        close(fd);
        unlink(tmp);
    }
    free(tmp);
    /* ... but a directory of that name is not ours to remove */
    CHECK(mkdir(stale, 0700) == 0);
    CHECK(sl_file_temp_create(reg, &tmp, &fd, &err) == SL_ERR_INVALID && fd == -1 && !tmp);
    CHECK_CONTAINS(err.msg, "is a directory");
    CHECK(rmdir(stale) == 0);
}

/* A one-tensor GGUF file at path through the writer; returns its status. */
static sl_status write_gguf(const char *path, sl_error *err)
{
    sl_gguf_writer *w = NULL;
    sl_status s = sl_gguf_writer_create(path, NULL, &w, err);
    const int64_t ne[1] = {8};
    const float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    if (!s) s = sl_gguf_writer_add_tensor(w, "t", SL_GGML_F32, 1, ne, err);
    if (!s) s = sl_gguf_writer_write(w, data, sizeof data, err);
    if (!s) s = sl_gguf_writer_finish(w, err);
    sl_gguf_writer_destroy(w);
    return s;
}

static void test_writer(void)
{
    fixtures fx;
    make_fixtures("w", &fx);
    const char *fifo = fx.fifo, *dir = fx.dir, *reg = fx.reg, *link = fx.link;
    char to_dev[600];
    in_dir(to_dev, sizeof to_dev, "w.null.gguf");
    CHECK(symlink("/dev/null", to_dev) == 0);

    sl_error err = {0};
    CHECK(write_gguf(fifo, &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "is a FIFO");
    CHECK(is_type(fifo, S_IFIFO)); /* not replaced by a regular file */
    CHECK(write_gguf(dir, &err) == SL_ERR_INVALID);
    CHECK(is_type(dir, S_IFDIR));
    CHECK(write_gguf("/dev/full", &err) == SL_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "/dev/full: is a character device");
    CHECK(is_type("/dev/full", S_IFCHR));
    CHECK(write_gguf(to_dev, &err) == SL_ERR_INVALID);
    CHECK(is_type(to_dev, S_IFLNK) && is_type("/dev/null", S_IFCHR));

    /* through a link: the link stays, its target becomes the model */
    CHECK_MSG(write_gguf(link, &err) == SL_OK, "%s", err.msg);
    CHECK(is_type(link, S_IFLNK) && is_type(reg, S_IFREG));
    sl_gguf *g = NULL;
    CHECK_MSG(sl_gguf_open(reg, NULL, &g, &err) == SL_OK, "%s", err.msg);
    if (g) CHECK(sl_gguf_tensor_count(g) == 1);
    sl_gguf_close(g);
    char partial[700];
    snprintf(partial, sizeof partial, "%s.partial", link);
    CHECK(access(partial, F_OK) != 0);
}

int main(void)
{
    alarm(60); /* a blocking open would hang: let SIGALRM fail the test instead */
    const char *tmp = getenv("TEST_TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/file_test.%ld", tmp && *tmp ? tmp : "/tmp", (long)getpid());
    if (mkdir(g_dir, 0700) != 0 && errno != EEXIST) {
        perror(g_dir);
        return 1;
    }
    test_inputs();
    test_outputs();
    test_writer();
    return sl_test_finish("file_test");
}
