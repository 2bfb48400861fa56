/*
 * ipcq — a bounded, ordered outgoing queue for one IPC channel (ipc.h).
 *
 * Every message to a peer goes through ipcq_send(): when nothing is queued
 * it is sent at once; when the socket is full (EAGAIN) it is copied into the
 * queue, with dups of its file descriptors, and sent by ipcq_flush() when
 * the socket becomes writable again, in order. Nothing is ever dropped
 * silently: a queue that would exceed its bounds answers -1/ENOBUFS, and
 * the owner treats that as a fault of the peer (a worker that does not read
 * its control channel is killed and restarted; a worker whose supervisor
 * does not read gives up and drains).
 *
 * Return convention: 0 sent or queued; -1 with errno (ENOBUFS queue full,
 * EPIPE/ECONNRESET peer gone, EMSGSIZE message too large, ENOMEM).
 */
#ifndef FERRY_COMMON_IPCQ_H
#define FERRY_COMMON_IPCQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/ipc.h"

#define IPCQ_MAX_MSGS 256
#define IPCQ_MAX_BYTES (4u << 20)

struct ipcq_item;

struct ipcq {
	struct ipcq_item *head, *tail;
	size_t n, bytes;
	size_t max_msgs, max_bytes;
	uint64_t sent, queued;        /* totals, for tests and logs */
};

void ipcq_init(struct ipcq *q, size_t max_msgs, size_t max_bytes);
/* Drop everything queued (closing the dup'ed fds). */
void ipcq_clear(struct ipcq *q);
bool ipcq_pending(const struct ipcq *q);

/* Send on the non-blocking socket sock, or queue behind what waits. The
 * caller keeps its fds. */
int ipcq_send(struct ipcq *q, int sock, enum ipc_type type, uint64_t generation,
	      const void *payload, size_t len, const int *fds, size_t nfds);

/* Send what is queued until the socket is full. Returns 1 when the queue is
 * empty, 0 when something is left (wait for writability), -1 on a hard error
 * (errno; the queue is kept). */
int ipcq_flush(struct ipcq *q, int sock);

#endif
