/* Cleanup macros and small helpers used everywhere (systemd-style). */
#ifndef CELLA_MACROS_H
#define CELLA_MACROS_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <dirent.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _warn_unused_ __attribute__((warn_unused_result))

static inline void freep(void *p)
{
        free(*(void **)p);
}
static inline void closep(int *fd)
{
        if (*fd >= 0) {
                int saved = errno;
                close(*fd);
                errno = saved;
        }
}
static inline void fclosep(FILE **f)
{
        if (*f)
                fclose(*f);
}
static inline void closedirp(DIR **d)
{
        if (*d)
                closedir(*d);
}

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)
#define _cleanup_closedir_ _cleanup_(closedirp)

/* Take ownership out of a cleanup variable. */
#define TAKE_PTR(p)                      \
        ({                               \
                __typeof__(p) _tp = (p); \
                (p) = NULL;              \
                _tp;                     \
        })
#define TAKE_FD(fd)             \
        ({                      \
                int _tf = (fd); \
                (fd) = -EBADF;  \
                _tf;            \
        })

#ifndef MIN
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#endif
#ifndef MAX
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#endif

#endif
