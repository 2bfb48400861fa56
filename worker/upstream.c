/*
 * upstream — resolution, connects and the worker's own metadata fetch;
 * see upstream.h.
 *
 * Callbacks of upstream_connect_start() always run from the event loop,
 * never from inside the start call, so callers need no re-entrancy care.
 */
#include "worker/upstream.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "worker/kafka/apiversions.h"
#include "worker/kafka/codec.h"
#include "worker/kafka/rewrite.h"
#include "worker/kafka/sasl_client.h"
#include "worker/kafka/sniff.h"
#include "common/tls.h"
#include "common/transport.h"

#define UC_MAX_ADDRS 8
#define FETCH_SNIFF_BYTES 64   /* first read of a fetch: enough to tell TLS/HTTP */

/* ---- c-ares on libev ------------------------------------------------------ */

struct worker_ares_io {
	ev_io io;
	struct worker *w;
	int fd;
	struct worker_ares_io *next;
};

static void
dns_arm_timer(struct worker *w)
{
	struct timeval tv, *tvp = ares_timeout(w->ares, NULL, &tv);
	ev_timer_stop(w->loop, &w->ares_timer);
	if (tvp) {
		ev_timer_set(&w->ares_timer, tvp->tv_sec + tvp->tv_usec / 1e6 + 0.001, 0.);
		ev_timer_start(w->loop, &w->ares_timer);
	}
}

static void
dns_io_cb(struct ev_loop *loop, ev_io *io, int revents)
{
	(void)loop;
	struct worker_ares_io *a = (struct worker_ares_io *)io;
	struct worker *w = a->w;
	ares_process_fd(w->ares, (revents & EV_READ) ? a->fd : ARES_SOCKET_BAD,
	    (revents & EV_WRITE) ? a->fd : ARES_SOCKET_BAD);
	dns_arm_timer(w);
}

static void
dns_timer_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)revents;
	struct worker *w = t->data;
	ares_process_fd(w->ares, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
	dns_arm_timer(w);
}

static void
dns_sock_state_cb(void *data, ares_socket_t fd, int readable, int writable)
{
	struct worker *w = data;
	struct worker_ares_io **pp = &w->ares_ios, *a;
	for (; (a = *pp); pp = &a->next)
		if (a->fd == fd)
			break;
	if (!readable && !writable) {
		if (a) {
			ev_io_stop(w->loop, &a->io);
			*pp = a->next;
			free(a);
		}
		return;
	}
	if (!a) {
		a = calloc(1, sizeof *a);
		if (!a)
			return;
		a->w = w;
		a->fd = fd;
		a->next = w->ares_ios;
		w->ares_ios = a;
	} else {
		ev_io_stop(w->loop, &a->io);
	}
	ev_io_init(&a->io, dns_io_cb, fd, (readable ? EV_READ : 0) | (writable ? EV_WRITE : 0));
	ev_io_start(w->loop, &a->io);
}

static void probe_cb(struct ev_loop *loop, ev_timer *t, int revents);

int
upstream_dns_init(struct worker *w, char *err, size_t errlen)
{
	int r = ares_library_init(ARES_LIB_INIT_ALL);
	if (r != ARES_SUCCESS) {
		snprintf(err, errlen, "c-ares init: %s", ares_strerror(r));
		return -1;
	}
	struct ares_options o = { 0 };
	o.sock_state_cb = dns_sock_state_cb;
	o.sock_state_cb_data = w;
	o.timeout = 2000;
	o.tries = 2;
	r = ares_init_options(&w->ares, &o,
	    ARES_OPT_SOCK_STATE_CB | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES);
	if (r != ARES_SUCCESS) {
		snprintf(err, errlen, "c-ares channel: %s", ares_strerror(r));
		return -1;
	}
	ev_timer_init(&w->ares_timer, dns_timer_cb, 0., 0.);
	w->ares_timer.data = w;
	ev_timer_init(&w->upstream_probe, probe_cb, 0., 0.);
	w->upstream_probe.data = w;
	w->probe_delay_ms = WORKER_PROBE_MIN_MS;
	return 0;
}

static void fetch_discard(struct upstream_fetch *f);

void
upstream_dns_free(struct worker *w)
{
	ev_timer_stop(w->loop, &w->upstream_probe);
	if (w->fetch)
		fetch_discard(w->fetch);
	w->fetch = NULL;
	if (!w->ares)
		return;
	ares_destroy(w->ares);  /* runs pending callbacks with ARES_EDESTRUCTION */
	w->ares = NULL;
	while (w->ares_ios) {
		struct worker_ares_io *a = w->ares_ios;
		ev_io_stop(w->loop, &a->io);
		w->ares_ios = a->next;
		free(a);
	}
	ev_timer_stop(w->loop, &w->ares_timer);
	ares_library_cleanup();
}

/* ---- connects --------------------------------------------------------------- */

struct upstream_connect {
	struct worker *w;
	upstream_connect_cb cb;
	void *arg;
	char host[CFG_HOST_MAX];
	uint16_t port;
	struct sockaddr_storage addrs[UC_MAX_ADDRS];
	socklen_t lens[UC_MAX_ADDRS];
	size_t n, i;
	int fd;
	ev_io io;
	ev_timer timer;      /* whole-connect deadline */
	ev_timer defer;      /* deliver a result from the loop */
	bool resolving;
	bool cancelled;
	bool done;
	bool local;          /* the last error was ours, not the upstream's */
	char err[400];
};

/* Errors of this process, not of the peer. */
static bool
uc_errno_local(int e)
{
	return e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM || e == EADDRNOTAVAIL;
}

static void
uc_free(struct upstream_connect *uc)
{
	struct ev_loop *loop = uc->w->loop;
	ev_io_stop(loop, &uc->io);
	ev_timer_stop(loop, &uc->timer);
	ev_timer_stop(loop, &uc->defer);
	if (uc->fd >= 0)
		close(uc->fd);
	free(uc);
}

/* Deliver the outcome through the loop (never synchronously). */
static void
uc_finish(struct upstream_connect *uc)
{
	uc->done = true;
	ev_io_stop(uc->w->loop, &uc->io);
	ev_timer_stop(uc->w->loop, &uc->timer);
	ev_timer_set(&uc->defer, 0., 0.);
	ev_timer_start(uc->w->loop, &uc->defer);
}

static void
uc_defer_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)revents;
	struct upstream_connect *uc = t->data;
	int fd = uc->fd;
	uc->fd = -1;
	upstream_connect_cb cb = uc->cb;
	void *arg = uc->arg;
	char err[400];
	bool local = fd < 0 && uc->local;
	snprintf(err, sizeof err, "%s", uc->err);
	uc_free(uc);
	cb(arg, fd, err, local);
}

static void
uc_addr_str(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN] = "?";
	int port = 0;
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)ss;
		inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof ip);
		port = ntohs(s4->sin_port);
		snprintf(buf, len, "%s:%d", ip, port);
	} else {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;
		inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof ip);
		port = ntohs(s6->sin6_port);
		snprintf(buf, len, "[%s]:%d", ip, port);
	}
}

static void uc_io_cb(struct ev_loop *loop, ev_io *io, int revents);

/* Try addresses from uc->i on until one is in progress; else finish with
 * the last error. */
static void
uc_try(struct upstream_connect *uc)
{
	for (; uc->i < uc->n; uc->i++) {
		char as[80];
		uc_addr_str(&uc->addrs[uc->i], as, sizeof as);
		int fd = socket(uc->addrs[uc->i].ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd == -1) {
			uc->local = uc_errno_local(errno);
			snprintf(uc->err, sizeof uc->err, "%s: socket: %s", as, strerror(errno));
			continue;
		}
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		if (connect(fd, (struct sockaddr *)&uc->addrs[uc->i], uc->lens[uc->i]) == 0 ||
		    errno == EINPROGRESS) {
			uc->fd = fd;
			ev_io_init(&uc->io, uc_io_cb, fd, EV_WRITE);
			uc->io.data = uc;
			ev_io_start(uc->w->loop, &uc->io);
			return;
		}
		uc->local = uc_errno_local(errno);
		snprintf(uc->err, sizeof uc->err, "connect %s: %s", as, strerror(errno));
		close(fd);
	}
	uc_finish(uc);
}

static void
uc_io_cb(struct ev_loop *loop, ev_io *io, int revents)
{
	(void)revents;
	struct upstream_connect *uc = io->data;
	int soerr = 0;
	socklen_t sl = sizeof soerr;
	ev_io_stop(loop, io);
	if (getsockopt(uc->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == -1)
		soerr = errno;
	if (soerr == 0) {
		uc->err[0] = 0;
		uc_finish(uc);  /* fd handed over in uc_defer_cb */
		return;
	}
	char as[80];
	uc_addr_str(&uc->addrs[uc->i], as, sizeof as);
	uc->local = false;
	snprintf(uc->err, sizeof uc->err, "connect %s: %s", as, strerror(soerr));
	close(uc->fd);
	uc->fd = -1;
	uc->i++;
	uc_try(uc);
}

static void
uc_timeout_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)revents;
	struct upstream_connect *uc = t->data;
	if (uc->resolving) {
		snprintf(uc->err, sizeof uc->err, "resolving %s: timed out", uc->host);
		/* The DNS callback owns uc now; it sees `done` and frees it. */
		uc->cancelled = true;
		upstream_connect_cb cb = uc->cb;
		void *arg = uc->arg;
		char err[400];
		snprintf(err, sizeof err, "%s", uc->err);
		ev_timer_stop(uc->w->loop, &uc->timer);
		cb(arg, -1, err, false);
		return;
	}
	uc->local = false;
	snprintf(uc->err, sizeof uc->err, "connect %s:%u: timed out", uc->host, uc->port);
	if (uc->fd >= 0) {
		close(uc->fd);
		uc->fd = -1;
	}
	uc_finish(uc);
}

static void
uc_resolved(void *arg, int status, int timeouts, struct ares_addrinfo *res)
{
	(void)timeouts;
	struct upstream_connect *uc = arg;
	uc->resolving = false;
	if (uc->cancelled) {
		if (res)
			ares_freeaddrinfo(res);
		uc_free(uc);
		return;
	}
	if (status != ARES_SUCCESS || !res) {
		snprintf(uc->err, sizeof uc->err, "resolving %s: %s", uc->host, ares_strerror(status));
		if (res)
			ares_freeaddrinfo(res);
		uc_finish(uc);
		return;
	}
	for (struct ares_addrinfo_node *n = res->nodes; n && uc->n < UC_MAX_ADDRS; n = n->ai_next) {
		if (n->ai_addrlen > sizeof(struct sockaddr_storage))
			continue;
		memcpy(&uc->addrs[uc->n], n->ai_addr, n->ai_addrlen);
		uc->lens[uc->n] = n->ai_addrlen;
		uc->n++;
	}
	ares_freeaddrinfo(res);
	if (uc->n == 0) {
		snprintf(uc->err, sizeof uc->err, "resolving %s: no address", uc->host);
		uc_finish(uc);
		return;
	}
	uc_try(uc);
}

struct upstream_connect *
upstream_connect_start(struct worker *w, const char *host, uint16_t port, uint64_t timeout_ms,
		       upstream_connect_cb cb, void *arg)
{
	struct upstream_connect *uc = calloc(1, sizeof *uc);
	if (!uc)
		return NULL;
	/* upstream_dial_map: another address is dialled for this broker
	 * address (the TLS name stays the broker's: upstream_transport_init) */
	const struct cfg_addr *to = cfg_dial_lookup(w->cl, host, port);
	if (to) {
		log_debug("dialling mapped address", "broker=%s:%u dial=%s:%u", host, port,
		    to->host, to->port);
		host = to->host;
		port = to->port;
	}
	uc->w = w;
	uc->cb = cb;
	uc->arg = arg;
	uc->fd = -1;
	uc->port = port;
	snprintf(uc->host, sizeof uc->host, "%s", host);
	ev_timer_init(&uc->timer, uc_timeout_cb, (ev_tstamp)timeout_ms / 1000.0, 0.);
	uc->timer.data = uc;
	ev_timer_init(&uc->defer, uc_defer_cb, 0., 0.);
	uc->defer.data = uc;
	ev_timer_start(w->loop, &uc->timer);

	struct sockaddr_in *s4 = (struct sockaddr_in *)&uc->addrs[0];
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&uc->addrs[0];
	if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		uc->lens[0] = sizeof *s4;
		uc->n = 1;
		uc_try(uc);
		return uc;
	}
	if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		uc->lens[0] = sizeof *s6;
		uc->n = 1;
		uc_try(uc);
		return uc;
	}
	char service[8];
	snprintf(service, sizeof service, "%u", port);
	struct ares_addrinfo_hints hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
					     .ai_flags = ARES_AI_NUMERICSERV };
	uc->resolving = true;
	ares_getaddrinfo(w->ares, host, service, &hints, uc_resolved, uc);
	/* The callback may have run already (hosts file, cache). */
	if (w->ares)
		dns_arm_timer(w);
	return uc;
}

void
upstream_connect_cancel(struct upstream_connect *uc)
{
	if (!uc)
		return;
	if (uc->resolving) {
		/* The DNS callback frees it. */
		uc->cancelled = true;
		ev_timer_stop(uc->w->loop, &uc->timer);
		return;
	}
	uc_free(uc);
}

int
upstream_transport_init(struct worker *w, struct transport *t, int fd, const char *host)
{
	if (!w->tls_client) {
		transport_plain_init(t, fd);
		return 0;
	}
	if (transport_tls_client_init(t, fd, w->tls_client, host, w->cl->upstream_tls_verify) != 0) {
		close(fd);
		t->fd = -1;
		t->ops = NULL;
		t->state = TRANSPORT_CLOSED;
		return -1;
	}
	/* resumption: keyed by the name checked and the address dialled (the
	 * dial map's target, as connected); without a key, a full handshake */
	struct sockaddr_storage sa;
	socklen_t salen = sizeof sa;
	char key[TLSCACHE_KEY_MAX];
	if (w->tls_sessions && getpeername(fd, (struct sockaddr *)&sa, &salen) == 0 &&
	    tlscache_key(key, sizeof key, host, (struct sockaddr *)&sa) == 0) {
		int r = tlscache_use(w->tls_sessions, transport_tls_ssl(t), key);
		if (r < 0)
			log_debug("upstream TLS: no session resumption", "key=%s error=%s", key,
			    strerror(errno));
		else if (r > 0)
			log_debug("upstream TLS: offering a cached session", "key=%s", key);
	}
	return 0;
}

void
upstream_tls_handshake_end(struct worker *w, const struct transport *t, bool ok)
{
	SSL *ssl = transport_tls_ssl(t);
	if (!ssl)
		return;
	if (!ok) {
		int e = errno;  /* the caller reports the failure's */
		tlscache_forget(ssl);
		errno = e;
		return;
	}
	METRIC_ADD(w->m, upstream_tls_handshakes, 1);
	if (SSL_session_reused(ssl))
		METRIC_ADD(w->m, upstream_tls_resumed, 1);
}

const char *
upstream_transport_error(const struct transport *t, int err)
{
	const char *e = transport_tls_error(t);
	return e[0] ? e : strerror(err);
}

/* ---- re-probing an unreachable upstream ---------------------------------- */

static void
probe_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)revents;
	struct worker *w = t->data;
	if (w->draining)
		return;
	log_debug("probing upstream", "delay_ms=%llu", (unsigned long long)w->probe_delay_ms);
	upstream_fetch_metadata(w);  /* a failure schedules the next probe */
}

void
upstream_probe_schedule(struct worker *w)
{
	if (w->draining || ev_is_active(&w->upstream_probe) || w->fetch)
		return;  /* (a running fetch schedules one when it fails) */
	if (w->probe_delay_ms < WORKER_PROBE_MIN_MS)
		w->probe_delay_ms = WORKER_PROBE_MIN_MS;
	ev_timer_set(&w->upstream_probe, (ev_tstamp)w->probe_delay_ms / 1000.0, 0.);
	ev_timer_start(w->loop, &w->upstream_probe);
	w->probe_delay_ms *= 2;
	if (w->probe_delay_ms > WORKER_PROBE_MAX_MS)
		w->probe_delay_ms = WORKER_PROBE_MAX_MS;
}

void
upstream_probe_stop(struct worker *w)
{
	ev_timer_stop(w->loop, &w->upstream_probe);
	w->probe_delay_ms = WORKER_PROBE_MIN_MS;
}

void
upstream_report(struct worker *w, bool reachable, const char *error)
{
	/* ferry's own credentials were refused: only a fetch that
	 * authenticates clears that (fetch_end), not a client's traffic */
	if (reachable && w->upstream_auth_failed)
		return;
	int now = reachable ? 1 : 0;
	if (reachable)
		upstream_probe_stop(w);
	else
		upstream_probe_schedule(w);
	if (w->upstream_reachable == now &&
	    (reachable || strcmp(w->upstream_error, error ? error : "") == 0))
		return;
	if (w->upstream_reachable != now)
		log_msg(reachable ? LOG_INFO : LOG_WARN,
		    reachable ? "upstream reachable" : "upstream unreachable",
		    error && *error ? "error=\"%s\"" : "%s", error && *error ? error : "");
	w->upstream_reachable = now;
	struct ipc_upstream u = { .reachable = (uint32_t)now };
	snprintf(u.error, sizeof u.error, "%s", error ? error : "");
	snprintf(w->upstream_error, sizeof w->upstream_error, "%s", u.error);
	worker_ipc_send(w, IPC_UPSTREAM, &u, sizeof u);
}

/* ---- learning broker addresses -------------------------------------------- */

void
upstream_learn_node(struct worker *w, int32_t node_id, const char *host, size_t host_len,
		    int32_t port)
{
	if (host_len == 0 || host_len >= CFG_HOST_MAX || port <= 0 || port > 65535)
		return;
	int idx = worker_node_slot(w, node_id, true);
	if (idx < 0)
		return;
	struct worker_node *n = &w->nodes[idx];
	if (n->known && n->port == port && strlen(n->host) == host_len &&
	    memcmp(n->host, host, host_len) == 0)
		return;
	bool moved = n->known;
	memcpy(n->host, host, host_len);
	n->host[host_len] = 0;
	n->port = port;
	n->known = true;
	/* the generation's other workers learn it too, and the next
	 * generations (through the supervisor) */
	genshm_node_put(w->gen, (size_t)idx, node_id, n->host, port);
	worker_node_learned(w, (size_t)idx);
	log_info(moved ? "upstream broker moved" : "upstream broker learned",
	    "node_id=%d upstream=%s:%d", node_id, n->host, port);
}

bool
upstream_node_from_siblings(struct worker *w, int idx)
{
	int32_t id, port;
	char host[CFG_HOST_MAX];
	if (idx < 0 || (size_t)idx >= w->n_nodes ||
	    !genshm_node_get(w->gen, (size_t)idx, &id, host, sizeof host, &port) ||
	    id != w->nodes[idx].node_id || port <= 0)
		return false;
	struct worker_node *n = &w->nodes[idx];
	snprintf(n->host, sizeof n->host, "%s", host);
	n->port = port;
	n->known = true;
	log_debug("upstream broker learned from a sibling", "node_id=%d upstream=%s:%d", id, host,
	    port);
	return true;
}

int
upstream_node_find(struct worker *w, int32_t node_id)
{
	int idx = worker_node_slot(w, node_id, false);
	if (idx >= 0 && (w->nodes[idx].known || upstream_node_from_siblings(w, idx)))
		return idx;
	if (w->cl->gateway != CFG_GATEWAY_SNI || node_id < 0)
		return -1;
	/* gateway = sni: a sibling may have learned it in a slot this worker has not
	 * taken: look for the id in the whole shared block (a miss path) */
	for (size_t i = 0; i < GENSHM_NODES; i++) {
		int32_t id, port;
		char host[CFG_HOST_MAX];
		if (!genshm_node_get(w->gen, i, &id, host, sizeof host, &port) || id != node_id ||
		    port <= 0)
			continue;
		upstream_learn_node(w, node_id, host, strlen(host), port);
		idx = worker_node_slot(w, node_id, false);
		return idx >= 0 && w->nodes[idx].known ? idx : -1;
	}
	return -1;
}

/* ---- the worker's own metadata fetch ------------------------------------- */

/*
 * ApiVersions, then (upstream_sasl_*) SaslHandshake v1 and one
 * SaslAuthenticate per client token (worker/kafka/sasl_client.h), then
 * Metadata. Without credentials, a broker that answers ApiVersions and
 * closes the connection on Metadata requires SASL: that counts as
 * reachable, with nothing learned (fetch_sasl_required).
 */
enum fetch_phase {
	FETCH_CONNECTING = 0, FETCH_APIVERSIONS, FETCH_SASL_HANDSHAKE, FETCH_SASL_AUTHENTICATE,
	FETCH_METADATA,
};

struct upstream_fetch {
	struct worker *w;
	enum fetch_phase phase;
	struct upstream_connect *uc;
	size_t try;
	struct transport t;  /* to the bootstrap server being asked */
	ev_io io;
	ev_timer timer;
	uint8_t req[SASL_CLIENT_TOKEN_MAX + 256];  /* wiped: it may hold a PLAIN token */
	size_t req_len, req_off;
	uint8_t *buf;
	size_t len, cap;
	int16_t md_version;
	int16_t auth_version;  /* SaslAuthenticate version spoken */
	int32_t corr;          /* of the last request */
	bool offers_sasl;      /* ApiVersions listed SaslHandshake */
	bool auth_failed;      /* ended because ferry's credentials were refused */
	struct sasl_client sasl;
	bool local;          /* the last error was ours (descriptors, memory) */
	char err[400];
};

/* "host:port" of the bootstrap server this fetch is talking to. */
static const char *
fetch_addr(const struct upstream_fetch *f, char *buf, size_t len)
{
	const struct cfg_addr *a = &f->w->cl->upstream[f->try];
	snprintf(buf, len, strchr(a->host, ':') ? "[%s]:%u" : "%s:%u", a->host, a->port);
	return buf;
}

static const char *
fetch_api(const struct upstream_fetch *f)
{
	switch (f->phase) {
	case FETCH_SASL_HANDSHAKE: return "SaslHandshake";
	case FETCH_SASL_AUTHENTICATE: return "SaslAuthenticate";
	case FETCH_METADATA: return "Metadata";
	default: return "ApiVersions";
	}
}

/* The upstream does not speak Kafka (or not well): f->err, try the next.
 * The health condition names it (not a TCP error, a protocol one). */
static void fetch_next(struct upstream_fetch *f);

static void
fetch_protocol_error(struct upstream_fetch *f, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
fetch_protocol_error(struct upstream_fetch *f, const char *fmt, ...)
{
	char addr[CFG_HOST_MAX + 16];
	fetch_addr(f, addr, sizeof addr);
	/* Before the first well-formed answer it is not a Kafka broker as far as
	 * ferry can tell; after ApiVersions parsed it is one that misbehaves. */
	int off = snprintf(f->err, sizeof f->err, f->phase == FETCH_APIVERSIONS
	    ? "not a Kafka broker at %s: " : "protocol error from %s: ", addr);
	if (off > 0 && (size_t)off < sizeof f->err) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(f->err + off, sizeof f->err - (size_t)off, fmt, ap);
		va_end(ap);
	}
	fetch_next(f);
}

static void fetch_connect(struct upstream_fetch *f);

/* Free a fetch without resuming anyone (worker exit). */
static void
fetch_discard(struct upstream_fetch *f)
{
	struct worker *w = f->w;
	ev_io_stop(w->loop, &f->io);
	ev_timer_stop(w->loop, &f->timer);
	if (f->uc)
		upstream_connect_cancel(f->uc);
	transport_close(&f->t);
	sasl_client_wipe(&f->sasl);
	sodium_memzero(f->req, sizeof f->req);
	free(f->buf);
	free(f);
}

static void
fetch_end(struct upstream_fetch *f, bool ok)
{
	struct worker *w = f->w;
	bool local = f->local;
	if (!ok) {
		uint64_t sup = 0;
		if (log_ratelimit_ok(&w->rl_upstream, 5, 10, &sup))
			log_warn("metadata fetch failed", "error=\"%s\" suppressed=%llu", f->err,
			    (unsigned long long)sup);
		if (f->auth_failed)
			w->upstream_auth_failed = true;
		if (!local)
			upstream_report(w, false, f->err);
	} else {
		w->upstream_auth_failed = false;
		upstream_report(w, true, NULL);
	}
	fetch_discard(f);
	w->fetch = NULL;
	if (!ok)
		upstream_probe_schedule(w);  /* (a local failure is retried too) */
	worker_metadata_ready(w);
}

/* This fetch failed against one bootstrap server: try the next one. */
static void
fetch_next(struct upstream_fetch *f)
{
	struct worker *w = f->w;
	ev_io_stop(w->loop, &f->io);
	transport_close(&f->t);
	if (++f->try >= w->cl->n_upstream) {
		fetch_end(f, false);
		return;
	}
	fetch_connect(f);
}

static int
fetch_learn(void *ctx, int32_t node_id, const char *up_host, size_t up_host_len,
	    int32_t up_port, const char **host, size_t *host_len, int32_t *port)
{
	struct worker *w = ctx;
	upstream_learn_node(w, node_id, up_host, up_host_len, up_port);
	if (worker_node_slot(w, node_id, false) < 0)
		worker_unknown_node(w, node_id, up_host, up_host_len, up_port);
	*host = up_host;
	*host_len = up_host_len;
	*port = up_port;
	return 0;
}

/* Watch for what the transport needs to read (response) or write
 * (request, or a handshake step). */
static void
fetch_watch(struct upstream_fetch *f, bool reading, bool writing)
{
	int ev = transport_interest(&f->t, reading, writing);
	if (ev_is_active(&f->io) && (f->io.events & (EV_READ | EV_WRITE)) == ev)
		return;
	ev_io_stop(f->w->loop, &f->io);
	if (ev == 0)
		return;
	ev_io_set(&f->io, f->t.fd, ev);
	ev_io_start(f->w->loop, &f->io);
}

static void
fetch_send(struct upstream_fetch *f)
{
	f->req_off = 0;
	f->len = 0;
	fetch_watch(f, false, true);
}

/* ferry's own credentials were refused (or cannot be used here): the
 * fetch ends at once (every broker would say the same; asking them all
 * with a wrong password helps nobody) and the condition stays unreachable
 * with this reason until a fetch authenticates. */
static void
fetch_auth_error(struct upstream_fetch *f, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
fetch_auth_error(struct upstream_fetch *f, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(f->err, sizeof f->err, fmt, ap);
	va_end(ap);
	f->auth_failed = true;
	f->local = false;
	fetch_end(f, false);
}

static void
fetch_metadata_send(struct upstream_fetch *f)
{
	sodium_memzero(f->req, sizeof f->req);
	f->req_len = kc_build_metadata_request(f->req, sizeof f->req, f->md_version, ++f->corr,
	    "ferry");
	f->phase = FETCH_METADATA;
	fetch_send(f);
}

/* One SaslAuthenticate carrying token (wiped here). */
static void
fetch_authenticate_send(struct upstream_fetch *f, uint8_t *token, size_t len)
{
	sodium_memzero(f->req, sizeof f->req);
	f->req_len = sasl_client_authenticate_request(f->req, sizeof f->req, f->auth_version,
	    ++f->corr, "ferry", token, len);
	sodium_memzero(token, len);
	if (f->req_len == 0) {  /* (every token of sasl_client.h fits) */
		fetch_auth_error(f, "upstream SASL: a %zu byte token does not fit a request", len);
		return;
	}
	f->phase = FETCH_SASL_AUTHENTICATE;
	fetch_send(f);
}

/* After ApiVersions, with upstream_sasl_*: SaslHandshake v1. */
static void
fetch_sasl_start(struct upstream_fetch *f)
{
	struct worker *w = f->w;
	const char *mech = cfg_sasl_mech_str(w->cl->upstream_sasl_mechanism);
	char addr[CFG_HOST_MAX + 16], err[200], nonce[48];
	int16_t hmin = 0, hmax = 0, amin = 0, amax = 0;
	uint8_t rnd[24];

	fetch_addr(f, addr, sizeof addr);
	if (kc_apiversions_find(f->buf, f->len, 0, KC_API_SASL_HANDSHAKE, &hmin, &hmax) != KC_OK ||
	    hmax < 1 ||
	    kc_apiversions_find(f->buf, f->len, 0, KC_API_SASL_AUTHENTICATE, &amin, &amax) != KC_OK) {
		fetch_auth_error(f, "upstream_sasl_mechanism is set but %s offers no SaslHandshake "
		    "v1 and SaslAuthenticate", addr);
		return;
	}
	f->auth_version = amax > 2 ? 2 : amax;
	randombytes_buf(rnd, sizeof rnd);
	sodium_bin2base64(nonce, sizeof nonce, rnd, sizeof rnd,
	    sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	enum sasl_mech m = sasl_mech_parse((const uint8_t *)mech, strlen(mech));
	if (sasl_client_init(&f->sasl, m, w->cl->upstream_sasl_username, w->sasl_password,
	    w->sasl_password_len, nonce, err, sizeof err) != 0) {
		fetch_auth_error(f, "upstream SASL %s: %s", mech, err);
		return;
	}
	f->req_len = sasl_client_handshake_request(f->req, sizeof f->req, ++f->corr, "ferry", mech);
	f->phase = FETCH_SASL_HANDSHAKE;
	fetch_send(f);
}

/* The SaslHandshake answer: the first token, or why not. */
static void
fetch_sasl_handshake(struct upstream_fetch *f)
{
	const char *mech = cfg_sasl_mech_str(f->w->cl->upstream_sasl_mechanism);
	char addr[CFG_HOST_MAX + 16], mechs[120], err[200];
	uint8_t tok[SASL_CLIENT_TOKEN_MAX];
	size_t n = 0;
	int16_t e = 0;

	fetch_addr(f, addr, sizeof addr);
	if (sasl_client_handshake_response(f->buf, f->len, &e, mechs, sizeof mechs, err,
	    sizeof err) != KC_OK) {
		fetch_protocol_error(f, "malformed SaslHandshake response: %s", err);
		return;
	}
	if (e == SASL_CLIENT_ERR_UNSUPPORTED_MECHANISM) {
		fetch_auth_error(f, "upstream SASL: %s does not enable %s (it enables %s)", addr,
		    mech, mechs[0] ? mechs : "none");
		return;
	}
	if (e == SASL_CLIENT_ERR_ILLEGAL_SASL_STATE) {
		fetch_auth_error(f, "upstream SASL: %s is not a SASL listener (SaslHandshake "
		    "refused: ILLEGAL_SASL_STATE) but upstream_sasl_mechanism is set", addr);
		return;
	}
	if (e != 0) {
		fetch_auth_error(f, "upstream SASL: %s refused SaslHandshake %s: error %d", addr,
		    mech, e);
		return;
	}
	if (sasl_client_first(&f->sasl, tok, sizeof tok, &n, err, sizeof err) != 0) {
		fetch_auth_error(f, "upstream SASL %s: %s", mech, err);
		return;
	}
	fetch_authenticate_send(f, tok, n);
}

/* A SaslAuthenticate answer: the next token, Metadata, or a refusal. */
static void
fetch_sasl_authenticate(struct upstream_fetch *f)
{
	struct worker *w = f->w;
	const char *mech = cfg_sasl_mech_str(w->cl->upstream_sasl_mechanism);
	char addr[CFG_HOST_MAX + 16], msg[160], err[200];
	uint8_t out[SASL_CLIENT_TOKEN_MAX];
	const uint8_t *tok = NULL;
	size_t tl = 0, n = 0;
	int16_t e = 0;

	fetch_addr(f, addr, sizeof addr);
	if (sasl_client_authenticate_response(f->buf, f->len, f->auth_version, &e, msg, sizeof msg,
	    &tok, &tl, err, sizeof err) != KC_OK) {
		fetch_protocol_error(f, "malformed SaslAuthenticate v%d response: %s",
		    f->auth_version, err);
		return;
	}
	if (e != 0) {
		fetch_auth_error(f, "upstream SASL %s as '%s' refused by %s: %s", mech,
		    w->cl->upstream_sasl_username, addr, msg[0] ? msg : e ==
		    SASL_CLIENT_ERR_AUTHENTICATION_FAILED ? "SASL_AUTHENTICATION_FAILED" : "error");
		return;
	}
	if (sasl_client_step(&f->sasl, tok, tl, out, sizeof out, &n, err, sizeof err) != 0) {
		fetch_auth_error(f, "upstream SASL %s at %s: %s", mech, addr, err);
		return;
	}
	if (n > 0) {
		fetch_authenticate_send(f, out, n);
		return;
	}
	log_debug("authenticated to the upstream", "upstream=%s mechanism=%s username=\"%s\"",
	    addr, mech, w->cl->upstream_sasl_username);
	sasl_client_wipe(&f->sasl);
	fetch_metadata_send(f);
}

/* No upstream_sasl_*, and the broker answered ApiVersions then closed the
 * connection on Metadata: its listener requires SASL. The upstream is
 * up (it speaks Kafka), so this ends the fetch as reachable with nothing
 * learned: brokers are learned from the Metadata responses of clients,
 * which authenticate themselves, and kept across restarts (IPC_NODES). */
static void
fetch_sasl_required(struct upstream_fetch *f)
{
	struct worker *w = f->w;
	char addr[CFG_HOST_MAX + 16];
	if (!w->upstream_sasl_required) {
		size_t known = 0;
		for (size_t i = 0; i < w->n_nodes; i++)
			known += w->nodes[i].known;
		log_warn("upstream requires SASL: ferry's own metadata fetch cannot authenticate",
		    "upstream=%s brokers_known=%zu hint=\"clients reach the brokers once one has "
		    "bootstrapped through ferry (the brokers learned are kept across restarts); set "
		    "upstream_sasl_mechanism, upstream_sasl_username and upstream_sasl_password_file "
		    "to learn them at start\"", fetch_addr(f, addr, sizeof addr), known);
	}
	w->upstream_sasl_required = true;
	fetch_end(f, true);
}

/* The transport failed (errno): say so and try the next server. */
static void
fetch_io_error(struct upstream_fetch *f, const char *what)
{
	char addr[CFG_HOST_MAX + 16];
	int e = errno;
	if (transport_is_tls(&f->t) && transport_tls_error(&f->t)[0]) {
		const char *tls = transport_tls_error(&f->t);
		if (strcmp(what, "handshake") == 0)
			METRIC_ADD(f->w->m, upstream_tls_failures, 1);
		/* a broker that requires client certificates says so with an
		 * alert, after the handshake under TLS 1.3 */
		bool no_cert = !f->w->cl->upstream_cert[0] && (strstr(tls, "alert bad certificate") ||
		    strstr(tls, "certificate required"));
		snprintf(f->err, sizeof f->err, "metadata fetch from %s: %s%s", fetch_addr(f, addr,
		    sizeof addr), tls, no_cert ? " (the broker wants a client certificate: "
		    "upstream_cert, upstream_key)" : "");
	} else {
		snprintf(f->err, sizeof f->err, "metadata fetch from %s: %s%s%s",
		    fetch_addr(f, addr, sizeof addr), what, *what ? ": " : "", strerror(e));
	}
	fetch_next(f);
}

/* A whole response frame is in f->buf. */
static void
fetch_handle(struct upstream_fetch *f)
{
	struct worker *w = f->w;
	if (f->len < 8 || kc_get_i32(f->buf + 4) != f->corr) {
		fetch_protocol_error(f, "%s response with correlation id %d, %d expected",
		    fetch_api(f), f->len < 8 ? -1 : kc_get_i32(f->buf + 4), f->corr);
		return;
	}
	if (f->phase == FETCH_APIVERSIONS) {
		int16_t min = 0, max = 0;
		int r = kc_apiversions_find(f->buf, f->len, 0, 3, &min, &max);
		if (r != KC_OK) {
			fetch_protocol_error(f, "%s", r == KC_APIVERSIONS_ABSENT
			    ? "ApiVersions response lists no Metadata"
			    : "malformed response to ApiVersions");
			return;
		}
		int16_t v = max > 12 ? 12 : max;
		if (v < 1)
			v = 1;
		if (v < min || !kc_response_needs_rewrite(3, v)) {
			char addr[CFG_HOST_MAX + 16];
			snprintf(f->err, sizeof f->err, "upstream %s: Metadata versions %d-%d unsupported",
			    fetch_addr(f, addr, sizeof addr), min, max);
			fetch_next(f);
			return;
		}
		f->md_version = v;
		f->offers_sasl = kc_apiversions_find(f->buf, f->len, 0, KC_API_SASL_HANDSHAKE, NULL,
		    NULL) == KC_OK;
		if (w->sasl_password)
			fetch_sasl_start(f);
		else
			fetch_metadata_send(f);
		return;
	}
	if (f->phase == FETCH_SASL_HANDSHAKE) {
		fetch_sasl_handshake(f);
		return;
	}
	if (f->phase == FETCH_SASL_AUTHENTICATE) {
		fetch_sasl_authenticate(f);
		return;
	}
	struct kc_broker_map map = { .map = fetch_learn, .ctx = w };
	uint8_t *out = NULL;
	size_t out_len = 0;
	char err[128];
	METRIC_ADD(w->m, metadata_fetches, 1);
	if (kc_rewrite_response(3, f->md_version, f->buf, f->len, &map, &out, &out_len, err,
	    sizeof err) != KC_OK) {
		fetch_protocol_error(f, "malformed Metadata v%d response: %s", f->md_version, err);
		return;
	}
	free(out);
	w->upstream_sasl_required = false;
	fetch_end(f, true);
}

static void
fetch_io_cb(struct ev_loop *loop, ev_io *io, int revents)
{
	(void)loop;
	(void)revents;
	struct upstream_fetch *f = io->data;
	if (f->t.state == TRANSPORT_HANDSHAKE) {
		int r = transport_handshake(&f->t);
		if (r != 0)
			upstream_tls_handshake_end(f->w, &f->t, r > 0);
		if (r < 0) {
			fetch_io_error(f, "handshake");
			return;
		}
		if (r == 0) {
			fetch_watch(f, false, true);
			return;
		}
	}
	if (f->req_off < f->req_len) {
		/* The request first (whatever event woke us: the transport
		 * asked for it). */
		while (f->req_off < f->req_len) {
			ssize_t n = transport_write(&f->t, f->req + f->req_off, f->req_len - f->req_off);
			if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
				fetch_watch(f, false, true);
				return;
			}
			if (n == -1) {
				fetch_io_error(f, "send");
				return;
			}
			f->req_off += (size_t)n;
		}
		fetch_watch(f, true, false);
		return;
	}
	/* Read a size-prefixed frame. The first read of the first response
	 * takes up to FETCH_SNIFF_BYTES: enough to tell what the peer speaks
	 * when it is not Kafka (sniff.h). */
	uint64_t max_frame = f->w->cl->max_frame_bytes;
	for (;;) {
		size_t need = f->phase == FETCH_APIVERSIONS ? FETCH_SNIFF_BYTES : 4;
		if (f->len >= 4) {
			enum kc_sniff v = kc_sniff_response(f->buf, f->len, max_frame);
			if (v != KC_SNIFF_KAFKA) {
				char what[200];
				fetch_protocol_error(f, "%s", kc_sniff_describe(v, f->buf, f->len,
				    max_frame, what, sizeof what));
				return;
			}
			need = 4 + (size_t)kc_get_i32(f->buf);
			if (f->len > need)
				f->len = need;  /* (nothing else is owed on this connection) */
			if (f->len == need) {
				fetch_handle(f);
				return;
			}
		}
		if (f->cap < need) {
			size_t ncap = need < 4096 ? 4096 : need;
			uint8_t *nb = realloc(f->buf, ncap);
			if (!nb) {
				snprintf(f->err, sizeof f->err, "metadata fetch: out of memory");
				f->local = true;
				fetch_next(f);
				return;
			}
			f->buf = nb;
			f->cap = ncap;
		}
		ssize_t n = transport_read(&f->t, f->buf + f->len, need - f->len);
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			fetch_watch(f, true, false);
			return;
		}
		if ((n == 0 || (n < 0 && errno == ECONNRESET)) && f->len == 0 &&
		    f->phase == FETCH_METADATA && f->offers_sasl && !f->w->sasl_password) {
			fetch_sasl_required(f);
			return;
		}
		if (n < 0) {
			fetch_io_error(f, "");
			return;
		}
		if (n == 0) {
			char what[200];
			if (f->len == 0)
				fetch_protocol_error(f, "closed the connection without answering %s%s",
				    fetch_api(f), f->phase == FETCH_APIVERSIONS
				    ? " (a TLS port, or not Kafka?)" : "");
			else if (f->len < 4)
				fetch_protocol_error(f, "%s", kc_sniff_describe(KC_SNIFF_NEED_MORE,
				    f->buf, f->len, max_frame, what, sizeof what));
			else
				fetch_protocol_error(f, "closed the connection in the middle of a %zu "
				    "byte %s response", need, fetch_api(f));
			return;
		}
		f->len += (size_t)n;
	}
}

static void
fetch_connected(void *arg, int fd, const char *err, bool local)
{
	struct upstream_fetch *f = arg;
	f->uc = NULL;
	if (fd < 0) {
		METRIC_ADD(f->w->m, upstream_connect_errors, 1);
		snprintf(f->err, sizeof f->err, "%s", err);
		f->local = local;
		fetch_next(f);
		return;
	}
	f->local = false;
	if (upstream_transport_init(f->w, &f->t, fd, f->w->cl->upstream[f->try].host) != 0) {
		snprintf(f->err, sizeof f->err, "metadata fetch: cannot start TLS: %s",
		    strerror(errno));
		f->local = true;
		fetch_next(f);
		return;
	}
	f->phase = FETCH_APIVERSIONS;
	f->corr = 1;
	f->req_len = kc_build_apiversions_request(f->req, sizeof f->req, f->corr, "ferry");
	fetch_send(f);
}

static void
fetch_connect(struct upstream_fetch *f)
{
	struct worker *w = f->w;
	const struct cfg_addr *a = &w->cl->upstream[f->try];
	f->phase = FETCH_CONNECTING;
	f->uc = upstream_connect_start(w, a->host, a->port, WORKER_CONNECT_TIMEOUT_MS,
	    fetch_connected, f);
	if (!f->uc) {
		snprintf(f->err, sizeof f->err, "out of memory");
		fetch_end(f, false);
	}
}

static void
fetch_timeout_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)revents;
	struct upstream_fetch *f = t->data;
	char addr[CFG_HOST_MAX + 16];
	fetch_addr(f, addr, sizeof addr);
	if (f->phase == FETCH_CONNECTING)
		snprintf(f->err, sizeof f->err, "metadata fetch timed out connecting to %s", addr);
	else
		snprintf(f->err, sizeof f->err, "%s accepted the connection but did not answer %s "
		    "within %ds (not a Kafka broker?)", addr, fetch_api(f),
		    WORKER_METADATA_TIMEOUT_MS / 1000);
	fetch_end(f, false);
}

void
upstream_fetch_metadata(struct worker *w)
{
	if (w->fetch)
		return;
	struct upstream_fetch *f = calloc(1, sizeof *f);
	if (!f) {
		worker_metadata_ready(w);
		return;
	}
	f->w = w;
	f->t.fd = -1;
	ev_io_init(&f->io, fetch_io_cb, -1, 0);
	f->io.data = f;
	ev_timer_init(&f->timer, fetch_timeout_cb, WORKER_METADATA_TIMEOUT_MS / 1000.0, 0.);
	f->timer.data = f;
	ev_timer_start(w->loop, &f->timer);
	w->fetch = f;
	w->metadata_fetches++;
	log_debug("fetching upstream metadata", "upstreams=%zu", w->cl->n_upstream);
	fetch_connect(f);
}
