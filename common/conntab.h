/*
 * conntab — the shared table of one worker process's client connections:
 * who is connected (the client's address after any PROXY protocol header,
 * its client_id, client software, SASL mechanism and asserted identity),
 * since when, and how many open connections each client software has. The
 * supervisor answers GET /admin/clusters/NAME/connections and the software
 * counts of /metrics from it without asking the worker anything, so a busy
 * or hung worker costs the listing nothing.
 *
 * Like the metrics block (metrics.h), the supervisor creates it (a sealed
 * memfd, shmblock.h) with the worker's configuration and the worker is its
 * one writer. Rows and software slots are written whole under a per-entry
 * sequence lock; a reader copies an entry and keeps it only when the
 * sequence was even and unchanged (a few retries, then the entry is
 * skipped: a listing is a snapshot, never a reason to wait).
 *
 * Sizes are bounded whatever clients send: a row holds fixed-size,
 * NUL-terminated strings that the worker has already reduced to printable
 * ASCII (worker/kafka/clientinfo.h). The supervisor trusts none of that:
 * conntab_read() terminates and sanitises every string again, since the
 * block is writable by a process that parses the network.
 *
 * The block's size is never taken from the block: each side passes the
 * row count it computed itself (the supervisor from the configuration it
 * created the block for), so a worker that scribbles over the header
 * cannot make the supervisor read or unmap past its mapping.
 *
 * Capacity: conntab_rows(max_connections) rows, at most CONNTAB_MAX_ROWS
 * (a worker cannot hold more: RLIMIT_NOFILE). A connection that finds no
 * free row is counted in `unlisted` and is not listed. Rows below the
 * high-water mark `hwm` are the only ones a reader looks at, so the pages
 * of rows never used are never touched (a read of a memfd page allocates
 * it). Rows freed are reused lowest-first by the worker (conntab_writer).
 *
 * Software counts: CONNTAB_SOFTWARE slots of (name, version, open
 * connections), taken by the worker for each valid pair it sees (Kafka's
 * rule for ClientSoftwareName/Version) and given back when their count
 * falls to zero; a pair that finds no slot counts as `other`, a connection
 * that sent no software (yet, or ever: ApiVersions below v3) as `unknown`,
 * one whose software strings break the rule as `invalid`. So /metrics has
 * at most CONNTAB_SOFTWARE + 3 series per worker; the supervisor bounds the
 * cluster's sum the same way.
 *
 * Return conventions: create/map return the fd / 0, or -1 with errno;
 * readers return true when they copied a consistent entry.
 */
#ifndef FERRY_COMMON_CONNTAB_H
#define FERRY_COMMON_CONNTAB_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define CONNTAB_MAGIC 0x6665727279630001ULL /* "ferryc" v1 */
#define CONNTAB_MAX_ROWS 16384
#define CONNTAB_SOFTWARE 32

#define CONNTAB_ADDR_MAX 56        /* "[IPv6]:port" */
#define CONNTAB_CLIENT_ID_MAX 256  /* with the NUL: clientinfo.h's bounds */
#define CONNTAB_SOFTWARE_MAX 65
#define CONNTAB_MECH_MAX 24
#define CONNTAB_PRINCIPAL_MAX 256
#define CONNTAB_STATE_MAX 24

/* Row flags. */
#define CONNTAB_F_TLS            0x01u  /* client TLS */
#define CONNTAB_F_PROXIED        0x02u  /* addr came from a PROXY header */
#define CONNTAB_F_CLIENT_ID      0x04u  /* a request header was read */
#define CONNTAB_F_CLIENT_ID_NULL 0x08u  /* ... and its client_id was null */
#define CONNTAB_F_SOFTWARE       0x10u  /* software name/version were sent */
#define CONNTAB_F_SOFTWARE_VALID 0x20u  /* ... and follow Kafka's rule */
#define CONNTAB_F_PRINCIPAL      0x40u  /* an asserted identity was read */
#define CONNTAB_F_BROKER         0x80u  /* accepted on a broker listener (or
                                           an SNI broker name): node_id */

/* One connection as written and as read (the reader's copy is sanitised). */
struct conntab_entry {
	uint64_t id;                      /* the worker's connection serial */
	int64_t since_ms;                 /* wall clock of its first accept */
	int32_t node_id;                  /* with CONNTAB_F_BROKER */
	uint32_t flags;
	char addr[CONNTAB_ADDR_MAX];
	char state[CONNTAB_STATE_MAX];    /* its lifecycle state (conn_fsm.h) */
	char client_id[CONNTAB_CLIENT_ID_MAX];
	char software_name[CONNTAB_SOFTWARE_MAX];
	char software_version[CONNTAB_SOFTWARE_MAX];
	char mechanism[CONNTAB_MECH_MAX]; /* "" before a SaslHandshake */
	char principal[CONNTAB_PRINCIPAL_MAX];
};

struct conntab_row {
	_Atomic uint32_t seq;             /* odd while being written */
	uint32_t used;                    /* 1: a connection's row */
	struct conntab_entry e;
};

struct conntab_soft {
	_Atomic uint32_t seq;             /* odd while the names change */
	uint32_t pad;
	_Atomic uint64_t count;           /* open connections with this pair */
	char name[CONNTAB_SOFTWARE_MAX];
	char version[CONNTAB_SOFTWARE_MAX];
};

/* Software buckets of a connection besides the slots 0..CONNTAB_SOFTWARE-1. */
enum conntab_bucket {
	CONNTAB_B_NONE = -1,              /* not counted (not in the table) */
	CONNTAB_B_UNKNOWN = -2,
	CONNTAB_B_INVALID = -3,
	CONNTAB_B_OTHER = -4,
};

struct conntab {
	uint64_t magic;
	uint32_t rows;                    /* capacity */
	uint32_t pad;
	_Atomic uint32_t hwm;             /* rows [0, hwm) may be in use */
	_Atomic uint32_t used;            /* rows in use */
	_Atomic uint64_t unlisted;        /* open connections without a row */
	_Atomic uint64_t soft_unknown, soft_invalid, soft_other;
	struct conntab_soft soft[CONNTAB_SOFTWARE];
	struct conntab_row row[];
};

/* Rows for a cluster's max_connections, and the block's size for them. */
uint32_t conntab_rows(uint64_t max_connections);
size_t conntab_size(uint32_t rows);

/* Supervisor: a sealed block of `rows` rows, mapped at *out; its fd. */
int conntab_create(uint32_t rows, struct conntab **out);
/* Worker: map a received block, which must be sealed and have exactly
 * `rows` rows (what it computes from its own configuration). */
int conntab_map(int fd, uint32_t rows, struct conntab **out);
void conntab_unmap(struct conntab *t, uint32_t rows);

/* ---- the worker's side ---- */

/* The worker's bookkeeping of free rows (in its own memory). */
struct conntab_writer {
	struct conntab *t;
	uint32_t rows;                    /* what the block was mapped with */
	uint32_t *free;                   /* a min-heap of free rows below hwm */
	uint32_t n_free;
};

/* 0, or -1 (out of memory). t may be NULL: every call is then a no-op. */
int conntab_writer_init(struct conntab_writer *w, struct conntab *t, uint32_t rows);
void conntab_writer_free(struct conntab_writer *w);
/* A row for a new connection: its index, or -1 (table full: counted as
 * unlisted until conntab_release(w, -1)). The row is written by
 * conntab_put. */
int conntab_take(struct conntab_writer *w);
/* Write row i (whole) from e. */
void conntab_put(struct conntab_writer *w, int i, const struct conntab_entry *e);
/* The connection of row i (or, i == -1, an unlisted one) is gone. */
void conntab_release(struct conntab_writer *w, int i);

/* Move a connection's software count from bucket `from` to the bucket of
 * (name, version) (valid: both follow Kafka's rule; seen: the client sent
 * them at all). Returns the new bucket. */
int conntab_soft_move(struct conntab_writer *w, int from, bool seen, bool valid,
		      const char *name, const char *version);
/* Count a connection in bucket b (a new connection: CONNTAB_B_UNKNOWN), or
 * stop counting it (conntab_soft_drop). */
void conntab_soft_add(struct conntab_writer *w, int b);
void conntab_soft_drop(struct conntab_writer *w, int b);

/* ---- the supervisor's side ---- */

/* Rows a reader looks at (below `rows`, the count it mapped the block with). */
uint32_t conntab_hwm(const struct conntab *t, uint32_t rows);
/* A consistent copy of row i, sanitised; false when unused or changing. */
bool conntab_read(const struct conntab *t, uint32_t rows, uint32_t i,
		  struct conntab_entry *out);
/* Software slot s: false when empty or changing. */
bool conntab_soft_read(const struct conntab *t, unsigned s, char *name, char *version,
		       uint64_t *count);

/* "1.2.3.4:5", "[2001:db8::1]:5" (an IPv4-mapped IPv6 address as IPv4),
 * "?" for anything else. */
void conntab_fmt_addr(const struct sockaddr *sa, char *buf, size_t len);
/* Copy src into dst (dstlen bytes, NUL-terminated within them), every byte
 * outside printable ASCII as '?', stopping at src's NUL or srclen. */
void conntab_sanitize(char *dst, size_t dstlen, const char *src, size_t srclen);

#endif
