/* Fuzz the git request checks and the credential scrubber (src/common/git-url.h).
 *
 * Invariants: git_url_redact() always NUL-terminates within outsz (NUL bytes of the input
 * are copied like any other), never grows its input,
 * is idempotent (a redacted text has no user information left to remove), and leaves no
 * '@' in the authority of any "scheme://" it writes. An accepted URL is NUL-free, has no
 * control character, space or backslash, does not start with '-' and fits the limit; if
 * it is a scheme URL, its redacted form is the scheme followed by the host and port. An accepted branch starts with none of "-/." and has no control
 * character, space or "..". A repository name is one path component, never "." or "..".
 * git_clone_error_code() answers one of the git codes for any text. */
#include <stdlib.h>
#include <string.h>

#include "common/git-url.h"
#include "common/limits.h"
#include "fuzz.h"

static bool is_auth_end(char c)
{
        return c == '/' || c == '?' || c == '#' || c == '"' || c == '\'' || c == '`' || c == ' ' ||
               c == '<' || c == '>' || (unsigned char)c < 0x20 || c == 0x7f;
}

static void check_redacted(const char *s, size_t n)
{
        char again[512];
        size_t m;

        FUZZ_CHECK(strlen(s) == n);
        for (const char *p = strstr(s, "://"); p; p = strstr(p + 1, "://"))
                for (const char *q = p + 3; *q && !is_auth_end(*q); q++)
                        FUZZ_CHECK(*q != '@');
        m = git_url_redact(s, n, again, sizeof(again));
        FUZZ_CHECK(m == n && strcmp(again, s) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const char *in = (const char *)data;
        struct cella_error err = {0};
        char out[512], small[8];
        char *z;
        size_t n;
        int code;

        /* the scrubber, with room and without */
        n = git_url_redact(in, size, out, sizeof(out));
        FUZZ_CHECK(n < sizeof(out) && n <= size);
        if (memchr(in, '\0', size) == NULL && size < sizeof(out))
                check_redacted(out, n);
        n = git_url_redact(in, size, small, sizeof(small));
        FUZZ_CHECK(n < sizeof(small) && small[n] == '\0' && n <= size);

        z = malloc(size + 1);
        if (!z)
                return 0;
        memcpy(z, data, size);
        z[size] = '\0';

        if (git_url_check(in, size, &err) == 0) {
                char name[CELLA_PATH_MAX + 1];
                const char *sep = strstr(z, "://");
                int r;

                FUZZ_CHECK(!cella_error_is_set(&err));
                FUZZ_CHECK(size >= 1 && size <= CELLA_GIT_MAX_URL && z[0] != '-');
                FUZZ_CHECK(strlen(z) == size);
                for (size_t i = 0; i < size; i++)
                        FUZZ_CHECK((unsigned char)z[i] >= 0x20 && z[i] != 0x7f && z[i] != ' ' &&
                                   z[i] != '\\');
                if (sep && size < sizeof(out)) {
                        const char *auth = sep + 3, *slash = strchr(auth, '/'), *at = NULL;

                        FUZZ_CHECK(slash != NULL);
                        for (const char *p = auth; p < slash; p++)
                                if (*p == '@')
                                        at = p;
                        n = git_url_redact(z, size, out, sizeof(out));
                        FUZZ_CHECK((size_t)(auth - z) <= n);
                        FUZZ_CHECK(memcmp(out, z, (size_t)(auth - z)) == 0);
                        /* the host and port follow the scheme (the path may hold more
                         * URLs, redacted too) */
                        {
                                const char *host = at ? at + 1 : auth;

                                FUZZ_CHECK(memcmp(out + (auth - z), host,
                                                  (size_t)(slash - host) + 1) == 0);
                        }
                }
                r = git_url_repo_name(z, name, sizeof(name));
                if (r >= 0) {
                        FUZZ_CHECK((size_t)r == strlen(name) && r >= 1);
                        FUZZ_CHECK(strchr(name, '/') == NULL);
                        FUZZ_CHECK(strcmp(name, ".") != 0 && strcmp(name, "..") != 0);
                }
        } else {
                FUZZ_CHECK(err.code == CELLA_E_INVALID_GIT_URL && err.msg[0] != '\0');
        }

        memset(&err, 0, sizeof(err));
        if (git_branch_check(in, size, &err) == 0) {
                FUZZ_CHECK(size >= 1 && size <= CELLA_GIT_MAX_BRANCH);
                FUZZ_CHECK(z[0] != '-' && z[0] != '/' && z[0] != '.');
                FUZZ_CHECK(strlen(z) == size && strstr(z, "..") == NULL);
                for (size_t i = 0; i < size; i++)
                        FUZZ_CHECK((unsigned char)z[i] > 0x20 && z[i] != 0x7f);
        } else {
                FUZZ_CHECK(err.code == CELLA_E_VALIDATION_FAILED);
        }

        code = git_clone_error_code(z);
        FUZZ_CHECK(code == CELLA_E_GIT_REPOSITORY_NOT_FOUND || code == CELLA_E_GIT_AUTH_FAILED ||
                   code == CELLA_E_GIT_BRANCH_NOT_FOUND || code == CELLA_E_GIT_NETWORK_ERROR ||
                   code == CELLA_E_DIRECTORY_NOT_EMPTY || code == CELLA_E_GIT_CLONE_FAILED);
        free(z);
        return 0;
}
