#include <stdio.h>
#include <time.h>

#include "common/timeutil.h"

int64_t time_now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint64_t time_mono_us(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

void time_format_iso(int64_t ms, char *out, unsigned outsz)
{
        time_t secs = (time_t)(ms / 1000);
        struct tm tm;
        char base[24];

        gmtime_r(&secs, &tm);
        strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(out, outsz, "%s.%03dZ", base, (int)(ms % 1000));
}
