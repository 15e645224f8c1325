/* cellad: the daemon. Parses options, builds the sandbox table and the HTTP API, runs the
 * loop until SIGINT/SIGTERM. Sandboxes are not stopped on exit (they are not our
 * children's children to kill: the registry and the agent sockets outlive the daemon). */
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/statvfs.h>
#include <sys/un.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/macros.h"
#include "common/startup.h"
#include "daemon/api-decode.h"
#include "daemon/api.h"
#include "daemon/backup.h"
#include "daemon/cluster.h"
#include "daemon/forward.h"
#include "daemon/http.h"
#include "daemon/metrics.h"
#include "daemon/sandbox.h"
#include "runtime/container.h"
#include "runtime/criu.h"
#include "runtime/host-claim.h"
#include "runtime/host-limits.h"

static void usage(FILE *f)
{
        fprintf(f,
                "usage: cellad [--listen HOST:PORT|unix:PATH]... [--data-dir DIR] [--images DIR]\n"
                "              [--image NAME] [--unix-mode MODE] [--unix-group GROUP]\n"
                "              [--max-sandboxes N] [--pool N] [--image-builder PATH] [--console "
                "DIR]\n"
                "              [--log-level L] [--image-import-max SIZE]\n"
                "              [--disk-quota required|auto|off] [--disk-limit-override SIZE]\n"
                "              [--preview-domain DOMAIN] [--preview-listen HOST:PORT]\n"
                "              [--network-range CIDR] [--uid-base UID] [--buffer-budget SIZE]\n"
                "              [--max-connections N] [--max-connections-per-client N]\n"
                "              [--disk-overcommit RATIO] [--disk-overcommit-policy warn|refuse]\n"
                "              [--backup-store s3://BUCKET?endpoint=URL] [--check] [--help]\n"
                "              [--cluster etcd=URL[,URL...] --node NAME --advertise URL]\n"
                "  --listen HOST:PORT   HTTP API address (default 127.0.0.1:7070; port 0: any)\n"
                "  --listen unix:PATH   the API on a unix socket at PATH (beside a HOST:PORT\n"
                "                       also given, else instead of TCP); its clients need no\n"
                "                       token: the socket's mode and group say who may connect\n"
                "  --unix-mode MODE     the unix socket's mode (octal, default 0660)\n"
                "  --unix-group GROUP   the unix socket's group (name or gid; default root's)\n"
                "  --data-dir DIR       registry and sandboxes (default /var/lib/cella)\n"
                "  --images DIR         images (default DATA-DIR/images)\n"
                "  --image NAME         default image (default \"default\")\n"
                "  --max-sandboxes N    sandboxes at most (default %d, max %u; beyond %u\n"
                "                       the daemon claims a larger block of host uids)\n"
                "  --pool N             warm pool: sandboxes of the default image built\n"
                "                       ahead, so a new name is a claim (default %d, max %d;\n"
                "                       0: none)\n"
                "  --image-builder PATH build-image.sh (default "
                "DIR-OF-CELLAD/../scripts/build-image.sh)\n"
                "  --console DIR        the web console's files, served at /console/ (default\n"
                "                       DIR-OF-CELLAD/../console/dist; \"\": none)\n"
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
                "  --backup-store URL   where backups are kept: s3://BUCKET[/PREFIX]?endpoint=\n"
                "                       http(s)://HOST:PORT[&region=R], credentials from\n"
                "                       AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,\n"
                "                       AWS_SESSION_TOKEN (default: DATA-DIR/backups)\n"
                "  --uid-base UID       first host uid of the sandboxes (a multiple of 65536\n"
                "                       from 0x10000000); they use 0x10000000 uids from it\n"
                "                       (default: as before, else the first free block)\n"
                "  --buffer-budget SIZE memory held for clients at once: buffered exec\n"
                "                       output and JSON bodies (default 256M)\n"
                "  --max-connections N  HTTP connections at once (default %d)\n"
                "  --max-connections-per-client N  of them from one address (default %d)\n"
                "  --cluster etcd=URL[,URL...]  be a node of the cluster whose etcd answers\n"
                "                       there (docs/cluster.md); needs --node, --advertise\n"
                "  --node NAME          this node's name in the cluster (a-z, 0-9, '-')\n"
                "  --advertise URL      this node's API as the other nodes reach it\n"
                "  --cluster-secret-file F  the secret node-to-node requests are signed\n"
                "                       with (mode 0600; needed unless on loopback only)\n"
                "  --drain              ask the cluster node at --listen to hand its sandboxes\n"
                "                       over (backup, name released) and stop, and wait\n"
                "  --cluster-backup-every DURATION  back up each active sandbox's /workspace\n"
                "                       to the shared store this often (default: never)\n"
                "  --check              print what the kernel offers, the network range and\n"
                "                       host uids this data dir would use, and exit\n"
                "The API token is CELLA_TOKEN from the environment; without one cellad\n"
                "listens on loopback addresses only.\n",
                CELLA_DEFAULT_MAX_SANDBOXES, CELLA_UID_SLOTS_MAX, CELLA_UID_SLOTS,
                CELLA_DEFAULT_POOL_SIZE, CELLA_POOL_MAX, CELLA_HTTP_MAX_CONNECTIONS,
                CELLA_HTTP_MAX_PER_CLIENT);
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

/* Why sleepMode "memory" falls back to files here (decision 0050): what the host check
 * found; "" where CRIU passes its check (cellad then checkpoints sleeping sandboxes). A
 * CRIU that passes but is older than the kernel needs (4.1; 4.2 on Linux 6.16 and later,
 * whose TCP sockets it cannot dump before) is a reason too. */
static void memory_sleep_reason(char *out, size_t outsz, char *version, size_t versz)
{
        struct criu_probe p;

        criu_probe_host(&p);
        snprintf(version, versz, "%s", p.version);
        if (p.check_passed)
                criu_version_reason(p.version, out, outsz);
        else
                snprintf(out, outsz, "%s", p.reason);
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

/* What the command line says, then what cellad derives from it (paths, host, port). */
struct options {
        const char *listen, *unix_path, *unix_group, *data_dir, *images, *image, *builder, *token;
        const char *preview_domain, *preview_listen, *network_range, *backup_store;
        const char *cluster, *node, *advertise; /* --cluster etcd=..., --node, --advertise */
        const char *cluster_secret_file;
        const char *console; /* --console; NULL: the default below */
        unsigned long max_sandboxes, pool_size, max_conns, max_per_client;
        enum disk_mode disk_mode;
        uint64_t disk_override, import_max, budget_bytes;
        bool check, overcommit_refuse, has_uid_base, drain;
        bool tcp_given; /* a --listen HOST:PORT was given */
        unsigned long unix_mode;
        int64_t backup_every_ms; /* --cluster-backup-every; 0: none */
        double overcommit;
        uint32_t uid_base;
        /* derived by check_options */
        char host[256];
        int port;
        bool no_tcp; /* only --listen unix:PATH: no TCP listener */
        gid_t unix_gid;
        char exe_dir[PATH_MAX - 64], images_buf[PATH_MAX], builder_buf[PATH_MAX];
        char agent_path[PATH_MAX];
        char console_buf[PATH_MAX];
        char archiver_path[PATH_MAX];
};

/* What runs: the loop and the objects built on it, freed in reverse by shut_down. */
struct daemon {
        uv_loop_t *loop;
        struct mem_budget budget;
        struct sandbox_table *table;
        struct backups *backups;
        struct cluster *cluster;
        struct forward *forward;
        struct api *api;
        struct http_server *srv, *psrv, *usrv;
        uv_signal_t sigint, sigterm;
};

/* "cellad: bad --OPT 'ARG' (HINT)" on stderr; returns 2, main's status for it. */
static int bad_value(const char *opt, const char *arg, const char *hint, ...) _printf_(3, 4);
static int bad_value(const char *opt, const char *arg, const char *hint, ...)
{
        va_list ap;

        fprintf(stderr, "cellad: bad --%s '%s'", opt, arg);
        if (hint) {
                fputs(" (", stderr);
                va_start(ap, hint);
                vfprintf(stderr, hint, ap);
                va_end(ap);
                fputc(')', stderr);
        }
        fputc('\n', stderr);
        return 2;
}

/* An unsigned number in [min, max] from s into *ret; false if s is not one. */
static bool parse_ulong(const char *s, unsigned long min, unsigned long max, unsigned long *ret)
{
        char *end;
        unsigned long v;

        errno = 0;
        v = strtoul(s, &end, 10);
        if (errno || end == s || *end || s[0] == '-' || v < min || v > max)
                return false;
        *ret = v;
        return true;
}

static int parse_uid_base(struct options *o, const char *arg)
{
        char *end;
        unsigned long long v;

        errno = 0;
        v = strtoull(arg, &end, 0);
        if (errno || end == arg || *end || arg[0] == '-' || !host_claim_uid_base_ok(v))
                return bad_value("uid-base", arg, "a multiple of 65536 from 0x10000000 to %#x",
                                 HOST_CLAIM_UID_BASE_MAX & ~0xffffu);
        o->uid_base = (uint32_t)v;
        o->has_uid_base = true;
        return 0;
}

static int parse_overcommit(struct options *o, const char *arg)
{
        char *end = NULL;

        errno = 0;
        o->overcommit = strtod(arg, &end);
        if (errno || end == arg || *end || !(o->overcommit > 0) ||
            o->overcommit > CELLA_DISK_OVERCOMMIT_MAX)
                return bad_value("disk-overcommit", arg,
                                 "a ratio above 0 and at most %g, e.g. 1 or 4.5",
                                 CELLA_DISK_OVERCOMMIT_MAX);
        return 0;
}

/* The options with a size for a value. */
static int parse_size_option(struct options *o, int c, const char *arg)
{
        uint64_t v;
        int r = disk_size_parse(arg, strlen(arg), &v);

        switch (c) {
        case 'X':
                if (r < 0 || v == 0 || v > (uint64_t)CELLA_IMAGE_IMPORT_MAX)
                        return bad_value("image-import-max", arg, NULL);
                o->import_max = v;
                break;
        case 'O':
                if (r < 0 || v < CELLA_DISK_MIN_BYTES || v > CELLA_DISK_MAX_BYTES)
                        return bad_value("disk-limit-override", arg,
                                         "a size from %lluM, e.g. 64M or 2G",
                                         CELLA_DISK_MIN_BYTES >> 20);
                o->disk_override = v;
                break;
        default: /* 'B' */
                if (r < 0 || v < (1u << 20))
                        return bad_value("buffer-budget", arg, "a size from 1M, e.g. 256M");
                o->budget_bytes = v;
                break;
        }
        return 0;
}

/* One option of cellad's table (startup_parse_options answers --help and --log-level). */
static int on_option(int c, const char *arg, void *ud)
{
        struct options *o = ud;

        switch (c) {
        case 'D':
                o->preview_domain = arg;
                break;
        case 'P':
                o->preview_listen = arg;
                break;
        case 'l':
                if (strncmp(arg, "unix:", 5) == 0) {
                        if (arg[5] != '/' ||
                            strlen(arg + 5) >= sizeof(((struct sockaddr_un *)0)->sun_path))
                                return bad_value("listen", arg,
                                                 "unix:PATH: an absolute path, %zu bytes at most",
                                                 sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
                        o->unix_path = arg + 5;
                } else {
                        o->listen = arg;
                        o->tcp_given = true;
                }
                break;
        case 'u': {
                char *end;

                errno = 0;
                o->unix_mode = strtoul(arg, &end, 8);
                if (errno || end == arg || *end || o->unix_mode > 0777)
                        return bad_value("unix-mode", arg, "octal, 0 to 0777");
                break;
        }
        case 'g':
                o->unix_group = arg;
                break;
        case 'd':
                o->data_dir = arg;
                break;
        case 'i':
                o->images = arg;
                break;
        case 'I':
                o->image = arg;
                break;
        case 'b':
                o->builder = arg;
                break;
        case 'w':
                o->console = arg;
                break;
        case 'N':
                o->network_range = arg;
                break;
        case 'S':
                if (strlen(arg) > CELLA_BACKUP_STORE_SPEC_MAX)
                        return bad_value("backup-store", arg, "too long");
                o->backup_store = arg;
                break;
        case 'J':
                o->drain = true;
                break;
        case 'E': {
                json_t *v = json_string(arg);
                struct cella_error err = {0};
                int r = v ? api_parse_duration(v, &o->backup_every_ms, &err) : -1;

                json_decref(v);
                if (r < 0)
                        return bad_value("cluster-backup-every", arg,
                                         "a duration like 30s, 10m, 2h, 1d (1 s to 30 days)");
                break;
        }
        case 'c':
                o->check = true;
                break;
        case 'G':
                if (cluster_spec_parse(arg, &o->cluster) < 0)
                        return bad_value("cluster", arg, "etcd=http://HOST:PORT[,...]");
                break;
        case 'W':
                if (!cluster_node_name_is_valid(arg))
                        return bad_value("node", arg, "1 to 63 of a-z, 0-9 and '-'");
                o->node = arg;
                break;
        case 'A':
                if (strlen(arg) > CELLA_CLUSTER_URL_MAX ||
                    (strncmp(arg, "http://", 7) != 0 && strncmp(arg, "https://", 8) != 0))
                        return bad_value("advertise", arg, "an http:// or https:// URL");
                o->advertise = arg;
                break;
        case 'Z':
                o->cluster_secret_file = arg;
                break;
        case 'm':
                if (!parse_ulong(arg, 1, CELLA_UID_SLOTS_MAX, &o->max_sandboxes))
                        return bad_value("max-sandboxes", arg, "1 to %u", CELLA_UID_SLOTS_MAX);
                break;
        case 'p':
                if (!parse_ulong(arg, 0, CELLA_POOL_MAX, &o->pool_size))
                        return bad_value("pool", arg, "0 to %d", CELLA_POOL_MAX);
                break;
        case 'C':
                if (!parse_ulong(arg, 1, 1000000, &o->max_conns))
                        return bad_value("max-connections", arg, NULL);
                break;
        case 'K':
                if (!parse_ulong(arg, 1, 1000000, &o->max_per_client))
                        return bad_value("max-connections-per-client", arg, NULL);
                break;
        case 'Q':
                if (disk_mode_from_name(arg, &o->disk_mode) < 0)
                        return bad_value("disk-quota", arg, "required, auto, off");
                break;
        case 'X':
        case 'O':
        case 'B':
                return parse_size_option(o, c, arg);
        case 'U':
                return parse_uid_base(o, arg);
        case 'V':
                return parse_overcommit(o, arg);
        case 'Y':
                if (strcmp(arg, "warn") && strcmp(arg, "refuse"))
                        return bad_value("disk-overcommit-policy", arg, "warn or refuse");
                o->overcommit_refuse = strcmp(arg, "refuse") == 0;
                break;
        }
        return 0;
}

/* Step 1: the command line into *o. -1 to go on, else main's exit status. */
static int parse_options(int argc, char **argv, struct options *o)
{
        static const struct option opts[] = {
                {"listen", required_argument, NULL, 'l'},
                {"unix-mode", required_argument, NULL, 'u'},
                {"unix-group", required_argument, NULL, 'g'},
                {"data-dir", required_argument, NULL, 'd'},
                {"images", required_argument, NULL, 'i'},
                {"image", required_argument, NULL, 'I'},
                {"max-sandboxes", required_argument, NULL, 'm'},
                {"pool", required_argument, NULL, 'p'},
                {"image-builder", required_argument, NULL, 'b'},
                {"console", required_argument, NULL, 'w'},
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
                {"backup-store", required_argument, NULL, 'S'},
                {"cluster", required_argument, NULL, 'G'},
                {"node", required_argument, NULL, 'W'},
                {"advertise", required_argument, NULL, 'A'},
                {"cluster-secret-file", required_argument, NULL, 'Z'},
                {"drain", no_argument, NULL, 'J'},
                {"cluster-backup-every", required_argument, NULL, 'E'},
                {"check", no_argument, NULL, 'c'},
                {"help", no_argument, NULL, 'h'},
                {},
        };
        const struct startup_cmdline cl = {"cellad", opts, usage, on_option, o};

        *o = (struct options){
                .listen = "127.0.0.1:7070",
                .unix_mode = 0660,
                .data_dir = "/var/lib/cella",
                .image = "default",
                .token = getenv("CELLA_TOKEN"),
                .preview_domain = "localhost",
                .max_sandboxes = CELLA_DEFAULT_MAX_SANDBOXES,
                .pool_size = CELLA_DEFAULT_POOL_SIZE,
                .max_conns = CELLA_HTTP_MAX_CONNECTIONS,
                .max_per_client = CELLA_HTTP_MAX_PER_CLIENT,
                .disk_mode = DISK_MODE_AUTO,
                .budget_bytes = CELLA_HTTP_BUFFER_BUDGET,
                .overcommit = CELLA_DISK_OVERCOMMIT_DEFAULT,
        };
        return startup_parse_options(&cl, argc, argv);
}

/* Step 2: the listen address and the token, then the paths that default from the data dir
 * and from where cellad is. -1 to go on, else main's exit status. */
static int check_options(struct options *o)
{
        ssize_t n;
        char *slash;

        if (o->backup_every_ms && !o->cluster) {
                fprintf(stderr, "cellad: --cluster-backup-every needs --cluster\n");
                return 2;
        }
        if (!!o->cluster != !!o->node || !!o->cluster != !!o->advertise) {
                fprintf(stderr, "cellad: --cluster, --node and --advertise go together\n");
                return 2;
        }
        if (parse_listen(o->listen, o->host, sizeof(o->host), &o->port) < 0) {
                fprintf(stderr, "cellad: bad --listen '%s' (HOST:PORT)\n", o->listen);
                return 2;
        }
        if (strcmp(o->host, "localhost") == 0)
                snprintf(o->host, sizeof(o->host), "127.0.0.1");
        o->no_tcp = o->unix_path && !o->tcp_given;
        if ((o->unix_group || o->unix_mode != 0660) && !o->unix_path) {
                fprintf(stderr,
                        "cellad: --unix-mode and --unix-group go with --listen unix:PATH\n");
                return 2;
        }
        o->unix_gid = (gid_t)-1;
        if (o->unix_group) {
                struct group *g = getgrnam(o->unix_group);
                char *end;
                unsigned long gid;

                errno = 0;
                gid = strtoul(o->unix_group, &end, 10);
                if (g)
                        o->unix_gid = g->gr_gid;
                else if (!errno && end != o->unix_group && !*end && gid < (gid_t)-1)
                        o->unix_gid = (gid_t)gid;
                else
                        return bad_value("unix-group", o->unix_group, "a group name or gid");
        }
        if (o->no_tcp && (o->cluster || o->drain || o->preview_listen)) {
                fprintf(stderr, "cellad: --cluster, --drain and --preview-listen need a "
                                "--listen HOST:PORT\n");
                return 2;
        }
        if (o->cluster_secret_file && !o->cluster) {
                fprintf(stderr, "cellad: --cluster-secret-file goes with --cluster\n");
                return 2;
        }
        /* Forwarded requests carry their caller's principal: beyond loopback, only a
         * secret shared by the nodes makes them trustworthy (decision 0056). */
        if (o->cluster && !o->cluster_secret_file && !is_loopback(o->host)) {
                fprintf(stderr, "cellad: --cluster on %s needs --cluster-secret-file\n", o->host);
                return 2;
        }
        if ((!o->token || !o->token[0]) && !o->no_tcp && !is_loopback(o->host)) {
                fprintf(stderr, "cellad: refusing to listen on %s without CELLA_TOKEN set\n",
                        o->host);
                return 2;
        }
        n = readlink("/proc/self/exe", o->exe_dir, sizeof(o->exe_dir) - 1);
        if (n < 0) {
                fprintf(stderr, "cellad: /proc/self/exe: %s\n", strerror(errno));
                return 1;
        }
        o->exe_dir[n] = '\0';
        if ((slash = strrchr(o->exe_dir, '/')))
                *slash = '\0';
        snprintf(o->agent_path, sizeof(o->agent_path), "%s/cella-init", o->exe_dir);
        snprintf(o->archiver_path, sizeof(o->archiver_path), "%s/cella-archive", o->exe_dir);
        if (!o->images) {
                snprintf(o->images_buf, sizeof(o->images_buf), "%s/images", o->data_dir);
                o->images = o->images_buf;
        }
        if (!o->builder) {
                snprintf(o->builder_buf, sizeof(o->builder_buf), "%s/../scripts/build-image.sh",
                         o->exe_dir);
                o->builder = o->builder_buf;
        }
        if (!o->console) {
                snprintf(o->console_buf, sizeof(o->console_buf), "%s/../console/dist", o->exe_dir);
                o->console = o->console_buf;
        }
        return -1;
}

/* The process itself: signals, descriptors, memory, orphans. */
static void set_up_process(const struct options *o)
{
        static const int ignored[] = {SIGPIPE};
        uint64_t want, have;

        startup_ignore_signals(ignored, ARRAY_SIZE(ignored));
        startup_raise_fd_limit();
        /* --max-sandboxes may need more than the hard limit (decision 0060): with
         * CAP_SYS_RESOURCE it is raised, up to fs.nr_open. */
        want = host_limits_fds((unsigned)o->max_sandboxes);
        have = host_limits_raise_nofile(want);
        if (have < want)
                log_warn("descriptor limit %llu: %lu sandboxes need %llu, about %llu fit (raise "
                         "the hard limit; cellad --check says what else is too low)",
                         (unsigned long long)have, o->max_sandboxes, (unsigned long long)want,
                         (unsigned long long)host_limits_fit(have));
        /* A fixed mmap threshold: large buffers (exec output, bodies) are mapped and go back
         * to the kernel when freed, instead of raising the threshold and staying in the
         * heap (glibc's dynamic threshold). */
        mallopt(M_MMAP_THRESHOLD, 256 * 1024);
        /* Setting it also fixes the trim threshold at glibc's 128 KiB: a buffer of a few
         * hundred KiB freed at the heap's top (an SSE output event of a 240 KiB frame)
         * gave its pages back and the next one faulted them in again, cleared (decision
         * 0058). The heap keeps this much free at its top instead. */
        mallopt(M_TRIM_THRESHOLD, CELLA_MALLOC_TRIM);
        startup_child_subreaper();
}

/* cellad --check: only the runtime and the choice of range and uids; it must not touch the
 * registry or sandboxes, nor claim anything. Returns main's exit status. */
static int run_check(const struct options *o)
{
        struct cella_error err = {0};
        struct host_claim *claim = NULL;
        struct runtime *rt = NULL;
        char name[32], range[24], ip[16];

        /* what --max-sandboxes needs of the kernel, whatever the claim finds */
        host_limits_report((unsigned)o->max_sandboxes, stdout);
        fflush(stdout);
        if (sandbox_instance_claim(o->data_dir, o->network_range,
                                   o->has_uid_base ? &o->uid_base : NULL,
                                   (unsigned)o->max_sandboxes, true, &claim, &err) < 0) {
                fprintf(stderr, "cellad: %s\n", err.msg);
                return 1;
        }
        sandbox_instance_name(o->data_dir, name, sizeof(name));
        net_addr_format(host_claim_range(claim)->addr, ip, sizeof(ip));
        snprintf(range, sizeof(range), "%s/%u", ip, host_claim_range(claim)->prefix);
        struct runtime_config rcfg = {
                .agent_path = o->agent_path,
                .cgroup_name = name,
                .disk_mode = o->disk_mode,
                .network_range = range,
                .check_only = true,
                .data_dir = o->data_dir,
        };
        if (runtime_new(&rcfg, &rt, &err) < 0) {
                fprintf(stderr, "cellad: %s\n", err.msg);
                host_claim_free(claim);
                return 1;
        }
        printf("%s\n%s\n", runtime_describe(rt), host_claim_describe(claim));
        print_disk_check(o->data_dir, o->overcommit, o->overcommit_refuse);
        {
                char why[CRIU_REASON_MAX], ver[32];

                memory_sleep_reason(why, sizeof(why), ver, sizeof(ver));
                if (why[0])
                        printf("memory sleep (sleepMode \"memory\", fork with memory): "
                               "unavailable, "
                               "sandboxes sleep with their files only: %s\n",
                               why);
                else
                        printf("memory sleep (sleepMode \"memory\", fork with memory): "
                               "available, criu %s checkpoints sleeping sandboxes and forks "
                               "running ones with their processes\n",
                               ver);
        }
        runtime_free(rt);
        host_claim_free(claim);
        return 0;
}

/* Step 3: the sandbox table. sandbox_table_new claims the instance (host-claim: network
 * range, uid block), opens the registry (store) and starts the warm pool. */
static int start_table(struct daemon *d, struct options *o)
{
        struct cella_error err = {0};
        char memsleep[CRIU_REASON_MAX], criu_ver[32];

        memory_sleep_reason(memsleep, sizeof(memsleep), criu_ver, sizeof(criu_ver));
        if (memsleep[0])
                log_info("memory sleep unavailable (sleepMode \"memory\" sleeps with files): %s",
                         memsleep);
        else
                log_info("memory sleep available: criu %s checkpoints sandboxes with sleepMode "
                         "\"memory\"",
                         criu_ver);
        struct sandbox_table_config cfg = {
                .data_dir = o->data_dir,
                .images_dir = o->images,
                .default_image = o->image,
                .agent_path = o->agent_path,
                .max_sandboxes = (unsigned)o->max_sandboxes,
                .pool_size = (unsigned)o->pool_size,
                .disk_mode = o->disk_mode,
                .disk_limit_override = o->disk_override,
                .network_range = o->network_range,
                .disk_overcommit = o->overcommit,
                .disk_overcommit_refuse = o->overcommit_refuse,
                .uid_base = o->has_uid_base ? &o->uid_base : NULL,
                .memory_sleep_unavailable = memsleep,
        };

        if (sandbox_table_new(d->loop, &cfg, &d->table, &err) < 0) {
                fprintf(stderr, "cellad: %s\n", err.msg);
                return -1;
        }
        if (backups_new(d->loop, o->backup_store, o->data_dir, o->archiver_path, &d->backups,
                        &err) < 0) {
                fprintf(stderr, "cellad: --backup-store: %s\n", err.msg);
                return -1;
        }
        log_info("backups: %s", backups_store_describe(d->backups));
        if (o->cluster) {
                struct cluster_config ccfg = {o->cluster,    o->node,
                                              o->advertise,  o->images,
                                              CELLA_VERSION, (unsigned)o->max_sandboxes,
                                              d->backups,    o->backup_every_ms};

                if (cluster_new(d->loop, &ccfg, d->table, &d->cluster, &err) < 0) {
                        fprintf(stderr, "cellad: %s\n", err.msg);
                        return -1;
                }
                log_info("cluster: node '%s' (%s) on etcd %s", o->node, o->advertise, o->cluster);
        }
        if (o->cluster_secret_file) {
                unsigned char secret[CELLA_CLUSTER_SECRET_MAX];
                struct forward_config fcfg = {
                        .cluster = d->cluster, .secret = secret, .default_image = o->image};
                int r = forward_secret_read(o->cluster_secret_file, secret, sizeof(secret),
                                            &fcfg.secret_len, &err);

                if (r >= 0)
                        r = forward_new(&fcfg, &d->forward);
                explicit_bzero(secret, sizeof(secret));
                if (r < 0) {
                        fprintf(stderr, "cellad: %s\n",
                                err.msg[0] ? err.msg : "--cluster-secret-file: out of memory");
                        return -1;
                }
                log_info("cluster: forwarding to the nodes owning names, placing new ones");
        } else if (o->cluster) {
                log_warn("cluster: no --cluster-secret-file: requests for names owned elsewhere "
                         "are refused (409), new names placed here");
        }
        return 0;
}

/* Step 4: the HTTP API over the table. */
static int start_api(struct daemon *d, const struct options *o)
{
        struct api_config acfg = {d->loop,    d->table,          o->token,   o->images,
                                  o->builder, o->preview_domain, 0,          (int64_t)o->import_max,
                                  &d->budget, d->backups,        d->cluster, d->forward,
                                  o->console};

        if (!o->preview_domain[0] || strlen(o->preview_domain) > CELLA_PREVIEW_DOMAIN_MAX ||
            strpbrk(o->preview_domain, ":/ ")) {
                fprintf(stderr, "cellad: bad --preview-domain '%s'\n", o->preview_domain);
                return -1;
        }
        if (api_new(&acfg, &d->api) < 0) {
                fprintf(stderr, "cellad: out of memory\n");
                return -1;
        }
        return 0;
}

/* The http servers' before_write: the claims made since the last commit are written
 * before any answer leaves (decision 0059). */
static void commit_claims(void *userdata)
{
        sandbox_table_commit(userdata);
}

/* Step 5: the API's listener, and the preview listener when asked. */
static int listen_http(struct daemon *d, const struct options *o)
{
        struct cella_error err = {0};
        struct http_server_config hcfg = {o->host,
                                          o->port,
                                          api_handle,
                                          d->api,
                                          api_log_request,
                                          (unsigned)o->max_conns,
                                          (unsigned)o->max_per_client,
                                          &d->budget,
                                          commit_claims,
                                          d->table,
                                          NULL,
                                          0,
                                          (gid_t)-1};
        char phost[256];

        if (o->unix_path) {
                hcfg.unix_path = o->unix_path;
                hcfg.unix_mode = (unsigned)o->unix_mode;
                hcfg.unix_gid = o->unix_gid;
                if (http_server_new(d->loop, &hcfg, &d->usrv, &err) < 0) {
                        fprintf(stderr, "cellad: %s\n", err.msg);
                        return -1;
                }
                hcfg.unix_path = NULL;
        }
        if (o->no_tcp)
                return 0;
        if (http_server_new(d->loop, &hcfg, &d->srv, &err) < 0) {
                fprintf(stderr, "cellad: %s\n", err.msg);
                return -1;
        }
        api_set_preview_port(d->api, http_server_port(d->srv));
        api_set_self_address(d->api, o->host, http_server_port(d->srv));
        if (!o->preview_listen)
                return 0;
        hcfg.host = phost;
        hcfg.on_request = api_handle_preview;
        if (parse_listen(o->preview_listen, phost, sizeof(phost), &hcfg.port) < 0) {
                fprintf(stderr, "cellad: bad --preview-listen '%s' (HOST:PORT)\n",
                        o->preview_listen);
                return -1;
        }
        if (http_server_new(d->loop, &hcfg, &d->psrv, &err) < 0) {
                fprintf(stderr, "cellad: %s\n", err.msg);
                return -1;
        }
        api_set_preview_port(d->api, http_server_port(d->psrv));
        return 0;
}

static void on_signal(uv_signal_t *h, int signum)
{
        log_info("signal %d: stopping", signum);
        uv_stop(h->loop);
}

/* Step 6: say where we listen, then run the loop until SIGINT or SIGTERM. */
static void run(struct daemon *d, const struct options *o)
{
        uv_signal_init(d->loop, &d->sigint);
        uv_signal_init(d->loop, &d->sigterm);
        uv_signal_start(&d->sigint, on_signal, SIGINT);
        uv_signal_start(&d->sigterm, on_signal, SIGTERM);

        if (d->usrv)
                printf("cellad listening on unix:%s\n", o->unix_path);
        if (d->srv)
                printf(strchr(o->host, ':') ? "cellad listening on http://[%s]:%d\n"
                                            : "cellad listening on http://%s:%d\n",
                       o->host, http_server_port(d->srv));
        if (d->psrv)
                printf("cellad preview URLs on port %d (*.%s)\n", http_server_port(d->psrv),
                       o->preview_domain);
        fflush(stdout);
        log_info("data-dir=%s images=%s image=%s auth=%s", o->data_dir, o->images, o->image,
                 o->token && o->token[0] ? "bearer" : "none");

        uv_run(d->loop, UV_RUN_DEFAULT);
}

static void close_walk(uv_handle_t *h, void *arg)
{
        (void)arg;
        if (!uv_is_closing(h))
                uv_close(h, NULL);
}

/* Step 7: listeners, preview connections, table, then every handle left; the API last
 * (closing handles may still call into it). */
static void shut_down(struct daemon *d)
{
        http_server_free(d->srv);
        http_server_free(d->psrv);
        http_server_free(d->usrv);
        if (d->api)
                api_shutdown(d->api);
        cluster_free(d->cluster); /* before the table: pending claims answer with an error */
        forward_free(d->forward); /* after: its etcd requests have answered */
        sandbox_table_free(d->table);
        uv_walk(d->loop, close_walk, NULL);
        uv_run(d->loop, UV_RUN_DEFAULT);
        api_free(d->api);
        backups_free(d->backups);
        uv_loop_close(d->loop);
}

int main(int argc, char **argv)
{
        static struct options o;
        static struct daemon d;
        int rc;

        metrics_init();
        if ((rc = parse_options(argc, argv, &o)) >= 0 || (rc = check_options(&o)) >= 0)
                return rc;
        if (o.drain)
                return cluster_drain_client(o.host, o.port, o.token);
        set_up_process(&o);
        /* libcurl (etcd, S3, the MCP engine's clients) and its TLS library are set up here,
         * on the main thread, before any thread exists (curl_global_init is the process's). */
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
                log_error("libcurl: global init failed");
                return 1;
        }
        d.budget.limit = (size_t)o.budget_bytes;
        if (o.check)
                return run_check(&o);

        d.loop = uv_default_loop();
        if (start_table(&d, &o) < 0)
                return 1;
        if (start_api(&d, &o) < 0 || listen_http(&d, &o) < 0) {
                /* What was built is undone as on a signal; sandboxes outlive us either way. */
                shut_down(&d);
                return 1;
        }
        run(&d, &o);
        shut_down(&d);
        return 0;
}
