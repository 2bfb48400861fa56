/*
 * fuzz_ipc — libFuzzer harness for the envelope decoder of the supervisor's
 * channels (common/ipc.c): ipc_decode over one datagram, as ipc_recv hands
 * it over; for the admin channel's types also the checks the receiver
 * applies next (supervisor/adminproto.c), with and without a descriptor.
 *
 * Input: the datagram (native-endian struct ipc_hdr, then the payload).
 *
 * Oracles (besides ASan/UBSan):
 *   - 0 or -1, and -1 always with a reason;
 *   - on success the type is known, the header length matches the datagram,
 *     the payload points right after the header, the size suits the type
 *     (exact for fixed structs, bounded for text), and ipc_encode of the
 *     decoded message reproduces the datagram byte for byte;
 *   - the consumers' reading of fixed payloads stays inside the datagram
 *     (the copies below run under ASan on an exact-size buffer);
 *   - an admin request the supervisor accepts has a route it answers, a
 *     cluster name that follows the name rule where the route takes one,
 *     a caller whose decision suits its listener, a body only with its
 *     memfd, and error texts that are NUL-terminated, bounded and fill the
 *     payload exactly; an accepted answer's inline body fills the payload;
 *     accepted credentials' file lengths add up to the payload.
 */
#include <string.h>

#include "common/ipc.h"
#include "common/nodemap.h"
#include "common/tlskeys.h"
#include "supervisor/adminproto.h"
#include "tests/fuzz/fuzz_common.h"

/* What the supervisor and the admin process do with an admin message. */
static void
fuzz_admin(const struct ipc_msg *msg)
{
	char err[256];

	for (size_t nfds = 0; nfds <= 1; nfds++) {
		struct adminproto_request_view v;
		struct adminproto_answer a;

		if (msg->hdr.type == IPC_ADMIN_REQUEST &&
		    adminproto_request_check(msg->payload, msg->hdr.len, nfds, &v, err,
		    sizeof err) == 0) {
			const struct adminproto_route_def *d =
			    adminproto_route((enum adminproto_route)v.rq.route);
			size_t sum = sizeof v.rq;

			FUZZ_CHECK(d != NULL && !(d->flags & ADMINPROTO_RF_LOCAL), "route %u",
			    v.rq.route);
			FUZZ_CHECK(!(d->flags & ADMINPROTO_RF_NAME) || cfg_cluster_name_ok(v.rq.name),
			    "name");
			FUZZ_CHECK(strlen(v.rq.caller.addr) < sizeof v.rq.caller.addr &&
			    strlen(v.rq.caller.subject) < sizeof v.rq.caller.subject, "caller text");
			FUZZ_CHECK(adminproto_auth_allowed((enum adminproto_auth)v.rq.caller.auth) &&
			    (v.rq.caller.listener == ADMINPROTO_L_CONTROL) ==
			    (v.rq.caller.auth == ADMINPROTO_AUTH_LOCAL), "caller decision");
			/* the cluster list's query: only on its route, within bounds,
			 * its globs a terminated text without an empty one */
			const struct adminproto_list_query *lq = &v.rq.list;
			size_t nl = strnlen(lq->names, sizeof lq->names);

			FUZZ_CHECK((d->flags & ADMINPROTO_RF_LIST) || (lq->given == 0 &&
			    lq->states == 0 && lq->sort == 0 && lq->limit == 0 && lq->offset == 0 &&
			    nl == 0), "list query on route %u", v.rq.route);
			FUZZ_CHECK(lq->given <= 1 && (lq->given || nl == 0) &&
			    (lq->states & ~ADMINPROTO_LIST_STATES_ALL) == 0 &&
			    lq->sort < ADMINPROTO_SORT_COUNT && lq->limit <= ADMINPROTO_LIST_LIMIT_MAX &&
			    lq->offset <= ADMINPROTO_LIST_OFFSET_MAX && nl < sizeof lq->names &&
			    (nl == 0 || (lq->names[0] != ',' && lq->names[nl - 1] != ',' &&
			    strstr(lq->names, ",,") == NULL)), "list query bounds");
			FUZZ_CHECK(((v.rq.flags & ADMINPROTO_REQ_BODY) != 0) == (nfds == 1) &&
			    (!(v.rq.flags & ADMINPROTO_REQ_BODY) || (v.rq.body_len > 0 &&
			    v.rq.body_len <= CFG_MAX_FILE_BYTES)), "body and fds");
			for (uint32_t i = 0; i < v.rq.n_errors; i++) {
				const char *e = v.errors[i];

				FUZZ_CHECK(e >= (const char *)msg->payload + sizeof v.rq &&
				    e < (const char *)msg->payload + msg->hdr.len, "error %u", i);
				sum += strlen(e) + 1;
				FUZZ_CHECK(strlen(e) < ADMINPROTO_ERROR_MAX, "error length");
			}
			FUZZ_CHECK(sum == msg->hdr.len, "request of %u bytes, %zu accounted",
			    msg->hdr.len, sum);
		}
		if (msg->hdr.type == IPC_ADMIN_ANSWER &&
		    adminproto_answer_check(msg->payload, msg->hdr.len, nfds, &a, err,
		    sizeof err) == 0) {
			FUZZ_CHECK(a.status >= 200 && a.status <= 599, "status");
			FUZZ_CHECK(nfds == 1 ? msg->hdr.len == sizeof a :
			    msg->hdr.len == sizeof a + a.body_len, "answer body");
		}
	}
	if (msg->hdr.type == IPC_ADMIN_CREDS) {
		struct adminproto_creds_view v;

		if (adminproto_creds_check(msg->payload, msg->hdr.len, &v, err, sizeof err) == 0)
			FUZZ_CHECK((uint64_t)v.c.cert_len + v.c.key_len + v.c.ca_len + sizeof v.c ==
			    msg->hdr.len, "credential lengths");
	}
	if (msg->hdr.type == IPC_ADMIN_LISTEN) {
		struct adminproto_listen l;

		if (adminproto_listen_check(msg->payload, msg->hdr.len, &l, err, sizeof err) == 0)
			FUZZ_CHECK(msg->hdr.len == sizeof l && l.state <= ADMINPROTO_LISTEN_CLOSE,
			    "listen state %u", l.state);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *buf = fuzz_dup(data, size), *enc;
	struct ipc_msg msg;
	char err[160];
	ssize_t el;
	int rc;

	memset(&msg, 0, sizeof msg);
	err[0] = '\0';
	rc = ipc_decode(buf, size, &msg, err, sizeof err);
	FUZZ_CHECK(rc == 0 || rc == -1, "rc %d", rc);
	if (rc != 0) {
		FUZZ_CHECK(err[0] != '\0', "failure without a reason");
		free(buf);
		return 0;
	}
	FUZZ_CHECK(size >= sizeof(struct ipc_hdr), "accepted %zu bytes", size);
	FUZZ_CHECK(msg.hdr.type > IPC_NONE && msg.hdr.type < IPC_TYPE_COUNT, "type %u", msg.hdr.type);
	FUZZ_CHECK(strcmp(ipc_type_str((enum ipc_type)msg.hdr.type), "unknown") != 0, "type name");
	FUZZ_CHECK((size_t)msg.hdr.len == size - sizeof(struct ipc_hdr), "len %u for %zu bytes",
	    msg.hdr.len, size);
	FUZZ_CHECK(msg.payload == buf + sizeof(struct ipc_hdr), "payload pointer");
	FUZZ_CHECK(msg.hdr.len <= IPC_MAX_PAYLOAD, "payload of %u bytes", msg.hdr.len);

	switch (msg.hdr.type) {
	case IPC_CONFIG:
		FUZZ_CHECK(msg.hdr.len >= 1, "empty config");
		break;
	case IPC_LISTENERS: {
		struct ipc_listeners l;

		FUZZ_CHECK(msg.hdr.len == sizeof l, "listeners size");
		memcpy(&l, msg.payload, sizeof l);
		break;
	}
	case IPC_DRAIN: {
		struct ipc_drain dr;

		FUZZ_CHECK(msg.hdr.len == sizeof dr, "drain size");
		memcpy(&dr, msg.payload, sizeof dr);
		break;
	}
	case IPC_UPSTREAM: {
		struct ipc_upstream u;

		FUZZ_CHECK(msg.hdr.len == sizeof u, "upstream size");
		memcpy(&u, msg.payload, sizeof u);
		/* what the supervisor does before printing it */
		u.error[sizeof u.error - 1] = 0;
		FUZZ_CHECK(strlen(u.error) < sizeof u.error, "error text");
		break;
	}
	case IPC_FAILED:
		FUZZ_CHECK(msg.hdr.len <= 1024, "failure text of %u bytes", msg.hdr.len);
		break;
	case IPC_PING:
	case IPC_PONG:
		FUZZ_CHECK(msg.hdr.len == sizeof(struct ipc_ping), "ping size");
		break;
	case IPC_LOG_LEVEL:
		FUZZ_CHECK(msg.hdr.len == sizeof(struct ipc_log_level), "log level size");
		break;
	case IPC_HANDOVER:
		FUZZ_CHECK(msg.hdr.len == sizeof(struct ipc_handover), "handover size");
		break;
	case IPC_CONN_DONE:
	case IPC_CONN_TAKEN:
		FUZZ_CHECK(msg.hdr.len == sizeof(struct ipc_conn_ack), "ack size");
		break;
	case IPC_CONN_IN:
	case IPC_CONN_OUT: {
		struct ipc_conn_record rec;
		char err[160];

		FUZZ_CHECK(msg.hdr.len >= sizeof rec && msg.hdr.len <= IPC_CONN_RECORD_MAX,
		    "record size");
		/* what the engine and the worker do with it: checked, never trusted */
		for (size_t nfds = 0; nfds <= 2; nfds++)
			if (ipc_conn_record_check(msg.payload, msg.hdr.len, nfds, &rec, err,
			    sizeof err) == 0) {
				FUZZ_CHECK(rec.pending_len == msg.hdr.len - ipc_conn_record_head(&rec),
				    "pending length");
				FUZZ_CHECK(rec.version == IPC_CONN_RECORD_V1 ||
				    rec.version == IPC_CONN_RECORD_VERSION, "version");
				if (rec.version == IPC_CONN_RECORD_VERSION) {
					/* the client part: checked, every string bounded */
					struct ipc_conn_client cc;

					memcpy(&cc, msg.payload + sizeof rec, sizeof cc);
					if (ipc_conn_client_check(&cc, err, sizeof err) == 0)
						FUZZ_CHECK(memchr(cc.client_id, 0, sizeof cc.client_id) &&
						    memchr(cc.principal, 0, sizeof cc.principal),
						    "client strings terminated");
				}
				FUZZ_CHECK(nfds == ((rec.flags & IPC_CONN_F_UPSTREAM) ? 2u : 1u), "fds");
				FUZZ_CHECK(rec.broker_index >= -1 && rec.upstream_try >= 0, "indexes");
			}
		break;
	}
	case IPC_TLS_MATERIAL: {
		struct ipc_tls_material tm;
		char err[160];

		FUZZ_CHECK(msg.hdr.len >= sizeof tm, "TLS material size");
		/* what the worker does with it: checked, never trusted */
		if (ipc_tls_material_check(msg.payload, msg.hdr.len, &tm, err, sizeof err) == 0) {
			uint64_t sum = 0;
			for (int i = 0; i < IPC_TLS_FILES; i++)
				sum += tm.len[i];
			FUZZ_CHECK(sum + sizeof tm == msg.hdr.len, "file lengths");
		} else {
			FUZZ_CHECK(err[0] != '\0', "refused without a reason");
		}
		break;
	}
	/* node maps: learned brokers */
	case IPC_NODES:
	case IPC_NODE_LEARNED: {
		/* decode checked the whole map: every record reads back */
		struct nodemap_reader r;
		struct nodemap_entry e;
		char nerr[160];
		int nr;

		FUZZ_CHECK(nodemap_reader_init(&r, msg.payload, msg.hdr.len, NODEMAP_MAX_COUNT, nerr,
		    sizeof nerr) == 0, "accepted map: %s", nerr);
		while ((nr = nodemap_reader_next(&r, &e, nerr, sizeof nerr)) == 1)
			FUZZ_CHECK(e.port > 0 && e.port <= 65535 && e.host[0] &&
			    strlen(e.host) < sizeof e.host, "node %d", e.node_id);
		FUZZ_CHECK(nr == 0, "accepted map ends badly: %s", nerr);
		break;
	}
	case IPC_READY: {
		struct ipc_ready rd;

		/* the receiver compares the worker's protocol version; any value decodes */
		FUZZ_CHECK(msg.hdr.len == sizeof rd, "ready size");
		memcpy(&rd, msg.payload, sizeof rd);
		break;
	}
	case IPC_TICKET_KEYS: {
		struct tlskeys k;

		FUZZ_CHECK(msg.hdr.len == sizeof k, "ticket keys size");
		memcpy(&k, msg.payload, sizeof k);
		break;
	}
	/* the admin channel: bounded here, checked by supervisor/adminproto.c */
	case IPC_ADMIN_SETUP:
	case IPC_ADMIN_CREDS:
	case IPC_ADMIN_REQUEST:
	case IPC_ADMIN_ANSWER:
	case IPC_ADMIN_LISTEN:
		FUZZ_CHECK(msg.hdr.len >= 8, "%s of %u bytes", ipc_type_str((enum ipc_type)msg.hdr.type),
		    msg.hdr.len);
		fuzz_admin(&msg);
		break;
	default:
		FUZZ_CHECK(msg.hdr.len == 0, "%s with %u payload bytes",
		    ipc_type_str((enum ipc_type)msg.hdr.type), msg.hdr.len);
		break;
	}

	/* encode the decoded message again: the same datagram */
	enc = malloc(size);
	FUZZ_CHECK(enc != NULL, "oom");
	el = ipc_encode(enc, size, (enum ipc_type)msg.hdr.type, msg.hdr.generation, msg.payload,
	    msg.hdr.len);
	FUZZ_CHECK(el == (ssize_t)size && memcmp(enc, buf, size) == 0, "re-encoding differs");
	/* one byte less does not fit */
	FUZZ_CHECK(ipc_encode(enc, size - 1, (enum ipc_type)msg.hdr.type, msg.hdr.generation,
	    msg.payload, msg.hdr.len) == -1, "encoded into a short buffer");
	free(enc);
	free(buf);
	return 0;
}
