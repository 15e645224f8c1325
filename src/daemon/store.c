#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/macros.h"
#include "daemon/store.h"

struct store {
        sqlite3 *db;
        sqlite3_stmt *save;
        sqlite3_stmt *del;
        sqlite3_stmt *touch;
        sqlite3_stmt *all;
        sqlite3_stmt *port_save;
        sqlite3_stmt *port_get;
        sqlite3_stmt *port_del;
        sqlite3_stmt *port_del_all;
        sqlite3_stmt *port_list;
        bool fresh; /* made by store_open: none was there, or a damaged one was moved aside */
};

static const char schema[] =
        "PRAGMA journal_mode=WAL;"
        "PRAGMA synchronous=NORMAL;"
        "PRAGMA foreign_keys=ON;"
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "INSERT OR IGNORE INTO meta VALUES ('schema', '1');"
        "CREATE TABLE IF NOT EXISTS sandboxes ("
        "  name TEXT PRIMARY KEY,"
        "  slot INTEGER NOT NULL UNIQUE,"
        "  image TEXT NOT NULL,"
        "  instance_type TEXT NOT NULL,"
        "  env TEXT NOT NULL DEFAULT '{}',"
        "  labels TEXT NOT NULL DEFAULT '{}',"
        "  created_ms INTEGER NOT NULL,"
        "  last_active_ms INTEGER NOT NULL,"
        "  pid INTEGER NOT NULL DEFAULT 0,"
        "  pid_start INTEGER NOT NULL DEFAULT 0,"
        "  sleep_after_ms INTEGER NOT NULL DEFAULT 600000,"
        "  keep_alive INTEGER NOT NULL DEFAULT 0,"
        "  default_session INTEGER NOT NULL DEFAULT 1);"
        /* Exposed ports (docs/decisions/0018-preview-urls.md): instance is the pid_start
         * of the sandbox's PID 1 when the port was exposed; another one means stale. */
        "CREATE TABLE IF NOT EXISTS ports ("
        "  sandbox TEXT NOT NULL,"
        "  port INTEGER NOT NULL,"
        "  name TEXT NOT NULL DEFAULT '',"
        "  token TEXT NOT NULL,"
        "  instance INTEGER NOT NULL DEFAULT 0,"
        "  PRIMARY KEY (sandbox, port));"
        /* Filesystem snapshots (docs/decisions/0048-snapshots-and-fork.md): the layer is
         * <data-dir>/snapshots/<id>/layer. */
        "CREATE TABLE IF NOT EXISTS snapshots ("
        "  id TEXT PRIMARY KEY,"
        "  name TEXT NOT NULL UNIQUE,"
        "  sandbox TEXT NOT NULL,"
        "  image TEXT NOT NULL,"
        "  size_bytes INTEGER NOT NULL,"
        "  created_ms INTEGER NOT NULL,"
        "  parent TEXT NOT NULL DEFAULT '');"
        /* Tenants' API keys (docs/tenants.md, decision 0053): only the secret's SHA-256;
         * a limit of 0 is none. Made by this statement in a registry of any age. */
        "CREATE TABLE IF NOT EXISTS api_keys ("
        "  id TEXT PRIMARY KEY,"
        "  tenant TEXT NOT NULL,"
        "  secret_sha256 TEXT NOT NULL,"
        "  created_ms INTEGER NOT NULL,"
        "  max_sandboxes INTEGER NOT NULL DEFAULT 0,"
        "  max_memory_bytes INTEGER NOT NULL DEFAULT 0);";

/* Columns added after schema 1; adding one that exists fails harmlessly. */
static const char *const migrations[] = {
        "ALTER TABLE sandboxes ADD COLUMN pid INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE sandboxes ADD COLUMN pid_start INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE sandboxes ADD COLUMN sleep_after_ms INTEGER NOT NULL DEFAULT 600000",
        "ALTER TABLE sandboxes ADD COLUMN keep_alive INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE sandboxes ADD COLUMN default_session INTEGER NOT NULL DEFAULT 1",
        /* Sandboxes made before network modes had loopback only: they keep it. */
        "ALTER TABLE sandboxes ADD COLUMN network TEXT NOT NULL DEFAULT 'none'",
        "ALTER TABLE sandboxes ADD COLUMN network_allow TEXT NOT NULL DEFAULT '[]'",
        /* The snapshot a sandbox was made from ('': none). */
        "ALTER TABLE sandboxes ADD COLUMN snapshot TEXT NOT NULL DEFAULT ''",
        /* What sleep keeps (docs/decisions/0050-memory-sleep.md): 'files' or 'memory'. */
        "ALTER TABLE sandboxes ADD COLUMN sleep_mode TEXT NOT NULL DEFAULT 'files'",
        /* How a snapshot's layer is stored and whose ids own it (0051). */
        "ALTER TABLE snapshots ADD COLUMN method TEXT NOT NULL DEFAULT 'copy'",
        "ALTER TABLE snapshots ADD COLUMN id_base INTEGER NOT NULL DEFAULT 0",
};

static int prepare(struct store *s, const char *sql, sqlite3_stmt **ret, struct cella_error *err)
{
        if (sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, ret, NULL) != SQLITE_OK)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "registry: prepare: %s",
                                       sqlite3_errmsg(s->db));
        return 0;
}

/* The registry holds env values and preview tokens: the database is made 0600 before
 * SQLite opens it, and SQLite gives its -wal and -shm files the database's mode. Files an
 * older cellad made wider are narrowed (logged). */
static int private_files(const char *path, struct cella_error *err)
{
        static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};

        for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
                _cleanup_close_ int fd = -EBADF;
                char p[CELLA_PATH_MAX + 1];
                struct stat st;
                int flags = O_RDWR | O_NOFOLLOW | O_CLOEXEC | (i == 0 ? O_CREAT : 0);

                if ((size_t)snprintf(p, sizeof(p), "%s%s", path, suffixes[i]) >= sizeof(p))
                        return cella_error_set(err, CELLA_E_INTERNAL_ERROR,
                                               "registry path too long");
                fd = open(p, flags, 0600);
                if (fd < 0 && errno == ENOENT && i > 0)
                        continue;
                if (fd < 0 || fstat(fd, &st) < 0)
                        return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "registry %s: %s", p,
                                               strerror(errno));
                if ((st.st_mode & 07777) != 0600) {
                        if (fchmod(fd, 0600) < 0)
                                return cella_error_set(err, CELLA_E_INTERNAL_ERROR,
                                                       "registry %s: chmod 0600: %s", p,
                                                       strerror(errno));
                        log_warn("registry file %s was mode %04o; now 0600", p,
                                 (unsigned)(st.st_mode & 07777));
                }
        }
        return 0;
}

/* A result code that says the file is not a sound SQLite database. */
static bool is_damage(int rc)
{
        rc &= 0xff;
        return rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB;
}

/* Close the statements and the connection of s, keep s. */
static void store_close_db(struct store *s)
{
        sqlite3_stmt **stmts[] = {&s->save,     &s->del,          &s->touch,
                                  &s->all,      &s->port_save,    &s->port_get,
                                  &s->port_del, &s->port_del_all, &s->port_list};

        for (size_t i = 0; i < sizeof(stmts) / sizeof(stmts[0]); i++) {
                sqlite3_finalize(*stmts[i]);
                *stmts[i] = NULL;
        }
        sqlite3_close(s->db);
        s->db = NULL;
}

/* Move <path><suffix> aside to <aside><suffix>. Absent is fine. */
static int move_aside(const char *path, const char *aside, const char *suffix)
{
        char from[4096], to[4096];

        if (snprintf(from, sizeof(from), "%s%s", path, suffix) >= (int)sizeof(from) ||
            snprintf(to, sizeof(to), "%s%s", aside, suffix) >= (int)sizeof(to))
                return -ENAMETOOLONG;
        if (rename(from, to) < 0)
                return errno == ENOENT ? 0 : -errno;
        log_warn("registry: %s moved aside to %s", from, to);
        return 0;
}

/* Move path and its -wal and -shm files aside to <path>.corrupt-<UTC time>[-N]: nothing of
 * a damaged registry is ever deleted. */
static int move_all_aside(const char *path, char *aside, size_t asidesz)
{
        static const char *const suffixes[] = {"", "-wal", "-shm"};
        char stamp[32];
        struct tm tm;
        time_t now = time(NULL);
        struct stat st;
        int r;

        gmtime_r(&now, &tm);
        strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
        for (int n = 0;; n++) {
                int len = n ? snprintf(aside, asidesz, "%s.corrupt-%s-%d", path, stamp, n)
                            : snprintf(aside, asidesz, "%s.corrupt-%s", path, stamp);
                if (len < 0 || (size_t)len >= asidesz)
                        return -ENAMETOOLONG;
                if (lstat(aside, &st) < 0 && errno == ENOENT)
                        break;
                if (n > 100)
                        return -EEXIST;
        }
        for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
                r = move_aside(path, aside, suffixes[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Open path, apply the schema and check the file. Returns 0, -EBADMSG when the file is
 * damaged (why in err), -1 on any other failure (err set). */
static int open_db(struct store *s, const char *path, struct cella_error *err)
{
        sqlite3_stmt *st = NULL;
        char *msg = NULL;
        int rc;

        if (private_files(path, err) < 0)
                return -1;
        rc = sqlite3_open_v2(path, &s->db,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                             NULL);
        if (rc != SQLITE_OK) {
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "registry %s: %s", path,
                                s->db ? sqlite3_errmsg(s->db) : "out of memory");
                return is_damage(rc) ? -EBADMSG : -1;
        }
        sqlite3_extended_result_codes(s->db, 1);
        sqlite3_busy_timeout(s->db, 5000);
        rc = sqlite3_exec(s->db, schema, NULL, NULL, &msg);
        if (rc != SQLITE_OK) {
                cella_error_set(err,
                                rc == SQLITE_FULL ? CELLA_E_INSUFFICIENT_STORAGE
                                                  : CELLA_E_INTERNAL_ERROR,
                                "registry %s: schema: %s", path, msg ? msg : "?");
                sqlite3_free(msg);
                return is_damage(rc) ? -EBADMSG : -1;
        }
        for (size_t i = 0; i < sizeof(migrations) / sizeof(migrations[0]); i++)
                sqlite3_exec(s->db, migrations[i], NULL, NULL, NULL);
        /* Every page is read once: a file truncated or overwritten in part shows here, not
         * as a failed save hours later. Milliseconds for thousands of sandboxes. */
        rc = sqlite3_prepare_v2(s->db, "PRAGMA quick_check(1)", -1, &st, NULL);
        if (rc == SQLITE_OK)
                rc = sqlite3_step(st);
        if (rc == SQLITE_ROW && strcmp((const char *)sqlite3_column_text(st, 0), "ok") != 0) {
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "registry %s: check: %s", path,
                                (const char *)sqlite3_column_text(st, 0));
                sqlite3_finalize(st);
                return -EBADMSG;
        }
        if (rc != SQLITE_ROW) {
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "registry %s: check: %s", path,
                                sqlite3_errmsg(s->db));
                sqlite3_finalize(st);
                return is_damage(rc) ? -EBADMSG : -1;
        }
        sqlite3_finalize(st);
        if (prepare(s,
                    /* An upsert on the name: REPLACE would silently delete another
                     * sandbox's row on a slot conflict. */
                    "INSERT INTO sandboxes (name, slot, image, instance_type, env,"
                    " labels, created_ms, last_active_ms, pid, pid_start, sleep_after_ms,"
                    " keep_alive, default_session, network, network_allow, snapshot, sleep_mode)"
                    " VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17)"
                    " ON CONFLICT(name) DO UPDATE SET slot=?2, image=?3, instance_type=?4,"
                    " env=?5, labels=?6, created_ms=?7, last_active_ms=?8, pid=?9,"
                    " pid_start=?10, sleep_after_ms=?11, keep_alive=?12, default_session=?13,"
                    " network=?14, network_allow=?15, snapshot=?16, sleep_mode=?17",
                    &s->save, err) < 0 ||
            prepare(s, "DELETE FROM sandboxes WHERE name = ?1", &s->del, err) < 0 ||
            prepare(s, "UPDATE sandboxes SET last_active_ms = ?2 WHERE name = ?1", &s->touch, err) <
                    0 ||
            prepare(s,
                    "SELECT name, slot, image, instance_type, env, labels, created_ms,"
                    " last_active_ms, pid, pid_start, sleep_after_ms, keep_alive, default_session,"
                    " network, network_allow, snapshot, sleep_mode FROM sandboxes"
                    " ORDER BY created_ms",
                    &s->all, err) < 0 ||
            prepare(s,
                    "INSERT INTO ports (sandbox, port, name, token, instance) VALUES"
                    " (?1,?2,?3,?4,?5) ON CONFLICT(sandbox, port) DO UPDATE SET name=?3,"
                    " token=?4, instance=?5",
                    &s->port_save, err) < 0 ||
            prepare(s, "SELECT name, token, instance FROM ports WHERE sandbox = ?1 AND port = ?2",
                    &s->port_get, err) < 0 ||
            prepare(s, "DELETE FROM ports WHERE sandbox = ?1 AND port = ?2", &s->port_del, err) <
                    0 ||
            prepare(s, "DELETE FROM ports WHERE sandbox = ?1", &s->port_del_all, err) < 0 ||
            prepare(s,
                    "SELECT port, name, token, instance FROM ports WHERE sandbox = ?1"
                    " ORDER BY port",
                    &s->port_list, err) < 0)
                return is_damage(sqlite3_errcode(s->db)) ? -EBADMSG : -1;
        return 0;
}

int store_open(const char *path, struct store **ret, struct cella_error *err)
{
        char aside[4096];
        struct cella_error why = {0};
        struct stat st;
        struct store *s;
        int r;

        s = calloc(1, sizeof(*s));
        if (!s)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        if (lstat(path, &st) < 0 && errno == ENOENT) {
                /* A -wal left without its database would be replayed into the new one. */
                s->fresh = true;
                r = move_all_aside(path, aside, sizeof(aside));
                if (r < 0) {
                        free(s);
                        return cella_error_errno(err, r, "registry %s: move aside", path);
                }
        }
        r = open_db(s, path, &why);
        if (r == -EBADMSG) {
                store_close_db(s);
                r = move_all_aside(path, aside, sizeof(aside));
                if (r < 0) {
                        free(s);
                        return cella_error_errno(err, r,
                                                 "registry %s is damaged (%s); move it aside", path,
                                                 why.msg);
                }
                log_error("registry %s is damaged (%s): kept as %s; a new registry is "
                          "rebuilt from the sandboxes",
                          path, why.msg, aside);
                s->fresh = true;
                memset(&why, 0, sizeof(why));
                r = open_db(s, path, &why);
        }
        if (r < 0) {
                store_close(s);
                return cella_error_set(err, why.code, "%s", why.msg);
        }
        *ret = s;
        return 0;
}

bool store_is_fresh(const struct store *s)
{
        return s->fresh;
}

void store_close(struct store *s)
{
        if (!s)
                return;
        store_close_db(s);
        free(s);
}

static int step_done(struct store *s, sqlite3_stmt *st, const char *what, struct cella_error *err)
{
        int rc = sqlite3_step(st);
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        if ((rc & 0xff) == SQLITE_FULL)
                return cella_error_set(err, CELLA_E_INSUFFICIENT_STORAGE,
                                       "the data directory is full: registry: %s: %s", what,
                                       sqlite3_errstr(rc));
        if (rc != SQLITE_DONE)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "registry: %s: %s", what,
                                       sqlite3_errmsg(s->db));
        return 0;
}

int store_sandbox_save(struct store *s, const struct store_sandbox *sb, struct cella_error *err)
{
        sqlite3_bind_text(s->save, 1, sb->name, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s->save, 2, sb->slot);
        sqlite3_bind_text(s->save, 3, sb->image, -1, SQLITE_STATIC);
        sqlite3_bind_text(s->save, 4, sb->instance_type, -1, SQLITE_STATIC);
        sqlite3_bind_text(s->save, 5, sb->env_json ? sb->env_json : "{}", -1, SQLITE_STATIC);
        sqlite3_bind_text(s->save, 6, sb->labels_json ? sb->labels_json : "{}", -1, SQLITE_STATIC);
        sqlite3_bind_int64(s->save, 7, sb->created_ms);
        sqlite3_bind_int64(s->save, 8, sb->last_active_ms);
        sqlite3_bind_int64(s->save, 9, sb->pid);
        sqlite3_bind_int64(s->save, 10, sb->pid_start);
        sqlite3_bind_int64(s->save, 11, sb->sleep_after_ms);
        sqlite3_bind_int64(s->save, 12, sb->keep_alive);
        sqlite3_bind_int64(s->save, 13, sb->default_session);
        sqlite3_bind_text(s->save, 14, sb->network ? sb->network : "none", -1, SQLITE_STATIC);
        sqlite3_bind_text(s->save, 15, sb->network_allow_json ? sb->network_allow_json : "[]", -1,
                          SQLITE_STATIC);
        sqlite3_bind_text(s->save, 16, sb->snapshot ? sb->snapshot : "", -1, SQLITE_STATIC);
        sqlite3_bind_text(s->save, 17, sb->sleep_mode ? sb->sleep_mode : "files", -1,
                          SQLITE_STATIC);
        return step_done(s, s->save, "save sandbox", err);
}

static int exec_sql(struct store *s, const char *sql, const char *what, struct cella_error *err)
{
        int rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);

        if ((rc & 0xff) == SQLITE_FULL)
                return cella_error_set(err, CELLA_E_INSUFFICIENT_STORAGE,
                                       "the data directory is full: registry: %s: %s", what,
                                       sqlite3_errstr(rc));
        if (rc != SQLITE_OK)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "registry: %s: %s", what,
                                       sqlite3_errmsg(s->db));
        return 0;
}

int store_begin(struct store *s, struct cella_error *err)
{
        return exec_sql(s, "BEGIN", "begin", err);
}

int store_commit(struct store *s, struct cella_error *err)
{
        return exec_sql(s, "COMMIT", "commit", err);
}

void store_rollback(struct store *s)
{
        if (!sqlite3_get_autocommit(s->db))
                sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
}

int store_sandbox_delete(struct store *s, const char *name, struct cella_error *err)
{
        sqlite3_bind_text(s->del, 1, name, -1, SQLITE_STATIC);
        return step_done(s, s->del, "delete sandbox", err);
}

int store_sandbox_touch(struct store *s, const char *name, int64_t last_active_ms)
{
        sqlite3_bind_text(s->touch, 1, name, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s->touch, 2, last_active_ms);
        return step_done(s, s->touch, "touch sandbox", NULL);
}

static const char *col_text(sqlite3_stmt *st, int i)
{
        const unsigned char *t = sqlite3_column_text(st, i);
        return t ? (const char *)t : "";
}

/* Steps st through its rows, handing each to row (which converts it and calls the caller's
 * function); stops at the first negative return and returns it. The statement is reset
 * and its bindings cleared, so a prepared one is ready again; a statement prepared for
 * the call is the caller's to finalize. */
static int each_row(struct store *s, sqlite3_stmt *st, const char *what,
                    int (*row)(sqlite3_stmt *st, void *it), void *it, struct cella_error *err)
{
        int rc, r = 0;

        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                r = row(st, it);
                if (r < 0)
                        break;
        }
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        if (r < 0)
                return r;
        if (rc != SQLITE_DONE && rc != SQLITE_ROW)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "registry: %s: %s", what,
                                       sqlite3_errmsg(s->db));
        return 0;
}

/* What each_row's row functions hand a row to: the caller's function of its record's type
 * and its userdata; r is the function's last return. */
struct row_iter {
        union {
                int (*sandbox)(const struct store_sandbox *sb, void *userdata);
                int (*port)(const struct store_port *p, void *userdata);
                int (*snapshot)(const struct store_snapshot *sn, void *userdata);
                int (*key)(const struct store_key *k, void *userdata);
        } fn;
        void *userdata;
        int r;
};

static int sandbox_row(sqlite3_stmt *st, void *p)
{
        struct row_iter *it = p;
        struct store_sandbox sb = {
                .name = col_text(st, 0),
                .slot = sqlite3_column_int64(st, 1),
                .image = col_text(st, 2),
                .instance_type = col_text(st, 3),
                .env_json = col_text(st, 4),
                .labels_json = col_text(st, 5),
                .created_ms = sqlite3_column_int64(st, 6),
                .last_active_ms = sqlite3_column_int64(st, 7),
                .pid = sqlite3_column_int64(st, 8),
                .pid_start = sqlite3_column_int64(st, 9),
                .sleep_after_ms = sqlite3_column_int64(st, 10),
                .keep_alive = sqlite3_column_int64(st, 11),
                .default_session = sqlite3_column_int64(st, 12),
                .network = col_text(st, 13),
                .network_allow_json = col_text(st, 14),
                .snapshot = col_text(st, 15),
                .sleep_mode = col_text(st, 16),
        };
        return it->fn.sandbox(&sb, it->userdata);
}

int store_sandbox_foreach(struct store *s,
                          int (*fn)(const struct store_sandbox *sb, void *userdata), void *userdata,
                          struct cella_error *err)
{
        struct row_iter it = {.fn.sandbox = fn, .userdata = userdata};

        return each_row(s, s->all, "list", sandbox_row, &it, err);
}

int store_meta_get(struct store *s, const char *key, char *buf, size_t size)
{
        sqlite3_stmt *st = NULL;
        int r = -ENOENT;

        if (sqlite3_prepare_v2(s->db, "SELECT value FROM meta WHERE key = ?1", -1, &st, NULL) !=
            SQLITE_OK)
                return -EIO;
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW) {
                snprintf(buf, size, "%s", col_text(st, 0));
                r = 0;
        }
        sqlite3_finalize(st);
        return r;
}

int store_meta_set(struct store *s, const char *key, const char *value, struct cella_error *err)
{
        sqlite3_stmt *st = NULL;

        if (sqlite3_prepare_v2(s->db, "INSERT OR REPLACE INTO meta VALUES (?1, ?2)", -1, &st,
                               NULL) != SQLITE_OK)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "registry: meta: %s",
                                       sqlite3_errmsg(s->db));
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, value, -1, SQLITE_STATIC);
        int rc = sqlite3_step(st);
        sqlite3_finalize(st);
        if (rc != SQLITE_DONE)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "registry: meta %s: %s", key,
                                       sqlite3_errmsg(s->db));
        return 0;
}

int store_port_save(struct store *s, const char *sandbox, const struct store_port *p,
                    struct cella_error *err)
{
        sqlite3_bind_text(s->port_save, 1, sandbox, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s->port_save, 2, p->port);
        sqlite3_bind_text(s->port_save, 3, p->name ? p->name : "", -1, SQLITE_STATIC);
        sqlite3_bind_text(s->port_save, 4, p->token, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s->port_save, 5, p->instance);
        return step_done(s, s->port_save, "save port", err);
}

int store_port_get(struct store *s, const char *sandbox, int port, char *name, size_t namesz,
                   char *token, size_t tokensz, int64_t *ret_instance)
{
        int rc, r = -ENOENT;

        sqlite3_bind_text(s->port_get, 1, sandbox, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s->port_get, 2, port);
        rc = sqlite3_step(s->port_get);
        if (rc == SQLITE_ROW) {
                snprintf(name, namesz, "%s", col_text(s->port_get, 0));
                snprintf(token, tokensz, "%s", col_text(s->port_get, 1));
                *ret_instance = sqlite3_column_int64(s->port_get, 2);
                r = 0;
        } else if (rc != SQLITE_DONE) {
                r = -EIO;
        }
        sqlite3_reset(s->port_get);
        sqlite3_clear_bindings(s->port_get);
        return r;
}

int store_port_delete(struct store *s, const char *sandbox, int port, struct cella_error *err)
{
        if (port < 0) {
                sqlite3_bind_text(s->port_del_all, 1, sandbox, -1, SQLITE_STATIC);
                return step_done(s, s->port_del_all, "delete ports", err);
        }
        sqlite3_bind_text(s->port_del, 1, sandbox, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s->port_del, 2, port);
        return step_done(s, s->port_del, "delete port", err);
}

static int port_row(sqlite3_stmt *st, void *p)
{
        struct row_iter *it = p;
        struct store_port port = {
                .port = sqlite3_column_int64(st, 0),
                .name = col_text(st, 1),
                .token = col_text(st, 2),
                .instance = sqlite3_column_int64(st, 3),
        };

        return it->fn.port(&port, it->userdata);
}

int store_port_foreach(struct store *s, const char *sandbox,
                       int (*fn)(const struct store_port *p, void *userdata), void *userdata,
                       struct cella_error *err)
{
        struct row_iter it = {.fn.port = fn, .userdata = userdata};

        sqlite3_bind_text(s->port_list, 1, sandbox, -1, SQLITE_STATIC);
        return each_row(s, s->port_list, "ports", port_row, &it, err);
}

int store_snapshot_save(struct store *s, const struct store_snapshot *sn, struct cella_error *err)
{
        sqlite3_stmt *st = NULL;

        if (sqlite3_prepare_v2(s->db,
                               "INSERT INTO snapshots (id, name, sandbox, image, size_bytes,"
                               " created_ms, parent, method, id_base)"
                               " VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9)",
                               -1, &st, NULL) != SQLITE_OK)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "registry: prepare: %s",
                                       sqlite3_errmsg(s->db));
        sqlite3_bind_text(st, 1, sn->id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, sn->name, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, sn->sandbox, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, sn->image, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 5, sn->size_bytes);
        sqlite3_bind_int64(st, 6, sn->created_ms);
        sqlite3_bind_text(st, 7, sn->parent ? sn->parent : "", -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 8, sn->method && sn->method[0] ? sn->method : "copy", -1,
                          SQLITE_STATIC);
        sqlite3_bind_int64(st, 9, sn->id_base);
        int r = step_done(s, st, "save snapshot", err);
        sqlite3_finalize(st);
        return r;
}

int store_snapshot_delete(struct store *s, const char *id, struct cella_error *err)
{
        sqlite3_stmt *st = NULL;

        if (sqlite3_prepare_v2(s->db, "DELETE FROM snapshots WHERE id = ?1", -1, &st, NULL) !=
            SQLITE_OK)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "registry: prepare: %s",
                                       sqlite3_errmsg(s->db));
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        int r = step_done(s, st, "delete snapshot", err);
        sqlite3_finalize(st);
        return r;
}

static int snapshot_row(sqlite3_stmt *st, void *p)
{
        struct row_iter *it = p;
        struct store_snapshot sn = {
                .id = col_text(st, 0),
                .name = col_text(st, 1),
                .sandbox = col_text(st, 2),
                .image = col_text(st, 3),
                .size_bytes = sqlite3_column_int64(st, 4),
                .created_ms = sqlite3_column_int64(st, 5),
                .parent = col_text(st, 6),
                .method = col_text(st, 7),
                .id_base = sqlite3_column_int64(st, 8),
        };

        return it->fn.snapshot(&sn, it->userdata);
}

int store_snapshot_foreach(struct store *s,
                           int (*fn)(const struct store_snapshot *sn, void *userdata),
                           void *userdata, struct cella_error *err)
{
        struct row_iter it = {.fn.snapshot = fn, .userdata = userdata};
        sqlite3_stmt *st = NULL;

        if (sqlite3_prepare_v2(s->db,
                               "SELECT id, name, sandbox, image, size_bytes, created_ms, parent,"
                               " method, id_base FROM snapshots ORDER BY created_ms, id",
                               -1, &st, NULL) != SQLITE_OK)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "registry: prepare: %s",
                                       sqlite3_errmsg(s->db));
        int r = each_row(s, st, "snapshots", snapshot_row, &it, err);
        sqlite3_finalize(st);
        return r;
}

/* ---- API keys ---- */

static int key_prepare(struct store *s, const char *sql, sqlite3_stmt **st, struct cella_error *err)
{
        if (sqlite3_prepare_v2(s->db, sql, -1, st, NULL) != SQLITE_OK)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "registry: prepare: %s",
                                       sqlite3_errmsg(s->db));
        return 0;
}

int store_key_save(struct store *s, const struct store_key *k, struct cella_error *err)
{
        sqlite3_stmt *st = NULL;

        if (key_prepare(s,
                        "INSERT INTO api_keys (id, tenant, secret_sha256, created_ms,"
                        " max_sandboxes, max_memory_bytes) VALUES (?1,?2,?3,?4,?5,?6)",
                        &st, err) < 0)
                return -EIO;
        sqlite3_bind_text(st, 1, k->id, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, k->tenant, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, k->secret_sha256, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 4, k->created_ms);
        sqlite3_bind_int64(st, 5, k->max_sandboxes);
        sqlite3_bind_int64(st, 6, k->max_memory_bytes);
        int r = step_done(s, st, "save key", err);
        sqlite3_finalize(st);
        return r;
}

static int key_row(sqlite3_stmt *st, void *p)
{
        struct row_iter *it = p;
        struct store_key k = {
                .id = col_text(st, 0),
                .tenant = col_text(st, 1),
                .secret_sha256 = col_text(st, 2),
                .created_ms = sqlite3_column_int64(st, 3),
                .max_sandboxes = sqlite3_column_int64(st, 4),
                .max_memory_bytes = sqlite3_column_int64(st, 5),
        };

        it->r = it->fn.key(&k, it->userdata);
        return it->r;
}

#define KEY_COLUMNS "id, tenant, secret_sha256, created_ms, max_sandboxes, max_memory_bytes"

int store_key_get(struct store *s, const char *id,
                  int (*fn)(const struct store_key *k, void *userdata), void *userdata)
{
        struct row_iter it = {.fn.key = fn, .userdata = userdata, .r = -ENOENT};
        sqlite3_stmt *st = NULL;

        /* id is the primary key: one row at the most */
        if (key_prepare(s, "SELECT " KEY_COLUMNS " FROM api_keys WHERE id = ?1", &st, NULL) < 0)
                return -EIO;
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        int r = each_row(s, st, "key", key_row, &it, NULL);
        sqlite3_finalize(st);
        return r < 0 ? r : it.r;
}

int store_key_delete(struct store *s, const char *id, bool *ret_existed, struct cella_error *err)
{
        sqlite3_stmt *st = NULL;

        if (key_prepare(s, "DELETE FROM api_keys WHERE id = ?1", &st, err) < 0)
                return -EIO;
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        int r = step_done(s, st, "delete key", err);
        sqlite3_finalize(st);
        if (r == 0)
                *ret_existed = sqlite3_changes(s->db) > 0;
        return r;
}

int store_key_foreach(struct store *s, int (*fn)(const struct store_key *k, void *userdata),
                      void *userdata, struct cella_error *err)
{
        struct row_iter it = {.fn.key = fn, .userdata = userdata};
        sqlite3_stmt *st = NULL;

        if (key_prepare(s, "SELECT " KEY_COLUMNS " FROM api_keys ORDER BY created_ms, id", &st,
                        err) < 0)
                return -EIO;
        int r = each_row(s, st, "keys", key_row, &it, err);
        sqlite3_finalize(st);
        return r;
}
