/*
 * conn_setup — how a connection gets open (its upstream leg in
 * conn_fsm.h): the PROXY protocol header a load balancer sends first, the
 * client's TLS handshake and the route its server name picks, the wait for
 * a broker's address, the upstream connect over every upstream server, and
 * the upstream's TLS handshake.
 */
#include "worker/conn_priv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/sni.h"
#include "common/tls.h"
#include "worker/proxyproto.h"
#include "worker/sni_gate.h"
#include "worker/upstream.h"

/* ---- the PROXY protocol header ---------------------------------------------- */

/*
 * Where a header is believed: only from proxy_protocol_from. `required`
 * refuses every other peer at once; `optional` serves them as direct
 * clients, but refuses one whose first bytes are a PROXY header (a
 * balancer outside the trusted networks, or a client forging its address).
 * A Kafka request or a TLS record never starts like a header (pp_detect),
 * so deciding that costs one peeked byte.
 */
int
conn_proxy_begin(struct conn *c)
{
	struct worker *w = c->w;
	if (c->peer.ss_family == 0)  /* gone before it was accepted: nobody to refuse */
		return conn_end(c, "client closed the connection before it was accepted");
	bool trusted = cidr_list_match(&w->cl->proxy_from, (const struct sockaddr *)&c->peer);

	if (!trusted && w->cl->proxy_protocol == CFG_PROXY_REQUIRED) {
		METRIC_ADD(w->m, proxy_untrusted_source, 1);
		return conn_fail(c, "untrusted_source: proxy_protocol = required and the peer "
		    "is not in proxy_protocol_from");
	}
	c->pp = !trusted ? CONN_PP_UNTRUSTED :
	    w->cl->proxy_protocol == CFG_PROXY_REQUIRED ? CONN_PP_REQUIRED : CONN_PP_OPTIONAL;
	conn_event(c, CONN_E_PROXY);
	return 0;
}

/* Consume exactly n bytes the header phase has looked at (they are in the
 * socket: MSG_PEEK saw them), into dst when not NULL. -1 (why set). */
static int
conn_proxy_consume(struct conn *c, uint8_t *dst, size_t n)
{
	uint8_t sink[PP_MAX_HEADER];

	while (n > 0) {
		ssize_t got = recv(c->cli.fd, dst ? dst : sink, n, 0);
		if (got <= 0) {
			if (got < 0 && errno == EINTR)
				continue;
			return conn_fail(c, "read from client: %s",
			    got == 0 ? "closed" : strerror(errno));
		}
		n -= (size_t)got;
		if (dst)
			dst += got;
	}
	return 0;
}

/* The header is read (or there is none to read): on as any connection. */
static int
conn_proxy_done(struct conn *c, const struct pp_header *h)
{
	struct worker *w = c->w;

	free(c->pp_buf);
	c->pp_buf = NULL;
	if (h) {
		if (h->version == 1)
			METRIC_ADD(w->m, proxy_headers_v1, 1);
		else
			METRIC_ADD(w->m, proxy_headers_v2, 1);
		/* LOCAL (a balancer's health check), UNKNOWN, datagram and unix
		 * families: the socket's own address stands */
		if (pp_has_address(h) && (h->family == PP_FAM_TCP4 || h->family == PP_FAM_TCP6))
			conn_peer_set(c, (const struct sockaddr *)&h->src);
		log_debug("PROXY header", "client=%s via=%s version=%d command=%s family=%s",
		    c->addr, c->proxied ? c->via : c->addr, h->version,
		    pp_command_str(h->command), pp_family_str(h->family));
	}
	return conn_start(c, false) < 0 ? -2 : 0;
}

int
conn_proxy_step(struct conn *c)
{
	struct worker *w = c->w;
	uint8_t buf[PP_MAX_HEADER];
	size_t have = c->pp_have;

	if (have)
		memcpy(buf, c->pp_buf, have);
	/* Look, do not take: nothing after the header may leave the socket
	 * (the TLS handshake or the Kafka framing reads it next). */
	ssize_t n = recv(c->cli.fd, buf + have, sizeof buf - have, MSG_PEEK);
	if (n < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			return 1;
		return conn_fail(c, "read from client: %s", strerror(errno));
	}
	if (n == 0) {
		if (have == 0)
			return conn_end(c, "client closed the connection before sending anything");
		METRIC_ADD(w->m, proxy_header_truncated, 1);
		return conn_fail(c, "proxy_header_truncated: client closed the connection after "
		    "%zu bytes of a PROXY protocol header", have);
	}
	size_t total = have + (size_t)n;
	if (c->pp != CONN_PP_REQUIRED) {
		enum pp_detect d = pp_detect(buf, total);
		if (d == PP_DETECT_NONE) {
			if (have == 0)
				return conn_proxy_done(c, NULL);  /* a direct client */
			/* consumed as the start of a signature, and it is not */
			METRIC_ADD(w->m, proxy_header_malformed, 1);
			return conn_fail(c, "proxy_header_malformed: not a PROXY protocol header "
			    "after %zu bytes", have);
		}
		if (c->pp == CONN_PP_UNTRUSTED) {
			METRIC_ADD(w->m, proxy_untrusted_source, 1);
			return conn_fail(c, "untrusted_source: a PROXY protocol header from a "
			    "peer not in proxy_protocol_from");
		}
	}
	struct pp_header h;
	int r = pp_parse(buf, total, &h);
	if (r == PP_MALFORMED) {
		if (h.reason == PP_R_NOT_PROXY) {
			METRIC_ADD(w->m, proxy_header_missing, 1);
			return conn_fail(c, "proxy_header_missing: proxy_protocol = required and "
			    "the first bytes are not a PROXY protocol header");
		}
		METRIC_ADD(w->m, proxy_header_malformed, 1);
		return conn_fail(c, "proxy_header_malformed: %s", pp_reason_str(h.reason));
	}
	if (r == PP_NEED_MORE) {
		/* Every byte seen is header: take them, keep them, wait. */
		if (!c->pp_buf && !(c->pp_buf = malloc(PP_MAX_HEADER)))
			return conn_fail(c, "out of memory");
		if (conn_proxy_consume(c, c->pp_buf + have, (size_t)n) < 0)
			return -1;
		c->pp_have = total;
		return 1;
	}
	/* Exactly the rest of the header: what follows stays in the socket. */
	if (conn_proxy_consume(c, NULL, h.len - have) < 0)
		return -1;
	c->pp_have = 0;
	return conn_proxy_done(c, &h);
}

/* ---- getting to open -------------------------------------------------------- */

static int conn_connect_begin(struct conn *c);

/* One handshake step on each side still in one (plain TCP never is: two
 * byte compares). -1 close (why set). */
int
conn_handshake(struct conn *c)
{
	if (c->cli.state == TRANSPORT_HANDSHAKE &&
	    conn_fsm_leg(c->state) != CONN_LEG_TLS_HANDSHAKE &&
	    transport_handshake(&c->cli) < 0)
		return conn_fail(c, "%s handshake with client: %s", transport_name(&c->cli),
		    strerror(errno));
	int up_hs = c->up.state == TRANSPORT_HANDSHAKE ? transport_handshake(&c->up) : 0;
	if (up_hs != 0)
		upstream_tls_handshake_end(c->w, &c->up, up_hs > 0);
	if (up_hs < 0) {
		int e = errno;
		char addr[CONN_PEER_MAX], msg[CONN_PEER_MAX + 300];
		METRIC_ADD(c->w->m, upstream_closed, 1);
		transport_peer(&c->up, addr, sizeof addr);
		snprintf(msg, sizeof msg, "%s handshake with upstream %s: %s", transport_name(&c->up),
		    addr, upstream_transport_error(&c->up, e));
		if (transport_is_tls(&c->up)) {
			/* a certificate or name the upstream cannot prove is the
			 * upstream's condition, as a refused connect is */
			METRIC_ADD(c->w->m, upstream_tls_failures, 1);
			upstream_report(c->w, false, msg);
		}
		return conn_fail(c, "%s", msg);
	}
	return 0;
}

/* The client's TLS handshake is done: only now is the upstream connected
 * (so that a server name from the ClientHello can still choose the
 * broker here, before any upstream connection). -1 when
 * the connection must close (why set). */
static int
conn_tls_accepted(struct conn *c)
{
	struct worker *w = c->w;
	SSL *ssl = transport_tls_ssl(&c->cli);
	METRIC_ADD(w->m, tls_handshakes, 1);
	if (ssl && SSL_session_reused(ssl))
		METRIC_ADD(w->m, tls_resumed, 1);
	if (log_enabled(LOG_DEBUG)) {
		char peer[CONN_PEER_MAX];
		transport_peer(&c->cli, peer, sizeof peer);
		log_debug("TLS handshake done", "client=\"%s\" version=%s resumed=%s", peer,
		    ssl ? SSL_get_version(ssl) : "?", ssl && SSL_session_reused(ssl) ? "true" : "false");
	}
	conn_event(c, CONN_E_TLS_DONE);
	if (w->cl->gateway == CFG_GATEWAY_SNI) {
		/* gateway = sni: the ClientHello's server name chose the upstream */
		if (!c->sni_pick.decided)
			return conn_fail(c, "no server name decision after the TLS handshake");
		c->sni_broker = c->sni_pick.match == SNI_BROKER;
		c->sni_node_id = c->sni_pick.node_id;
		log_debug("TLS server name", "route=%s node_id=%d",
		    sni_match_str(c->sni_pick.match), (int)c->sni_node_id);
	}
	return conn_connect_begin(c);
}

/* One step of the client's TLS handshake (its upstream leg: tls-handshake). 0
 * blocked or done, -1 close (why set). A client that sent plaintext (a
 * Kafka frame) is counted apart from one whose handshake failed. */
int
conn_tls_step(struct conn *c)
{
	struct worker *w = c->w;
	int r = transport_handshake(&c->cli);
	if (r == 0)
		return 0;
	if (r < 0) {
		if (transport_tls_plaintext(&c->cli)) {
			METRIC_ADD(w->m, plaintext_on_tls, 1);
			return conn_fail(c, "plaintext on a TLS listener: %s",
			    transport_tls_error(&c->cli));
		}
		if (c->sni_pick.refused)  /* unknown server name: counted (sni_unknown) and logged */
			return conn_end(c, "TLS server name refused (unrecognized_name)");
		METRIC_ADD(w->m, tls_handshake_failures, 1);
		return conn_fail(c, "TLS handshake with client: %s",
		    transport_tls_error(&c->cli)[0] ? transport_tls_error(&c->cli) : strerror(errno));
	}
	return conn_tls_accepted(c);
}

static void
conn_connected(void *arg, int fd, const char *err, bool local)
{
	struct conn *c = arg;
	struct worker *w = c->w;
	c->uc = NULL;
	if (fd < 0) {
		METRIC_ADD(w->m, upstream_connect_errors, 1);
		uint64_t sup = 0;
		if (log_ratelimit_ok(&w->rl_upstream, 5, 10, &sup))
			log_warn("upstream connect failed", "error=\"%s\" suppressed=%llu", err,
			    (unsigned long long)sup);
		if (local) {
			/* Out of descriptors or memory here: says nothing about
			 * the upstream, and the next address would fail too. */
			snprintf(c->why, sizeof c->why, "cannot open an upstream connection: %s", err);
			conn_close(c, LOG_DEBUG, "connection closed");
			return;
		}
		if (c->broker_index < 0 && c->upstream_try + 1 < w->cl->n_upstream) {
			c->upstream_try++;
			if (conn_connect_next(c) == 0)
				conn_update_watchers(c);
			return;
		}
		upstream_report(w, false, err);
		snprintf(c->why, sizeof c->why, "no upstream reachable: %s", err);
		METRIC_ADD(w->m, upstream_closed, 1);
		conn_close(c, LOG_DEBUG, "connection closed");
		return;
	}
	/* A TCP connect is not Kafka health: the condition becomes reachable on
	 * a well-formed ApiVersions or Metadata answer (resp_finish_rewrite). */
	/* TLS to the upstream: SNI and the certificate name are the broker's
	 * own host (configured or advertised), also when the dial map made
	 * the connection to another address. */
	const char *host = c->broker_index < 0 ? w->cl->upstream[c->upstream_try].host
	    : w->nodes[c->broker_index].host;
	if (upstream_transport_init(w, &c->up, fd, host) != 0) {
		snprintf(c->why, sizeof c->why, "cannot start TLS to the upstream: %s",
		    strerror(errno));
		conn_close(c, LOG_WARN, "connection closed");
		return;
	}
	conn_event(c, CONN_E_CONNECTED);
	conn_step(c, false, false);
}

/* Start (or wait for) the upstream connection. -1 when it could not
 * start (out of memory; why set, c not closed). A broker whose address is
 * not known yet waits for metadata (ours or a sibling's), bounded by
 * WORKER_METADATA_TIMEOUT_MS. */
static int
conn_connect_begin(struct conn *c)
{
	struct worker *w = c->w;
	const char *host;
	uint16_t port;
	if (c->sni_broker && c->broker_index < 0) {
		/* gateway = sni: the broker the server name asked for */
		int idx = upstream_node_find(w, c->sni_node_id);
		if (idx < 0) {
			conn_event(c, CONN_E_WAIT_METADATA);
			return 0;
		}
		c->broker_index = idx;
	}
	if (c->broker_index < 0) {
		host = w->cl->upstream[c->upstream_try].host;
		port = w->cl->upstream[c->upstream_try].port;
	} else {
		struct worker_node *n = &w->nodes[c->broker_index];
		if (!n->known)
			upstream_node_from_siblings(w, c->broker_index);
		if (!n->known) {
			conn_event(c, CONN_E_WAIT_METADATA);
			return 0;
		}
		host = n->host;
		port = (uint16_t)n->port;
	}
	conn_event(c, CONN_E_CONNECT);
	c->uc = upstream_connect_start(w, host, port, WORKER_CONNECT_TIMEOUT_MS, conn_connected, c);
	if (!c->uc)
		return conn_fail(c, "out of memory");
	return 0;
}

/* The same; -1 if c was closed. */
int
conn_connect_next(struct conn *c)
{
	if (conn_connect_begin(c) < 0) {
		conn_close(c, LOG_ERROR, "connection closed");
		return -1;
	}
	return 0;
}

int
conn_start(struct conn *c, bool step)
{
	struct worker *w = c->w;

	if (w->tls_server) {
		/* TLS first; the upstream is connected once it is done
		 * (conn_tls_accepted), within request_timeout (the same
		 * deadline as a PROXY header before it). */
		if (transport_tls_server_init(&c->cli, c->cli.fd, w->tls_server) != 0 ||
		    (w->cl->gateway == CFG_GATEWAY_SNI &&   /* the server name picks the route */
		    sni_gate_attach(transport_tls_ssl(&c->cli), &c->sni_pick) != 0)) {
			snprintf(c->why, sizeof c->why, "cannot start TLS: %s", strerror(errno));
			conn_close(c, LOG_WARN, "connection closed");
			return -1;
		}
		conn_event(c, CONN_E_TLS);
		if (step)
			conn_step(c, true, false);  /* the ClientHello may be there already */
		return 0;
	}
	if (conn_connect_next(c) < 0)
		return -1;
	if (step)
		conn_update_watchers(c);
	return 0;
}

void
conn_metadata_ready(struct worker *w)
{
	struct conn *c = w->conns, *next;
	for (; c; c = next) {
		next = c->next;
		if (conn_fsm_leg(c->state) != CONN_LEG_WAIT_METADATA)
			continue;
		if (c->sni_broker && c->broker_index < 0)
			c->broker_index = upstream_node_find(w, c->sni_node_id);
		if (c->broker_index < 0 || !w->nodes[c->broker_index].known) {
			int32_t id = c->sni_broker ? c->sni_node_id : w->nodes[c->broker_index].node_id;
			if (w->upstream_sasl_required)
				snprintf(c->why, sizeof c->why, "node id %d unknown yet: the upstream "
				    "requires SASL, ferry has no upstream_sasl_* (bootstrap through "
				    "ferry first)", id);
			else
				snprintf(c->why, sizeof c->why,
				    "upstream metadata has no broker with node id %d", id);
			METRIC_ADD(w->m, upstream_closed, 1);
			conn_close(c, LOG_WARN, "connection closed");
			continue;
		}
		if (conn_connect_next(c) == 0)
			conn_update_watchers(c);
	}
}
