/* Git clone requests; see git-url.h. */
#include <string.h>
#include <strings.h>

#include "common/git-url.h"
#include "common/limits.h"

static bool is_ctl(unsigned char c)
{
        return c < 0x20 || c == 0x7f;
}

/* Bytes allowed in a host name or address: letters, digits, '.', '-', '_', and for an IPv6
 * literal '[', ']' and ':' (the caller strips the port). */
static bool host_ok(const char *h, size_t n)
{
        if (n == 0 || h[0] == '-' || h[0] == '.')
                return false;
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)h[i];

                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '-' || c == '_' || c == '[' || c == ']' || c == ':' ||
                      c == '%'))
                        return false;
        }
        return true;
}

/* The authority of a scheme URL (after "://", before the first '/'): [userinfo@]host[:port],
 * host not empty, port digits. */
static bool authority_ok(const char *a, size_t n)
{
        const char *at = NULL, *host, *end = a + n, *colon = NULL;

        /* what would end the authority for git_url_redact() ends it here too (none of it
         * may hide in a user name or password) */
        for (const char *p = a; p < end; p++) {
                if (strchr("?#\"'`<>", *p))
                        return false;
                if (*p == '@')
                        at = p;
        }
        host = at ? at + 1 : a;
        if (host < end && *host == '[') {
                const char *close = memchr(host, ']', (size_t)(end - host));

                if (!close)
                        return false;
                if (close + 1 < end && close[1] != ':')
                        return false;
                colon = close + 1 < end ? close + 1 : NULL;
        } else {
                colon = memchr(host, ':', (size_t)(end - host));
        }
        if (colon) {
                if (colon + 1 == end || end - colon - 1 > 5)
                        return false;
                for (const char *p = colon + 1; p < end; p++)
                        if (*p < '0' || *p > '9')
                                return false;
        }
        return host_ok(host, (size_t)((colon ? colon : end) - host));
}

static const char *const schemes[] = {"https://", "http://",    "git://",
                                      "ssh://",   "git+ssh://", "ssh+git://"};

static size_t scheme_len(const char *url, size_t len)
{
        for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
                size_t n = strlen(schemes[i]);

                if (len >= n && strncasecmp(url, schemes[i], n) == 0)
                        return n;
        }
        return 0;
}

int git_url_check(const char *url, size_t len, struct cella_error *err)
{
        size_t s;

        if (len == 0)
                return cella_error_set(err, CELLA_E_INVALID_GIT_URL, "repoUrl is empty");
        if (len > CELLA_GIT_MAX_URL)
                return cella_error_set(err, CELLA_E_INVALID_GIT_URL,
                                       "repoUrl is longer than %d bytes", CELLA_GIT_MAX_URL);
        if (url[0] == '-')
                return cella_error_set(err, CELLA_E_INVALID_GIT_URL,
                                       "repoUrl must not start with '-'");
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char)url[i];

                if (is_ctl(c) || c == ' ' || c == '\\')
                        return cella_error_set(err, CELLA_E_INVALID_GIT_URL,
                                               "repoUrl contains a control character, a space "
                                               "or a backslash");
        }
        s = scheme_len(url, len);
        if (s) {
                const char *a = url + s, *slash = memchr(a, '/', len - s);
                size_t alen = slash ? (size_t)(slash - a) : len - s;

                if (!authority_ok(a, alen))
                        return cella_error_set(err, CELLA_E_INVALID_GIT_URL,
                                               "repoUrl has no valid host");
                if (!slash || (size_t)(slash - url) + 1 == len)
                        return cella_error_set(err, CELLA_E_INVALID_GIT_URL,
                                               "repoUrl has no repository path");
                return 0;
        }
        if (memchr(url, ':', len) && memmem(url, len, "://", 3))
                return cella_error_set(err, CELLA_E_INVALID_GIT_URL,
                                       "repoUrl: only https, http, git and ssh URLs are accepted");
        {
                /* scp-like: [user@]host:path, no '/' before the ':' (git's own rule for
                 * telling it from a local path) */
                const char *colon = memchr(url, ':', len);
                const char *slash = memchr(url, '/', len);
                const char *host = url, *at;

                if (!colon || (slash && slash < colon))
                        return cella_error_set(err, CELLA_E_INVALID_GIT_URL,
                                               "repoUrl: local paths are not accepted; use an "
                                               "https, http, git or ssh URL");
                at = memchr(url, '@', (size_t)(colon - url));
                if (at) {
                        if (at == url)
                                return cella_error_set(err, CELLA_E_INVALID_GIT_URL,
                                                       "repoUrl has an empty user name");
                        host = at + 1;
                }
                if (!host_ok(host, (size_t)(colon - host)) || memchr(host, ':', colon - host))
                        return cella_error_set(err, CELLA_E_INVALID_GIT_URL,
                                               "repoUrl has no valid host");
                if ((size_t)(colon - url) + 1 == len || colon[1] == '-')
                        return cella_error_set(err, CELLA_E_INVALID_GIT_URL,
                                               "repoUrl has no valid repository path");
                return 0;
        }
}

int git_branch_check(const char *b, size_t len, struct cella_error *err)
{
        if (len == 0 || len > CELLA_GIT_MAX_BRANCH)
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "branch must be 1 to %d bytes", CELLA_GIT_MAX_BRANCH);
        if (b[0] == '-' || b[0] == '/' || b[0] == '.' || b[len - 1] == '/' || b[len - 1] == '.' ||
            (len >= 5 && memcmp(b + len - 5, ".lock", 5) == 0) || (len == 1 && b[0] == '@'))
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "branch is not a valid branch name");
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char)b[i];

                if (is_ctl(c) || strchr(" ~^:?*[\\", c) ||
                    (i + 1 < len &&
                     ((c == '.' && b[i + 1] == '.') || (c == '@' && b[i + 1] == '{') ||
                      (c == '/' && (b[i + 1] == '/' || b[i + 1] == '.')))))
                        return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                               "branch is not a valid branch name");
        }
        return 0;
}

int git_url_repo_name(const char *url, char *out, size_t outsz)
{
        size_t len = strlen(url), start, n;

        while (len > 0 && url[len - 1] == '/')
                len--;
        if (len >= 4 && memcmp(url + len - 4, ".git", 4) == 0)
                len -= 4;
        while (len > 0 && url[len - 1] == '/')
                len--;
        start = len;
        while (start > 0 && url[start - 1] != '/' && url[start - 1] != ':')
                start--;
        n = len - start;
        if (n == 0 || n + 1 > outsz || (n == 1 && url[start] == '.') ||
            (n == 2 && url[start] == '.' && url[start + 1] == '.'))
                return -1;
        /* an authority ("https://host" with no path) is no repository name */
        if (start >= 2 && url[start - 1] == '/' && url[start - 2] == '/')
                return -1;
        memcpy(out, url + start, n);
        out[n] = '\0';
        return (int)n;
}

static bool ends_authority(unsigned char c)
{
        return c == '/' || c == '?' || c == '#' || c == '"' || c == '\'' || c == '`' || c == ' ' ||
               c == '<' || c == '>' || is_ctl(c);
}

size_t git_url_redact(const char *text, size_t len, char *out, size_t outsz)
{
        size_t i = 0, o = 0;

        if (outsz == 0)
                return 0;
        while (i < len && o + 1 < outsz) {
                if (i + 3 <= len && memcmp(text + i, "://", 3) == 0) {
                        size_t a = i + 3, end = a, last_at = 0;
                        bool has_at = false;

                        /* the authority: up to a byte that ends it; the user information is
                         * up to its last '@' */
                        while (end < len && !ends_authority((unsigned char)text[end])) {
                                if (text[end] == '@') {
                                        has_at = true;
                                        last_at = end;
                                }
                                end++;
                        }
                        for (size_t k = 0; k < 3 && o + 1 < outsz; k++)
                                out[o++] = text[i + k];
                        i = has_at ? last_at + 1 : a;
                        continue;
                }
                out[o++] = text[i++];
        }
        out[o] = '\0';
        return o;
}

static bool has(const char *s, const char *needle)
{
        return strstr(s, needle) != NULL;
}

int git_clone_error_code(const char *e)
{
        if (has(e, "already exists and is not an empty directory"))
                return CELLA_E_DIRECTORY_NOT_EMPTY;
        if ((has(e, "Remote branch ") && has(e, " not found in upstream")) ||
            has(e, "Could not find remote branch"))
                return CELLA_E_GIT_BRANCH_NOT_FOUND;
        if (has(e, "Authentication failed") || has(e, "could not read Username") ||
            has(e, "could not read Password") || has(e, "terminal prompts disabled") ||
            has(e, "Permission denied (publickey") || has(e, "Host key verification failed") ||
            has(e, "returned error: 401") || has(e, "returned error: 403"))
                return CELLA_E_GIT_AUTH_FAILED;
        if ((has(e, "repository '") && has(e, "' not found")) ||
            has(e, "does not appear to be a git repository") || has(e, "Repository not found") ||
            has(e, "returned error: 404") || has(e, "remote error: access denied or repository"))
                return CELLA_E_GIT_REPOSITORY_NOT_FOUND;
        if (has(e, "Could not resolve host") || has(e, "Failed to connect") ||
            has(e, "Connection refused") || has(e, "unable to connect") ||
            has(e, "Connection timed out") || has(e, "Could not read from remote repository") ||
            has(e, "unable to access") || has(e, "Network is unreachable") ||
            has(e, "Could not resolve hostname") || has(e, "the remote end hung up"))
                return CELLA_E_GIT_NETWORK_ERROR;
        return CELLA_E_GIT_CLONE_FAILED;
}
