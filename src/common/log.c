#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "common/log.h"

static enum log_level min_level = LOG_LEVEL_INFO;
static const char *log_prefix = "cella";

void log_set_level(enum log_level lvl)
{
        min_level = lvl;
}

int log_level_from_name(const char *name, enum log_level *ret)
{
        static const char *const names[] = {"debug", "info", "warn", "error"};
        for (int i = 0; i < 4; i++)
                if (strcmp(name, names[i]) == 0) {
                        *ret = (enum log_level)i;
                        return 0;
                }
        return -1;
}

void log_set_prefix(const char *prefix)
{
        log_prefix = prefix;
}

void log_msg(enum log_level lvl, const char *fmt, ...)
{
        static const char *names[] = {"debug", "info", "warn", "error"};
        char line[1024], ts[32];
        struct timeval tv;
        struct tm tm;
        va_list ap;
        int n;

        if (lvl < min_level)
                return;
        gettimeofday(&tv, NULL);
        gmtime_r(&tv.tv_sec, &tm);
        strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
        n = snprintf(line, sizeof(line), "%s.%03ldZ %s %s: ", ts, (long)tv.tv_usec / 1000,
                     log_prefix, names[lvl]);
        if (n < 0 || (size_t)n >= sizeof(line))
                return;
        va_start(ap, fmt);
        vsnprintf(line + n, sizeof(line) - n, fmt, ap);
        va_end(ap);
        fprintf(stderr, "%s\n", line);
}
