/* Services beneath the handlers (api-service.h): finding a request's sandbox, and
 * reading an agent's ERROR. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/timeutil.h"
#include "daemon/api-service.h"
#include "daemon/instance-type.h"
#include "daemon/cluster.h"
#include "daemon/sandbox-directory.h"
#include "daemon/sandbox.h"
#include "daemon/tenant.h"

static bool is(const struct http_request *req, const char *m)
{
        return strcmp(http_request_method(req), m) == 0;
}

void api_timestamp(char out[32])
{
        time_format_iso(time_now_ms(), out, 32);
}

void api_agent_error(const struct frame *f, struct cella_error *err)
{
        json_t *j = json_loadb((const char *)f->payload, f->len, 0, NULL);
        const char *code = NULL, *msg = NULL;
        int c;

        if (j)
                json_unpack(j, "{s?s, s?s}", "code", &code, "message", &msg);
        c = code ? cella_code_from_name(code) : -1;
        if (c < 0 || c == CELLA_E_OK)
                c = CELLA_E_INTERNAL_ERROR;
        cella_error_set(err, c, "%s", msg ? msg : cella_code_name(c));
        json_decref(j);
}

bool api_wants_sse(const struct http_request *req)
{
        const char *acc = http_request_header(req, "Accept");

        return acc && strstr(acc, "text/event-stream");
}

bool api_wants_raw(const struct http_request *req)
{
        const char *acc = http_request_header(req, "Accept");

        return acc && !strstr(acc, "text/event-stream") && strstr(acc, "application/octet-stream");
}

static bool is_websocket_upgrade(const struct http_request *req)
{
        const char *u = http_request_header(req, "Upgrade");

        return u && strcasecmp(u, "websocket") == 0;
}

static void sandbox_got(struct sandbox *sb, bool created, const struct cella_error *err, void *ud)
{
        struct api_sandbox_wait *w = ud;
        struct http_request *req = w->req;
        bool here = http_request_loop(req) != NULL; /* the client is still there */

        (void)created;
        /* made, woken or failed: the table counts it (or there is nothing to count) */
        api_quota_release(w->a, w->hold);
        w->hold = NULL;
        if (!sb) {
                if (here)
                        http_respond_error(req, err, NULL);
        } else if (!sandbox_agent(sb)) {
                if (here)
                        http_respond_code(req, CELLA_E_SANDBOX_UNAVAILABLE,
                                          "sandbox '%s' has no agent connection", sandbox_name(sb));
                sb = NULL;
        } else if (!here) {
                sb = NULL;
        } else {
                sandbox_touch(sb);
        }
        w->cb(req, sb, w->ud);
        http_request_unref(req);
}

static bool holds_memory(const char *state)
{
        return state && strcmp(state, "sleeping") != 0 && strcmp(state, "stopped") != 0 &&
               strcmp(state, "destroyed") != 0;
}

static uint64_t type_memory(const char *type)
{
        const struct instance_type *it = instance_type_find(type ? type : INSTANCE_TYPE_DEFAULT);

        return it ? it->memory_bytes : 0;
}

/* A start in progress, held against its tenant's quotas (api_quota_reserve). */
struct quota_hold {
        struct quota_hold *next;
        char tenant[CELLA_TENANT_MAX + 1];
        char name[CELLA_NAME_MAX + 1]; /* internal */
        uint64_t memory;               /* what it will run with */
        bool seen;                     /* in the table (api_quota_check's pass) */
        bool seen_holds;               /* and the table's entry holds memory already */
        /* a new name's, for the cluster's claim (api_quota_cluster) */
        bool creating;
        int64_t max_sandboxes, max_memory;
        uint64_t local_memory; /* the tenant's on this node besides this start, when held */
};

/* The holds of tenant other than name's, each name once: what the table does not count
 * yet (a sandbox being made) or counts without its memory (one waking). */
static void count_holds(struct api *a, const char *tenant, const char *name, int64_t *count,
                        uint64_t *mem)
{
        for (struct quota_hold *h = a->quota_holds; h; h = h->next) {
                bool dup = false;

                if (strcmp(h->tenant, tenant) != 0 || strcmp(h->name, name) == 0)
                        continue;
                for (struct quota_hold *g = a->quota_holds; g != h && !dup; g = g->next)
                        dup = strcmp(g->tenant, tenant) == 0 && strcmp(g->name, h->name) == 0;
                if (dup)
                        continue;
                if (!h->seen)
                        (*count)++;
                if (!h->seen_holds)
                        *mem += h->memory;
        }
}

/* api_quota_check, and the memory the tenant's sandboxes and starts hold on this node
 * besides name's (*ret_mem). */
static int quota_check(struct api *a, const struct principal *p, const char *name, bool creating,
                       const char *instance_type, uint64_t *ret_mem, struct cella_error *err);

int api_quota_check(struct api *a, const struct principal *p, const char *name, bool creating,
                    const char *instance_type, struct cella_error *err)
{
        uint64_t mem;

        return quota_check(a, p, name, creating, instance_type, &mem, err);
}

static int quota_check(struct api *a, const struct principal *p, const char *name, bool creating,
                       const char *instance_type, uint64_t *ret_mem, struct cella_error *err)
{
        uint64_t mem = 0, want = creating ? type_memory(instance_type) : 0;
        int64_t count = 0;
        size_t i;
        json_t *list, *e;
        struct quota_hold *h;

        if (p->admin || (p->max_sandboxes <= 0 && p->max_memory_bytes <= 0))
                return 0;
        list = sandbox_table_list(a->cfg.table);
        if (!list)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        for (h = a->quota_holds; h; h = h->next)
                h->seen = h->seen_holds = false;
        json_array_foreach(list, i, e)
        {
                const char *t = json_string_value(json_object_get(e, "tenant"));
                const char *id = json_string_value(json_object_get(e, "id"));
                const char *type = json_string_value(json_object_get(e, "instanceType"));
                bool holds = holds_memory(json_string_value(json_object_get(e, "state")));
                char internal[CELLA_NAME_MAX + 1];

                if (!t || !id || strcmp(t, p->tenant) != 0)
                        continue;
                count++;
                if (tenant_qualify(t, id, internal, NULL) < 0)
                        internal[0] = '\0';
                for (h = a->quota_holds; h; h = h->next)
                        if (strcmp(h->tenant, t) == 0 && strcmp(h->name, internal) == 0) {
                                h->seen = true;
                                h->seen_holds = holds;
                        }
                if (strcmp(internal, name) == 0)
                        want = type_memory(type); /* the one that wakes */
                else if (holds)
                        mem += type_memory(type);
        }
        json_decref(list);
        count_holds(a, p->tenant, name, &count, &mem);
        *ret_mem = mem;
        if (creating && p->max_sandboxes > 0 && count + 1 > p->max_sandboxes)
                return cella_error_set(err, CELLA_E_QUOTA_EXCEEDED,
                                       "tenant '%s' has %lld sandboxes, its key's maxSandboxes is "
                                       "%lld: destroy one first",
                                       p->tenant, (long long)count, (long long)p->max_sandboxes);
        if (p->max_memory_bytes > 0 && mem + want > (uint64_t)p->max_memory_bytes)
                return cella_error_set(err, CELLA_E_QUOTA_EXCEEDED,
                                       "tenant '%s' runs sandboxes of %llu bytes of memory; %llu "
                                       "more would pass its key's maxMemory of %lld bytes",
                                       p->tenant, (unsigned long long)mem, (unsigned long long)want,
                                       (long long)p->max_memory_bytes);
        return 0;
}

int api_quota_reserve(struct api *a, const struct principal *p, const char *name, bool creating,
                      const char *instance_type, struct quota_hold **ret, struct cella_error *err)
{
        struct sandbox_directory *d = sandbox_table_directory(a->cfg.table);
        struct sandbox *cur = NULL;
        struct cella_error ne = {0};
        struct quota_hold *h;
        uint64_t mem = 0;

        *ret = NULL;
        if (quota_check(a, p, name, creating, instance_type, &mem, err) < 0)
                return -1;
        if (p->admin || (p->max_sandboxes <= 0 && p->max_memory_bytes <= 0))
                return 0;
        h = calloc(1, sizeof(*h));
        if (!h)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        snprintf(h->tenant, sizeof(h->tenant), "%s", p->tenant);
        snprintf(h->name, sizeof(h->name), "%s", name);
        h->creating = creating;
        h->max_sandboxes = p->max_sandboxes;
        h->max_memory = p->max_memory_bytes;
        h->local_memory = mem;
        if (creating) {
                h->memory = type_memory(instance_type);
        } else if (d->ops->get_now(d, name, &cur, &ne) == 0) {
                json_t *info = sandbox_info(cur);

                h->memory = type_memory(
                        info ? json_string_value(json_object_get(info, "instanceType")) : NULL);
                json_decref(info);
        }
        h->next = a->quota_holds;
        a->quota_holds = h;
        *ret = h;
        return 0;
}

bool api_quota_cluster(const char *name, struct cluster_quota *out, void *userdata)
{
        struct api *a = userdata;

        for (struct quota_hold *h = a->quota_holds; h; h = h->next)
                if (h->creating && strcmp(h->name, name) == 0) {
                        *out = (struct cluster_quota){.max_sandboxes = h->max_sandboxes,
                                                      .max_memory = h->max_memory,
                                                      .memory = h->memory,
                                                      .local_memory = h->local_memory};
                        return true;
                }
        return false;
}

void api_quota_release(struct api *a, struct quota_hold *h)
{
        if (!h)
                return;
        for (struct quota_hold **pp = &a->quota_holds; *pp; pp = &(*pp)->next)
                if (*pp == h) {
                        *pp = h->next;
                        break;
                }
        free(h);
}

/* A wake held to a tenant's maxMemory on a cluster node, while the cluster checks it. */
struct wake_wait {
        struct api_sandbox_wait *w;
        char name[CELLA_NAME_MAX + 1];
};

static void wake_checked(const struct cella_error *err, void *ud)
{
        struct wake_wait *ww = ud;
        struct api_sandbox_wait *w = ww->w;
        struct sandbox_directory *d = api_directory(w->a);

        if (err)
                sandbox_got(NULL, false, err, w);
        else
                d->ops->get(d, ww->name, true, NULL, sandbox_got, w);
        free(ww);
}

/* w's start is a wake held to a tenant's maxMemory on a cluster node: check it against the
 * other nodes' sandboxes first (then the get). false when there is nothing to check. */
static bool wake_check(struct api *a, const char *name, struct api_sandbox_wait *w)
{
        struct quota_hold *h = w->hold;
        struct cluster_quota q;
        struct wake_wait *ww;

        if (!a->cfg.cluster || !h || h->creating || h->max_memory <= 0)
                return false;
        ww = calloc(1, sizeof(*ww));
        if (!ww)
                return false;
        ww->w = w;
        snprintf(ww->name, sizeof(ww->name), "%s", name);
        q = (struct cluster_quota){.max_sandboxes = h->max_sandboxes,
                                   .max_memory = h->max_memory,
                                   .memory = h->memory,
                                   .local_memory = h->local_memory};
        if (cluster_quota_check_wake(a->cfg.cluster, name, &q, wake_checked, ww) < 0) {
                free(ww);
                return false;
        }
        return true;
}

void api_sandbox_for(struct api *a, struct http_request *req, const char *name,
                     struct api_sandbox_wait *w, api_sandbox_cb cb, void *ud)
{
        struct sandbox_directory *d = api_directory(a);
        struct cella_error err = {0};
        struct sandbox *sb = NULL;

        w->a = a;
        w->hold = NULL;
        /* Only explicit writes create: a GET or HEAD is what any web page can make a browser
         * send (an <img>, a link) without a token or an Origin, so it never makes a
         * sandbox. It still wakes one that exists. A WebSocket upgrade (ws, pty) is the
         * exception: browsers always send it with an Origin, which
         * request_from_allowed_origin() has checked, and a terminal or a relay is a
         * sandbox's first use like an exec (decision 0032). The lookup starts nothing. */
        if ((is(req, "GET") || is(req, "HEAD")) && !is_websocket_upgrade(req) &&
            d->ops->get_now(d, name, &sb, &err) < 0) {
                http_respond_error(req, &err, NULL);
                cb(req, NULL, ud);
                return;
        }
        /* A tenant's quotas hold for what this get starts: a new sandbox, or a wake. */
        if (!principal_of(req)->admin) {
                struct cella_error qe = {0};
                struct sandbox *cur = sb;
                bool exists = cur || d->ops->get_now(d, name, &cur, &qe) == 0;

                memset(&qe, 0, sizeof(qe));
                if ((!exists || !sandbox_running(cur)) &&
                    api_quota_reserve(a, principal_of(req), name, !exists, NULL, &w->hold, &qe) <
                            0) {
                        http_respond_error(req, &qe, NULL);
                        cb(req, NULL, ud);
                        return;
                }
        }
        w->req = req;
        w->cb = cb;
        w->ud = ud;
        http_request_ref(req);
        if (wake_check(a, name, w))
                return;
        d->ops->get(d, name, true, NULL, sandbox_got, w);
}

struct sandbox_directory *api_directory(struct api *a)
{
        return a->cfg.cluster ? cluster_directory(a->cfg.cluster)
                              : sandbox_table_directory(a->cfg.table);
}

void api_answer_json(json_t *j, const struct cella_error *err, void *userdata)
{
        struct http_request *req = userdata;

        if (err)
                http_respond_error(req, err, NULL);
        else
                http_respond_json(req, 200, j);
        json_decref(j);
        http_request_unref(req);
}
