/* Small file system helpers shared by the daemon and the agent. */
#ifndef CELLA_FSUTIL_H
#define CELLA_FSUTIL_H

#include <sys/types.h>

/* mkdir -p: every missing directory of path is made with mode. Returns 0 or -errno
 * (-ENOTDIR when a component exists and is not a directory, -ENAMETOOLONG beyond
 * CELLA_PATH_MAX). */
int fs_mkdir_p(const char *path, mode_t mode);

/* Read a small file (procfs, cgroupfs: what one read returns) into buf: at most size - 1
 * bytes, NUL-terminated. The length read (0 for an empty file), or -errno. */
ssize_t fs_read_small(const char *path, char *buf, size_t size);

#endif
