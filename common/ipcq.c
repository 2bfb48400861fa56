/*
 * ipcq — bounded ordered send queue; see ipcq.h.
 */
#include "common/ipcq.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

struct ipcq_item {
	struct ipcq_item *next;
	uint32_t type;
	uint64_t generation;
	size_t len;
	size_t nfds;
	int fds[IPC_MAX_FDS];
	uint8_t payload[];
};

void
ipcq_init(struct ipcq *q, size_t max_msgs, size_t max_bytes)
{
	memset(q, 0, sizeof *q);
	q->max_msgs = max_msgs ? max_msgs : IPCQ_MAX_MSGS;
	q->max_bytes = max_bytes ? max_bytes : IPCQ_MAX_BYTES;
}

static void
ipcq_item_free(struct ipcq_item *it)
{
	for (size_t i = 0; i < it->nfds; i++)
		if (it->fds[i] >= 0)
			close(it->fds[i]);
	if (it->type == IPC_TLS_MATERIAL)  /* key bytes: never left in freed memory */
		sodium_memzero(it->payload, it->len);
	free(it);
}

static void
ipcq_pop(struct ipcq *q)
{
	struct ipcq_item *it = q->head;
	q->head = it->next;
	if (!q->head)
		q->tail = NULL;
	q->n--;
	q->bytes -= it->len;
	ipcq_item_free(it);
}

void
ipcq_clear(struct ipcq *q)
{
	while (q->head)
		ipcq_pop(q);
}

bool
ipcq_pending(const struct ipcq *q)
{
	return q->head != NULL;
}

static int
ipcq_push(struct ipcq *q, enum ipc_type type, uint64_t generation, const void *payload,
	  size_t len, const int *fds, size_t nfds)
{
	if (q->n + 1 > q->max_msgs || q->bytes + len > q->max_bytes) {
		errno = ENOBUFS;
		return -1;
	}
	struct ipcq_item *it = malloc(sizeof *it + len);
	if (!it) {
		errno = ENOMEM;
		return -1;
	}
	it->next = NULL;
	it->type = (uint32_t)type;
	it->generation = generation;
	it->len = len;
	it->nfds = 0;
	if (len)
		memcpy(it->payload, payload, len);
	for (size_t i = 0; i < nfds; i++) {
		int d = fcntl(fds[i], F_DUPFD_CLOEXEC, 0);
		if (d == -1) {
			int e = errno;
			ipcq_item_free(it);
			errno = e;
			return -1;
		}
		it->fds[it->nfds++] = d;
	}
	if (q->tail)
		q->tail->next = it;
	else
		q->head = it;
	q->tail = it;
	q->n++;
	q->bytes += len;
	q->queued++;
	return 0;
}

int
ipcq_flush(struct ipcq *q, int sock)
{
	while (q->head) {
		struct ipcq_item *it = q->head;
		if (ipc_send(sock, it->type, it->generation, it->payload, it->len, it->fds,
		    it->nfds) == -1) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS)
				return 0;
			return -1;
		}
		q->sent++;
		ipcq_pop(q);
	}
	return 1;
}

int
ipcq_send(struct ipcq *q, int sock, enum ipc_type type, uint64_t generation,
	  const void *payload, size_t len, const int *fds, size_t nfds)
{
	if (len > IPC_MAX_PAYLOAD || nfds > IPC_MAX_FDS) {
		errno = EMSGSIZE;
		return -1;
	}
	if (!q->head) {
		if (ipc_send(sock, type, generation, payload, len, fds, nfds) == 0) {
			q->sent++;
			return 0;
		}
		/* ENOBUFS from a SOCK_SEQPACKET send means "no room now" */
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS)
			return -1;
	}
	return ipcq_push(q, type, generation, payload, len, fds, nfds);
}
