/* See signal.h. Numbers are Linux's (x86 and arm share them). */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/macros.h"
#include "common/signal.h"

static const struct {
        const char *name;
        int sig;
} names[] = {
        {"HUP", SIGHUP},   {"INT", SIGINT},       {"QUIT", SIGQUIT}, {"ILL", SIGILL},
        {"TRAP", SIGTRAP}, {"ABRT", SIGABRT},     {"BUS", SIGBUS},   {"FPE", SIGFPE},
        {"KILL", SIGKILL}, {"USR1", SIGUSR1},     {"SEGV", SIGSEGV}, {"USR2", SIGUSR2},
        {"PIPE", SIGPIPE}, {"ALRM", SIGALRM},     {"TERM", SIGTERM}, {"STKFLT", SIGSTKFLT},
        {"CHLD", SIGCHLD}, {"CONT", SIGCONT},     {"STOP", SIGSTOP}, {"TSTP", SIGTSTP},
        {"TTIN", SIGTTIN}, {"TTOU", SIGTTOU},     {"URG", SIGURG},   {"XCPU", SIGXCPU},
        {"XFSZ", SIGXFSZ}, {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}, {"WINCH", SIGWINCH},
        {"IO", SIGIO},     {"PWR", SIGPWR},       {"SYS", SIGSYS},
};

int cella_signal_parse(const char *s)
{
        char *end;
        long n;

        if (!s || !*s)
                return -1;
        if (*s >= '0' && *s <= '9') {
                if (strlen(s) > 2)
                        return -1;
                n = strtol(s, &end, 10);
                return *end == '\0' && n >= 1 && n <= 64 ? (int)n : -1;
        }
        if (strncasecmp(s, "SIG", 3) == 0)
                s += 3;
        for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                if (strcasecmp(s, names[i].name) == 0)
                        return names[i].sig;
        return -1;
}

const char *cella_signal_name(int sig)
{
        static const char *const full[] = {
                "SIGHUP",  "SIGINT",    "SIGQUIT", "SIGILL",  "SIGTRAP",   "SIGABRT", "SIGBUS",
                "SIGFPE",  "SIGKILL",   "SIGUSR1", "SIGSEGV", "SIGUSR2",   "SIGPIPE", "SIGALRM",
                "SIGTERM", "SIGSTKFLT", "SIGCHLD", "SIGCONT", "SIGSTOP",   "SIGTSTP", "SIGTTIN",
                "SIGTTOU", "SIGURG",    "SIGXCPU", "SIGXFSZ", "SIGVTALRM", "SIGPROF", "SIGWINCH",
                "SIGIO",   "SIGPWR",    "SIGSYS",
        };

        if (sig < 1 || sig > (int)ARRAY_SIZE(full))
                return NULL;
        return full[sig - 1];
}
