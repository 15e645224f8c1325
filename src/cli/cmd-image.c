/* Images and exposed ports: image build|import|rm|ls, expose, unexpose, ports. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

static void on_build_line(const char *line, size_t len, void *ud)
{
        fwrite(line, 1, len, stderr);
        if (len == 0 || line[len - 1] != '\n')
                fputc('\n', stderr);
}

static const char *fmt_size(uint64_t b, char out[32])
{
        static const char units[] = "BKMGT";
        double v = (double)b;
        int u = 0;

        while (v >= 1024 && u < 4) {
                v /= 1024;
                u++;
        }
        snprintf(out, 32, u ? "%.1f%c" : "%.0f%c", v, units[u]);
        return out;
}

static void print_imported(cella_client *c, json_t *j, const struct cli_args *a)
{
        char sz[32];

        cli_confirm(a, "imported image '%s': %lld layers, %lld entries, %s", a->pos[2],
                    json_integer_value(json_object_get(j, "layers")),
                    json_integer_value(json_object_get(j, "entries")),
                    fmt_size((uint64_t)json_integer_value(json_object_get(j, "sizeBytes")), sz));
}

static void print_images(cella_client *c, json_t *j, const struct cli_args *a)
{
        json_t *im;
        size_t i;

        printf("%-24s %-7s %-9s %s\n", "NAME", "SOURCE", "SIZE", "CREATED");
        json_array_foreach(json_object_get(j, "images"), i, im)
        {
                json_t *sz = json_object_get(im, "sizeBytes");
                char b[32];
                printf("%-24s %-7s %-9s %s\n", cli_str(im, "name"), cli_str(im, "source"),
                       json_is_integer(sz) ? fmt_size((uint64_t)json_integer_value(sz), b) : "-",
                       cli_str(im, "createdAt"));
        }
}

int cmd_image(cella_client *c, struct cli_args *a)
{
        char *text = NULL;
        int r;
        if (a->npos < 2)
                return cli_bad_args(a);
        if (strcmp(a->pos[1], "build") == 0) {
                const char *name = a->npos >= 3 ? a->pos[2] : "default";
                r = cella_image_build_packages(c, name, a->packages, (size_t)a->npackages,
                                               on_build_line, NULL);
                if (r < 0)
                        return cli_api_fail(c, r);
                cli_confirm(a, "built image '%s'", name);
                return 0;
        }
        if (strcmp(a->pos[1], "import") == 0) {
                int fd;

                if (a->npos != 4)
                        return cli_bad_args(a);
                fd = strcmp(a->pos[3], "-") == 0 ? 0 : open(a->pos[3], O_RDONLY | O_CLOEXEC);
                if (fd < 0) {
                        fprintf(stderr, "cella: %s: %s\n", a->pos[3], strerror(errno));
                        return 1;
                }
                if (!a->quiet)
                        fprintf(stderr, "importing %s as '%s'...\n", a->pos[3], a->pos[2]);
                r = cella_image_import(c, a->pos[2], fd, a->replace, &text);
                if (fd > 0)
                        close(fd);
                return cli_answer(c, a, r, &text, print_imported);
        }
        if (strcmp(a->pos[1], "rm") == 0) {
                if (a->npos != 3)
                        return cli_bad_args(a);
                r = cella_image_delete(c, a->pos[2], &text);
                if (r >= 0)
                        cli_confirm(a, "deleted image '%s'", a->pos[2]);
                return cli_answer(c, a, r, &text, NULL);
        }
        if (strcmp(a->pos[1], "ls") != 0)
                return cli_bad_args(a);
        return cli_answer(c, a, cella_image_list(c, &text), &text, print_images);
}

/* After a preview URL, the same request for clients that do not resolve *.localhost (wget,
 * Python, Go, getaddrinfo on glibc): to the address the client reaches the daemon at,
 * with the preview host in the Host header; cellad routes by Host on its API listener
 * (docs/api.md "Exposed ports and preview URLs"). Nothing with --quiet, or when either URL
 * is not http://AUTHORITY/... */
static void print_preview_hint(cella_client *c, const struct cli_args *a, const char *url)
{
        const char *base = cella_client_url(c), *host, *end, *daemon;
        size_t hn, dn;

        if (a->quiet || strncmp(url, "http://", 7) != 0 || strncmp(base, "http://", 7) != 0)
                return;
        host = url + 7;
        end = strchr(host, '/');
        hn = end ? (size_t)(end - host) : strlen(host);
        daemon = base + 7;
        end = strchr(daemon, '/');
        dn = end ? (size_t)(end - daemon) : strlen(daemon);
        if (hn == 0 || dn == 0 || memchr(host, '\'', hn) || memchr(daemon, '\'', dn))
                return;
        printf("  without DNS: curl -H 'Host: %.*s' http://%.*s/\n", (int)hn, host, (int)dn,
               daemon);
}

static int parse_port_arg(const char *s)
{
        char *end;
        long v;

        errno = 0;
        v = strtol(s, &end, 10);
        if (errno || end == s || *end || v < 1 || v > 65535)
                return -1;
        return (int)v;
}

static void print_exposed(cella_client *c, json_t *j, const struct cli_args *a)
{
        printf("%s\n", cli_str(j, "url"));
        print_preview_hint(c, a, cli_str(j, "url"));
}

static void print_ports(cella_client *c, json_t *j, const struct cli_args *a)
{
        json_t *p;
        size_t i;

        printf("%-6s %-7s %-16s %s\n", "PORT", "STATUS", "NAME", "URL");
        json_array_foreach(json_object_get(j, "ports"), i, p)
        {
                printf("%-6lld %-7s %-16s %s\n",
                       (long long)json_integer_value(json_object_get(p, "port")),
                       cli_str(p, "status"), cli_str(p, "name"), cli_str(p, "url"));
        }
}

/* expose NAME PORT, unexpose NAME PORT, ports NAME */
int cmd_ports(cella_client *c, struct cli_args *a)
{
        const char *cmd = a->pos[0];
        char *text = NULL;
        int port = a->npos >= 3 ? parse_port_arg(a->pos[2]) : 0;
        int r;

        if (strcmp(cmd, "expose") == 0) {
                if (a->npos != 3 || port < 0)
                        return cli_bad_args(a);
                r = cella_port_expose(c, a->pos[1], port, a->port_name, a->port_token, &text);
                return cli_answer(c, a, r, &text, print_exposed);
        }
        if (strcmp(cmd, "unexpose") == 0) {
                if (a->npos != 3 || port < 0)
                        return cli_bad_args(a);
                r = cella_port_unexpose(c, a->pos[1], port);
                if (r < 0)
                        return cli_api_fail(c, r);
                cli_confirm(a, "unexposed port %d", port);
                return 0;
        }
        if (a->npos != 2)
                return cli_bad_args(a);
        return cli_answer(c, a, cella_port_list(c, a->pos[1], &text), &text, print_ports);
}
