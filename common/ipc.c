/*
 * ipc — envelope encode/decode and the one SCM_RIGHTS send/receive pair;
 * see ipc.h for the message set and the trust rules.
 */
#include "common/ipc.h"
#include "common/nodemap.h"
#include "common/tlskeys.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char *const ipc_names[IPC_TYPE_COUNT] = {
	[IPC_NONE] = "none",
	[IPC_CONFIG] = "config",
	[IPC_LISTENERS] = "listeners",
	[IPC_ACCEPT] = "accept",
	[IPC_DRAIN] = "drain",
	[IPC_STOP] = "stop",
	[IPC_READY] = "ready",
	[IPC_UPSTREAM] = "upstream",
	[IPC_FAILED] = "failed",
	[IPC_UNKNOWN_NODE] = "unknown-node",
	[IPC_PING] = "ping",
	[IPC_PONG] = "pong",
	[IPC_LOG_LEVEL] = "log-level",
	[IPC_HANDOVER] = "handover",
	[IPC_CONN_IN] = "conn-in",
	[IPC_CONN_DONE] = "conn-done",
	[IPC_PROBE] = "probe",
	[IPC_TLS_MATERIAL] = "tls-material",
	[IPC_CONN_OUT] = "conn-out",
	[IPC_CONN_TAKEN] = "conn-taken",
	/* brokers learned across generations, TLS session ticket keys */
	[IPC_NODES] = "nodes",
	[IPC_TICKET_KEYS] = "ticket-keys",
	[IPC_NODE_LEARNED] = "node-learned",
	[IPC_ADMIN_SETUP] = "admin-setup",
	[IPC_ADMIN_CREDS] = "admin-creds",
	[IPC_ADMIN_REQUEST] = "admin-request",
	[IPC_ADMIN_ANSWER] = "admin-answer",
	[IPC_ADMIN_LISTEN] = "admin-listen",
};

const char *
ipc_type_str(enum ipc_type t)
{
	if ((unsigned)t >= IPC_TYPE_COUNT)
		return "unknown";
	return ipc_names[t];
}

/* Payload size rule per type: exact size, or a range for text payloads. */
static int
ipc_payload_ok(uint32_t type, uint32_t len)
{
	switch (type) {
	case IPC_CONFIG:
		return len >= 1 && len <= IPC_MAX_PAYLOAD;
	case IPC_LISTENERS:
		return len == sizeof(struct ipc_listeners);
	case IPC_DRAIN:
		return len == sizeof(struct ipc_drain);
	case IPC_UPSTREAM:
		return len == sizeof(struct ipc_upstream);
	case IPC_UNKNOWN_NODE:
		return len == sizeof(struct ipc_unknown_node);
	case IPC_PING:
	case IPC_PONG:
		return len == sizeof(struct ipc_ping);
	case IPC_LOG_LEVEL:
		return len == sizeof(struct ipc_log_level);
	case IPC_HANDOVER:
		return len == sizeof(struct ipc_handover);
	case IPC_CONN_IN:
	case IPC_CONN_OUT:
		return len >= sizeof(struct ipc_conn_record) && len <= IPC_CONN_RECORD_MAX;
	case IPC_CONN_DONE:
	case IPC_CONN_TAKEN:
		return len == sizeof(struct ipc_conn_ack);
	case IPC_PROBE:
		return len == 0;
	case IPC_TLS_MATERIAL:
		return len >= sizeof(struct ipc_tls_material) && len <= IPC_MAX_PAYLOAD;
	/* node maps: their records are checked by nodemap_check */
	case IPC_NODES:
	case IPC_NODE_LEARNED:
		return len >= sizeof(struct nodemap_hdr) && len <= IPC_MAX_PAYLOAD;
	case IPC_TICKET_KEYS:
		return len == sizeof(struct tlskeys);
	case IPC_FAILED:
		return len <= 1024;
	case IPC_READY:
		return len == sizeof(struct ipc_ready);
	/* the admin channel: exact rules in supervisor/adminproto.c */
	case IPC_ADMIN_SETUP:
	case IPC_ADMIN_CREDS:
	case IPC_ADMIN_REQUEST:
	case IPC_ADMIN_ANSWER:
	case IPC_ADMIN_LISTEN:
		return len >= 8 && len <= IPC_MAX_PAYLOAD;
	case IPC_ACCEPT:
	case IPC_STOP:
		return len == 0;
	default:
		return 0;
	}
}

ssize_t
ipc_encode(uint8_t *buf, size_t cap, enum ipc_type type, uint64_t generation,
	   const void *payload, size_t len)
{
	if (len > IPC_MAX_PAYLOAD || cap < sizeof(struct ipc_hdr) + len) {
		errno = EMSGSIZE;
		return -1;
	}
	struct ipc_hdr h = { .type = (uint32_t)type, .len = (uint32_t)len, .generation = generation };
	memcpy(buf, &h, sizeof h);
	if (len)
		memcpy(buf + sizeof h, payload, len);
	return (ssize_t)(sizeof h + len);
}

int
ipc_decode_frame(const uint8_t *buf, size_t len, struct ipc_msg *msg, char *err, size_t errlen)
{
	if (len < sizeof(struct ipc_hdr)) {
		snprintf(err, errlen, "short message (%zu bytes)", len);
		return -1;
	}
	memcpy(&msg->hdr, buf, sizeof msg->hdr);
	if ((size_t)msg->hdr.len != len - sizeof(struct ipc_hdr) || msg->hdr.len > IPC_MAX_PAYLOAD) {
		snprintf(err, errlen, "message type %u: length %u does not match datagram (%zu)",
		    msg->hdr.type, msg->hdr.len, len - sizeof(struct ipc_hdr));
		return -1;
	}
	msg->payload = (uint8_t *)buf + sizeof(struct ipc_hdr);
	return 0;
}

int
ipc_decode(const uint8_t *buf, size_t len, struct ipc_msg *msg, char *err, size_t errlen)
{
	if (len < sizeof(struct ipc_hdr)) {
		snprintf(err, errlen, "short message (%zu bytes)", len);
		return -1;
	}
	memcpy(&msg->hdr, buf, sizeof msg->hdr);
	if (msg->hdr.type == IPC_NONE || msg->hdr.type >= IPC_TYPE_COUNT) {
		snprintf(err, errlen, "unknown message type %u", msg->hdr.type);
		return -1;
	}
	if ((size_t)msg->hdr.len != len - sizeof(struct ipc_hdr)) {
		snprintf(err, errlen, "%s: length %u does not match datagram (%zu)",
		    ipc_type_str(msg->hdr.type), msg->hdr.len, len - sizeof(struct ipc_hdr));
		return -1;
	}
	if (!ipc_payload_ok(msg->hdr.type, msg->hdr.len)) {
		snprintf(err, errlen, "%s: bad payload size %u", ipc_type_str(msg->hdr.type),
		    msg->hdr.len);
		return -1;
	}
	msg->payload = (uint8_t *)buf + sizeof(struct ipc_hdr);
	if (msg->hdr.type == IPC_TICKET_KEYS) {
		uint32_t n;
		memcpy(&n, msg->payload + offsetof(struct tlskeys, n), sizeof n);
		if (n > TLSKEYS_MAX) {
			snprintf(err, errlen, "ticket-keys: %u keys, at most %d", n, TLSKEYS_MAX);
			return -1;
		}
	}
	if ((msg->hdr.type == IPC_NODES || msg->hdr.type == IPC_NODE_LEARNED) &&
	    nodemap_check(msg->payload, msg->hdr.len, NODEMAP_MAX_COUNT, err, errlen) == -1)
		return -1;
	return 0;
}

int
ipc_send(int sock, enum ipc_type type, uint64_t generation,
	 const void *payload, size_t len, const int *fds, size_t nfds)
{
	struct ipc_hdr h = { .type = (uint32_t)type, .len = (uint32_t)len, .generation = generation };
	if (len > IPC_MAX_PAYLOAD || nfds > IPC_MAX_FDS) {
		errno = EMSGSIZE;
		return -1;
	}
	struct iovec iov[2] = {
		{ .iov_base = &h, .iov_len = sizeof h },
		{ .iov_base = (void *)payload, .iov_len = len },
	};
	union {
		char buf[CMSG_SPACE(sizeof(int) * IPC_MAX_FDS)];
		struct cmsghdr align;
	} cbuf;
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = len ? 2 : 1 };
	if (nfds) {
		memset(&cbuf, 0, sizeof cbuf);
		mh.msg_control = cbuf.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
	}
	ssize_t n;
	do
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	while (n == -1 && errno == EINTR);
	if (n == -1)
		return -1;
	if ((size_t)n != sizeof h + len) {
		errno = EMSGSIZE;
		return -1;
	}
	return 0;
}

void
ipc_msg_take_fds(struct ipc_msg *msg)
{
	msg->nfds = 0;
}

void
ipc_close_fds(struct ipc_msg *msg)
{
	for (size_t i = 0; i < msg->nfds; i++)
		if (msg->fds[i] >= 0)
			close(msg->fds[i]);
	msg->nfds = 0;
}

/* One datagram and its fds; with `typed`, decoded by the worker protocol's
 * rules (ipc_decode), otherwise only its envelope is checked. */
static int
ipc_recv_one(int sock, uint8_t *buf, size_t cap, struct ipc_msg *msg, bool typed, char *err,
	     size_t errlen)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * IPC_MAX_FDS)];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = { .iov_base = buf, .iov_len = cap };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cbuf.buf, .msg_controllen = sizeof cbuf.buf };
	ssize_t n;
	memset(msg, 0, sizeof *msg);
	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	while (n == -1 && errno == EINTR);
	if (n == -1)
		return -1;
	/* Collect fds first so they are never leaked, whatever else is wrong. */
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k && msg->nfds < IPC_MAX_FDS; i++)
			memcpy(&msg->fds[msg->nfds++], CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
	}
	if (n == 0 && msg->nfds == 0)
		return 0;
	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
		snprintf(err, errlen, "truncated message (%s)",
		    (mh.msg_flags & MSG_CTRUNC) ? "file descriptors" : "payload");
		goto bad;
	}
	if (typed ? ipc_decode(buf, (size_t)n, msg, err, errlen) == -1 :
	    ipc_decode_frame(buf, (size_t)n, msg, err, errlen) == -1)
		goto bad;
	return 1;
bad:
	ipc_close_fds(msg);
	errno = EBADMSG;
	return -1;
}

int
ipc_recv(int sock, uint8_t *buf, size_t cap, struct ipc_msg *msg, char *err, size_t errlen)
{
	return ipc_recv_one(sock, buf, cap, msg, true, err, errlen);
}

int
ipc_recv_frame(int sock, uint8_t *buf, size_t cap, struct ipc_msg *msg, char *err, size_t errlen)
{
	return ipc_recv_one(sock, buf, cap, msg, false, err, errlen);
}

int
ipc_conn_record_check(const void *payload, size_t len, size_t nfds, struct ipc_conn_record *out,
		      char *err, size_t errlen)
{
	if (len < sizeof *out) {
		snprintf(err, errlen, "connection record: %zu bytes, need %zu", len, sizeof *out);
		return -1;
	}
	memcpy(out, payload, sizeof *out);
	if (out->version != IPC_CONN_RECORD_VERSION && out->version != IPC_CONN_RECORD_V1) {
		snprintf(err, errlen, "connection record: version %u", out->version);
		return -1;
	}
	if (out->flags & ~IPC_CONN_F_UPSTREAM) {
		snprintf(err, errlen, "connection record: unknown flags 0x%x", out->flags);
		return -1;
	}
	size_t head = ipc_conn_record_head(out);
	if (len < head || out->pending_len > IPC_CONN_PENDING_MAX ||
	    (size_t)out->pending_len != len - head) {
		snprintf(err, errlen, "connection record: %u pending bytes in a %zu-byte payload",
		    out->pending_len, len);
		return -1;
	}
	size_t want = (out->flags & IPC_CONN_F_UPSTREAM) ? 2 : 1;
	if (nfds != want) {
		snprintf(err, errlen, "connection record: %zu file descriptors, want %zu", nfds, want);
		return -1;
	}
	if (out->broker_index < -1 || out->upstream_try < 0) {
		snprintf(err, errlen, "connection record: broker index %d, upstream %d",
		    out->broker_index, out->upstream_try);
		return -1;
	}
	return 0;
}

size_t
ipc_conn_record_head(const struct ipc_conn_record *r)
{
	return sizeof *r + (r->version >= IPC_CONN_RECORD_VERSION ?
	    sizeof(struct ipc_conn_client) : 0);
}

/* A string field: NUL-terminated within its n bytes, printable before. */
static int
ipc_client_str(const char *s, size_t n, const char *what, char *err, size_t errlen)
{
	const char *z = memchr(s, 0, n);

	if (z == NULL) {
		snprintf(err, errlen, "connection record: %s not terminated", what);
		return -1;
	}
	for (const char *p = s; p < z; p++)
		if (*p < 0x20 || *p > 0x7e) {
			snprintf(err, errlen, "connection record: %s not printable", what);
			return -1;
		}
	return 0;
}

int
ipc_conn_client_check(const struct ipc_conn_client *c, char *err, size_t errlen)
{
	if (c->flags & ~IPC_CONN_C_ALL) {
		snprintf(err, errlen, "connection record: unknown client flags 0x%x", c->flags);
		return -1;
	}
	if (c->family != 0 && c->family != AF_INET && c->family != AF_INET6) {
		snprintf(err, errlen, "connection record: address family %u", c->family);
		return -1;
	}
	if (c->age_ms > 100ULL * 366 * 24 * 3600 * 1000 || c->since_ms < 0) {
		snprintf(err, errlen, "connection record: age %llu ms, since %lld",
		    (unsigned long long)c->age_ms, (long long)c->since_ms);
		return -1;
	}
	if (ipc_client_str(c->mech_name, sizeof c->mech_name, "mechanism", err, errlen) ||
	    ipc_client_str(c->client_id, sizeof c->client_id, "client id", err, errlen) ||
	    ipc_client_str(c->software_name, sizeof c->software_name, "software name", err,
	    errlen) ||
	    ipc_client_str(c->software_version, sizeof c->software_version, "software version",
	    err, errlen) ||
	    ipc_client_str(c->principal, sizeof c->principal, "principal", err, errlen))
		return -1;
	return 0;
}

int
ipc_tls_material_check(const void *payload, size_t len, struct ipc_tls_material *out,
		       char *err, size_t errlen)
{
	if (len < sizeof *out) {
		snprintf(err, errlen, "TLS material: %zu bytes, need %zu", len, sizeof *out);
		return -1;
	}
	memcpy(out, payload, sizeof *out);
	if (out->version != IPC_TLS_MATERIAL_VERSION) {
		snprintf(err, errlen, "TLS material: version %u", out->version);
		return -1;
	}
	uint64_t sum = 0;
	for (int i = 0; i < IPC_TLS_FILES; i++)
		sum += out->len[i];
	if (sum != (uint64_t)(len - sizeof *out)) {
		snprintf(err, errlen, "TLS material: files of %llu bytes in a %zu-byte payload",
		    (unsigned long long)sum, len);
		return -1;
	}
	return 0;
}
