/*
 * admin_accept — the listeners of the admin HTTP server (admin_http.h):
 * accepting, the per-listener budget and eviction. The connections
 * themselves are admin_http.c's.
 *
 * Budgets and eviction (limits in admin_http.h). Each listener counts its
 * own connections, up to ADMIN_LISTEN_MAX_CONNS, or less when the
 * descriptor limit cannot hold two full listeners (admin_http_budget): then
 * neither listener can use up the descriptors the other needs. Every loop
 * iteration in which both listening sockets are readable accepts up to
 * ADMIN_ACCEPT_BATCH from each, so a flood on one never delays the other by
 * more than one batch. A newly accepted connection is read at once: a
 * client that sent its request with the connect is submitted before
 * anything else can happen to it.
 *
 * When a listener is full, accepting continues and each new connection
 * evicts one old connection of the same listener, chosen in O(1) by the
 * queues of evict.h: first one whose response is already sent, then the
 * reading connection that has sent least and waited longest, then one whose
 * client does not read its response. A reading victim is sent a best-effort
 * 503 (a TLS one only the close: plain bytes would not be TLS). Queued and
 * waiting connections are in no queue and are never evicted; if nothing is
 * evictable the new connection is answered 503 and closed.
 *
 * When accept() runs out of descriptors the listener stops watching and a
 * timer re-arms it, so the loop never spins on a readable listening socket.
 */
#include "supervisor/admin_http_priv.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/tls.h"

#define ADMIN_ACCEPT_BACKOFF 1.0    /* seconds to pause accept() after EMFILE */
#define ADMIN_ACCEPT_BATCH   64     /* per listener per loop iteration */
#define ADMIN_EVICT_LOG_S    10     /* at most one eviction warning per this */
#define ADMIN_FD_RESERVE     64     /* descriptors left for everything but connections */
#define ADMIN_MIN_CONNS      16

/* A full listener keeps accepting: each new connection evicts an old one. */
void
admin_server_update(struct admin_server *srv)
{
	struct ev_loop *loop = srv->admin->loop;

	if (srv->fd == -1)
		return;
	if (!srv->backing_off && !srv->admin->paused)
		ev_io_start(loop, &srv->io);
	else
		ev_io_stop(loop, &srv->io);
}

void
admin_send_raw(int fd, const char *status_line, const char *extra_headers, const char *body)
{
	char msg[768];
	int n;

	n = snprintf(msg, sizeof msg, "HTTP/1.1 %s\r\nContent-Type: application/json\r\n"
	    "Content-Length: %zu\r\n%sConnection: close\r\n\r\n%s", status_line, strlen(body),
	    extra_headers, body);
	if (n > 0 && (size_t)n < sizeof msg)
		(void)send(fd, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

void
admin_send_busy(int fd)
{
	admin_send_raw(fd, "503 Service Unavailable", "Retry-After: 1\r\n",
	    "{\"error\":\"admin API busy: too many connections\"}\n");
}

static void
admin_server_log_evictions(struct admin_server *srv)
{
	uint64_t now = clock_mono_ms();

	if (srv->evict_logged_ms != 0 && now - srv->evict_logged_ms < ADMIN_EVICT_LOG_S * 1000)
		return;
	srv->evict_logged_ms = now;
	log_warn("admin listener full, dropping the slowest connections", "listener=%s "
	    "max_connections=%u evicted_total=%llu refused_total=%llu",
	    adminproto_listener_str(srv->kind), srv->max_conns, srv->evicted, srv->refused);
}

/* Make room for one connection: close the cheapest victim (see the header
 * comment). Returns false when nothing can be evicted. */
static bool
admin_server_evict(struct admin_server *srv)
{
	struct evict_node *n = evict_victim(&srv->evict);
	struct admin_conn *victim;

	if (n == NULL)
		return false;
	victim = admin_conn_of(n);
	log_debug("admin connection evicted", "listener=%s state=%s bytes=%zu",
	    adminproto_listener_str(srv->kind), admin_conn_state_str(victim->state),
	    victim->parser.len);
	if (victim->state == ADMIN_CONN_READING && !transport_is_tls(&victim->tp))
		admin_send_busy(victim->fd);
	admin_conn_close(victim);
	srv->evicted++;
	return true;
}

static void
admin_backoff_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct admin_server *srv = w->data;

	(void)loop;
	(void)revents;
	srv->backing_off = false;
	admin_server_update(srv);
}

bool
admin_server_tls(const struct admin_server *srv)
{
	return srv == &srv->admin->http && srv->admin->auth.tls_ctx != NULL;
}

static void
admin_accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct admin_server *srv = w->data;
	int fd, i;

	(void)revents;
	for (i = 0; i < ADMIN_ACCEPT_BATCH && !srv->backing_off; i++) {
		fd = accept4(srv->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd == -1) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				log_warn("admin accept paused", "listener=%s error=\"%s\" retry_s=%g",
				    adminproto_listener_str(srv->kind), strerror(errno),
				    ADMIN_ACCEPT_BACKOFF);
				srv->backing_off = true;
				ev_timer_set(&srv->backoff, ADMIN_ACCEPT_BACKOFF, 0.);
				ev_timer_start(loop, &srv->backoff);
				break;
			}
			log_warn("admin accept failed", "listener=%s error=\"%s\"",
			    adminproto_listener_str(srv->kind), strerror(errno));
			break;
		}
		if (srv->n_conns >= srv->max_conns) {
			bool room = admin_server_evict(srv);

			if (!room)
				srv->refused++;
			admin_server_log_evictions(srv);
			if (!room) {
				if (!admin_server_tls(srv))
					admin_send_busy(fd);
				close(fd);
				continue;
			}
		}
		/* may close it at once: a request sent with the connect is read */
		if (!admin_conn_new(srv, fd))
			break;
	}
	admin_server_update(srv);
}

/* Connections per listener: ADMIN_LISTEN_MAX_CONNS when RLIMIT_NOFILE (the
 * supervisor raised it to its hard limit) leaves room for both listeners
 * after ADMIN_FD_RESERVE; otherwise half of what is left, at least
 * ADMIN_MIN_CONNS. */
unsigned
admin_http_budget(void)
{
	struct rlimit rl;
	unsigned long long room;

	if (getrlimit(RLIMIT_NOFILE, &rl) == -1 || rl.rlim_cur == RLIM_INFINITY)
		return ADMIN_LISTEN_MAX_CONNS;
	room = rl.rlim_cur > ADMIN_FD_RESERVE ? (rl.rlim_cur - ADMIN_FD_RESERVE) / 2 : 0;
	if (room >= ADMIN_LISTEN_MAX_CONNS)
		return ADMIN_LISTEN_MAX_CONNS;
	if (room < ADMIN_MIN_CONNS)
		room = ADMIN_MIN_CONNS;
	log_warn("file descriptor limit lowers the admin connection budget",
	    "limit=%llu per_listener=%llu wanted=%u hint=\"raise LimitNOFILE (ulimit -n)\"",
	    (unsigned long long)rl.rlim_cur, room, ADMIN_LISTEN_MAX_CONNS);
	return (unsigned)room;
}

void
admin_server_init(struct admin *a, struct admin_server *srv, enum adminproto_listener kind,
		  unsigned max_conns)
{
	evict_set_init(&srv->evict);
	srv->max_conns = max_conns;
	srv->admin = a;
	srv->kind = kind;
	srv->fd = -1;
	ev_timer_init(&srv->backoff, admin_backoff_cb, ADMIN_ACCEPT_BACKOFF, 0.);
	srv->backoff.data = srv;
}

void
admin_server_start(struct admin_server *srv, int fd)
{
	srv->fd = fd;
	ev_io_init(&srv->io, admin_accept_cb, fd, EV_READ);
	srv->io.data = srv;
	admin_server_update(srv);
}

void
admin_server_close(struct admin_server *srv)
{
	struct ev_loop *loop = srv->admin->loop;

	ev_timer_stop(loop, &srv->backoff);
	if (srv->fd == -1)
		return;
	ev_io_stop(loop, &srv->io);
	close(srv->fd);
	srv->fd = -1;
}

