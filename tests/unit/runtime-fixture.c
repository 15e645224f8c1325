/* See runtime-fixture.h. */
#include <elf.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/limits.h"
#include "runtime-fixture.h"

/* An ELF64 executable without an interpreter. */
static bool is_static_elf(const char *path)
{
        Elf64_Ehdr eh;
        Elf64_Phdr ph;
        bool ok = true;
        int fd = open(path, O_RDONLY | O_CLOEXEC);

        if (fd < 0)
                return false;
        if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) ||
            memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64) {
                close(fd);
                return false;
        }
        for (unsigned i = 0; ok && i < eh.e_phnum; i++) {
                off_t off = (off_t)eh.e_phoff + (off_t)i * eh.e_phentsize;

                if (pread(fd, &ph, sizeof(ph), off) != (ssize_t)sizeof(ph) ||
                    ph.p_type == PT_INTERP)
                        ok = false;
        }
        close(fd);
        return ok;
}

int runtime_fixture_setup(struct runtime_fixture *f)
{
        const char *probe = getenv("CELLA_TEST_PROBE");
        struct cella_error err = {0};

        f->probe = probe && *probe ? probe : CELLA_BUILD_DIR "/tests/probe-init";
        f->rt = NULL;
        if (geteuid() != 0) {
                print_message("SKIP: %s need root\n", f->what);
                return 0;
        }
        if (access(RUNTIME_FIXTURE_ROOTFS "/usr/bin", F_OK) < 0) {
                print_message("SKIP: default image missing at " RUNTIME_FIXTURE_ROOTFS "\n");
                return 0;
        }
        if (access(f->probe, X_OK) < 0) {
                print_message("SKIP: %s not built\n", f->probe);
                return 0;
        }
        if (!is_static_elf(f->probe)) {
                print_message("SKIP: %s is not a static executable (sanitizer build?)\n", f->probe);
                return 0;
        }
        struct runtime_config cfg = {.agent_path = f->probe, .cgroup_name = f->cgroup_name};
        if (runtime_new(&cfg, &f->rt, &err) < 0) {
                print_message("runtime_new: %s\n", err.msg);
                return -1;
        }
        print_message("runtime: %s\n", runtime_describe(f->rt));
        assert_int_equal(cgroup_detect_host(&f->layout), 0);
        /* leftovers of an interrupted earlier run: the after-restart path (no pidfd) */
        for (size_t i = 0; i < f->n_ids; i++)
                if (runtime_container_destroy(f->rt, f->ids[i], NULL, &err) < 0)
                        print_message("cleanup %s: %s\n", f->ids[i], err.msg);
        return mkdtemp(f->tmpdir) ? 0 : -1;
}

void runtime_fixture_teardown(struct runtime_fixture *f)
{
        char p[CELLA_PATH_MAX + 64];

        if (!f->rt)
                return;
        for (size_t i = 0; i < f->n_ids; i++)
                runtime_container_destroy(f->rt, f->ids[i], NULL, NULL);
        /* plain removal: the files are owned by the test's uid ranges */
        pid_t pid = fork();
        if (pid == 0) {
                execl("/bin/rm", "rm", "-rf", "--", f->tmpdir, (char *)NULL);
                _exit(127);
        }
        waitpid(pid, NULL, 0);
        /* the shared parents of the test's cgroups */
        snprintf(p, sizeof(p), "%s/%s", f->layout.v2_root, f->cgroup_name);
        rmdir(p);
        for (int c = 0; c < _CGROUP_V1_MAX; c++) {
                if (f->layout.mode != CGROUP_MODE_HYBRID || !f->layout.v1_root[c][0])
                        continue;
                snprintf(p, sizeof(p), "%s/%s", f->layout.v1_root[c], f->cgroup_name);
                rmdir(p);
        }
        runtime_free(f->rt);
        f->rt = NULL;
}

bool runtime_fixture_cgroup_left(const struct runtime_fixture *f, const char *id)
{
        char p[CELLA_PATH_MAX + 128];

        cgroup_v2_dir(&f->layout, f->cgroup_name, id, p, sizeof(p));
        if (access(p, F_OK) == 0)
                return true;
        for (int c = 0; c < _CGROUP_V1_MAX; c++) {
                if (f->layout.mode != CGROUP_MODE_HYBRID || !f->layout.v1_root[c][0])
                        continue;
                snprintf(p, sizeof(p), "%s/%s/%s", f->layout.v1_root[c], f->cgroup_name, id);
                if (access(p, F_OK) == 0)
                        return true;
        }
        return false;
}
