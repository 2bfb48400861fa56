/*
 * upstream — resolution, connects, probes and learned broker addresses;
 * see upstream.h. The worker's own metadata fetch is upstream_fetch.c.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/tls.h"
#include "common/transport.h"

#define UC_MAX_ADDRS 8

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

void
upstream_dns_free(struct worker *w)
{
	ev_timer_stop(w->loop, &w->upstream_probe);
	upstream_fetch_discard(w);
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
