#include <errno.h>
#include <string.h>
#include <sys/stat.h>

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
