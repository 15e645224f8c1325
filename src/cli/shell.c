/* cella shell (see shell.h). With a terminal on stdin, it is put in raw mode, restored on
 * every way out (the shell's exit, an error, a signal: signals are taken through a
 * signalfd, never handled asynchronously), and SIGWINCH becomes a resize. Without one,
 * stdin is passed on as it is, and its end becomes a ^D (so a shell reading a script
 * from a pipe ends where the script does). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <termios.h>
#include <unistd.h>

#include "cli/shell.h"

struct shell {
        bool raw;
        struct termios saved;
        int exit_code;
        bool write_failed;
};

static void on_output(const void *data, size_t len, void *ud)
{
        struct shell *sh = ud;
        const char *p = data;

        while (len > 0 && !sh->write_failed) {
                ssize_t n = write(STDOUT_FILENO, p, len);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        sh->write_failed = true;
                        break;
                }
                p += n;
                len -= (size_t)n;
        }
}

static void on_exit_msg(int code, void *ud)
{
        ((struct shell *)ud)->exit_code = code;
}

static void term_size(unsigned *cols, unsigned *rows)
{
        struct winsize ws;

        *cols = 80;
        *rows = 24;
        if ((ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0 ||
             ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0) &&
            ws.ws_col > 0 && ws.ws_row > 0) {
                *cols = ws.ws_col > 1000 ? 1000 : ws.ws_col;
                *rows = ws.ws_row > 1000 ? 1000 : ws.ws_row;
        }
}

static void raw_on(struct shell *sh)
{
        struct termios t;

        if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &sh->saved) < 0)
                return;
        t = sh->saved;
        cfmakeraw(&t);
        if (tcsetattr(STDIN_FILENO, TCSADRAIN, &t) == 0)
                sh->raw = true;
}

static void raw_off(struct shell *sh)
{
        if (sh->raw)
                tcsetattr(STDIN_FILENO, TCSADRAIN, &sh->saved);
        sh->raw = false;
}

int cli_shell(cella_client *c, const char *sandbox, const char *session)
{
        static const struct cella_pty_events ev = {
                .on_output = on_output,
                .on_exit = on_exit_msg,
        };
        struct cella_pty_options o = {.session_id = session};
        struct shell sh = {.exit_code = -1};
        bool stdin_open = true;
        sigset_t sigs, saved_mask;
        cella_pty *p = NULL;
        int sfd, r, rc = 1, killed_by = 0;

        term_size(&o.cols, &o.rows);
        sigemptyset(&sigs);
        sigaddset(&sigs, SIGWINCH);
        sigaddset(&sigs, SIGINT);
        sigaddset(&sigs, SIGTERM);
        sigaddset(&sigs, SIGHUP);
        sigaddset(&sigs, SIGQUIT);
        sigaddset(&sigs, SIGPIPE);
        sigprocmask(SIG_BLOCK, &sigs, &saved_mask);
        sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
        r = cella_pty_open(c, sandbox, &o, &p);
        if (r < 0) {
                fprintf(stderr, "cella: %s: %s\n",
                        cella_client_error_code(c)[0] ? cella_client_error_code(c) : "error",
                        cella_client_error_message(c));
                goto out;
        }
        raw_on(&sh);
        /* what came with the handshake */
        r = cella_pty_process(p, &ev, &sh);
        for (; r == CELLA_OK;) {
                struct pollfd pf[3] = {
                        {.fd = cella_pty_fd(p),
                         .events = (short)(POLLIN | (cella_pty_want_write(p) ? POLLOUT : 0))},
                        {.fd = stdin_open ? STDIN_FILENO : -1, .events = POLLIN},
                        {.fd = sfd, .events = POLLIN},
                };

                if (poll(pf, 3, -1) < 0 && errno != EINTR)
                        break;
                if (pf[2].revents & POLLIN) {
                        struct signalfd_siginfo si;

                        while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                                if (si.ssi_signo == SIGWINCH) {
                                        unsigned cols, rows;

                                        term_size(&cols, &rows);
                                        cella_pty_resize(p, cols, rows);
                                } else if (si.ssi_signo != SIGPIPE) {
                                        killed_by = (int)si.ssi_signo;
                                }
                        }
                        if (killed_by)
                                break;
                }
                if (pf[1].revents & (POLLIN | POLLHUP | POLLERR)) {
                        char buf[4096];
                        ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));

                        if (n > 0) {
                                cella_pty_send(p, buf, (size_t)n);
                        } else if (n == 0 || errno != EINTR) {
                                stdin_open = false;
                                if (!sh.raw)
                                        cella_pty_send(p, "\x04", 1);
                        }
                }
                if (pf[0].revents) {
                        r = cella_pty_process(p, &ev, &sh);
                        if (r != CELLA_OK || sh.write_failed)
                                break;
                }
        }
        raw_off(&sh);
        if (killed_by) {
                rc = 128 + killed_by;
        } else if (sh.exit_code >= 0) {
                rc = sh.exit_code;
        } else {
                fprintf(stderr, "cella: the terminal connection ended without an exit status\n");
                rc = 1;
        }
out:
        raw_off(&sh);
        cella_pty_close(p);
        if (sfd >= 0)
                close(sfd);
        sigprocmask(SIG_SETMASK, &saved_mask, NULL);
        return rc;
}
