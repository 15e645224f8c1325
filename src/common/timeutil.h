/* Wall-clock time for records and API timestamps. */
#ifndef CELLA_TIMEUTIL_H
#define CELLA_TIMEUTIL_H

#include <stdint.h>

int64_t time_now_ms(void);   /* CLOCK_REALTIME in milliseconds */
uint64_t time_mono_us(void); /* CLOCK_MONOTONIC in microseconds */
/* "2026-11-23T01:02:03.456Z" into out (at least 32 bytes). */
void time_format_iso(int64_t ms, char *out, unsigned outsz);

#endif
