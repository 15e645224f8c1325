/* Corpus replay driver: the main() that turns a libFuzzer target into an ordinary program,
 * so that every fuzz target replays its checked-in corpus as a ctest under gcc (and under
 * ASan+UBSan in the sanitizer build) without libFuzzer.
 *
 * Usage: fuzz-<name> PATH...  where each PATH is a file or a directory whose regular files
 * are replayed (not recursively). Fails if a path cannot be read or if no input was found,
 * so that a missing or empty corpus is a test failure rather than a silent pass. A crash or
 * an assertion in the target is, as under libFuzzer, the failure itself. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

/* Read the whole file at dirfd/name into a fresh malloc'ed buffer (at least 1 byte, so
 * that an empty file still yields a valid pointer). Returns 0 or -errno. */
static int read_file(int dirfd, const char *name, uint8_t **ret, size_t *ret_len)
{
        struct stat st;
        uint8_t *data;
        size_t len = 0;
        int fd;

        fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                int r = errno ? -errno : -EINVAL;
                close(fd);
                return r;
        }
        data = malloc((size_t)st.st_size + 1);
        if (!data) {
                close(fd);
                return -ENOMEM;
        }
        while (len < (size_t)st.st_size) {
                ssize_t n = read(fd, data + len, (size_t)st.st_size - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        int r = n < 0 ? -errno : -EIO;
                        free(data);
                        close(fd);
                        return r;
                }
                len += (size_t)n;
        }
        close(fd);
        *ret = data;
        *ret_len = len;
        return 0;
}

static int run_one(int dirfd, const char *name, const char *shown)
{
        uint8_t *data = NULL, *copy;
        size_t len = 0;
        int r;

        r = read_file(dirfd, name, &data, &len);
        if (r < 0) {
                fprintf(stderr, "replay: %s: %s\n", shown, strerror(-r));
                return r;
        }
        /* An exact-size copy, so that ASan catches a read one byte past the input. */
        copy = malloc(len ? len : 1);
        if (!copy) {
                free(data);
                return -ENOMEM;
        }
        memcpy(copy, data, len);
        free(data);
        LLVMFuzzerTestOneInput(copy, len);
        free(copy);
        return 0;
}

static int compare_names(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Replay every regular file of the directory, in name order so that runs are
 * reproducible. Returns the number replayed or -errno. */
static int run_dir(const char *path)
{
        char **names = NULL;
        size_t n = 0, cap = 0;
        struct dirent *de;
        int count = 0, r = 0;
        DIR *d;

        d = opendir(path);
        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue;
                if (n == cap) {
                        size_t ncap = cap ? cap * 2 : 64;
                        char **nn = realloc(names, ncap * sizeof(*names));
                        if (!nn) {
                                r = -ENOMEM;
                                goto out;
                        }
                        names = nn;
                        cap = ncap;
                }
                names[n] = strdup(de->d_name);
                if (!names[n]) {
                        r = -ENOMEM;
                        goto out;
                }
                n++;
        }
        if (n > 0)
                qsort(names, n, sizeof(*names), compare_names);
        for (size_t i = 0; i < n; i++) {
                char shown[4096];
                snprintf(shown, sizeof(shown), "%s/%s", path, names[i]);
                r = run_one(dirfd(d), names[i], shown);
                if (r < 0)
                        goto out;
                count++;
        }
        r = count;
out:
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(names);
        closedir(d);
        return r;
}

int main(int argc, char **argv)
{
        int total = 0;

        if (LLVMFuzzerInitialize)
                LLVMFuzzerInitialize(&argc, &argv);
        if (argc < 2) {
                fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
                return 2;
        }
        for (int i = 1; i < argc; i++) {
                struct stat st;
                int r;

                if (stat(argv[i], &st) < 0) {
                        fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
                        return 1;
                }
                if (S_ISDIR(st.st_mode))
                        r = run_dir(argv[i]);
                else
                        r = run_one(AT_FDCWD, argv[i], argv[i]) < 0 ? -EIO : 1;
                if (r < 0) {
                        fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(-r));
                        return 1;
                }
                total += r;
        }
        if (total == 0) {
                fprintf(stderr, "replay: no inputs found\n");
                return 1;
        }
        printf("replayed %d inputs\n", total);
        return 0;
}
