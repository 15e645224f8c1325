/* Fuzz the gitignore patterns of backups (backup-ignore.h): a .gitignore is the sandbox's
 * text. The first byte picks:
 *   0  a .gitignore, a NUL, then a path: parsed, the path matched (as a file and as a
 *      directory) in a bounded number of steps; every pattern kept has a glob;
 *   1  one exclude: ignore_pattern_check and ignore_list_add agree, and what is taken is
 *      matched against itself without a crash;
 *   2  a glob, a NUL, a name of [ab]: patterns of [ab*?] only answer as fnmatch(3). */
#include <fnmatch.h>
#include <string.h>

#include "common/limits.h"
#include "daemon/backup-ignore.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct ignore_list l;
        struct cella_error err = {0};
        char path[4096];

        if (size < 1 || size > 70000)
                return 0;
        const char *in = (const char *)data + 1;
        size_t len = size - 1;
        const char *nul = memchr(in, '\0', len);
        size_t tl = nul ? (size_t)(nul - in) : len;
        size_t pl = nul ? len - tl - 1 : 0;
        int r;

        switch (data[0] % 3) {
        case 0:
                if (ignore_list_init(&l, "", 0) < 0)
                        return 0;
                r = ignore_list_parse(&l, in, tl);
                FUZZ_CHECK(r == -E2BIG || r == -ENOMEM || (r >= 0 && (size_t)r == l.n));
                for (size_t i = 0; i < l.n; i++)
                        FUZZ_CHECK(l.v[i].glob && l.v[i].len > 0 &&
                                   strlen(l.v[i].glob) == l.v[i].len);
                if (pl > 0 && pl < sizeof(path)) {
                        /* a relative path without empty components */
                        size_t o = 0;
                        for (size_t i = 0; i < pl; i++) {
                                char c = nul[1 + i];
                                if (c == '/' && (o == 0 || path[o - 1] == '/'))
                                        continue;
                                path[o++] = c ? c : 'x';
                        }
                        while (o > 0 && path[o - 1] == '/')
                                o--;
                        if (o > 0) {
                                r = ignore_list_match(&l, path, o, false);
                                FUZZ_CHECK(r >= -1 && r <= 1);
                                r = ignore_list_match(&l, path, o, true);
                                FUZZ_CHECK(r >= -1 && r <= 1);
                        }
                }
                ignore_list_free(&l);
                break;
        case 1:
                if (ignore_list_init(&l, "", 0) < 0)
                        return 0;
                r = ignore_pattern_check(in, len, &err);
                FUZZ_CHECK(r == 0 || (r == -EINVAL && err.code == CELLA_E_INVALID_BACKUP_CONFIG));
                if (r == 0 && !memchr(in, '\0', len)) {
                        char pat[CELLA_BACKUP_PATTERN_MAX + 1];
                        memcpy(pat, in, len);
                        pat[len] = '\0';
                        FUZZ_CHECK(ignore_list_add(&l, pat, len, &err) == 0);
                        FUZZ_CHECK(l.n == 1 && l.v[0].len > 0);
                        ignore_list_match(&l, l.v[0].glob, l.v[0].len, false);
                }
                ignore_list_free(&l);
                break;
        case 2:
                if (!nul || tl > 64 || pl > 64)
                        return 0;
                {
                        char g[65], s[65];
                        memcpy(g, in, tl);
                        g[tl] = '\0';
                        memcpy(s, nul + 1, pl);
                        s[pl] = '\0';
                        if (strspn(g, "ab*?") < tl || strspn(s, "ab") < pl)
                                return 0;
                        FUZZ_CHECK(ignore_glob_match(g, tl, s, pl) ==
                                   (fnmatch(g, s, FNM_PATHNAME) == 0));
                }
                break;
        }
        return 0;
}
