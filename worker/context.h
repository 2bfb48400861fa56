/*
 * context — struct worker, the worker process's one context, and the
 * services every part of the worker uses: the buffer pool, the ordered
 * channel to the supervisor, the shared connection count, and the table
 * of upstream brokers with what the supervisor is told of it. Its
 * functions are named worker_* after the struct they work on.
 *
 * Files of the worker call downwards only: worker.c (the process: IPC,
 * listeners, drain) -> conn*.c (connections) -> upstream.c (DNS, connects,
 * the metadata fetch) -> context.c. The two calls that go up are hooks set
 * by worker.c (worker_context_init): a channel that breaks makes the worker
 * an orphan, and the end of a metadata fetch resumes the connections
 * waiting for broker addresses.
 */
#ifndef FERRY_WORKER_CONTEXT_H
#define FERRY_WORKER_CONTEXT_H

#include <ares.h>
#include <ev.h>
#include <openssl/ssl.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/config.h"
#include "common/conntab.h"
#include "common/genshm.h"
#include "common/ipc.h"
#include "common/ipcq.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/tlscache.h"
#include "worker/sni_gate.h"
#include "common/tlskeys.h"

#define WORKER_IPC_FD 3
#define WORKER_CONNECT_TIMEOUT_MS 10000
#define WORKER_METADATA_TIMEOUT_MS 10000
#define WORKER_ORPHAN_DRAIN_MS 1500     /* drain budget when the supervisor is gone:
                                           no worker outlives ferryd by more than this */
#define WORKER_UNKNOWN_NODES 16         /* distinct unknown node ids reported */
#define WORKER_BUF_SIZE (64 * 1024)     /* per-direction I/O buffer */
/* In-flight requests per connection: cl->max_inflight (max_inflight_per_connection). */
#define WORKER_PROBE_MIN_MS 1000        /* upstream unreachable: first re-probe after */
#define WORKER_PROBE_MAX_MS 30000       /* ... doubling up to this */
#define WORKER_ACCEPT_BACKOFF_MS 100    /* EMFILE/ENFILE: accepting paused this long */
#define WORKER_BUF_POOL 256             /* idle buffers kept for reuse */
#define WORKER_TLS_SESSIONS 256         /* upstream TLS sessions kept (one per broker) */
#define WORKER_HEARTBEAT_MS 100         /* shared heartbeat period */
#define WORKER_HEARTBEAT_STALE_MS 500   /* a sibling silent this long is not waited for */
#define WORKER_DEFER_MS 5               /* longest a worker lets a sibling go first */
#define WORKER_HANDOVER_WINDOW 32       /* connections handed over (CONN_OUT sent)
                                           whose CONN_DONE has not come yet */
#define WORKER_SNI_NODES GENSHM_NODES   /* gateway = sni: distinct upstream node
                                           ids the worker serves */

struct conn;
struct upstream_fetch;

/* What the worker knows of an upstream broker: learned from every Metadata
 * response that passes through (and from its own fetches). */
struct worker_node {
	int32_t node_id;
	char host[CFG_HOST_MAX];
	int32_t port;
	bool known;
	bool used;                  /* gateway = sni: slot taken by node_id */
	bool report;                /* learned here, not yet told the supervisor */
};

struct worker_listener {
	struct worker *w;
	ev_io io;
	int fd;
	int broker_index;           /* -1 = bootstrap, else index into node_ids */
};

struct worker {
	struct ev_loop *loop;
	struct cfg cfg;             /* parsed from the canonical text */
	struct cfg_cluster *cl;     /* = &cfg.clusters[0] */
	uint64_t generation;
	pid_t supervisor_pid;
	struct metrics *m;
	int ipc_fd;
	ev_io ipc_io;
	ev_io ipc_wio;              /* while ipc_q holds messages */
	struct ipcq ipc_q;          /* to the supervisor: ordered, bounded */
	unsigned index;             /* of this worker in its generation */
	struct genshm *gen;         /* shared by the generation's workers */
	ev_timer heartbeat;         /* publishes that this loop turns */
	ev_timer accept_defer;      /* a sibling with fewer connections goes first */
	bool deferring;
	bool defer_done;            /* stepped back once: accept on the next wake-up */

	/* TLS contexts built from IPC_TLS_MATERIAL before READY (the worker
	 * never opens a key file): clients (cl->tls) and upstream
	 * (cl->upstream_tls); NULL = plaintext. */
	SSL_CTX *tls_server;
	SSL_CTX *tls_client;
	/* sessions of tls_client per upstream (name + address dialled), so
	 * the next connection to a broker resumes; NULL without upstream TLS */
	struct tlscache *tls_sessions;
	/* upstream_sasl_*: ferry's own password (from IPC_TLS_MATERIAL) in
	 * guarded, read-only memory; NULL without upstream_sasl_mechanism */
	uint8_t *sasl_password;
	size_t sasl_password_len;

	struct worker_listener *listeners;
	size_t n_listeners;
	bool accepting;
	ev_timer accept_backoff;    /* EMFILE/ENFILE: pause accepting */

	/* Upstream brokers. gateway = ports: n_nodes = n_brokers, parallel to
	 * cl->node_ids. gateway = sni: WORKER_SNI_NODES slots, open
	 * addressing by node id (worker_node_slot), filled only by what the
	 * upstream's metadata names, so any node id works, bounded. */
	struct worker_node *nodes;
	size_t n_nodes;
	char sni_host[CFG_HOST_MAX]; /* gateway = sni: the broker name last advertised */
	struct sni_gate sni_gate;   /* arg of tls_server's ClientHello callback */
	struct upstream_fetch *fetch; /* in-flight metadata fetch, or NULL */
	/* the broker map earlier generations learned, kept by the supervisor
	 * and handed to each new worker (IPC_NODES) */
	size_t nodes_inherited;     /* known from IPC_NODES at start */
	bool nodes_reachable;       /* ... and the upstream answered the last generation */
	bool nodes_reporting;       /* accepted once: learned nodes go to the supervisor */
	ev_timer nodes_report;      /* batches IPC_NODE_LEARNED once per loop turn */
	uint64_t metadata_fetches;  /* own fetches started (logged at exit) */
	/* TLS session-ticket keys from the supervisor (IPC_TICKET_KEYS),
	 * updated in place at every rotation; the TLS server contexts read them
	 * (tls_ticket_keys_install(ctx, &w->tickets)). n == 0: no tickets. */
	struct tlskeys tickets;

	struct conn *conns;         /* doubly linked list of live connections */
	uint64_t n_conns;
	uint64_t conn_serial;       /* ids of this worker's connections (conntab rows) */
	/* the connections as the supervisor lists them (common/conntab.h) */
	struct conntab_writer ct;

	/* buffer pool: WORKER_BUF_SIZE blocks */
	void *pool[WORKER_BUF_POOL];
	size_t n_pool;

	/* DNS */
	ares_channel ares;
	ev_timer ares_timer;
	struct worker_ares_io *ares_ios;

	/* upstream condition as last reported */
	int upstream_reachable;     /* -1 unknown, 0, 1 */
	char upstream_error[188];
	/* While unreachable, the worker re-probes on its own (a metadata
	 * fetch) with a doubling delay, so the condition recovers without
	 * client traffic. */
	ev_timer upstream_probe;
	uint64_t probe_delay_ms;
	/* The last own fetch failed to authenticate (a wrong password, a
	 * mechanism the broker does not enable): the condition stays
	 * unreachable with that reason, whatever clients manage on their own,
	 * until a fetch authenticates (probes go on). */
	bool upstream_auth_failed;
	/* The upstream answered ApiVersions and closed the connection on
	 * Metadata: it requires SASL and ferry has no upstream_sasl_*. It
	 * counts as reachable; brokers are learned from clients' metadata. */
	bool upstream_sasl_required;

	bool draining;
	ev_timer drain_timer;
	/* Reload (IPC_HANDOVER; conn.c): connections leave by handover or
	 * spread over this window instead of a plain drain. */
	uint64_t spread_window_ms;
	uint64_t handover_seq;      /* last connection record id given */
	size_t handover_out;        /* CONN_OUT sent, CONN_DONE not yet */
	size_t handover_waiting;    /* ready, held back by WORKER_HANDOVER_WINDOW */
	ev_timer handover_abort;    /* the channel closed: end what waits for CONN_DONE */
	/* hooks into worker.c, the only calls up (worker_context_init) */
	void (*orphan)(struct worker *w, const char *why);
	void (*metadata_ready)(struct worker *w);
	uint64_t conn_violations;   /* forbidden connection lifecycle events (bugs;
	                               conn_fsm.h), logged at exit */
	ev_signal sig_term, sig_int, sig_hup;
	struct log_ratelimit rl_proto;  /* protocol errors */
	struct log_ratelimit rl_upstream;
	struct log_ratelimit rl_accept;   /* max_connections, descriptor exhaustion */
	struct ipc_unknown_node unknown[WORKER_UNKNOWN_NODES]; /* already reported */
	size_t n_unknown;
	uint8_t ipc_buf[sizeof(struct ipc_hdr) + IPC_MAX_PAYLOAD];
};

/* Set the hooks the lower files call up through (worker.c's), and the
 * timer that batches broker reports. */
void worker_context_init(struct worker *w, void (*orphan)(struct worker *w, const char *why),
			 void (*metadata_ready)(struct worker *w));
/* The metadata fetch ended: resume the connections waiting for broker
 * addresses (the metadata_ready hook). */
void worker_metadata_ready(struct worker *w);

/* Buffer pool (no allocation per request in steady state). */
void *worker_buf_get(struct worker *w);
void worker_buf_put(struct worker *w, void *buf);

/* Upstream metadata names node_id, which has no broker port: tell the
 * supervisor (once per id and address) so the cluster's status shows it. */
void worker_unknown_node(struct worker *w, int32_t node_id, const char *host, size_t host_len,
			 int32_t port);

/* Send a message to the supervisor (queued when the channel is full; a
 * supervisor that stops reading makes the worker drain as an orphan). */
void worker_ipc_send(struct worker *w, enum ipc_type type, const void *payload, size_t len);
/* The same with file descriptors (dup'ed when queued; the caller keeps its
 * own). 0 sent or queued; -1 not sent (errno): the caller falls back, and
 * a broken channel is noticed by its reader, not here. */
int worker_ipc_send_fds(struct worker *w, enum ipc_type type, const void *payload, size_t len,
			const int *fds, size_t nfds);

/* Node n (an index into w->nodes) was learned here or moved: report it to
 * the supervisor (batched; only once this worker accepts), which hands the
 * broker map to every later generation. */
void worker_node_learned(struct worker *w, size_t n);
/* IPC_NODES at start: what earlier generations learned. -1: malformed
 * (err). */
int worker_nodes_inherit(struct worker *w, const struct ipc_msg *msg, char *err, size_t errlen);

/* Open connections changed: publish the count for the siblings. */
void worker_conns_changed(struct worker *w);

/* The slot of node_id in w->nodes, or -1. gateway = ports: its index
 * in cl->node_ids. gateway = sni: the slot it has; with add, a free one is
 * taken for it (-1 only when all WORKER_SNI_NODES are taken). */
int worker_node_slot(struct worker *w, int32_t node_id, bool add);

/* A connection is gone: a draining worker with none left stops its loop. */
void worker_conn_closed(struct worker *w);

#endif
