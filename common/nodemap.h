/*
 * nodemap — learned upstream broker addresses (node id -> host:port) as
 * they travel between a worker and the supervisor.
 *
 * Workers learn where each upstream broker lives from the Metadata
 * responses that pass through them and from their own metadata fetch.
 * They report what they learn or what changed (IPC_NODE_LEARNED), the
 * supervisor keeps the map per cluster across generations and hands it to
 * every new worker at start (IPC_NODES), so a client that connects straight
 * to a broker port after a worker restart or a reload is served at once,
 * without a metadata fetch by the new worker.
 *
 * Wire form (both messages): struct nodemap_hdr, then `count` records
 *   int32 node_id | uint16 port (1..65535) | uint8 host_len (1..255) | host
 * native-endian (the channel never leaves the machine), no padding, no
 * trailing bytes; a host holds no NUL and no control character. A map
 * larger than one message travels as several (each one self-contained).
 *
 * Pure code: encode with a writer, decode with a reader that checks every
 * record and distinguishes nothing but "valid" from "malformed" (a datagram
 * is always whole). Return conventions: see each function.
 */
#ifndef FERRY_COMMON_NODEMAP_H
#define FERRY_COMMON_NODEMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/config.h"

#define NODEMAP_F_REACHABLE 0x1u  /* IPC_NODES: the upstream answered the last
                                     generation (it need not be probed at start) */
#define NODEMAP_FLAGS_KNOWN NODEMAP_F_REACHABLE
#define NODEMAP_MAX_COUNT 65536u  /* at most one node per broker port */

struct nodemap_hdr {
	uint32_t count;           /* records that follow */
	uint32_t flags;           /* NODEMAP_F_* */
};

struct nodemap_entry {
	int32_t node_id;
	int32_t port;             /* 1..65535 */
	char host[CFG_HOST_MAX];  /* NUL-terminated, non-empty */
};

/* Bytes one entry takes on the wire. */
size_t nodemap_entry_size(const struct nodemap_entry *e);

struct nodemap_writer {
	uint8_t *buf;
	size_t cap, len;
	uint32_t count;
};

/* Start a message in buf (cap >= sizeof(struct nodemap_hdr)). */
void nodemap_writer_init(struct nodemap_writer *w, uint8_t *buf, size_t cap, uint32_t flags);
/* Append e. false (nothing written) when it does not fit, or when e is
 * not a valid entry (empty or too long host, bad port). */
bool nodemap_writer_add(struct nodemap_writer *w, const struct nodemap_entry *e);
/* Finish the header; the message length. */
size_t nodemap_writer_finish(struct nodemap_writer *w);

struct nodemap_reader {
	const uint8_t *p;
	size_t left;
	uint32_t count, done, flags;
};

/* Check the header of a message of len bytes: 0, or -1 (malformed, reason
 * in err) for a short message, unknown flags, or more than max_count
 * records (or more than the bytes could hold). */
int nodemap_reader_init(struct nodemap_reader *r, const void *buf, size_t len,
			uint32_t max_count, char *err, size_t errlen);
/* The next record into *e: 1, or 0 at the end (no trailing bytes), or -1
 * malformed (reason in err). */
int nodemap_reader_next(struct nodemap_reader *r, struct nodemap_entry *e, char *err,
			size_t errlen);
/* A whole message valid? 0 / -1 with the reason. */
int nodemap_check(const void *buf, size_t len, uint32_t max_count, char *err, size_t errlen);

#endif
