/* cella-init: PID 1 of a sandbox and the agent cellad talks to (docs/protocol.md).
 *
 * fd 3 is the listening socket cellad bound for us; stdin/stdout/stderr go to a log file.
 * As PID 1 we reap every child (the agent's SIGCHLD handler waits for any pid), cannot be
 * killed by the signals a process in the sandbox could send, and are not dumpable.
 *
 * The runtime execs us from a memfd, whose name the kernel gives the process as its comm
 * ("memfd:cella-ini", truncated): main() names the process cella-init again, so that `ps`
 * and /proc/1/comm inside the sandbox say what PID 1 is. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <uv.h>

#include "agent/agent.h"
#include "common/log.h"
#include "common/macros.h"
#include "common/startup.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

static void usage(FILE *f)
{
        fprintf(f, "usage: cella-init [--no-cgroup] [--log-level debug|info|warn|error]\n"
                   "                  [--proc-log-dir DIR]\n"
                   "  Serves the cella agent protocol on the listening socket at fd 3.\n"
                   "  --no-cgroup        never create per-command cgroups (host-mode tests)\n"
                   "  --log-level L      log verbosity on stderr (default info)\n"
                   "  --run-dir DIR      the agent's own files, session scripts and FIFOs\n"
                   "                     (default /run/cella)\n"
                   "  --proc-log-dir DIR background process logs (default\n"
                   "                     /var/log/cella/processes)\n");
}

/* Every inherited descriptor from 3 up becomes close-on-exec, so commands get none. */
static void cloexec_inherited(void)
{
        if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
                return;
        for (int fd = 3; fd < 4096; fd++) {
                int flags = fcntl(fd, F_GETFD);

                if (flags >= 0)
                        fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
        }
}

static int on_option(int c, const char *arg, void *ud)
{
        struct agent_options *ao = ud;

        switch (c) {
        case 'C':
                ao->no_cgroup = true;
                break;
        case 'R':
                ao->run_dir = arg;
                break;
        case 'P':
                ao->proc_log_dir = arg;
                break;
        }
        return 0;
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
                {"no-cgroup", no_argument, NULL, 'C'},
                {"log-level", required_argument, NULL, 'L'},
                {"run-dir", required_argument, NULL, 'R'},
                {"proc-log-dir", required_argument, NULL, 'P'},
                {"help", no_argument, NULL, 'h'},
                {},
        };
        /* As PID 1 these reach us from inside the sandbox: none may stop the agent. */
        static const int ignored[] = {SIGTERM, SIGINT, SIGHUP, SIGPIPE};
        struct agent_options ao = {.listen_fd = 3};
        const struct startup_cmdline cl = {"cella-init", opts, usage, on_option, &ao};
        struct stat st;
        struct agent *agent = NULL;
        uv_loop_t loop;
        int r;

        r = startup_parse_options(&cl, argc, argv);
        if (r >= 0)
                return r;

        prctl(PR_SET_NAME, "cella-init", 0, 0, 0);
        prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
        /* Outside a pid namespace (host-mode tests) orphans still come back to us. */
        startup_child_subreaper();
        startup_ignore_signals(ignored, ARRAY_SIZE(ignored));
        setvbuf(stderr, NULL, _IOLBF, 0);
        cloexec_inherited();

        /* Check fd 3 before the loop opens descriptors that could take its number. */
        if (fstat(ao.listen_fd, &st) < 0 || !S_ISSOCK(st.st_mode)) {
                log_error("fd %d is not the listening socket cellad hands us", ao.listen_fd);
                return 1;
        }
        r = uv_loop_init(&loop);
        if (r < 0) {
                log_error("event loop: %s", uv_strerror(r));
                return 1;
        }
        r = agent_new(&loop, &ao, &agent);
        if (r < 0) {
                log_error("listen on fd %d: %s", ao.listen_fd, uv_strerror(r));
                return 1;
        }
        log_info("ready (pid %d)", (int)getpid());
        uv_run(&loop, UV_RUN_DEFAULT);
        /* Only reached if every handle closed, which does not happen while we listen. */
        agent_free(agent);
        uv_run(&loop, UV_RUN_DEFAULT);
        uv_loop_close(&loop);
        return 0;
}
