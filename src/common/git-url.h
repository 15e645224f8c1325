/* Git clone requests: repository URLs, branch names, and what a failed clone's stderr means.
 *
 * Pure functions (no I/O, no allocation) shared by the daemon's request decoder and the
 * git checkout route; unit tests and tests/fuzz/fuzz-git-url.c reach all of them.
 * Decision 0019 says which URLs are accepted and why. */
#ifndef CELLA_GIT_URL_H
#define CELLA_GIT_URL_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

/* Check a repository URL (len bytes, may hold NULs, which are refused): https://, http://,
 * git://, ssh:// (and git+ssh://, ssh+git://) URLs with a host, or scp-like
 * [user@]host:path. Refused: file:// and other schemes, local paths, anything starting
 * with '-', control characters, spaces, backslashes, over CELLA_GIT_MAX_URL. Returns 0, or
 * -1 with err set to INVALID_GIT_URL; the message never repeats the URL. */
int git_url_check(const char *url, size_t len, struct cella_error *err);

/* Check a branch (or tag) name: 1..CELLA_GIT_MAX_BRANCH bytes, git's ref name rules
 * (no control characters, space, ~ ^ : ? * [ \, "..", "@{", "//", no leading '-', '/' or
 * '.', no trailing '/', '.' or ".lock"). Returns 0, or -1 with err (VALIDATION_FAILED). */
int git_branch_check(const char *branch, size_t len, struct cella_error *err);

/* The default checkout directory's last component for url (already checked): its last
 * path component without a trailing ".git" ("https://h/a/b.git/" -> "b"). Returns the
 * length written to out (NUL-terminated), or -1 when there is no usable name ("", ".",
 * "..") or it does not fit in outsz. */
int git_url_repo_name(const char *url, char *out, size_t outsz);

/* Copy text (len bytes) into out (outsz > 0 bytes, always NUL-terminated, truncated if
 * needed) with the user information of every URL in it removed:
 * "fatal: 'https://u:secret@host/r' x" -> "fatal: 'https://host/r' x". A URL is a
 * "scheme://" sequence; its user information runs to the last '@' before the end of its
 * authority (the first '/', '?', '#', whitespace, quote or control character after the '@'
 * search starts) and goes whole, password and user name alike. Returns the length
 * written. */
size_t git_url_redact(const char *text, size_t len, char *out, size_t outsz);

/* The API error code for a failed `git clone` whose stderr (LC_ALL=C) is err_text:
 * GIT_BRANCH_NOT_FOUND, GIT_AUTH_FAILED, GIT_REPOSITORY_NOT_FOUND, GIT_NETWORK_ERROR,
 * DIRECTORY_NOT_EMPTY, else GIT_CLONE_FAILED. */
int git_clone_error_code(const char *err_text);

#endif
