/* cellad --drain: ask the cellad listening at --listen to drain (POST /v1/cluster/drain
 * {"stop":true}), print its answer, and wait for it to stop (cluster.h, decision 0057). */
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/json-cleanup.h"
#include "common/limits.h"
#include "daemon/cluster.h"

static size_t collect(char *p, size_t size, size_t n, void *userdata)
{
        struct buf *b = userdata;

        return buf_append(b, p, size * n) < 0 ? 0 : size * n;
}

/* One request; the status, or -1 when no answer came (connection refused: stopped). */
static long request(const char *method, const char *url, const char *token, const char *body,
                    long timeout_ms, struct buf *out)
{
        CURL *h = curl_easy_init();
        struct curl_slist *hdrs = NULL;
        _cleanup_buf_ struct buf auth = {0};
        long status = -1;

        if (!h)
                return -1;
        if (token && token[0] && buf_printf(&auth, "Authorization: Bearer %s", token) >= 0 &&
            buf_append(&auth, "", 1) >= 0)
                hdrs = curl_slist_append(hdrs, auth.data);
        hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
        if (body)
                curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
        if (curl_easy_perform(h) == CURLE_OK)
                curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        curl_slist_free_all(hdrs);
        curl_easy_cleanup(h);
        return status;
}

int cluster_drain_client(const char *host, int port, const char *token)
{
        char base[300], url[400];
        struct buf out = {0};
        _cleanup_json_ json_t *j = NULL;
        size_t failed;
        long st;

        snprintf(base, sizeof(base), strchr(host, ':') ? "http://[%s]:%d" : "http://%s:%d", host,
                 port);
        snprintf(url, sizeof(url), "%s/v1/cluster/drain", base);
        curl_global_init(CURL_GLOBAL_DEFAULT);
        /* no overall timeout: a drain backs up every sandbox, one after the other */
        st = request("POST", url, token, "{\"stop\":true}", 0, &out);
        if (st < 0) {
                fprintf(stderr, "cellad --drain: no cellad answers at %s\n", base);
                buf_free(&out);
                return 1;
        }
        fwrite(out.data, 1, out.len, stdout);
        fputc('\n', stdout);
        j = json_loadb(out.data ? out.data : "", out.len, 0, NULL);
        buf_free(&out);
        if (st != 200) {
                fprintf(stderr, "cellad --drain: the drain was refused (HTTP %ld)\n", st);
                return 1;
        }
        failed = json_array_size(json_object_get(j, "failed"));
        if (failed) {
                fprintf(stderr,
                        "cellad --drain: %zu sandboxes could not be handed over; cellad keeps "
                        "running with them (see \"failed\")\n",
                        failed);
                return 1;
        }
        /* the daemon stops once it has answered: wait until it no longer does */
        snprintf(url, sizeof(url), "%s/v1/health", base);
        for (int i = 0; i < CELLA_CLUSTER_DRAIN_STOP_WAIT_MS / 100; i++) {
                struct buf h = {0};

                st = request("GET", url, NULL, NULL, 1000, &h);
                buf_free(&h);
                if (st < 0) {
                        fprintf(stderr, "cellad --drain: drained; cellad at %s stopped\n", base);
                        return 0;
                }
                usleep(100 * 1000);
        }
        fprintf(stderr, "cellad --drain: drained, but cellad at %s still answers\n", base);
        return 1;
}
