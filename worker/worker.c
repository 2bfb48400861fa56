/*
 * worker — process entry point, IPC with the supervisor, listeners, drain;
 * see worker.h.
 */
#include "worker/worker.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <sodium.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sodium.h>

#include "common/fault.h"
#include "common/conntab.h"
#include "common/ipc.h"
#include "common/nodemap.h"
#include "common/tls.h"
#include "common/tlsmat.h"
#include "worker/conn.h"
#include "worker/context.h"
#include "worker/handover.h"
#include "worker/lockdown.h"
#include "worker/upstream.h"
#ifdef FERRY_TEST_HOOKS
#include "common/testhook.h"
#endif

/* IPC_TICKET_KEYS: take the supervisor's TLS session-ticket keys (at
 * start and at every rotation). The old copy and the message buffer are
 * wiped; the struct is updated in place, so every TLS context that points
 * at it uses the new keys from the next handshake on. */
static void
worker_ticket_keys(struct worker *w, struct ipc_msg *msg)
{
	uint64_t was = w->tickets.serial;
	sodium_memzero(&w->tickets, sizeof w->tickets);
	memcpy(&w->tickets, msg->payload, sizeof w->tickets);
	sodium_memzero(msg->payload, msg->hdr.len);
	log_debug("session-ticket keys received", "serial=%llu was=%llu keys=%u",
	    (unsigned long long)w->tickets.serial, (unsigned long long)was, w->tickets.n);
}

/* ---- shutdown and drain ---------------------------------------------------------- */

static void
worker_close_listeners(struct worker *w)
{
	for (size_t i = 0; i < w->n_listeners; i++) {
		ev_io_stop(w->loop, &w->listeners[i].io);
		if (w->listeners[i].fd >= 0)
			close(w->listeners[i].fd);
		w->listeners[i].fd = -1;
	}
	ev_timer_stop(w->loop, &w->accept_backoff);
	ev_timer_stop(w->loop, &w->accept_defer);
	w->accepting = false;
}

static void
worker_accept_pause(struct worker *w, int err)
{
	METRIC_ADD(w->m, accept_paused, 1);
	uint64_t sup = 0;
	if (log_ratelimit_ok(&w->rl_accept, 1, 5, &sup))
		log_warn("accept paused", "error=\"%s\" retry_ms=%d connections=%llu suppressed=%llu",
		    strerror(err), WORKER_ACCEPT_BACKOFF_MS, (unsigned long long)w->n_conns,
		    (unsigned long long)sup);
	for (size_t k = 0; k < w->n_listeners; k++)
		ev_io_stop(w->loop, &w->listeners[k].io);
	ev_timer_stop(w->loop, &w->accept_backoff);
	ev_timer_set(&w->accept_backoff, WORKER_ACCEPT_BACKOFF_MS / 1000.0, 0.);
	ev_timer_start(w->loop, &w->accept_backoff);
}

static void
worker_drain_deadline_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)revents;
	struct worker *w = t->data;
	log_info("drain deadline reached", "connections=%llu", (unsigned long long)w->n_conns);
	conn_close_all(w, true);
	ev_break(w->loop, EVBREAK_ALL);
}

/* Stop accepting and let every connection leave (how: drain, handover or
 * spread; see worker/handover.h), force-closing what is left after
 * deadline_ms. Once leaving, a later request only brings the deadline
 * forward (never back) and keeps the way connections leave. */
static void
worker_leave(struct worker *w, uint64_t deadline_ms, const char *why, enum handover_exit how)
{
	ev_tstamp after = (ev_tstamp)deadline_ms / 1000.0;
	if (w->draining) {
		ev_tstamp left = ev_is_active(&w->drain_timer)
		    ? ev_timer_remaining(w->loop, &w->drain_timer) : 0.;  /* (deadline passed: exiting) */
		if (after >= left) {
			log_debug("already draining", "why=\"%s\" deadline_ms=%llu left_ms=%.0f", why,
			    (unsigned long long)deadline_ms, left * 1000.0);
			return;
		}
		log_info("drain deadline moved earlier", "why=\"%s\" connections=%llu "
		    "deadline_ms=%llu was_ms=%.0f", why, (unsigned long long)w->n_conns,
		    (unsigned long long)deadline_ms, left * 1000.0);
		ev_timer_stop(w->loop, &w->drain_timer);
		ev_timer_set(&w->drain_timer, after, 0.);
		ev_timer_start(w->loop, &w->drain_timer);
		return;
	}
	w->draining = true;
	upstream_probe_stop(w);
	log_info("draining", "why=\"%s\" how=%s connections=%llu deadline_ms=%llu", why,
	    handover_exit_str(how), (unsigned long long)w->n_conns,
	    (unsigned long long)deadline_ms);
	worker_close_listeners(w);
	ev_timer_init(&w->drain_timer, worker_drain_deadline_cb, after, 0.);
	w->drain_timer.data = w;
	ev_timer_start(w->loop, &w->drain_timer);
	if (how == HANDOVER_EXIT_HANDOVER)
		conn_handover_all(w);
	else if (how == HANDOVER_EXIT_SPREAD)
		conn_spread_all(w);
	else
		conn_drain_all(w);
	if (w->n_conns == 0)
		ev_break(w->loop, EVBREAK_ALL);
}

static void
worker_drain(struct worker *w, uint64_t deadline_ms, const char *why)
{
	worker_leave(w, deadline_ms, why, HANDOVER_EXIT_DRAIN);
}

/* IPC_HANDOVER: a reload of this cluster committed. */
static void
worker_handover(struct worker *w, const struct ipc_handover *h)
{
	if (!w->draining)
		w->spread_window_ms = handover_spread_window(h->spread_ms, h->deadline_ms);
	worker_leave(w, h->deadline_ms, h->handover ? "reload (handover)" : "reload (upstream changed)",
	    h->handover ? HANDOVER_EXIT_HANDOVER : HANDOVER_EXIT_SPREAD);
}

/* ---- accepting ------------------------------------------------------------------- */

static void
worker_accept_resume_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)revents;
	struct worker *w = t->data;
	if (!w->accepting || w->draining)
		return;
	for (size_t i = 0; i < w->n_listeners; i++)
		ev_io_start(loop, &w->listeners[i].io);
}

/* Several workers share each listening socket (one accept queue). The
 * kernel wakes all of them; one with more connections than a live sibling
 * steps back once for WORKER_DEFER_MS so the sibling takes the connection,
 * and each takes a few per wake-up: connections spread evenly, and a
 * connection waits at most WORKER_DEFER_MS more when the sibling is busy
 * or hung. */
static void
worker_listeners_watch(struct worker *w, bool on)
{
	for (size_t k = 0; k < w->n_listeners; k++) {
		if (w->listeners[k].fd < 0)
			continue;
		if (on)
			ev_io_start(w->loop, &w->listeners[k].io);
		else
			ev_io_stop(w->loop, &w->listeners[k].io);
	}
}

static void
worker_defer_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)revents;
	struct worker *w = t->data;
	w->deferring = false;
	w->defer_done = true;
	if (w->accepting && !w->draining && !ev_is_active(&w->accept_backoff))
		worker_listeners_watch(w, true);
}

static void
worker_heartbeat_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)revents;
	struct worker *w = t->data;
	atomic_store_explicit(&w->gen->workers[w->index].heartbeat_ms,
	    (uint64_t)(ev_now(loop) * 1000.0), memory_order_relaxed);
}

static void
worker_accept_cb(struct ev_loop *loop, ev_io *io, int revents)
{
	(void)revents;
	struct worker_listener *l = io->data;
	struct worker *w = l->w;
	int batch = 64;
	if (w->gen->n_workers > 1) {
		uint64_t now = (uint64_t)(ev_now(loop) * 1000.0);
		atomic_store_explicit(&w->gen->workers[w->index].heartbeat_ms, now,
		    memory_order_relaxed);
		bool may_defer = !w->defer_done;
		w->defer_done = false;
		if (may_defer && !w->deferring && genshm_should_defer(w->gen, w->index, now,
		    WORKER_HEARTBEAT_STALE_MS)) {
			w->deferring = true;
			worker_listeners_watch(w, false);
			ev_timer_set(&w->accept_defer, WORKER_DEFER_MS / 1000.0, 0.);
			ev_timer_start(loop, &w->accept_defer);
			return;
		}
		batch = 2;
	}
	for (int i = 0; i < batch && !w->draining; i++) {
		int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd == -1) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ||
			    errno == ECONNABORTED)
				return;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				/* Out of descriptors: pause accepting instead of
				 * spinning on a listener that stays readable; the
				 * connections already open keep being served. */
				worker_accept_pause(w, errno);
				return;
			}
			log_error("accept failed", "error=\"%s\"", strerror(errno));
			return;
		}
		conn_accept(w, fd, l->broker_index);
		atomic_fetch_add_explicit(&w->gen->workers[w->index].accepted, 1,
		    memory_order_relaxed);
	}
}

static void
worker_start_accepting(struct worker *w)
{
	if (w->accepting || w->draining)
		return;
	w->accepting = true;
	for (size_t i = 0; i < w->n_listeners; i++)
		ev_io_start(w->loop, &w->listeners[i].io);
	log_info("accepting", "listeners=%zu", w->n_listeners);
	/* What this worker learned while held (a reload's probe) goes to the
	 * supervisor now that it serves; so does what it learns from now on. */
	w->nodes_reporting = true;
	for (size_t i = 0; i < w->n_nodes; i++)
		if (w->nodes[i].report) {
			worker_node_learned(w, i);
			break;
		}
	if (w->nodes_inherited && w->nodes_reachable) {
		/* Earlier generations learned the brokers of this same upstream,
		 * and it answered them: clients on broker ports are forwarded at
		 * once, and no fetch is needed (nor possible, when the upstream
		 * requires SASL). A broker not in the map, or a failure, still
		 * brings a fetch. */
		log_info("upstream brokers known from earlier generations", "brokers=%zu "
		    "metadata_fetch=no", w->nodes_inherited);
		return;
	}
	/* Learn the upstream brokers now: clients that go straight to a broker
	 * port need not wait, and the upstream condition is known at once. */
	upstream_fetch_metadata(w);
}

/* ---- IPC ------------------------------------------------------------------------ */

static void worker_drain(struct worker *w, uint64_t deadline_ms, const char *why);

/* The supervisor is gone or broken: close the channel, drain as an orphan. */
static void
worker_orphan(struct worker *w, const char *why)
{
	log_warn("control channel closed", "error=\"%s\"", why);
	ev_io_stop(w->loop, &w->ipc_io);
	ev_io_stop(w->loop, &w->ipc_wio);
	ipcq_clear(&w->ipc_q);
	if (w->ipc_fd >= 0)
		close(w->ipc_fd);
	w->ipc_fd = -1;
	conn_handover_abort(w);
	worker_drain(w, WORKER_ORPHAN_DRAIN_MS, "supervisor gone");
}

static void
worker_ipc_write_cb(struct ev_loop *loop, ev_io *io, int revents)
{
	(void)revents;
	struct worker *w = io->data;
	int r = ipcq_flush(&w->ipc_q, w->ipc_fd);
	if (r == 1)
		ev_io_stop(loop, io);
	else if (r == -1)
		worker_orphan(w, strerror(errno));
}

static void
worker_ipc_cb(struct ev_loop *loop, ev_io *io, int revents)
{
	(void)revents;
	struct worker *w = io->data;
	for (;;) {
		struct ipc_msg msg;
		char err[128] = "";
		int r = ipc_recv(w->ipc_fd, w->ipc_buf, sizeof w->ipc_buf, &msg, err, sizeof err);
		if (r == -1 && errno == EAGAIN)
			return;
		if (r <= 0) {
			/* Supervisor gone (EOF) or the channel is broken: close the
			 * listeners at once, give connections a short drain, exit. */
			worker_orphan(w, r == 0 ? "EOF" : (err[0] ? err : strerror(errno)));
			return;
		}
		switch (msg.hdr.type) {
		case IPC_ACCEPT:
			worker_start_accepting(w);
			break;
		case IPC_DRAIN: {
			struct ipc_drain d;
			memcpy(&d, msg.payload, sizeof d);
			worker_drain(w, d.deadline_ms, "supervisor request");
			break;
		}
		case IPC_HANDOVER: {
			struct ipc_handover h;
			memcpy(&h, msg.payload, sizeof h);
			worker_handover(w, &h);
			break;
		}
		case IPC_CONN_IN:
			conn_adopt(w, &msg);
			break;
		case IPC_CONN_DONE: {
			struct ipc_conn_ack a;
			memcpy(&a, msg.payload, sizeof a);
			conn_handover_done(w, &a);
			break;
		}
		case IPC_PING:
			/* The watchdog: answering proves this loop turns. */
			worker_ipc_send(w, IPC_PONG, msg.payload, sizeof(struct ipc_ping));
			break;
		case IPC_LOG_LEVEL: {
			struct ipc_log_level ll;
			memcpy(&ll, msg.payload, sizeof ll);
			if (ll.level <= LOG_ERROR) {
				log_set_level((enum log_level)ll.level);
				log_info("log level changed", "level=%s",
				    log_level_str((enum log_level)ll.level));
			}
			break;
		}
		case IPC_TICKET_KEYS:
			worker_ticket_keys(w, &msg);
			break;
		case IPC_PROBE:
			/* a reload asks whether the (new) upstream answers: the
			 * fetch reports the upstream condition either way */
			upstream_fetch_metadata(w);
			break;
		case IPC_STOP:
			log_info("stopping", "%s", "");
			worker_close_listeners(w);
			conn_close_all(w, false);
			ev_break(loop, EVBREAK_ALL);
			break;
		default:
			log_error("unexpected control message", "type=%s", ipc_type_str(msg.hdr.type));
			break;
		}
		ipc_close_fds(&msg);
	}
}

static void worker_fail(struct worker *w, const char *reason);

/* Messages that may come between CONFIG and LISTENERS: 1 handled, 0 not
 * one of them. */
static int
worker_setup_extra(struct worker *w, struct ipc_msg *msg)
{
	char err[160], reason[256];
	switch (msg->hdr.type) {
	case IPC_NODES:
		if (!w->nodes || worker_nodes_inherit(w, msg, err, sizeof err) == -1) {
			snprintf(reason, sizeof reason, "malformed broker map from the supervisor: %s",
			    w->nodes ? err : "before the configuration");
			ipc_close_fds(msg);
			worker_fail(w, reason);
		}
		ipc_close_fds(msg);
		return 1;
	case IPC_TICKET_KEYS:
		worker_ticket_keys(w, msg);
		ipc_close_fds(msg);
		return 1;
	default:
		return 0;
	}
}

/* Blocking receive of one expected message during start-up. */
static int
worker_expect(struct worker *w, enum ipc_type type, uint8_t *buf, size_t cap, struct ipc_msg *msg)
{
	char err[128] = "";
	int r;
	while ((r = ipc_recv(w->ipc_fd, buf, cap, msg, err, sizeof err)) > 0 &&
	    msg->hdr.type != (uint32_t)type && worker_setup_extra(w, msg))
		;
	if (r <= 0) {
		log_error("no configuration from supervisor", "error=\"%s\"",
		    r == 0 ? "EOF" : (err[0] ? err : strerror(errno)));
		return -1;
	}
	if (msg->hdr.type != type) {
		log_error("unexpected control message", "type=%s expected=%s",
		    ipc_type_str(msg->hdr.type), ipc_type_str(type));
		ipc_close_fds(msg);
		return -1;
	}
	return 0;
}

static void
worker_fail(struct worker *w, const char *reason)
{
	log_error("configuration not viable", "reason=\"%s\"", reason);
	ipc_send(w->ipc_fd, IPC_FAILED, w->generation, reason, strlen(reason), NULL, 0);
	exit(WORKER_EXIT_CONFIG);
}

static void
worker_signal_cb(struct ev_loop *loop, ev_signal *s, int revents)
{
	(void)loop;
	(void)revents;
	struct worker *w = s->data;
	if (s->signum == SIGHUP)
		return;  /* reloads are the supervisor's business */
	worker_drain(w, WORKER_ORPHAN_DRAIN_MS, s->signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

/* upstream_sasl_*: ferry's own password, from the material's bytes into
 * guarded memory (sodium_malloc: guard pages, no core dumps, read-only
 * from here on), for the metadata fetch's SASL exchange. */
static void
worker_sasl_setup(struct worker *w, const struct cfg_tls_files *f)
{
	size_t n = f->len[CFG_TLS_F_UPSTREAM_SASL_PASSWORD];
	if (n == 0 || n > CFG_SASL_PASSWORD_MAX)
		worker_fail(w, "upstream_sasl_mechanism is set but no password came from the "
		    "supervisor");
	if (sodium_init() < 0)
		worker_fail(w, "libsodium initialisation failed (upstream SASL)");
	if ((w->sasl_password = sodium_malloc(n)) == NULL)
		worker_fail(w, "out of memory for the upstream SASL password");
	memcpy(w->sasl_password, f->data[CFG_TLS_F_UPSTREAM_SASL_PASSWORD], n);
	w->sasl_password_len = n;
	sodium_mprotect_readonly(w->sasl_password);
	log_info("upstream SASL ready", "mechanism=%s username=\"%s\" used_for=\"ferry's own metadata "
	    "fetch and probes\"", cfg_sasl_mech_str(w->cl->upstream_sasl_mechanism),
	    w->cl->upstream_sasl_username);
	if (w->cl->upstream_sasl_mechanism == CFG_SASL_PLAIN && !w->cl->upstream_tls)
		log_warn("upstream_sasl_mechanism = PLAIN without upstream_tls: ferry's password "
		    "crosses the network in clear (use SCRAM, or TLS)", "%s", "");
}

/* TLS_MATERIAL follows CONFIG: the contexts are built from the bytes, which
 * are wiped at once. Bad material is a configuration that is not viable. */
static void
worker_tls_setup(struct worker *w)
{
	struct ipc_msg msg;
	struct cfg_tls_files f;
	char err[512], reason[600];

	if (worker_expect(w, IPC_TLS_MATERIAL, w->ipc_buf, sizeof w->ipc_buf, &msg) == -1)
		worker_fail(w, "no TLS material from the supervisor");
	ipc_close_fds(&msg);
	int rc = tlsmat_decode(msg.payload, msg.hdr.len, &f, err, sizeof err);
	if (rc == 0)
		rc = tlsmat_contexts(w->cl, &f, &w->tls_server, &w->tls_client, err, sizeof err);
	if (rc == 0 && w->cl->upstream_sasl_mechanism != CFG_SASL_NONE)
		worker_sasl_setup(w, &f);
	sodium_memzero(msg.payload, msg.hdr.len);
	if (rc != 0) {
		snprintf(reason, sizeof reason, "TLS: %s", err);
		worker_fail(w, reason);
	}
	if (w->tls_client) {
		/* TLS sessions towards the upstream, one per broker, so that the
		 * next connection to a broker resumes */
		if ((w->tls_sessions = tlscache_new(WORKER_TLS_SESSIONS)) == NULL ||
		    tlscache_attach(w->tls_sessions, w->tls_client) != 0)
			worker_fail(w, "TLS: cannot set up the upstream session cache: out of memory");
	}
	if (w->cl->gateway == CFG_GATEWAY_SNI) {
		/* gateway = sni: the ClientHello's server name picks bootstrap or
		 * broker */
		w->sni_gate = (struct sni_gate){ w->cl->sni_bootstrap_host,
		    w->cl->sni_broker_pattern, w->m, &w->rl_proto };
		if (!w->tls_server || sni_gate_install(w->tls_server, &w->sni_gate) != 0)
			worker_fail(w, "TLS: cannot install the SNI gateway's ClientHello callback");
	}
	if (w->cl->upstream_tls && !w->cl->upstream_tls_verify)
		log_warn("upstream_tls_verify = off: the upstream brokers' certificates and "
		    "names are not checked (anyone on the path can impersonate them)", "%s", "");
	if (w->tls_server || w->tls_client)
		log_info("TLS ready", "clients=%s upstream=%s min_version=%s client_auth=%s",
		    w->tls_server ? "on" : "off", w->tls_client ? "on" : "off",
		    cfg_tls_version_str((enum cfg_tls_version)w->cl->tls_min_version),
		    cfg_tls_client_auth_str(w->cl->tls_client_auth));
}

/* Receive CONFIG and LISTENERS, set everything up. -1: exit. */
static int
worker_setup(struct worker *w)
{
	uint8_t *buf = w->ipc_buf;
	size_t cap = sizeof w->ipc_buf;
	struct ipc_msg msg;
	char reason[256];

	if (worker_expect(w, IPC_CONFIG, buf, cap, &msg) == -1)
		return -1;
	if (fault_at("worker-fail-at-start")) {
		ipc_close_fds(&msg);
		worker_fail(w, "fault injection: worker-fail-at-start");
	}
	if (msg.nfds != 3 || metrics_map(msg.fds[0], &w->m) == -1) {
		ipc_close_fds(&msg);
		worker_fail(w, "no usable metrics block");
	}
	if (genshm_map(msg.fds[1], &w->gen) == -1 || w->index >= w->gen->n_workers) {
		ipc_close_fds(&msg);
		worker_fail(w, "no usable generation block");
	}
	/* a replacement starts from nothing, not from its predecessor's count */
	worker_conns_changed(w);
	splice_pool_init(&w->splice, w->m);
	struct cfg_errors errs;
	cfg_errors_init(&errs);
	if (cfg_parse_string("<cluster config>", (const char *)msg.payload, msg.hdr.len, &w->cfg,
	    &errs) == -1 || w->cfg.n_clusters != 1) {
		snprintf(reason, sizeof reason, "%s", errs.n ? errs.msg[0] : "not one cluster");
		cfg_errors_free(&errs);
		ipc_close_fds(&msg);
		worker_fail(w, reason);
	}
	cfg_errors_free(&errs);
	w->cl = &w->cfg.clusters[0];
	/* ferryd sends auto resolved; a configuration that still says auto
	 * gets the same rule over this process's own descriptor limit (never
	 * 0: that would refuse every client) */
	if (!w->cl->max_connections) {
		struct rlimit rl;
		uint64_t lim = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ?
		    (uint64_t)rl.rlim_cur : 0;
		w->cfg.clusters[0].max_connections = cfg_max_connections_auto(lim, w->cl->n_brokers);
	}
	/* the connection table is sized by the configuration just read */
	struct conntab *ct = NULL;
	uint32_t rows = conntab_rows(w->cl->max_connections);
	if (conntab_map(msg.fds[2], rows, &ct) == -1 || conntab_writer_init(&w->ct, ct, rows) == -1) {
		ipc_close_fds(&msg);
		worker_fail(w, "no usable connection table");
	}
	ipc_close_fds(&msg);
	if (w->cl->tls || w->cl->upstream_tls || w->cl->upstream_sasl_mechanism != CFG_SASL_NONE)
		worker_tls_setup(w);
	/* the client-facing context encrypts and decrypts TLS session
	 * tickets with the supervisor's keys (IPC_TICKET_KEYS, before
	 * LISTENERS; updated in place at each rotation) */
	if (w->tls_server && tls_ticket_keys_install(w->tls_server, &w->tickets) == -1)
		worker_fail(w, "TLS: cannot install the session-ticket callback");

	w->n_listeners = 1 + w->cl->n_brokers;
	w->listeners = calloc(w->n_listeners, sizeof *w->listeners);
	w->n_nodes = w->cl->gateway == CFG_GATEWAY_SNI ? WORKER_SNI_NODES : w->cl->n_brokers;
	w->nodes = calloc(w->n_nodes ? w->n_nodes : 1, sizeof *w->nodes);
	if (!w->listeners || !w->nodes)
		worker_fail(w, "out of memory");
	for (size_t i = 0; i < w->n_listeners; i++)
		w->listeners[i].fd = -1;
	/* The sockets come in batches (SCM_RIGHTS carries a bounded number). */
	for (size_t got = 0; got < w->n_listeners;) {
		if (worker_expect(w, IPC_LISTENERS, buf, cap, &msg) == -1)
			return -1;
		struct ipc_listeners li;
		memcpy(&li, msg.payload, sizeof li);
		size_t nfds = msg.nfds;
		ipc_msg_take_fds(&msg);
		if (li.count != nfds || li.first != got || li.total != w->n_listeners ||
		    nfds == 0 || got + nfds > w->n_listeners) {
			for (size_t i = 0; i < nfds; i++)
				close(msg.fds[i]);
			snprintf(reason, sizeof reason, "expected listening sockets %zu..%zu of %zu, "
			    "got %zu from %u (of %u)", got, w->n_listeners - 1, w->n_listeners, nfds,
			    li.first, li.total);
			worker_fail(w, reason);
		}
		for (size_t i = 0; i < nfds; i++) {
			struct worker_listener *l = &w->listeners[got + i];
			l->w = w;
			l->fd = msg.fds[i];
			l->broker_index = (int)(got + i) - 1;
			fcntl(l->fd, F_SETFL, fcntl(l->fd, F_GETFL) | O_NONBLOCK);
			ev_io_init(&l->io, worker_accept_cb, l->fd, EV_READ);
			l->io.data = l;
		}
		got += nfds;
	}
	for (size_t i = 0; i < w->cl->n_brokers; i++)
		w->nodes[i].node_id = w->cl->node_ids[i];

	if (upstream_dns_init(w, reason, sizeof reason) == -1)
		worker_fail(w, reason);
	return 0;
}

int
worker_main(int argc, char **argv)
{
	static struct worker wk;
	struct worker *w = &wk;
	const char *cluster = "?";
	static const struct option opts[] = {
		{ "worker", no_argument, NULL, 'W' },
		{ "cluster", required_argument, NULL, 'n' },
		{ "generation", required_argument, NULL, 'g' },
		{ "ppid", required_argument, NULL, 'p' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "log-json", no_argument, NULL, 'j' },
		{ "index", required_argument, NULL, 'i' },
		{ "ipc", required_argument, NULL, 'I' },
		{ "sandbox", required_argument, NULL, 's' },
		{ 0, 0, 0, 0 },
	};
	long ipc_version = -1;
	int level = LOG_INFO, c;
	bool json = false, sandbox = true;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'W': break;
		case 'n': cluster = optarg; break;
		case 'g': w->generation = strtoull(optarg, NULL, 10); break;
		case 'p': w->supervisor_pid = (pid_t)strtol(optarg, NULL, 10); break;
		case 'l': level = log_level_parse(optarg) < 0 ? LOG_INFO : log_level_parse(optarg); break;
		case 'j': json = true; break;
		case 'i': w->index = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'I': ipc_version = strtol(optarg, NULL, 10); break;
		case 's': sandbox = strcmp(optarg, "off") != 0; break;
		default:
			fprintf(stderr, "ferryd --worker is started by ferryd itself\n");
			return 2;
		}
	}
	char role[32];
	snprintf(role, sizeof role, "worker");
	log_init(role, cluster, (enum log_level)level, json);
	log_set_generation(w->generation);
	w->ipc_fd = WORKER_IPC_FD;
	w->upstream_reachable = -1;
	worker_context_init(w, worker_orphan, conn_metadata_ready);
	ipcq_init(&w->ipc_q, 0, 0);

	/* Backstop for supervisor death (set after the credential change,
	 * which happened before exec; PDEATHSIG survives exec). */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	/* exec of /proc/self/exe names the process "exe": let ps -C ferryd
	 * and pkill find workers too. */
	prctl(PR_SET_NAME, "ferryd", 0, 0, 0);
	/* No core dump, no ptrace by its own user, no /proc/PID/mem: the
	 * bytes a worker relays include clients' SASL passwords and tokens
	 * (and TLS keys live here), which must never land in a core file.
	 * Before the configuration brings any of them, sandbox or not. */
	if (sandbox_not_dumpable() == -1) {
		log_error("cannot make the worker not dumpable", "error=\"%s\"", strerror(errno));
		return 1;
	}
	if (w->supervisor_pid && getppid() != w->supervisor_pid) {
		log_error("supervisor already gone", "%s", "");
		return 1;
	}
	/* never one message in a protocol this worker does not speak */
	if (ipc_version != IPC_PROTOCOL_VERSION) {
		log_error("the supervisor speaks another IPC protocol", "supervisor=%ld worker=%d",
		    ipc_version, IPC_PROTOCOL_VERSION);
		return WORKER_EXIT_CONFIG;
	}
	if (fcntl(w->ipc_fd, F_GETFD) == -1) {
		fprintf(stderr, "ferryd --worker: no control channel on fd %d\n", WORKER_IPC_FD);
		return 2;
	}
	fcntl(w->ipc_fd, F_SETFD, FD_CLOEXEC);
	signal(SIGPIPE, SIG_IGN);

	w->loop = ev_default_loop(EVFLAG_AUTO);
	if (worker_setup(w) == -1)
		return 1;

	ev_timer_init(&w->accept_backoff, worker_accept_resume_cb,
	    WORKER_ACCEPT_BACKOFF_MS / 1000.0, 0.);
	w->accept_backoff.data = w;
	ev_timer_init(&w->accept_defer, worker_defer_cb, WORKER_DEFER_MS / 1000.0, 0.);
	w->accept_defer.data = w;
	ev_timer_init(&w->heartbeat, worker_heartbeat_cb, 0., WORKER_HEARTBEAT_MS / 1000.0);
	w->heartbeat.data = w;
	ev_timer_start(w->loop, &w->heartbeat);
	worker_heartbeat_cb(w->loop, &w->heartbeat, 0);
	ev_signal_init(&w->sig_term, worker_signal_cb, SIGTERM);
	ev_signal_init(&w->sig_int, worker_signal_cb, SIGINT);
	ev_signal_init(&w->sig_hup, worker_signal_cb, SIGHUP);
	w->sig_term.data = w->sig_int.data = w->sig_hup.data = w;
	ev_signal_start(w->loop, &w->sig_term);
	ev_signal_start(w->loop, &w->sig_int);
	ev_signal_start(w->loop, &w->sig_hup);

	fcntl(w->ipc_fd, F_SETFL, fcntl(w->ipc_fd, F_GETFL) | O_NONBLOCK);
	ev_io_init(&w->ipc_io, worker_ipc_cb, w->ipc_fd, EV_READ);
	w->ipc_io.data = w;
	ev_io_start(w->loop, &w->ipc_io);
	ev_io_init(&w->ipc_wio, worker_ipc_write_cb, w->ipc_fd, EV_WRITE);
	w->ipc_wio.data = w;

#ifdef FERRY_TEST_HOOKS
	testhook_start(w->loop);
#endif
	/* Everything from outside is in: lock down before serving. */
	char why[256], reason[300];
	if (lockdown_worker(w, sandbox, why, sizeof why) == -1) {
		snprintf(reason, sizeof reason, "sandbox: %s (sandbox = off runs without)", why);
		worker_fail(w, reason);
	}
	struct ipc_ready rd = { .ipc_version = IPC_PROTOCOL_VERSION };
	worker_ipc_send(w, IPC_READY, &rd, sizeof rd);
	if (w->ipc_fd < 0)
		return 1;
	log_info("ready", "generation=%llu bootstrap=%s:%u brokers=%zu gateway=%s",
	    (unsigned long long)w->generation, w->cl->bootstrap.host, w->cl->bootstrap.port,
	    w->cl->n_brokers, cfg_gateway_str(w->cl->gateway));

	ev_run(w->loop, 0);

	log_info("exiting", "connections=%llu metadata_fetches=%llu violations=%llu",
	    (unsigned long long)w->n_conns, (unsigned long long)w->metadata_fetches,
	    (unsigned long long)w->conn_violations);
	ev_timer_stop(w->loop, &w->nodes_report);
	conn_close_all(w, false);
	worker_close_listeners(w);
	ev_timer_stop(w->loop, &w->drain_timer);
	upstream_dns_free(w);
	while (w->n_pool)
		free(w->pool[--w->n_pool]);
	splice_pool_free(&w->splice);
	free(w->listeners);
	free(w->nodes);
	if (w->gen) {
		atomic_store_explicit(&w->gen->workers[w->index].connections, 0, memory_order_relaxed);
		atomic_store_explicit(&w->gen->workers[w->index].heartbeat_ms, 0, memory_order_relaxed);
	}
	genshm_unmap(w->gen);
	metrics_unmap(w->m);
	conntab_unmap(w->ct.t, w->ct.rows);
	conntab_writer_free(&w->ct);
	sodium_memzero(&w->tickets, sizeof w->tickets);
	if (w->sasl_password)
		sodium_free(w->sasl_password);  /* (wipes it) */
	cfg_free(&w->cfg);
	SSL_CTX_free(w->tls_server);
	SSL_CTX_free(w->tls_client);
	tlscache_free(w->tls_sessions);  /* after its context: no callback finds it */
	ipcq_clear(&w->ipc_q);
	if (w->ipc_fd >= 0)
		close(w->ipc_fd);
	return 0;
}
