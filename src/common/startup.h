/* What the programs' main()s share at start-up (cellad, cella-init, cella): the option loop
 * with its --help and --log-level, the signals a program ignores, the descriptor limit and
 * the child subreaper. Each is a small function a main() calls in its own order. */
#ifndef CELLA_STARTUP_H
#define CELLA_STARTUP_H

#include <getopt.h>
#include <stddef.h>
#include <stdio.h>

/* A program's command line. opts is getopt_long's table; its 'h' entry (--help) and 'L'
 * entry (--log-level, when present) are answered here, every other one goes to
 * on_option. */
struct startup_cmdline {
        const char *prog; /* "cellad": prefix of messages and of the log; borrowed */
        const struct option *opts;
        void (*usage)(FILE *f);
        /* One option and its value (NULL for a flag): 0, or the exit status for main (2
         * after writing "PROG: bad --OPT ..." to stderr). */
        int (*on_option)(int c, const char *arg, void *ud);
        void *ud;
};

/* Names the log after cl->prog and runs getopt_long over argv. Returns -1 when the program
 * goes on, else the exit status main returns: 0 after --help (usage on stdout), 2 for an
 * unknown option, a bad value or a stray word (usage on stderr, or on_option's message). */
int startup_parse_options(const struct startup_cmdline *cl, int argc, char **argv);

/* The value of a --log-level: "PROG: bad --log-level 'x'" on stderr and 2, else 0 with the
 * level set. */
int startup_log_level(const char *prog, const char *arg);

/* Each of sigs[0..n) is ignored (SIG_IGN), e.g. SIGPIPE: a write to a closed peer is an
 * EPIPE, not a death. */
void startup_ignore_signals(const int *sigs, size_t n);

/* The soft descriptor limit raised to the hard one (every client connection is a
 * descriptor); a failure is logged and otherwise ignored. */
void startup_raise_fd_limit(void);

/* Orphans of our descendants come back to us (PR_SET_CHILD_SUBREAPER): 0 or -errno,
 * logged as a warning. */
int startup_child_subreaper(void);

#endif
