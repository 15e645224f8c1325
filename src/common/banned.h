/* Force-included into every translation unit: functions that are easy to misuse.
 * Use snprintf, strtol/strtoul with checks, posix_spawn/execve, fcntl(F_DUPFD_CLOEXEC),
 * localtime_r/gmtime_r instead. */
#ifndef CELLA_BANNED_H
#define CELLA_BANNED_H
#ifndef CELLA_ALLOW_BANNED
/* The system headers that declare them come first, so the macros below only catch our
 * own uses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#define CELLA_BANNED(func) sorry_##func##_is_banned_in_cella
#undef strcpy
#define strcpy(a, b) CELLA_BANNED(strcpy)
#undef strcat
#define strcat(a, b) CELLA_BANNED(strcat)
#undef sprintf
#define sprintf(...) CELLA_BANNED(sprintf)
#undef vsprintf
#define vsprintf(...) CELLA_BANNED(vsprintf)
#undef strtok
#define strtok(a, b) CELLA_BANNED(strtok)
#undef atoi
#define atoi(a) CELLA_BANNED(atoi)
#undef atol
#define atol(a) CELLA_BANNED(atol)
#undef system
#define system(a) CELLA_BANNED(system)
#undef popen
#define popen(a, b) CELLA_BANNED(popen)
#undef dup
#define dup(a) CELLA_BANNED(dup)
#undef gmtime
#define gmtime(a) CELLA_BANNED(gmtime)
#undef localtime
#define localtime(a) CELLA_BANNED(localtime)
#undef ctime
#define ctime(a) CELLA_BANNED(ctime)
#undef asctime
#define asctime(a) CELLA_BANNED(asctime)
#endif
#endif
