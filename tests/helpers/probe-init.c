/* probe-init: a stand-in for cella-init in the runtime's live tests. Runs as PID 1 of a
 * container, accepts connections on fd 3 (the agent socket), reads one command line per
 * connection and answers with one JSON object, then closes the connection:
 *
 *   facts            isolation facts (ids, maps, hostname, interfaces, mounts, caps...)
 *   oom <MB>         fork a child that allocates and touches MB; report how it ended
 *   pids <N>         try to fork N sleeping children; report how many forks succeeded
 *   subcgroup        make /sys/fs/cgroup/cmd/1 and move a sleeping child into it
 *   read <path>      try to open and read a file; report errno and owner
 *   exit <code>      exit PID 1
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/sched.h>
#include <unistd.h>

static char *slurp(const char *path)
{
        static char buf[65536];
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return NULL;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n < 0)
                return NULL;
        buf[n] = '\0';
        return buf;
}

static json_t *str_or_null(const char *s)
{
        return s ? json_string(s) : json_null();
}

static json_t *status_field(const char *name)
{
        char *s = slurp("/proc/self/status");
        if (!s)
                return json_null();
        size_t nl = strlen(name);
        for (char *line = s; line && *line;) {
                char *eol = strchr(line, '\n');
                if (eol)
                        *eol = '\0';
                if (strncmp(line, name, nl) == 0 && line[nl] == ':') {
                        char *v = line + nl + 1;
                        while (*v == ' ' || *v == '\t')
                                v++;
                        return json_string(v);
                }
                line = eol ? eol + 1 : NULL;
        }
        return json_null();
}

static int errno_of(int r)
{
        return r < 0 ? errno : 0;
}

static json_t *facts(void)
{
        json_t *o = json_object();
        char host[256] = "";
        struct stat st;

        json_object_set_new(o, "pid", json_integer(getpid()));
        json_object_set_new(o, "uid", json_integer(getuid()));
        json_object_set_new(o, "gid", json_integer(getgid()));
        json_object_set_new(o, "uid_map", str_or_null(slurp("/proc/self/uid_map")));
        json_object_set_new(o, "gid_map", str_or_null(slurp("/proc/self/gid_map")));
        gethostname(host, sizeof(host) - 1);
        json_object_set_new(o, "hostname", json_string(host));
        json_object_set_new(o, "etc_hostname", str_or_null(slurp("/etc/hostname")));
        json_object_set_new(o, "etc_hosts", str_or_null(slurp("/etc/hosts")));

        /* Interfaces from /proc/net/dev (lines after the two headers). */
        json_t *ifs = json_array();
        char *dev = slurp("/proc/net/dev");
        int lineno = 0;
        for (char *line = dev; line && *line; lineno++) {
                char *eol = strchr(line, '\n');
                if (eol)
                        *eol = '\0';
                if (lineno >= 2) {
                        char *colon = strchr(line, ':');
                        if (colon) {
                                *colon = '\0';
                                while (*line == ' ')
                                        line++;
                                json_array_append_new(ifs, json_string(line));
                        }
                }
                line = eol ? eol + 1 : NULL;
        }
        json_object_set_new(o, "interfaces", ifs);
        int s = socket(AF_INET, SOCK_DGRAM, 0);
        struct ifreq ifr = {0};
        memcpy(ifr.ifr_name, "lo", 3);
        json_object_set_new(o, "lo_up",
                            json_boolean(s >= 0 && ioctl(s, SIOCGIFFLAGS, &ifr) == 0 &&
                                         (ifr.ifr_flags & IFF_UP)));
        if (s >= 0)
                close(s);

        json_object_set_new(o, "host_work_visible", json_boolean(access("/work/main", F_OK) == 0));
        json_object_set_new(o, "host_images_visible",
                            json_boolean(access("/var/lib/cella/images", F_OK) == 0));
        json_object_set_new(o, "mount_errno",
                            json_integer(errno_of(mount("tmpfs", "/mnt", "tmpfs", 0, NULL))));
        json_object_set_new(o, "unshare_user_errno",
                            json_integer(errno_of(unshare(CLONE_NEWUSER))));
        {
                /* Raw clone with CLONE_NEWUSER, and clone3 (flags in memory). */
                long r = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
                if (r == 0)
                        _exit(0);
                if (r > 0)
                        waitpid((pid_t)r, NULL, 0);
                json_object_set_new(o, "clone_newuser_errno", json_integer(r < 0 ? errno : 0));
                struct clone_args ca = {.exit_signal = SIGCHLD};
                r = syscall(SYS_clone3, &ca, sizeof(ca));
                if (r == 0)
                        _exit(0);
                if (r > 0)
                        waitpid((pid_t)r, NULL, 0);
                json_object_set_new(o, "clone3_errno", json_integer(r < 0 ? errno : 0));
                char exe[256] = "";
                ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
                exe[n > 0 ? n : 0] = '\0';
                json_object_set_new(o, "exe", json_string(exe));
                int fd = open("/proc/self/exe", O_WRONLY | O_CLOEXEC);
                json_object_set_new(o, "exe_write_errno", json_integer(fd < 0 ? errno : 0));
                if (fd >= 0)
                        close(fd);
        }
        json_object_set_new(o, "personality_query", json_integer(personality(0xffffffff)));
        json_object_set_new(o, "personality_set_errno",
                            json_integer(errno_of(personality(PER_LINUX32))));
        json_object_set_new(o, "cap_eff", status_field("CapEff"));
        json_object_set_new(o, "cap_bnd", status_field("CapBnd"));
        json_object_set_new(o, "cap_amb", status_field("CapAmb"));
        json_object_set_new(o, "cap_inh", status_field("CapInh"));
        json_object_set_new(o, "seccomp", status_field("Seccomp"));
        json_object_set_new(o, "sig_ign", status_field("SigIgn"));
        json_object_set_new(o, "sig_blk", status_field("SigBlk"));
        json_object_set_new(o, "no_new_privs", status_field("NoNewPrivs"));
        json_object_set_new(o, "oom_score_adj", str_or_null(slurp("/proc/self/oom_score_adj")));
        json_object_set_new(o, "cgroup", str_or_null(slurp("/proc/self/cgroup")));

        bool owned = stat("/usr/bin", &st) == 0 && st.st_uid == 0 && st.st_gid == 0 &&
                     stat("/etc/passwd", &st) == 0 && st.st_uid == 0;
        json_object_set_new(o, "lower_root_owned", json_boolean(owned));

        int fd = open("/workspace/probe.txt", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        json_object_set_new(o, "workspace_writable",
                            json_boolean(fd >= 0 && write(fd, "w", 1) == 1));
        if (fd >= 0)
                close(fd);
        fd = open("/etc/probe-copy-up", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        json_object_set_new(o, "etc_writable", json_boolean(fd >= 0));
        if (fd >= 0)
                close(fd);
        /* copy-up of an existing image file */
        fd = open("/etc/debian_version", O_WRONLY | O_APPEND | O_CLOEXEC);
        json_object_set_new(o, "copy_up", json_boolean(fd >= 0 && write(fd, "", 0) == 0));
        if (fd >= 0)
                close(fd);
        fd = open("/tmp/probe", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        json_object_set_new(o, "tmp_writable", json_boolean(fd >= 0));
        if (fd >= 0)
                close(fd);

        /* /dev/shm: a directory of the /dev tmpfs (the same filesystem) */
        fd = open("/dev/shm/probe", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        json_object_set_new(o, "shm_writable", json_boolean(fd >= 0));
        if (fd >= 0)
                close(fd);
        struct stat dev_st, shm_st;
        json_object_set_new(o, "shm_on_dev",
                            json_boolean(stat("/dev", &dev_st) == 0 &&
                                         stat("/dev/shm", &shm_st) == 0 &&
                                         dev_st.st_dev == shm_st.st_dev));
        /* the block devices' mask: empty, nothing can be made in it */
        {
                int entries = -1;
                DIR *d = opendir("/sys/devices/virtual/block");
                if (d) {
                        entries = 0;
                        struct dirent *e;
                        while ((e = readdir(d)))
                                if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
                                        entries++;
                        closedir(d);
                }
                json_object_set_new(o, "block_mask_entries", json_integer(entries));
                int mk = mkdir("/sys/devices/virtual/block/probe", 0755);
                json_object_set_new(o, "block_mask_mkdir_errno", json_integer(mk < 0 ? errno : 0));
                int cf = open("/sys/devices/virtual/block/probe", O_WRONLY | O_CREAT | O_CLOEXEC,
                              0600);
                json_object_set_new(o, "block_mask_create_errno", json_integer(cf < 0 ? errno : 0));
                if (cf >= 0)
                        close(cf);
        }

        char cwd[256] = "";
        json_object_set_new(o, "cwd", json_string(getcwd(cwd, sizeof(cwd)) ? cwd : ""));
        json_object_set_new(o, "kcore_masked",
                            json_boolean(stat("/proc/kcore", &st) == 0 ? S_ISCHR(st.st_mode)
                                                                       : errno == ENOENT));
        json_object_set_new(o, "keys_masked",
                            json_boolean(stat("/proc/keys", &st) == 0 && S_ISCHR(st.st_mode)));
        fd = open("/proc/sys/net/ipv4/ip_forward", O_WRONLY | O_CLOEXEC);
        json_object_set_new(o, "proc_sys_write_errno", json_integer(fd < 0 ? errno : 0));
        if (fd >= 0)
                close(fd);
        json_object_set_new(o, "dev_null",
                            json_boolean(stat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode)));
        json_object_set_new(o, "dev_ptmx",
                            json_boolean(lstat("/dev/ptmx", &st) == 0 && S_ISLNK(st.st_mode)));
        json_object_set_new(o, "devpts", json_boolean(stat("/dev/pts/ptmx", &st) == 0));
        int sub = mkdir("/sys/fs/cgroup/probe-sub", 0755);
        json_object_set_new(o, "cgroup_delegated", json_boolean(sub == 0));
        if (sub == 0)
                rmdir("/sys/fs/cgroup/probe-sub");
        json_object_set_new(o, "mountinfo", str_or_null(slurp("/proc/self/mountinfo")));

        json_t *fds = json_array();
        for (int i = 0; i < 64; i++)
                if (fcntl(i, F_GETFD) >= 0)
                        json_array_append_new(fds, json_integer(i));
        json_object_set_new(o, "fds", fds);
        return o;
}

static json_t *oom(long mb)
{
        pid_t pid = fork();
        if (pid == 0) {
                int fd = open("/proc/self/oom_score_adj", O_WRONLY);
                if (fd >= 0) {
                        if (write(fd, "0", 1) < 0)
                                _exit(3);
                        close(fd);
                }
                size_t len = (size_t)mb << 20;
                char *p =
                        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (p == MAP_FAILED)
                        _exit(2);
                for (size_t i = 0; i < len; i += 4096)
                        p[i] = 1;
                _exit(0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        json_t *o = json_object();
        json_object_set_new(o, "killed_by",
                            json_integer(WIFSIGNALED(status) ? WTERMSIG(status) : 0));
        json_object_set_new(o, "exit", json_integer(WIFEXITED(status) ? WEXITSTATUS(status) : -1));
        return o;
}

static json_t *pids(long n)
{
        long ok = 0;
        pid_t kids[4096];
        int err = 0;
        for (long i = 0; i < n && i < 4096; i++) {
                pid_t p = fork();
                if (p == 0) {
                        pause();
                        _exit(0);
                }
                if (p < 0) {
                        err = errno;
                        break;
                }
                kids[ok++] = p;
        }
        for (long i = 0; i < ok; i++) {
                kill(kids[i], SIGKILL);
                waitpid(kids[i], NULL, 0);
        }
        json_t *o = json_object();
        json_object_set_new(o, "forked", json_integer(ok));
        json_object_set_new(o, "errno", json_integer(err));
        return o;
}

/* Like the agent: a nested sub-cgroup holding a forked, sleeping process. */
static json_t *subcgroup(void)
{
        json_t *o = json_object();
        int ok = mkdir("/sys/fs/cgroup/cmd", 0755) == 0 && mkdir("/sys/fs/cgroup/cmd/1", 0755) == 0;
        pid_t pid = fork();
        if (pid == 0) {
                /* Not holding the connection open. */
                close_range(3, ~0U, 0);
                for (;;)
                        pause();
        }
        if (ok && pid > 0) {
                char v[32];
                int fd = open("/sys/fs/cgroup/cmd/1/cgroup.procs", O_WRONLY | O_CLOEXEC);
                int n = snprintf(v, sizeof(v), "%d", (int)pid);
                ok = fd >= 0 && write(fd, v, (size_t)n) == n;
                if (fd >= 0)
                        close(fd);
        }
        json_object_set_new(o, "ok", json_boolean(ok && pid > 0));
        json_object_set_new(o, "errno", json_integer(ok ? 0 : errno));
        json_object_set_new(o, "cgroup_procs",
                            str_or_null(slurp("/sys/fs/cgroup/cmd/1/cgroup.procs")));
        return o;
}

static json_t *read_path(const char *path)
{
        json_t *o = json_object();
        struct stat st;
        int r = stat(path, &st);
        json_object_set_new(o, "stat_errno", json_integer(r < 0 ? errno : 0));
        json_object_set_new(o, "uid", json_integer(r == 0 ? (json_int_t)st.st_uid : -1));
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        json_object_set_new(o, "open_errno", json_integer(fd < 0 ? errno : 0));
        if (fd >= 0)
                close(fd);
        return o;
}

int main(void)
{
        /* Reap children that are not waited for explicitly (we are PID 1). */
        for (;;) {
                int c = accept4(3, NULL, NULL, SOCK_CLOEXEC);
                if (c < 0) {
                        if (errno == EINTR)
                                continue;
                        return 1;
                }
                char line[512];
                ssize_t n = read(c, line, sizeof(line) - 1);
                if (n <= 0) {
                        close(c);
                        continue;
                }
                line[n] = '\0';
                line[strcspn(line, "\n")] = '\0';
                json_t *ans;
                if (strcmp(line, "facts") == 0)
                        ans = facts();
                else if (strncmp(line, "oom ", 4) == 0)
                        ans = oom(strtol(line + 4, NULL, 10));
                else if (strncmp(line, "pids ", 5) == 0)
                        ans = pids(strtol(line + 5, NULL, 10));
                else if (strcmp(line, "subcgroup") == 0)
                        ans = subcgroup();
                else if (strncmp(line, "read ", 5) == 0)
                        ans = read_path(line + 5);
                else if (strncmp(line, "exit ", 5) == 0)
                        return (int)strtol(line + 5, NULL, 10);
                else
                        ans = json_pack("{s:s}", "error", "unknown command");
                char *text = json_dumps(ans, JSON_COMPACT);
                json_decref(ans);
                if (text) {
                        size_t len = strlen(text), off = 0;
                        while (off < len) {
                                ssize_t w = write(c, text + off, len - off);
                                if (w <= 0)
                                        break;
                                off += (size_t)w;
                        }
                        free(text);
                }
                close(c);
                while (waitpid(-1, NULL, WNOHANG) > 0)
                        ;
        }
}
