/* See startup.h. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include "common/log.h"
#include "common/startup.h"

int startup_log_level(const char *prog, const char *arg)
{
        enum log_level level;

        if (log_level_from_name(arg, &level) < 0) {
                fprintf(stderr, "%s: bad --log-level '%s'\n", prog, arg);
                return 2;
        }
        log_set_level(level);
        return 0;
}

int startup_parse_options(const struct startup_cmdline *cl, int argc, char **argv)
{
        int c, rc;

        log_set_prefix(cl->prog);
        while ((c = getopt_long(argc, argv, "h", cl->opts, NULL)) != -1) {
                switch (c) {
                case 'h':
                        cl->usage(stdout);
                        return 0;
                case 'L':
                        rc = startup_log_level(cl->prog, optarg);
                        break;
                case '?':
                case ':':
                        cl->usage(stderr);
                        return 2;
                default:
                        rc = cl->on_option(c, optarg, cl->ud);
                        break;
                }
                if (rc != 0)
                        return rc;
        }
        if (optind < argc) {
                cl->usage(stderr);
                return 2;
        }
        return -1;
}

void startup_ignore_signals(const int *sigs, size_t n)
{
        struct sigaction sa;

        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = SIG_IGN;
        for (size_t i = 0; i < n; i++)
                sigaction(sigs[i], &sa, NULL);
}

void startup_raise_fd_limit(void)
{
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= rl.rlim_max)
                return;
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                log_warn("raise the descriptor limit to %llu: %s", (unsigned long long)rl.rlim_max,
                         strerror(errno));
}

int startup_child_subreaper(void)
{
        if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0) {
                int r = -errno;

                log_warn("PR_SET_CHILD_SUBREAPER: %s", strerror(-r));
                return r;
        }
        return 0;
}
