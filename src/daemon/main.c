/* cellad: the daemon. Parses options, builds the sandbox table and the HTTP API, runs the
 * loop until SIGINT/SIGTERM. Sandboxes are not stopped on exit (they are not our
 * children's children to kill: the registry and the agent sockets outlive the daemon). */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/statvfs.h>

#include "common/limits.h"
#include "common/log.h"
#include "daemon/api.h"
#include "daemon/http.h"
#include "daemon/sandbox.h"
#include "runtime/container.h"
#include "runtime/host-claim.h"

static void usage(FILE *f)
{
        fprintf(f,
                "usage: cellad [--listen HOST:PORT] [--data-dir DIR] [--images DIR] [--image "
                "NAME]\n"
                "              [--max-sandboxes N] [--pool N] [--image-builder PATH]\n"
                "              [--log-level L] [--image-import-max SIZE]\n"
                "              [--disk-quota required|auto|off] [--disk-limit-override SIZE]\n"
                "              [--preview-domain DOMAIN] [--preview-listen HOST:PORT]\n"
                "              [--network-range CIDR] [--uid-base UID] [--buffer-budget SIZE]\n"
                "              [--max-connections N] [--max-connections-per-client N]\n"
                "              [--disk-overcommit RATIO] [--disk-overcommit-policy warn|refuse]\n"
                "              [--check] [--help]\n"
                "  --listen HOST:PORT   HTTP API address (default 127.0.0.1:7070; port 0: any)\n"
                "  --data-dir DIR       registry and sandboxes (default /var/lib/cella)\n"
                "  --images DIR         images (default DATA-DIR/images)\n"
                "  --image NAME         default image (default \"default\")\n"
                "  --max-sandboxes N    sandboxes at most (default %d)\n"
                "  --pool N             warm pool: sandboxes of the default image built\n"
                "                       ahead, so a new name is a claim (default %d, max %d;\n"
                "                       0: none)\n"
                "  --image-builder PATH build-image.sh (default "
                "DIR-OF-CELLAD/../scripts/build-image.sh)\n"
                "  --log-level L        debug, info, warn, error (default info)\n"
                "  --image-import-max SIZE  an image import's tarball at most (default 4G)\n"
                "  --disk-quota MODE    disk limits by the kernel: required, auto (where the\n"
                "                       host can; default) or off\n"
                "  --disk-limit-override SIZE  every new sandbox's disk limit (e.g. 64M),\n"
                "                       instead of its instance type's (tests, small hosts)\n"
                "  --disk-overcommit RATIO  disk promised to sandboxes (their images' full\n"
                "                       sizes) over the data dir's filesystem size allowed\n"
                "                       before the policy applies (default 1; e.g. 4, 0.5)\n"
                "  --disk-overcommit-policy P  warn (default: log it, /v1/health says so) or\n"
                "                       refuse (new sandboxes answer 507\n"
                "                       INSUFFICIENT_STORAGE past it)\n"
                "  --preview-domain D   preview URLs are http://PORT-ID-TOKEN.D (default\n"
                "                       localhost: browsers resolve it to loopback)\n"
                "  --preview-listen HOST:PORT  also serve preview URLs (only) there; their\n"
                "                       URLs then carry this port\n"
                "  --network-range CIDR addresses of outbound sandboxes, a /30 each by uid\n"
                "                       slot (default: the one this data dir used before,\n"
                "                       else the first of " NET_DEFAULT_RANGE ", 10.64.0.0/16 to\n"
                "                       10.127.0.0/16 that no other cella instance, address\n"
                "                       or route of the host overlaps)\n"
                "  --uid-base UID       first host uid of the sandboxes (a multiple of 65536\n"
                "                       from 0x10000000); they use 0x10000000 uids from it\n"
                "                       (default: as before, else the first free block)\n"
                "  --buffer-budget SIZE memory held for clients at once: buffered exec\n"
                "                       output and JSON bodies (default 256M)\n"
                "  --max-connections N  HTTP connections at once (default %d)\n"
                "  --max-connections-per-client N  of them from one address (default %d)\n"
                "  --check              print what the kernel offers, the network range and\n"
                "                       host uids this data dir would use, and exit\n"
                "The API token is CELLA_TOKEN from the environment; without one cellad\n"
                "listens on loopback addresses only.\n",
                CELLA_DEFAULT_MAX_SANDBOXES, CELLA_DEFAULT_POOL_SIZE, CELLA_POOL_MAX,
                CELLA_HTTP_MAX_CONNECTIONS, CELLA_HTTP_MAX_PER_CLIENT);
}

/* cellad --check: the data dir's filesystem and the disk overcommit policy. The data dir
 * may not exist yet: its nearest existing parent is measured then. */
static void print_disk_check(const char *data_dir, double overcommit, bool refuse)
{
        char dir[PATH_MAX];
        struct statvfs v;
        char *slash;

        snprintf(dir, sizeof(dir), "%s", data_dir);
        while (statvfs(dir, &v) < 0 && (slash = strrchr(dir, '/')) && slash != dir)
                *slash = '\0';
        if (statvfs(dir[0] ? dir : "/", &v) < 0) {
                printf("disk: %s: %s\n", data_dir, strerror(errno));
                return;
        }
        double size = (double)v.f_blocks * v.f_frsize, avail = (double)v.f_bavail * v.f_frsize;
        printf("disk: data dir %s on a filesystem of %.1f GiB, %.1f GiB free; sandbox disks "
               "(sparse) may promise up to %.2f x that, %.1f GiB, then cellad %s "
               "(--disk-overcommit, --disk-overcommit-policy)\n",
               data_dir, size / (1 << 30), avail / (1 << 30), overcommit,
               overcommit * size / (1 << 30), refuse ? "refuses new sandboxes" : "warns");
}

/* "HOST:PORT", "[v6]:PORT". */
static int parse_listen(const char *s, char *host, size_t hostsz, int *port)
{
        const char *colon = strrchr(s, ':');
        const char *h = s;
        size_t hl;
        char *end;
        long p;

        if (!colon)
                return -EINVAL;
        hl = (size_t)(colon - s);
        if (hl >= 2 && s[0] == '[' && s[hl - 1] == ']') {
                h = s + 1;
                hl -= 2;
        }
        if (hl == 0 || hl >= hostsz)
                return -EINVAL;
        memcpy(host, h, hl);
        host[hl] = '\0';
        errno = 0;
        p = strtol(colon + 1, &end, 10);
        if (errno || end == colon + 1 || *end || p < 0 || p > 65535)
                return -EINVAL;
        *port = (int)p;
        return 0;
}

static bool is_loopback(const char *host)
{
        return strncmp(host, "127.", 4) == 0 || strcmp(host, "::1") == 0 ||
               strcmp(host, "localhost") == 0;
}

static uv_loop_t *g_loop;

/* Every client connection is a descriptor: take the hard limit. */
static void raise_fd_limit(void)
{
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= rl.rlim_max)
                return;
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                log_warn("raise the descriptor limit to %llu: %s", (unsigned long long)rl.rlim_max,
                         strerror(errno));
}

/* A positive count up to max from optarg, or 0. */
static unsigned long parse_count(const char *s, unsigned long max)
{
        char *end;
        unsigned long v;

        errno = 0;
        v = strtoul(s, &end, 10);
        if (errno || end == s || *end || s[0] == '-' || v == 0 || v > max)
                return 0;
        return v;
}

static void on_signal(uv_signal_t *h, int signum)
{
        log_info("signal %d: stopping", signum);
        uv_stop(h->loop);
}

static void close_walk(uv_handle_t *h, void *arg)
{
        (void)arg;
        if (!uv_is_closing(h))
                uv_close(h, NULL);
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
                {"listen", required_argument, NULL, 'l'},
                {"data-dir", required_argument, NULL, 'd'},
                {"images", required_argument, NULL, 'i'},
                {"image", required_argument, NULL, 'I'},
                {"max-sandboxes", required_argument, NULL, 'm'},
                {"pool", required_argument, NULL, 'p'},
                {"image-builder", required_argument, NULL, 'b'},
                {"log-level", required_argument, NULL, 'L'},
                {"disk-quota", required_argument, NULL, 'Q'},
                {"disk-limit-override", required_argument, NULL, 'O'},
                {"preview-domain", required_argument, NULL, 'D'},
                {"preview-listen", required_argument, NULL, 'P'},
                {"network-range", required_argument, NULL, 'N'},
                {"uid-base", required_argument, NULL, 'U'},
                {"image-import-max", required_argument, NULL, 'X'},
                {"buffer-budget", required_argument, NULL, 'B'},
                {"max-connections", required_argument, NULL, 'C'},
                {"max-connections-per-client", required_argument, NULL, 'K'},
                {"disk-overcommit", required_argument, NULL, 'V'},
                {"disk-overcommit-policy", required_argument, NULL, 'Y'},
                {"check", no_argument, NULL, 'c'},
                {"help", no_argument, NULL, 'h'},
                {},
        };
        const char *listen = "127.0.0.1:7070", *data_dir = "/var/lib/cella", *images = NULL;
        const char *image = "default", *builder = NULL, *token = getenv("CELLA_TOKEN");
        const char *preview_domain = "localhost", *preview_listen = NULL;
        struct http_server *psrv = NULL;
        unsigned long max_sandboxes = CELLA_DEFAULT_MAX_SANDBOXES;
        unsigned long pool_size = CELLA_DEFAULT_POOL_SIZE;
        enum disk_mode disk_mode = DISK_MODE_AUTO;
        uint64_t disk_override = 0, import_max = 0, budget_bytes = CELLA_HTTP_BUFFER_BUDGET;
        unsigned long max_conns = CELLA_HTTP_MAX_CONNECTIONS,
                      max_per_client = CELLA_HTTP_MAX_PER_CLIENT;
        struct mem_budget budget = {0};
        bool check = false, overcommit_refuse = false;
        double overcommit = CELLA_DISK_OVERCOMMIT_DEFAULT;
        const char *network_range = NULL;
        uint32_t uid_base = 0;
        bool has_uid_base = false;
        char host[256], exe_dir[PATH_MAX - 64], images_buf[PATH_MAX], builder_buf[PATH_MAX];
        char agent_path[PATH_MAX];
        enum log_level level;
        int port, c, r;
        ssize_t n;
        struct cella_error err = {0};
        struct sandbox_table *table = NULL;
        struct http_server *srv = NULL;
        struct api *api = NULL;
        uv_signal_t sigint, sigterm;

        log_set_prefix("cellad");
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                switch (c) {
                case 'D':
                        preview_domain = optarg;
                        break;
                case 'P':
                        preview_listen = optarg;
                        break;
                case 'l':
                        listen = optarg;
                        break;
                case 'd':
                        data_dir = optarg;
                        break;
                case 'i':
                        images = optarg;
                        break;
                case 'I':
                        image = optarg;
                        break;
                case 'm': {
                        char *end;

                        errno = 0;
                        max_sandboxes = strtoul(optarg, &end, 10);
                        if (errno || end == optarg || *end || max_sandboxes == 0 ||
                            max_sandboxes > 1000000) {
                                fprintf(stderr, "cellad: bad --max-sandboxes '%s'\n", optarg);
                                return 2;
                        }
                        break;
                }
                case 'p': {
                        char *end;

                        errno = 0;
                        pool_size = strtoul(optarg, &end, 10);
                        if (errno || end == optarg || *end || optarg[0] == '-' ||
                            pool_size > CELLA_POOL_MAX) {
                                fprintf(stderr, "cellad: bad --pool '%s' (0 to %d)\n", optarg,
                                        CELLA_POOL_MAX);
                                return 2;
                        }
                        break;
                }
                case 'b':
                        builder = optarg;
                        break;
                case 'L':
                        if (log_level_from_name(optarg, &level) < 0) {
                                fprintf(stderr, "cellad: bad --log-level '%s'\n", optarg);
                                return 2;
                        }
                        log_set_level(level);
                        break;
                case 'Q':
                        if (disk_mode_from_name(optarg, &disk_mode) < 0) {
                                fprintf(stderr,
                                        "cellad: bad --disk-quota '%s' (required, auto, "
                                        "off)\n",
                                        optarg);
                                return 2;
                        }
                        break;
                case 'X':
                        if (disk_size_parse(optarg, strlen(optarg), &import_max) < 0 ||
                            import_max == 0 || import_max > (uint64_t)CELLA_IMAGE_IMPORT_MAX) {
                                fprintf(stderr, "cellad: bad --image-import-max '%s'\n", optarg);
                                return 2;
                        }
                        break;
                case 'O':
                        if (disk_size_parse(optarg, strlen(optarg), &disk_override) < 0 ||
                            disk_override < CELLA_DISK_MIN_BYTES ||
                            disk_override > CELLA_DISK_MAX_BYTES) {
                                fprintf(stderr,
                                        "cellad: bad --disk-limit-override '%s' (a size from "
                                        "%lluM, e.g. 64M or 2G)\n",
                                        optarg, CELLA_DISK_MIN_BYTES >> 20);
                                return 2;
                        }
                        break;
                case 'N':
                        network_range = optarg;
                        break;
                case 'U': {
                        char *end;
                        unsigned long long v;

                        errno = 0;
                        v = strtoull(optarg, &end, 0);
                        if (errno || end == optarg || *end || optarg[0] == '-' ||
                            !host_claim_uid_base_ok(v)) {
                                fprintf(stderr,
                                        "cellad: bad --uid-base '%s' (a multiple of 65536 from "
                                        "0x10000000 to %#x)\n",
                                        optarg, HOST_CLAIM_UID_BASE_MAX & ~0xffffu);
                                return 2;
                        }
                        uid_base = (uint32_t)v;
                        has_uid_base = true;
                        break;
                }
                case 'B':
                        if (disk_size_parse(optarg, strlen(optarg), &budget_bytes) < 0 ||
                            budget_bytes < (1u << 20)) {
                                fprintf(stderr,
                                        "cellad: bad --buffer-budget '%s' (a size from "
                                        "1M, e.g. 256M)\n",
                                        optarg);
                                return 2;
                        }
                        break;
                case 'C':
                        max_conns = parse_count(optarg, 1000000);
                        if (!max_conns) {
                                fprintf(stderr, "cellad: bad --max-connections '%s'\n", optarg);
                                return 2;
                        }
                        break;
                case 'K':
                        max_per_client = parse_count(optarg, 1000000);
                        if (!max_per_client) {
                                fprintf(stderr, "cellad: bad --max-connections-per-client '%s'\n",
                                        optarg);
                                return 2;
                        }
                        break;
                case 'V': {
                        char *end = NULL;
                        errno = 0;
                        overcommit = strtod(optarg, &end);
                        if (errno || end == optarg || *end || !(overcommit > 0) ||
                            overcommit > CELLA_DISK_OVERCOMMIT_MAX) {
                                fprintf(stderr,
                                        "cellad: bad --disk-overcommit '%s' (a ratio above 0 and "
                                        "at most %g, e.g. 1 or 4.5)\n",
                                        optarg, CELLA_DISK_OVERCOMMIT_MAX);
                                return 2;
                        }
                        break;
                }
                case 'Y':
                        if (strcmp(optarg, "warn") && strcmp(optarg, "refuse")) {
                                fprintf(stderr,
                                        "cellad: bad --disk-overcommit-policy '%s' (warn or "
                                        "refuse)\n",
                                        optarg);
                                return 2;
                        }
                        overcommit_refuse = strcmp(optarg, "refuse") == 0;
                        break;
                case 'c':
                        check = true;
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                default:
                        usage(stderr);
                        return 2;
                }
        }
        if (optind < argc) {
                usage(stderr);
                return 2;
        }
        if (parse_listen(listen, host, sizeof(host), &port) < 0) {
                fprintf(stderr, "cellad: bad --listen '%s' (HOST:PORT)\n", listen);
                return 2;
        }
        if (strcmp(host, "localhost") == 0)
                snprintf(host, sizeof(host), "127.0.0.1");
        if ((!token || !token[0]) && !is_loopback(host)) {
                fprintf(stderr, "cellad: refusing to listen on %s without CELLA_TOKEN set\n", host);
                return 2;
        }

        n = readlink("/proc/self/exe", exe_dir, sizeof(exe_dir) - 1);
        if (n < 0) {
                fprintf(stderr, "cellad: /proc/self/exe: %s\n", strerror(errno));
                return 1;
        }
        exe_dir[n] = '\0';
        if (strrchr(exe_dir, '/'))
                *strrchr(exe_dir, '/') = '\0';
        snprintf(agent_path, sizeof(agent_path), "%s/cella-init", exe_dir);
        if (!images) {
                snprintf(images_buf, sizeof(images_buf), "%s/images", data_dir);
                images = images_buf;
        }
        if (!builder) {
                snprintf(builder_buf, sizeof(builder_buf), "%s/../scripts/build-image.sh", exe_dir);
                builder = builder_buf;
        }

        signal(SIGPIPE, SIG_IGN);
        raise_fd_limit();
        /* A fixed mmap threshold: large buffers (exec output, bodies) are mapped and go back
         * to the kernel when freed, instead of raising the threshold and staying in the
         * heap (glibc's dynamic threshold). */
        mallopt(M_MMAP_THRESHOLD, 256 * 1024);
        budget.limit = (size_t)budget_bytes;
        if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
                log_warn("PR_SET_CHILD_SUBREAPER: %s", strerror(errno));

        if (check) {
                /* Only the runtime and the choice of range and uids: --check must not touch
                 * the registry or sandboxes, nor claim anything. */
                struct host_claim *claim = NULL;
                struct runtime *rt = NULL;
                char name[32], range[24], ip[16];

                if (sandbox_instance_claim(data_dir, network_range, has_uid_base ? &uid_base : NULL,
                                           true, &claim, &err) < 0) {
                        fprintf(stderr, "cellad: %s\n", err.msg);
                        return 1;
                }
                sandbox_instance_name(data_dir, name, sizeof(name));
                net_addr_format(host_claim_range(claim)->addr, ip, sizeof(ip));
                snprintf(range, sizeof(range), "%s/%u", ip, host_claim_range(claim)->prefix);
                struct runtime_config rcfg = {
                        .agent_path = agent_path,
                        .cgroup_name = name,
                        .disk_mode = disk_mode,
                        .network_range = range,
                        .check_only = true,
                };
                if (runtime_new(&rcfg, &rt, &err) < 0) {
                        fprintf(stderr, "cellad: %s\n", err.msg);
                        host_claim_free(claim);
                        return 1;
                }
                printf("%s\n%s\n", runtime_describe(rt), host_claim_describe(claim));
                print_disk_check(data_dir, overcommit, overcommit_refuse);
                runtime_free(rt);
                host_claim_free(claim);
                return 0;
        }

        g_loop = uv_default_loop();
        {
                struct sandbox_table_config cfg = {
                        .data_dir = data_dir,
                        .images_dir = images,
                        .default_image = image,
                        .agent_path = agent_path,
                        .max_sandboxes = (unsigned)max_sandboxes,
                        .pool_size = (unsigned)pool_size,
                        .disk_mode = disk_mode,
                        .disk_limit_override = disk_override,
                        .network_range = network_range,
                        .disk_overcommit = overcommit,
                        .disk_overcommit_refuse = overcommit_refuse,
                        .uid_base = has_uid_base ? &uid_base : NULL,
                };

                if (sandbox_table_new(g_loop, &cfg, &table, &err) < 0) {
                        fprintf(stderr, "cellad: %s\n", err.msg);
                        return 1;
                }
        }
        {
                struct api_config acfg = {g_loop,  table,          token, images,
                                          builder, preview_domain, 0,     (int64_t)import_max,
                                          &budget};

                if (!preview_domain[0] || strlen(preview_domain) > CELLA_PREVIEW_DOMAIN_MAX ||
                    strpbrk(preview_domain, ":/ ")) {
                        fprintf(stderr, "cellad: bad --preview-domain '%s'\n", preview_domain);
                        return 1;
                }

                if (api_new(&acfg, &api) < 0) {
                        fprintf(stderr, "cellad: out of memory\n");
                        return 1;
                }
        }
        {
                struct http_server_config hcfg = {host,
                                                  port,
                                                  api_handle,
                                                  api,
                                                  api_log_request,
                                                  (unsigned)max_conns,
                                                  (unsigned)max_per_client,
                                                  &budget};

                r = http_server_new(g_loop, &hcfg, &srv, &err);
                if (r < 0) {
                        fprintf(stderr, "cellad: %s\n", err.msg);
                        sandbox_table_free(table);
                        api_free(api);
                        return 1;
                }
                api_set_preview_port(api, http_server_port(srv));
        }
        if (preview_listen) {
                char phost[256];
                int pport;
                struct http_server_config pcfg = {phost,
                                                  0,
                                                  api_handle_preview,
                                                  api,
                                                  api_log_request,
                                                  (unsigned)max_conns,
                                                  (unsigned)max_per_client,
                                                  &budget};

                if (parse_listen(preview_listen, phost, sizeof(phost), &pport) < 0) {
                        fprintf(stderr, "cellad: bad --preview-listen '%s' (HOST:PORT)\n",
                                preview_listen);
                        return 1;
                }
                pcfg.port = pport;
                if (http_server_new(g_loop, &pcfg, &psrv, &err) < 0) {
                        fprintf(stderr, "cellad: %s\n", err.msg);
                        return 1;
                }
                api_set_preview_port(api, http_server_port(psrv));
        }
        uv_signal_init(g_loop, &sigint);
        uv_signal_init(g_loop, &sigterm);
        uv_signal_start(&sigint, on_signal, SIGINT);
        uv_signal_start(&sigterm, on_signal, SIGTERM);

        printf(strchr(host, ':') ? "cellad listening on http://[%s]:%d\n"
                                 : "cellad listening on http://%s:%d\n",
               host, http_server_port(srv));
        if (psrv)
                printf("cellad preview URLs on port %d (*.%s)\n", http_server_port(psrv),
                       preview_domain);
        fflush(stdout);
        log_info("data-dir=%s images=%s image=%s auth=%s", data_dir, images, image,
                 token && token[0] ? "bearer" : "none");

        uv_run(g_loop, UV_RUN_DEFAULT);

        http_server_free(srv);
        http_server_free(psrv);
        api_shutdown(api);
        sandbox_table_free(table);
        uv_close((uv_handle_t *)&sigint, NULL);
        uv_close((uv_handle_t *)&sigterm, NULL);
        uv_walk(g_loop, close_walk, NULL);
        uv_run(g_loop, UV_RUN_DEFAULT);
        api_free(api);
        uv_loop_close(g_loop);
        return 0;
}
