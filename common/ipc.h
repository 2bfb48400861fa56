/*
 * ipc — typed messages between the supervisor and its workers.
 *
 * Transport: one SOCK_SEQPACKET socketpair per worker, so every message is
 * one datagram with preserved boundaries. Each message is an envelope
 * { type, len, generation } followed by len payload bytes, and may carry
 * file descriptors (SCM_RIGHTS) through ipc_send()/ipc_recv(), the only two
 * functions that touch ancillary data. Sizes are checked exactly on
 * receipt: a message whose length does not match its type is malformed.
 * A truncated datagram (MSG_TRUNC) or truncated fd list (MSG_CTRUNC) is an
 * error; fds that did arrive with a bad message are closed.
 *
 * Every message carries the worker's generation, so the supervisor never
 * lets the report of an old generation overwrite a newer one's.
 *
 * Encode/decode (ipc_encode/ipc_decode) are pure and unit-tested; send/recv
 * are the thin I/O layer around them.
 */
#ifndef FERRY_COMMON_IPC_H
#define FERRY_COMMON_IPC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define IPC_MAX_PAYLOAD (256 * 1024)
#define IPC_MAX_FDS 64

/* The version of this protocol between a supervisor and its workers. Both
 * are always the same binary (workers run /proc/self/exe); an upgrade
 * never mixes them (docs/design.md §11). */
#define IPC_PROTOCOL_VERSION 2

enum ipc_type {
	IPC_NONE = 0,
	/* supervisor -> worker */
	IPC_CONFIG,      /* payload: canonical cluster text; fds: [the worker's metrics
	                    memfd, the generation's shared block (genshm.h)] */
	IPC_LISTENERS,   /* payload: struct ipc_listeners; fds: a batch of listeners */
	IPC_ACCEPT,      /* start accepting on the listeners */
	IPC_DRAIN,       /* payload: struct ipc_drain */
	IPC_STOP,        /* close everything and exit now */
	IPC_PING,        /* payload: struct ipc_ping; answered with PONG (watchdog) */
	IPC_LOG_LEVEL,   /* payload: struct ipc_log_level (a reload changed it) */
	IPC_HANDOVER,    /* payload: struct ipc_handover; like DRAIN, but connections
	                    whose upstream stays valid move to the new generation */
	IPC_CONN_IN,     /* payload: struct ipc_conn_record + pending bytes; fds:
	                    [client] or [client, upstream]: adopt this connection */
	IPC_CONN_DONE,   /* payload: struct ipc_conn_ack: the outcome of a CONN_OUT */
	IPC_PROBE,       /* fetch upstream metadata now and report (reload check) */
	IPC_TLS_MATERIAL, /* payload: struct ipc_tls_material + the bytes of the
	                    cluster's TLS files; right after CONFIG, before
	                    LISTENERS, when the cluster has TLS keys */
	/* sup -> worker, after CONFIG and before LISTENERS: learned brokers
	   and TLS session ticket keys */
	IPC_NODES,       /* payload: a node map (common/nodemap.h): the upstream
	                    brokers the cluster's earlier generations learned */
	IPC_TICKET_KEYS, /* payload: struct tlskeys (common/tlskeys.h) exactly; also
	                    sent to every live worker at each rotation */
	/* worker -> supervisor */
	IPC_READY,       /* payload: struct ipc_ready; config parsed, listeners
	                    received; held until ACCEPT */
	IPC_UPSTREAM,    /* payload: struct ipc_upstream */
	IPC_FAILED,      /* payload: reason text; worker exits with WORKER_EXIT_CONFIG */
	IPC_UNKNOWN_NODE, /* payload: struct ipc_unknown_node */
	IPC_PONG,        /* payload: struct ipc_ping, the sequence it answers */
	IPC_CONN_OUT,    /* payload: struct ipc_conn_record + pending bytes; fds:
	                    [client] or [client, upstream]: hand this one over */
	IPC_CONN_TAKEN,  /* payload: struct ipc_conn_ack: a CONN_IN was adopted (or not) */
	/* worker -> supervisor: brokers learned */
	IPC_NODE_LEARNED, /* payload: a node map (common/nodemap.h): upstream brokers
	                     this worker learned or saw move */
	/* supervisor <-> admin process (ferry-admin). The payloads are
	   supervisor/adminproto.h's; ipc_decode checks only their range, the
	   receiver checks each exactly with adminproto_*_check. The admin
	   channel also carries READY (struct ipc_ready), PING/PONG,
	   LOG_LEVEL and STOP. */
	IPC_ADMIN_SETUP,   /* sup -> admin: adminproto_setup; fds: [counters block,
	                      control socket listener (, admin_listen listener)] */
	IPC_ADMIN_CREDS,   /* sup -> admin: adminproto_creds + the HTTPS files' bytes */
	IPC_ADMIN_REQUEST, /* admin -> sup: adminproto_request (+ error texts);
	                      fds: [the body, a sealed memfd] or none */
	IPC_ADMIN_ANSWER,  /* sup -> admin: adminproto_answer (+ the body inline);
	                      fds: [the body, a sealed memfd] or none */
	IPC_ADMIN_LISTEN,  /* sup -> admin: adminproto_listen (pause, accept, close
	                      the listening sockets: an upgrade) */
	IPC_TYPE_COUNT,
};

const char *ipc_type_str(enum ipc_type t);

struct ipc_hdr {
	uint32_t type;
	uint32_t len;          /* payload bytes after this header */
	uint64_t generation;
};

/* Listening sockets travel in batches of at most IPC_MAX_FDS, in order
 * (bootstrap first, then brokers in node order); the worker collects
 * messages until it has `total`. */
struct ipc_listeners {
	uint32_t count;        /* number of fds that came with this message */
	uint32_t first;        /* index of the first of them */
	uint32_t total;        /* listening sockets of the cluster */
};

/* A worker is told the protocol version it must speak (--ipc N on its
 * command line: one it does not speak is exit WORKER_EXIT_CONFIG before a
 * single message) and says which it speaks in READY; the supervisor takes
 * no other (a malformed message: the worker is killed). Defence in depth:
 * both are the same binary. */
struct ipc_ready {
	uint32_t ipc_version;  /* IPC_PROTOCOL_VERSION */
	uint32_t pad;
};

struct ipc_drain {
	uint64_t deadline_ms;  /* relative: drain_timeout */
};

/* Watchdog: the supervisor pings, the worker's loop answers with the same
 * sequence number. */
struct ipc_ping {
	uint64_t seq;
};

struct ipc_log_level {
	uint32_t level;        /* enum log_level */
};

/*
 * Live connection handover (a reload that keeps the upstream): the old
 * worker stops reading requests at a boundary, delivers every response
 * owed, then sends each connection (CONN_OUT: its sockets and this record)
 * to the supervisor, which passes it to a worker of the new generation
 * (CONN_IN with the supervisor's relay id in `id`). The new worker adopts
 * it and answers CONN_TAKEN; the supervisor tells the old worker
 * (CONN_DONE with the old worker's id): adopted -> it closes its copies of
 * the sockets only; not adopted -> it closes the connection cleanly
 * (shutdown + close: it owes nothing). The old worker keeps its copies
 * until then, so a handover that fails anywhere ends as a drain.
 */
struct ipc_handover {
	uint64_t deadline_ms;  /* drain_timeout: force-close what is left */
	uint64_t spread_ms;    /* drain_spread: connections that must close do so at
	                          request boundaries spread over this */
	uint32_t handover;     /* 1: move connections; 0: close them (upstream changed) */
	uint32_t pad;
};

#define IPC_CONN_F_UPSTREAM 0x1u  /* an upstream socket follows the client's */
#define IPC_CONN_PENDING_MAX (64u * 1024u)

struct ipc_conn_record {
	uint64_t id;           /* the sender's handle, echoed in the ack */
	int32_t broker_index;  /* -1: bootstrap listener */
	uint32_t flags;        /* IPC_CONN_F_* */
	int32_t upstream_try;  /* bootstrap connections: index into upstream */
	uint32_t sasl;         /* SASL pass-through state (worker/kafka/sasl.h:
	                          sasl_encode; never a raw exchange in progress) */
	uint64_t requests;     /* requests served so far on this connection */
	uint32_t pending_len;  /* client bytes read but not forwarded (a partial
	                          request), after the record (and its client part) */
	uint32_t version;      /* IPC_CONN_RECORD_V1 or IPC_CONN_RECORD_VERSION */
};
/* Version 1: the record, then the pending bytes. Version 2 (what this
 * binary sends) puts struct ipc_conn_client between them: who the client
 * is and since when, so the connection keeps its real address, its age
 * (connection_max_age) and what it said of itself. A version 1 record is
 * still adopted; its connection starts its age and identity afresh. */
#define IPC_CONN_RECORD_V1 1
#define IPC_CONN_RECORD_VERSION 2

/* String sizes of the client part, NUL included (worker/kafka/clientinfo.h
 * keeps values this long). */
#define IPC_CONN_CLIENT_ID_MAX 256
#define IPC_CONN_SOFTWARE_MAX 65
#define IPC_CONN_MECH_MAX 24
#define IPC_CONN_PRINCIPAL_MAX 256

/* ipc_conn_client.flags */
#define IPC_CONN_C_PROXIED         0x001u  /* addr came from a PROXY header */
#define IPC_CONN_C_CLIENT_ID       0x002u  /* a request header was read */
#define IPC_CONN_C_CLIENT_ID_NULL  0x004u
#define IPC_CONN_C_CLIENT_ID_CUT   0x008u
#define IPC_CONN_C_SOFTWARE        0x010u  /* ApiVersions v3+ was read */
#define IPC_CONN_C_SOFTWARE_VALID  0x020u
#define IPC_CONN_C_SOFTWARE_CUT    0x040u
#define IPC_CONN_C_PRINCIPAL       0x080u  /* an asserted identity was read */
#define IPC_CONN_C_PRINCIPAL_CUT   0x100u
#define IPC_CONN_C_SASL_FIRST      0x200u  /* the next client token is the first */
#define IPC_CONN_C_ALL             0x3ffu

struct ipc_conn_client {
	int64_t since_ms;      /* wall clock of its first accept */
	uint64_t age_ms;       /* open this long when it left (monotonic) */
	uint32_t age_rnd;      /* its draw in connection_max_age_jitter */
	uint32_t flags;        /* IPC_CONN_C_* */
	uint16_t family;       /* AF_INET, AF_INET6, or 0: not known */
	uint16_t port;         /* host order */
	uint8_t addr[16];      /* AF_INET: the first 4 bytes */
	uint32_t mech;         /* enum sasl_mech (worker/kafka/sasl.h) */
	char mech_name[IPC_CONN_MECH_MAX];
	char client_id[IPC_CONN_CLIENT_ID_MAX];
	char software_name[IPC_CONN_SOFTWARE_MAX];
	char software_version[IPC_CONN_SOFTWARE_MAX];
	char principal[IPC_CONN_PRINCIPAL_MAX];
	uint8_t pad[6];
};

/* The largest CONN_OUT / CONN_IN payload. */
#define IPC_CONN_RECORD_MAX (sizeof(struct ipc_conn_record) + \
	sizeof(struct ipc_conn_client) + IPC_CONN_PENDING_MAX)

/* The outcome of a handed-over connection (CONN_TAKEN, CONN_DONE). */
enum ipc_adopted {
	IPC_ADOPT_NO = 0,      /* refused: the old worker closes it cleanly (shutdown) */
	IPC_ADOPT_YES = 1,     /* adopted: the old worker closes its copies only */
	IPC_ADOPT_UNKNOWN = 2, /* no answer in time (relay timeout, the new worker
	                          or supervisor gone): the old worker closes its
	                          copies only, never shutdown(), which would cut the
	                          connection for a worker that adopted it late; if
	                          nobody did, that last close is the clean one */
};

struct ipc_conn_ack {
	uint64_t id;
	uint32_t adopted;      /* enum ipc_adopted */
	uint32_t pad;
};

/* Check a CONN_OUT / CONN_IN payload: the record, its version, flags and
 * pending_len against len and the fds that came with it. 0, or -1 with a
 * reason. Pure. */
int ipc_conn_record_check(const void *payload, size_t len, size_t nfds,
			  struct ipc_conn_record *out, char *err, size_t errlen);
/* Bytes of a checked record's payload before its pending bytes (the
 * record, and its client part from version 2 on). */
size_t ipc_conn_record_head(const struct ipc_conn_record *r);
/* Check a client part: known flags and family, every string NUL-terminated
 * and printable ASCII, an age below a century. 0, or -1 with a reason. */
int ipc_conn_client_check(const struct ipc_conn_client *c, char *err, size_t errlen);

/* The TLS files of a cluster and its upstream SASL password (enum
 * cfg_tls_file order), their bytes right after this header, one after the
 * other; len 0 = not set. The worker builds its contexts from them, keeps
 * the password in guarded memory and wipes the buffer. */
#define IPC_TLS_FILES 7
struct ipc_tls_material {
	uint32_t len[IPC_TLS_FILES];
	uint32_t version;      /* IPC_TLS_MATERIAL_VERSION */
	uint32_t pad;
};
#define IPC_TLS_MATERIAL_VERSION 2

/* Check a TLS_MATERIAL payload: the header, its version, and that the
 * lengths add up to len exactly. 0, or -1 with a reason. Pure. */
int ipc_tls_material_check(const void *payload, size_t len, struct ipc_tls_material *out,
			   char *err, size_t errlen);

struct ipc_upstream {
	uint32_t reachable;    /* 1 / 0 */
	char error[188];       /* NUL-terminated, last error when unreachable */
};

/* Upstream metadata named a node id that has no broker port (node_ids). */
struct ipc_unknown_node {
	int32_t node_id;
	int32_t port;
	char host[256];        /* NUL-terminated upstream host */
};

struct ipc_msg {
	struct ipc_hdr hdr;
	uint8_t *payload;      /* points into the receive buffer */
	int fds[IPC_MAX_FDS];
	size_t nfds;
};

/* Exit status a worker uses when its configuration is not viable (do not
 * restart it in a loop). EX_CONFIG from sysexits.h. */
#define WORKER_EXIT_CONFIG 78

/* Encode header + payload into buf (cap bytes). Returns total length or -1
 * (EMSGSIZE) when it does not fit or exceeds IPC_MAX_PAYLOAD. */
ssize_t ipc_encode(uint8_t *buf, size_t cap, enum ipc_type type, uint64_t generation,
		   const void *payload, size_t len);

/* Decode one datagram. 0 on success (msg->payload points into buf); -1 with
 * a reason in err for a short header, unknown type, length that does not
 * match the datagram, or a payload size wrong for its type. */
int ipc_decode(const uint8_t *buf, size_t len, struct ipc_msg *msg, char *err, size_t errlen);

/* Send one message with optional fds (the fds stay owned by the caller).
 * Blocking semantics on a blocking socket; on a non-blocking one, -1/EAGAIN
 * may be returned. Returns 0 or -1 (errno). */
int ipc_send(int sock, enum ipc_type type, uint64_t generation,
	     const void *payload, size_t len, const int *fds, size_t nfds);

/* Receive one message into buf (cap ≥ sizeof hdr + IPC_MAX_PAYLOAD). Returns
 * 1 on a message, 0 on EOF, -1 on error (errno; EAGAIN when nothing is
 * there; EBADMSG for a malformed message with the reason in err). Received
 * fds are O_CLOEXEC and owned by the caller (closed on error). */
int ipc_recv(int sock, uint8_t *buf, size_t cap, struct ipc_msg *msg, char *err, size_t errlen);

/* The same framing for another protocol over the same envelope (the
 * upgrade channel, supervisor/upgproto.h): ipc_decode_frame checks only the
 * envelope (length matches the datagram, at most IPC_MAX_PAYLOAD); the
 * type and payload are the caller's to check. */
int ipc_decode_frame(const uint8_t *buf, size_t len, struct ipc_msg *msg, char *err,
		     size_t errlen);
int ipc_recv_frame(int sock, uint8_t *buf, size_t cap, struct ipc_msg *msg, char *err,
		   size_t errlen);

void ipc_close_fds(struct ipc_msg *msg);
/* The caller takes the fds (msg->fds stays readable; nfds becomes 0). */
void ipc_msg_take_fds(struct ipc_msg *msg);

#endif
