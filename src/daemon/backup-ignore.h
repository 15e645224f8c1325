/* Which files a backup leaves out (docs/decisions/0049-backups.md, "Excludes and
 * .gitignore"): gitignore patterns, from the request's `excludes` and, with `gitignore`,
 * from the .gitignore files of the tree, matched as git matches them (`*`, `?`, `[...]`,
 * `**`, a leading `!` to take a file back, a trailing `/` for directories only, a `/` at
 * the start or in the middle to anchor the pattern to its file's directory).
 *
 * A .gitignore file is the sandbox's, hence hostile: its size and the patterns in effect at
 * once are bounded (limits.h), and the matcher never backtracks more than once per `*`
 * (segments are matched left to right, a failed segment resuming after the last star):
 * a pattern of p bytes against a name of n bytes costs O(p * n) at worst. */
#ifndef CELLA_DAEMON_BACKUP_IGNORE_H
#define CELLA_DAEMON_BACKUP_IGNORE_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

/* One pattern: its glob (without the leading '!', the anchoring '/' and the trailing '/'). */
struct ignore_pattern {
        char *glob;
        size_t len;
        bool negate;   /* "!x": a match takes the path back */
        bool dir_only; /* "x/": matches directories only */
        bool anchored; /* a '/' before its end: matched against the path from its base; else
                        * against the last component, at any depth */
};

/* The patterns of one source: the request's excludes (base "") or one .gitignore file
 * (base: its directory, relative to the archive's root, "" for the root itself). */
struct ignore_list {
        char *base;
        size_t base_len;
        struct ignore_pattern *v;
        size_t n, cap;
};

/* Does glob (one path component's pattern: '*', '?', '[...]', '\' escapes) match the
 * component s? '*' never matches '/'. A malformed bracket matches nothing. */
bool ignore_glob_match(const char *glob, size_t glen, const char *s, size_t slen);

/* Is pat (one of the request's excludes) a pattern a backup takes? Not empty, at most
 * CELLA_BACKUP_PATTERN_MAX bytes, no control character, brackets closed, not only "!".
 * 0 or -EINVAL with err set (INVALID_BACKUP_CONFIG) saying why. */
int ignore_pattern_check(const char *pat, size_t len, struct cella_error *err);

/* A list with base (copied; "" for the archive's root). 0 or -ENOMEM. */
int ignore_list_init(struct ignore_list *l, const char *base, size_t base_len);
void ignore_list_free(struct ignore_list *l);

/* Add one pattern as it is (an exclude: no comment, no trailing-space rule). 0 or
 * -EINVAL (err set, as ignore_pattern_check) or -ENOMEM. */
int ignore_list_add(struct ignore_list *l, const char *pat, size_t len, struct cella_error *err);

/* Add the patterns of a .gitignore's text as git reads it: one per line, blank lines and
 * "#" comments skipped, trailing spaces dropped unless escaped ("\ "), "\#" and "\!" for a
 * literal first character, a line's trailing '\r' dropped. A malformed line matches
 * nothing (it is skipped), as with git. Lines longer than CELLA_BACKUP_PATTERN_MAX: -E2BIG.
 * Returns the number of patterns added, or -errno. */
int ignore_list_parse(struct ignore_list *l, const char *text, size_t len);

/* The last pattern of l that matches path (relative to the archive's root, no leading or
 * trailing '/', below l's base): 1 when it excludes path, 0 when it takes it back ('!'),
 * -1 when no pattern matches (or path is not below the base). */
int ignore_list_match(const struct ignore_list *l, const char *path, size_t len, bool is_dir);

#endif
