/* What cellad gives its HTTP API (api.h) when it makes it; the handlers beneath read it
 * through struct api (api-service.h). */
#ifndef CELLA_DAEMON_API_CONFIG_H
#define CELLA_DAEMON_API_CONFIG_H

#include <stdint.h>
#include <uv.h>

struct sandbox_table;
struct mem_budget;
struct backups;
struct cluster;
struct forward;

struct api_config {
        uv_loop_t *loop;
        struct sandbox_table *table;
        const char *token;          /* bearer token, or NULL/empty: no auth */
        const char *images_dir;     /* --images */
        const char *image_builder;  /* scripts/build-image.sh */
        const char *preview_domain; /* preview URLs' domain; NULL: "localhost" */
        int preview_url_port;       /* the port in preview URLs (0: none) */
        int64_t image_import_max;   /* an import's tarball (0: CELLA_IMAGE_IMPORT_MAX) */
        struct mem_budget *budget;  /* buffered exec output is counted here (may be NULL) */
        struct backups *backups;    /* backups (backup.h); NULL: none */
        struct cluster *cluster;    /* the cluster this node is in (cluster.h); NULL: none */
        struct forward *forward;    /* forwarding to other nodes (forward.h); NULL: none */
        const char *console_dir;    /* the web console's files (--console); NULL: none */
};

#endif
