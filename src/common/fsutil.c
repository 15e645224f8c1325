#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "common/limits.h"

int fs_mkdir_p(const char *path, mode_t mode)
{
        char buf[CELLA_PATH_MAX + 1];
        size_t n = strlen(path);
        struct stat st;

        if (n == 0 || n > CELLA_PATH_MAX)
                return -ENAMETOOLONG;
        memcpy(buf, path, n + 1);
        for (size_t i = 1; i <= n; i++) {
                if (buf[i] != '/' && buf[i] != '\0')
                        continue;
                buf[i] = '\0';
                if (mkdir(buf, mode) < 0) {
                        if (errno != EEXIST)
                                return -errno;
                        if (stat(buf, &st) < 0)
                                return -errno;
                        if (!S_ISDIR(st.st_mode))
                                return -ENOTDIR;
                }
                if (i < n)
                        buf[i] = '/';
        }
        return 0;
}

ssize_t fs_read_small(const char *path, char *buf, size_t size)
{
        ssize_t n;
        int fd;

        if (size == 0)
                return -EINVAL;
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        do
                n = read(fd, buf, size - 1);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                n = -errno;
        close(fd);
        buf[n > 0 ? n : 0] = '\0';
        return n;
}
