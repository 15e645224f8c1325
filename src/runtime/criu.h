/* Memory sleep's host check (docs/decisions/0050-memory-sleep.md): whether CRIU can
 * checkpoint and restore processes on this host, and if not, why.
 *
 * criu_probe_host() runs the CRIU binary twice (`criu --version`, `criu check`) with its
 * output captured, once at cellad's start and for `cellad --check`; what the output means
 * is read by the pure criu_version_parse() and criu_check_reason() (unit tests, fuzz
 * target fuzz/criu). The binary is the first of: CELLA_CRIU from the environment when set
 * (a path, or a name looked up in PATH; tests point it at a missing file or a stand-in
 * script to see the failures), CRIU_BUILT_PATH when it is there (the CRIU scripts/criu.sh
 * builds where the system's fails its check), "criu" in PATH. */
#ifndef CELLA_RUNTIME_CRIU_H
#define CELLA_RUNTIME_CRIU_H

#include <stdbool.h>
#include <stddef.h>

#define CRIU_REASON_MAX 400

/* Where scripts/criu.sh puts the CRIU it builds (a link to criu-VERSION/criu). */
#define CRIU_BUILT_PATH "/var/cache/cella/criu/criu"

struct criu_probe {
        bool check_passed;            /* `criu check` exited 0 */
        char binary[256];             /* what was run ("criu", or CELLA_CRIU) */
        char version[32];             /* "3.17.1"; "" when unknown */
        char reason[CRIU_REASON_MAX]; /* why not, when !check_passed: one line */
};

/* The CRIU binary to run: env (CELLA_CRIU) when set and not empty, else CRIU_BUILT_PATH
 * when built says it is there (executable), else "criu" (looked up in PATH). */
const char *criu_binary(const char *env, bool built);

/* "Version: 3.17.1" anywhere in out[0..len) (not NUL-terminated): the version, at most
 * 31 bytes of [0-9A-Za-z.+~-], into ver. Returns 0, or -EINVAL when there is none. */
int criu_version_parse(const char *out, size_t len, char *ver, size_t versz);

/* Why `criu check` failed, from its output out[0..len): the message of its first
 * "Error (file:line): message" line that is not a probe's "exited, status=N", else its
 * last non-empty line, else "". Control bytes become '?', the text is cut to fit sz
 * (at least 1). vvar_vclock says whether this host's processes have a [vvar_vclock]
 * mapping (Linux 6.13 and later); with a vDSO message it adds what that means. Returns
 * the length written. */
size_t criu_check_reason(const char *out, size_t len, bool vvar_vclock, char *reason, size_t sz);

/* Run the CRIU binary's version and check (each bounded by CELLA_CRIU_CHECK_TIMEOUT_MS)
 * and fill p. Never fails: a missing binary, a crash or a timeout is a reason. */
void criu_probe_host(struct criu_probe *p);

/* Where `criu check` passed: "" when version is recent enough for a sandbox on kernel
 * (a uname release): 4.1, or 4.2 on Linux 6.16 and later (decision 0050); else why not,
 * one line into out (sz >= 1). Returns the length written. */
size_t criu_version_reason_for(const char *version, const char *kernel, char *out, size_t sz);
/* The same for this host's kernel. */
void criu_version_reason(const char *version, char *out, size_t sz);

#endif
