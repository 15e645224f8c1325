#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli/duration.h"
#include "common/macros.h"

static const struct {
        const char *name;
        int64_t ms;
} units[] = {
        {"d", 86400000LL}, {"h", 3600000LL}, {"m", 60000LL}, {"s", 1000LL}, {"ms", 1LL},
};

/* The unit at s[0..len), longest match first ("ms" before "m"); its index or -1. */
static int unit_at(const char *s, size_t len, size_t *ret_n)
{
        if (len >= 2 && s[0] == 'm' && s[1] == 's') {
                *ret_n = 2;
                return 4;
        }
        for (int u = 0; u < 4; u++)
                if (len >= 1 && s[0] == units[u].name[0]) {
                        *ret_n = 1;
                        return u;
                }
        return -1;
}

int cli_duration_parse(const char *s, size_t len, int64_t unit_ms, int64_t *ret_ms)
{
        int64_t total = 0;
        size_t i = 0;
        int last = -1; /* index of the previous group's unit */

        if (!s || len == 0 || unit_ms <= 0)
                return -EINVAL;
        while (i < len) {
                int64_t n = 0;
                size_t start = i, ulen = 0;
                bool big = false;
                int u;

                while (i < len && s[i] >= '0' && s[i] <= '9') {
                        if (n > CLI_DURATION_MAX_MS)
                                big = true; /* keep reading the digits; no overflow */
                        else
                                n = n * 10 + (s[i] - '0');
                        i++;
                }
                if (i == start)
                        return -EINVAL;
                if (i == len && start == 0) {
                        /* a bare number: the option's unit */
                        if (big || n > CLI_DURATION_MAX_MS / unit_ms)
                                return -ERANGE;
                        *ret_ms = n * unit_ms;
                        return 0;
                }
                u = unit_at(s + i, len - i, &ulen);
                if (u < 0 || u <= last)
                        return -EINVAL; /* no unit, an unknown one, or out of order */
                i += ulen;
                last = u;
                if (big || n > CLI_DURATION_MAX_MS / units[u].ms)
                        return -ERANGE;
                total += n * units[u].ms;
                if (total > CLI_DURATION_MAX_MS)
                        return -ERANGE;
        }
        *ret_ms = total;
        return 0;
}

int cli_duration_format(int64_t ms, char *buf, size_t size)
{
        size_t at = 0;

        if (ms < 0 || ms > CLI_DURATION_MAX_MS)
                return -ERANGE;
        if (size == 0)
                return -ENOBUFS;
        buf[0] = '\0';
        if (ms == 0) {
                if (size < 3)
                        return -ENOBUFS;
                memcpy(buf, "0s", 3);
                return 0;
        }
        for (size_t u = 0; u < ARRAY_SIZE(units); u++) {
                int64_t n = ms / units[u].ms;
                int w;

                if (n == 0)
                        continue;
                ms -= n * units[u].ms;
                w = snprintf(buf + at, size - at, "%lld%s", (long long)n, units[u].name);
                if (w < 0 || (size_t)w >= size - at)
                        return -ENOBUFS;
                at += (size_t)w;
        }
        return 0;
}

/* n digits at s as a number, or -1. */
static int digits(const char *s, int n)
{
        int v = 0;

        for (int i = 0; i < n; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -1;
                v = v * 10 + (s[i] - '0');
        }
        return v;
}

int cli_time_parse(const char *s, size_t len, int64_t *ret_ms)
{
        /* 2026-11-23T01:02:03.456Z
         * 0123456789012345678901234 */
        static const char shape[] = "dddd-dd-ddTdd:dd:dd.dddZ";
        struct tm tm = {0};
        int mdays;
        time_t t;

        if (!s || len != sizeof(shape) - 1)
                return -EINVAL;
        for (size_t i = 0; i < len; i++)
                if (shape[i] == 'd' ? (s[i] < '0' || s[i] > '9') : s[i] != shape[i])
                        return -EINVAL;
        tm.tm_year = digits(s, 4) - 1900;
        tm.tm_mon = digits(s + 5, 2) - 1;
        tm.tm_mday = digits(s + 8, 2);
        tm.tm_hour = digits(s + 11, 2);
        tm.tm_min = digits(s + 14, 2);
        tm.tm_sec = digits(s + 17, 2);
        if (tm.tm_year < 70 || tm.tm_mon < 0 || tm.tm_mon > 11 || tm.tm_mday < 1 ||
            tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 59)
                return -EINVAL;
        {
                static const int days[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
                int y = tm.tm_year + 1900;
                bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

                mdays = tm.tm_mon == 1 && !leap ? 28 : days[tm.tm_mon];
        }
        if (tm.tm_mday > mdays)
                return -EINVAL;
        t = timegm(&tm);
        if (t == (time_t)-1)
                return -EINVAL;
        *ret_ms = (int64_t)t * 1000 + digits(s + 20, 3);
        return 0;
}
