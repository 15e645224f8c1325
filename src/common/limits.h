/* Every quantity a user or a sandbox controls has its limit here, and only here. */
#ifndef CELLA_LIMITS_H
#define CELLA_LIMITS_H

/* HTTP (docs/decisions/0029-http-limits.md) */
#define CELLA_HTTP_MAX_HEADER_BYTES (64 * 1024) /* request line + all headers: 431 beyond */
#define CELLA_HTTP_MAX_HEADERS 100              /* header count: 431 beyond */
#define CELLA_HTTP_MAX_URL 8192                 /* request target: 414 beyond */
/* JSON request bodies: 413 beyond (room for an exec's 1 MiB command) */
#define CELLA_HTTP_MAX_JSON_BODY (2 * 1024 * 1024)
/* The JSON file routes: POST /files/write's body (its content is the file, base64 from
 * the SDK) and POST /files/read's content (FILE_TOO_LARGE beyond) */
#define CELLA_FILES_JSON_MAX (16 * 1024 * 1024)
#define CELLA_FILES_SENDFILE_CHUNK (4096 * 1024)  /* a host-side download's step (0061) */
#define CELLA_HTTP_SENDFILE_COPY (64 * 1024)      /* read where sendfile stops (0061) */
#define CELLA_HTTP_MAX_CONNECTIONS 8192           /* default --max-connections */
#define CELLA_HTTP_MAX_PER_CLIENT 1024            /* default --max-connections-per-client */
#define CELLA_HTTP_FD_RESERVE 1024                /* descriptors kept for everything but clients */
#define CELLA_HTTP_WRITE_HIGH_WATER (1024 * 1024) /* pause the producer above this */
#define CELLA_HTTP_IDLE_TIMEOUT_MS (120 * 1000)   /* keep-alive connection with no request */
#define CELLA_HTTP_HEADER_TIMEOUT_MS (20 * 1000)  /* a request's head, first byte to last */
#define CELLA_HTTP_BODY_IDLE_MS (30 * 1000)       /* no body byte while it is read: 408 */
#define CELLA_HTTP_JSON_BODY_TIMEOUT_MS (60 * 1000) /* a whole JSON body, after its head */
/* Lingering close: after the answer of a connection that is closed with request bytes maybe
 * still unread (an error answered before the body), what the client still sends is read
 * and dropped for this long or this much before the socket is closed, so that the close
 * is not a reset that destroys the answer in the client's receive queue (nginx's
 * lingering_time; h2o does the same). */
#define CELLA_HTTP_LINGER_MS 2000
#define CELLA_HTTP_LINGER_BYTES (1024 * 1024)
#define CELLA_HTTP_SEND_TIMEOUT_MS (60 * 1000) /* answer bytes queued and none taken: close */
#define CELLA_HTTP_SWEEP_MS 1000               /* how often deadlines are checked */
/* Daemon-wide bytes held for clients (buffered exec output, JSON bodies being read):
 * default --buffer-budget */
#define CELLA_HTTP_BUFFER_BUDGET (256ull * 1024 * 1024)
/* A JSON body's first bytes are held whatever the budget (small requests always pass) */
#define CELLA_HTTP_BODY_RESERVE (64 * 1024)
#define CELLA_HTTP_RETRY_AFTER_S 1 /* Retry-After of a 503 SERVER_BUSY or a 429 */
/* Failed authentications (bad bearer token, bad preview token) per client address: a
 * bucket of this many, refilled at this rate per second; empty: 429 TOO_MANY_REQUESTS */
#define CELLA_AUTH_FAIL_BURST 20
#define CELLA_AUTH_FAIL_RATE 10
#define CELLA_AUTH_FAIL_TRACKED 4096 /* client addresses remembered for that */

/* Agent protocol */
#define CELLA_FRAME_HEADER 12
#define CELLA_FRAME_MAX (1024 * 1024)      /* payload bytes per frame */
#define CELLA_FRAME_DATA_CHUNK (64 * 1024) /* preferred DATA/STDOUT chunk */
#define CELLA_STREAM_WINDOW (4096 * 1024)  /* initial per-stream credit, each direction */
#define CELLA_STREAM_ACK_BATCH (CELLA_STREAM_WINDOW / 4) /* credit cellad returns at once */
#define CELLA_AGENT_MAX_STREAMS 1024                     /* concurrent streams per connection */
#define CELLA_WATCH_MAX_PATTERNS 32 /* include + exclude globs of one file watch */
#define CELLA_WATCH_PATTERN_MAX 256 /* bytes of one glob */
#define CELLA_WATCH_MAX_DIRS 4096   /* directories watched by one file watch */
#define CELLA_WATCH_QUEUE_MAX 1024  /* events held for a slow client, then overflow */

/* A command's output read at once by cella-init's pump (exec, a session's command) and so
 * the largest STDOUT/STDERR frame; its pipe grows to CELLA_PUMP_PIPE_SIZE once a read
 * fills a chunk (a command writing in bulk, not every idle one). Below cellad's mmap
 * threshold (256 KiB, main.c) with a frame's or an SSE event's overhead, so that a frame's
 * buffers come from the heap, not from an mmap and its page faults per frame. */
#define CELLA_PUMP_READ (240 * 1024)
#define CELLA_PUMP_PIPE_SIZE (1024 * 1024)
/* cellad's heap keeps up to this much free at its top (M_TRIM_THRESHOLD, main.c), so that
 * a frame's buffers freed there are reused, not given back and faulted in again */
#define CELLA_MALLOC_TRIM (8 * 1024 * 1024)

/* Exec */
#define CELLA_EXEC_MAX_BUFFERED (64 * 1024 * 1024) /* buffered (non-SSE) output per stream */
/* Buffered output per stream held whatever the daemon's --buffer-budget (beyond: budget) */
#define CELLA_EXEC_BUFFER_RESERVE (64 * 1024)
/* The raw form's stderr, kept for its trailers (docs/api.md) */
#define CELLA_EXEC_RAW_STDERR (64 * 1024)
#define CELLA_EXEC_MAX_COMMAND (1024 * 1024)
#define CELLA_EXEC_MAX_ENV 1024
#define CELLA_EXEC_MAX_TIMEOUT_MS (7LL * 24 * 3600 * 1000) /* per-command timeout: 7 days */
#define CELLA_CALL_MAX_OUTPUT \
        (64 * 1024) /* an EXEC run as an agent call (api-req.h): output kept per stream */

/* Git checkout (POST .../git/checkout, common/git-url.h) */
#define CELLA_GIT_MAX_URL 4096
#define CELLA_GIT_MAX_BRANCH 255
#define CELLA_GIT_MAX_DEPTH 2147483647LL
#define CELLA_GIT_DEFAULT_TIMEOUT_MS (10LL * 60 * 1000) /* a clone without a timeout */
#define CELLA_LABELS_MAX 64                             /* labels per sandbox */

/* Sessions and background processes (agent) */
#define CELLA_ID_MAX 64                 /* session and process ids */
#define CELLA_ENV_NAME_MAX 255          /* an environment variable's name (common/validate.h) */
#define CELLA_PROC_MAX 1024             /* processes kept (running and finished) */
#define CELLA_PROC_RING (64 * 1024)     /* in-memory output per stream (no disk log) */
#define CELLA_PROC_RING_TAIL (4 * 1024) /* what a finished process keeps of it */
#define CELLA_PROC_MAX_LOG (64 * 1024 * 1024) /* log bytes kept on disk per process */
#define CELLA_PROC_MAX_PATTERN 4096           /* waitLog pattern */
#define CELLA_PROC_MAX_LINE (64 * 1024)       /* waitLog: longer lines are matched in pieces */
#define CELLA_PROC_KILL_GRACE_MS 3000         /* SIGTERM, then SIGKILL after this */
#define CELLA_PROC_MIN_INTERVAL_MS 10         /* waitPort poll interval, lower bound */
#define CELLA_PROC_MAX_INTERVAL_MS 60000
#define CELLA_PROC_DEFAULT_INTERVAL_MS 500 /* waitPort poll interval when none is given */
#define CELLA_PROC_MAX_HTTP_PATH 2048      /* waitPort's HTTP path (common/validate.h) */
#define CELLA_AGENT_MAX_SESSIONS 256       /* sessions (shells) per sandbox */

/* Code interpreter (agent, docs/decisions/0021-code-interpreter.md) */
#define CELLA_CODE_MAX_CODE (512 * 1024)         /* bytes of code in one run */
#define CELLA_CODE_MAX_CONTEXTS 32               /* contexts per sandbox */
#define CELLA_CODE_MAX_QUEUE 256                 /* runs waiting in one context */
#define CELLA_CODE_MAX_LINE (64 * 1024 * 1024)   /* one event line from a runner */
#define CELLA_CODE_MAX_EVENT CELLA_CODE_MAX_LINE /* one event the daemon reassembles */
#define CELLA_CODE_OUT_PENDING (64 * 1024)       /* output held per stream awaiting credit */
#define CELLA_CODE_INTERRUPT_GRACE_MS 2000       /* SIGINT, then the runner's cgroup is killed */
#define CELLA_CODE_INTERRUPT_REPEAT_MS 500       /* SIGINT resent until done or the grace ends */
#define CELLA_CODE_READY_TIMEOUT_MS 60000        /* a runner's start (preloads included) */
#define CELLA_CODE_MAX_TEXT 4096                 /* runner message/name fields kept */
#define CELLA_CODE_MAX_TRACEBACK 1000            /* traceback lines kept */
/* Terminals (one per session; docs/decisions/0022-terminal.md) */
#define CELLA_PTY_RING (64 * 1024) /* recent output replayed to a new connection */
#define CELLA_PTY_MAX_DIM 1000     /* cols and rows: 1..this */

/* WebSockets (src/daemon/ws.c) */
#define CELLA_WS_MAX_MESSAGE (64 * 1024) /* a WebSocket message from a client */
#define CELLA_WS_HIGH_WATER (256 * 1024) /* unsent WebSocket bytes: stop reading input */
#define CELLA_WS_MAX_CONNECTIONS 1024    /* WebSocket connections cellad holds: 503 beyond */

/* Paths and names */
#define CELLA_NAME_MAX 63
#define CELLA_PATH_MAX 4096

/* Sandboxes */
#define CELLA_DEFAULT_MAX_SANDBOXES 1000
#define CELLA_DEFAULT_POOL_SIZE 4     /* warm pool: running sandboxes built ahead */
#define CELLA_POOL_MAX 1024           /* --pool at most */
#define CELLA_POOL_REFILL_DELAY_MS 20 /* refill starts this long after the last claim */
#define CELLA_POOL_RETRY_MS 2000      /* after a failed pool build, doubling up to: */
#define CELLA_POOL_RETRY_MAX_MS 60000
/* A refill waits for the first commands of sandboxes claimed this recently. */
#define CELLA_POOL_QUIET_MS 2000
#define CELLA_UID_BASE 0x10000000u /* first host uid handed to sandboxes */
#define CELLA_UID_RANGE 65536u     /* uids per sandbox */
#define CELLA_UID_SLOTS 4096u      /* slots: CELLA_UID_BASE + slot * CELLA_UID_RANGE */
/* --max-sandboxes at most; a daemon with more than CELLA_UID_SLOTS claims as many blocks of
 * CELLA_UID_SLOTS slots as it needs (decision 0060) */
#define CELLA_UID_SLOTS_MAX 16384u
#define CELLA_FS_GROUPS_MAX 256u /* cellad's groups kept across a host-side open */
#define CELLA_DEFAULT_PIDS_MAX 1024
#define CELLA_NETWORK_ALLOW_MAX 64 /* networkAllow entries per sandbox */

/* Disk (per-sandbox ext4 image, src/runtime/disk.h; the limit is the instance type's) */
#define CELLA_DISK_MIN_BYTES (32ull << 20)     /* smallest disk limit (and override) */
#define CELLA_DISK_MAX_BYTES (16ull << 40)     /* largest */
#define CELLA_DISK_BYTES_PER_INODE (16 * 1024) /* inode limit = disk limit / this */
#define CELLA_DISK_JOURNAL_MB 4                /* ext4 journal inside the image */
/* Disk promised to sandboxes (their sparse images' sizes) over the data dir's filesystem
 * size past which cellad warns, or refuses new sandboxes (--disk-overcommit) */
#define CELLA_DISK_OVERCOMMIT_DEFAULT 1.0
#define CELLA_DISK_OVERCOMMIT_MAX 1000.0
#define CELLA_DISK_SPARES 4 /* disk sizes with a new disk made ahead (one each) */
#define CELLA_DEFAULT_SLEEP_AFTER_MS (10 * 60 * 1000) /* idle time before a sandbox sleeps */
#define CELLA_IDLE_CHECK_MS 1000                      /* how often idleness is checked */

/* The web console (daemon/console.c, decision 0062): one of its files, read whole on the
 * loop; a bearer token a browser's WebSocket carries in Sec-WebSocket-Protocol (api.c) */
#define CELLA_CONSOLE_FILE_MAX (16 * 1024 * 1024)
#define CELLA_WS_BEARER_MAX 1024

/* Exposed ports and the preview proxy (docs/decisions/0018-preview-urls.md) */
#define CELLA_PORT_MIN 1024
#define CELLA_PORT_MAX 65535
#define CELLA_PORT_RESERVED 3000   /* the hosted product's control port: refused alike */
#define CELLA_PREVIEW_TOKEN_LEN 16 /* generated tokens */
/* custom tokens: MIN..MAX of [a-z0-9_] (the hosted product allows 1..16: a short token is
 * guessed, so cella takes only the longest) */
#define CELLA_PREVIEW_TOKEN_MIN 16
#define CELLA_PREVIEW_TOKEN_MAX 16

/* Tenants and their API keys (docs/tenants.md, decision 0053) */
#define CELLA_TENANT_MAX 16     /* a tenant's name: [a-z0-9] */
#define CELLA_KEY_ID_LEN 12     /* a key's id: hex */
#define CELLA_KEY_SECRET_LEN 32 /* a key's secret: base62 */
#define CELLA_KEYS_MAX 10000    /* keys in the registry, revoked ones not counted */
#define CELLA_PREVIEW_DOMAIN_MAX 200
#define CELLA_PREVIEW_PORT_NAME_MAX 64
#define CELLA_PREVIEW_HEAD_MAX (64 * 1024) /* a sandbox's response head */
#define CELLA_PREVIEW_MAX_HEADERS 256      /* header lines in a sandbox's response head */
#define CELLA_PREVIEW_IDLE_MAX 256         /* idle connections into sandboxes kept for reuse */
#define CELLA_PREVIEW_MAX_UPGRADES 1024    /* upgrades proxied or relayed at once: 503 beyond */
#define CELLA_PREVIEW_HALF_CLOSE_MS (10 * 1000) /* a relay after one side's EOF */

/* Images (docs/decisions/0023-images.md) */
#define CELLA_IMAGE_IMPORT_MAX (4LL << 30)        /* an import's request body (the tarball) */
#define CELLA_IMAGE_UNPACKED_MAX (16LL << 30)     /* bytes written for one import (all layers) */
#define CELLA_IMAGE_MAX_ENTRIES (2 * 1024 * 1024) /* tar entries of one import (all layers) */
#define CELLA_IMAGE_MAX_LAYERS 128
#define CELLA_IMAGE_META_MAX (4 * 1024 * 1024) /* manifest, index and config JSON */
#define CELLA_IMAGE_PATH_DEPTH 256             /* components of an entry's path */
#define CELLA_IMAGE_MAX_PACKAGES 64            /* extra packages of one build */
#define CELLA_IMAGE_PACKAGE_MAX 100            /* a package name's length */

/* libcella's receive buffer for the raw form and for event streams (an exec's SSE
 * events are up to 255 KiB each: one read, one parse of a whole event) */
#define CELLA_CLIENT_RAW_READ (512 * 1024)

/* libcella (src/client/): what it accepts from a server */
#define CELLA_CLIENT_SSE_LINE_MAX (4 * 1024 * 1024)       /* an SSE line of exec/watch events */
#define CELLA_CLIENT_SSE_CODE_LINE_MAX (64 * 1024 * 1024) /* a code run's (a PNG is one line) */
#define CELLA_CLIENT_WS_MESSAGE_MAX (4 * 1024 * 1024)     /* a terminal WebSocket message */
#define CELLA_CLIENT_SSE_BUILD_LINE_MAX (1024 * 1024)     /* an image build's log event */
#define CELLA_CLIENT_JSON_ANSWER_MAX (64u * 1024 * 1024)  /* a JSON answer (or error body) */
#define CELLA_CLIENT_WS_HEAD_MAX (16 * 1024)              /* the terminal handshake's answer head */
#define CELLA_CLIENT_WS_ERROR_BODY_MAX (64 * 1024)        /* a refused handshake's error body */
#define CELLA_CLIENT_CONNECT_TIMEOUT_MS 10000L            /* a TCP connect to the server */
#define CELLA_CLIENT_WS_HANDSHAKE_TIMEOUT_MS 60000        /* may be creating the sandbox */
#define CELLA_CLIENT_PTY_SIZE_MAX 1000                    /* a terminal's columns or rows */
/* cella_file_read_fd's spliced download (decision 0061): the answer's head at most, and the
 * pipe the body passes through (its pages moved, not copied) */
#define CELLA_CLIENT_HEAD_MAX (16 * 1024)
#define CELLA_CLIENT_SPLICE_PIPE (1024 * 1024)

/* Image import (src/daemon/image-manifest.c) */
#define CELLA_IMAGE_BLOB_PATH_MAX 512 /* a blob path named by a manifest */

/* MCP server (src/mcp, docs/mcp.md, docs/decisions/0047-mcp-server.md) */
#define CELLA_MCP_MAX_MESSAGE (4 * 1024 * 1024)    /* one JSON-RPC message (a stdio line) */
#define CELLA_MCP_MAX_INFLIGHT 64                  /* tool calls running at once per session */
#define CELLA_MCP_MAX_OUTPUT (1024 * 1024)         /* stdout/stderr kept per stream in a result */
#define CELLA_MCP_MAX_RESOURCES 1000               /* entries one resources/list answers */
#define CELLA_MCP_MAX_SUBSCRIPTIONS 64             /* resources watched per session */
#define CELLA_MCP_PROGRESS_TEXT 4096               /* output bytes quoted in one progress message */
#define CELLA_MCP_MAX_SESSIONS 256                 /* /mcp sessions; the least recently used goes */
#define CELLA_MCP_REPLAY 64                        /* /mcp stream events kept for Last-Event-ID */
#define CELLA_MCP_IDLE_TIMEOUT_MS (30 * 60 * 1000) /* /mcp session unused this long ends */

#define CELLA_SNAPSHOT_FREEZE_TIMEOUT_MS 10000 /* a sandbox's tasks all frozen within */
#define CELLA_SNAPSHOT_MAX_LAYERS 16      /* snapshots stacked under a sandbox (fork of fork...) */
#define CELLA_LAYER_MAX_DEPTH 512         /* directory depth of a captured layer */
#define CELLA_LAYER_XATTR_LIST_MAX 65536  /* xattr names of one entry of a captured layer */
#define CELLA_LAYER_XATTR_VALUE_MAX 65536 /* one xattr value (the kernel's XATTR_SIZE_MAX) */

#define CELLA_CRIU_CHECK_TIMEOUT_MS 20000    /* `criu check` (memory sleep's host check) within */
#define CELLA_CRIU_OUTPUT_MAX 65536          /* of its output, read for the reason */
#define CELLA_CRIU_DUMP_TIMEOUT_MS 120000    /* a memory sleep's `criu dump` within */
#define CELLA_CRIU_RESTORE_TIMEOUT_MS 120000 /* a memory wake's `criu restore` within */
#define CELLA_CRIU_PEER_CLOSE_MS 5000        /* the agent closes its end of cellad's link within */
#define CELLA_CRIU_EXTERNALS_MAX 64          /* mounts named external in one checkpoint */
#define CELLA_CRIU_CGROUPS_MAX 256           /* cgroups under a checkpointed sandbox's own */
#define CELLA_CRIU_USERNS_MAX 4096           /* bytes of a checkpoint's userns image */
#define CELLA_CRIU_USERNS_EXTENTS 5          /* extents of one uid or gid map (the kernel's base) */
/* Backups (src/daemon/backup*.c, docs/decisions/0049-backups.md) */
#define CELLA_BACKUP_TTL_DEFAULT 259200        /* seconds a backup is kept (the hosted SDK's) */
#define CELLA_BACKUP_TTL_MAX (366LL * 86400)   /* the longest ttl accepted, in seconds */
#define CELLA_BACKUP_NAME_MAX 256              /* bytes of a backup's name */
#define CELLA_BACKUP_DIR_MAX 1024              /* bytes of the directory a backup is of */
#define CELLA_BACKUP_RECORD_MAX 8192           /* bytes of one backup's JSON record */
#define CELLA_BACKUP_LIST_MAX 10000            /* backups one listing reads */
#define CELLA_BACKUP_SWEEP_MS 2000             /* how often expired backups are looked for */
#define CELLA_BACKUP_STORE_SPEC_MAX 2048       /* bytes of --backup-store */
#define CELLA_BACKUP_S3_LIST_MAX (1024 * 1024) /* one ListObjectsV2 answer */
#define CELLA_BACKUP_ERROR_MAX 240             /* what the archiver says when it fails */
#define CELLA_BACKUP_PIPE_BYTES (1024 * 1024)  /* the archive's pipe to and from cella-archive */
#define CELLA_BACKUP_PATTERN_MAX 1024          /* bytes of one exclude or .gitignore pattern */
#define CELLA_BACKUP_EXCLUDES_MAX 256          /* patterns in a backup's excludes */
#define CELLA_BACKUP_EXCLUDES_BYTES 16384      /* bytes of a backup's excludes together */
#define CELLA_BACKUP_GITIGNORE_BYTES 65536     /* bytes of one .gitignore a backup reads */
#define CELLA_BACKUP_GITIGNORE_ACTIVE 4096     /* .gitignore patterns in effect for one path */
#define CELLA_BACKUP_GITIGNORE_TOTAL 16384     /* .gitignore patterns one backup reads */
#define CELLA_BACKUP_PART_BYTES (8 << 20)      /* an S3 multipart upload's part (S3: >= 5 MiB) */
#define CELLA_BACKUP_PARTS_MAX 10000           /* parts of one S3 multipart upload (S3's) */

/* The cluster on etcd (src/daemon/etcd.c, cluster.c; docs/decisions/0055-cluster.md) */
#define CELLA_ETCD_ENDPOINTS_MAX 16             /* endpoints in --cluster etcd=... */
#define CELLA_ETCD_SPEC_MAX 4096                /* bytes of --cluster */
#define CELLA_ETCD_ANSWER_MAX (8 * 1024 * 1024) /* bytes of one answer of the gateway */
#define CELLA_ETCD_RANGE_MAX 100000             /* keys one range answer may hold */
#define CELLA_ETCD_CONNECT_TIMEOUT_MS 1000      /* connecting to one endpoint within */
#define CELLA_ETCD_ATTEMPT_TIMEOUT_MS 2500      /* one attempt at one endpoint answered within */
#define CELLA_ETCD_PENDING_MAX 4096             /* requests in flight at once */
#define CELLA_CLUSTER_LEASE_TTL 5       /* seconds a node's lease outlives its last keepalive */
#define CELLA_CLUSTER_KEEPALIVE_MS 1500 /* a node's keepalive period (a third of the TTL) */
#define CELLA_CLUSTER_PUBLISH_MS 200    /* load changes within this are one record put */
#define CELLA_CLUSTER_REVOKE_TIMEOUT_MS 1000 /* the lease's revoke at exit, waited for at most */
#define CELLA_CLUSTER_URL_MAX 255            /* bytes of --advertise */
#define CELLA_CLUSTER_KEY_MAX 256            /* bytes of a name's key in etcd */
#define CELLA_CLUSTER_IMAGES_MAX 256         /* images a node's record lists */
#define CELLA_CLUSTER_KEYS_POLL_MS 500       /* a node reads the keys' marker this often */
#define CELLA_CLUSTER_KEYS_RELOAD_MS 30000   /* and every key at least this often */
#define CELLA_CLUSTER_CLAIM_TRIES 16         /* a quota-held claim's txn tried at most */
/* Forwarding between nodes (decision 0056) */
#define CELLA_CLUSTER_AUTH_SKEW_MS 10000  /* a forwarded request's clock skew accepted, each way */
#define CELLA_CLUSTER_AUTH_NONCES 65536   /* nonces remembered for replays (2 skews' worth) */
#define CELLA_CLUSTER_AUTH_HEADER_MAX 512 /* bytes of an X-Cella-Cluster value */
#define CELLA_CLUSTER_SECRET_MIN 16       /* bytes of --cluster-secret-file, at least */
#define CELLA_CLUSTER_SECRET_MAX 4096     /* and at most */
#define CELLA_FORWARD_CACHE_MS 1000       /* a name's owner and the nodes' records, cached */
#define CELLA_FORWARD_CACHE_MAX 4096 /* owners cached (slots by hash: a newer name takes one) */

#define CELLA_CLUSTER_DRAIN_STOP_WAIT_MS 30000 /* cellad --drain waits this long for the stop */
#define CELLA_CLUSTER_DRAIN_STOP_DELAY_MS 200  /* a drained node stops this long after its answer */

#endif
