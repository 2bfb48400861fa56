/*
 * upstream_fetch — the worker's own metadata fetch (see upstream.h): it
 * learns the upstream address of every broker and is the health probe.
 * One at a time per worker (w->fetch), over the bootstrap servers in turn,
 * each step under WORKER_METADATA_TIMEOUT_MS.
 *
 * Callbacks of upstream_connect_start() run from the event loop, never
 * from inside the start call, so the fetch needs no re-entrancy care.
 */
#include "worker/upstream.h"

#include <errno.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/kafka/apiversions.h"
#include "worker/kafka/codec.h"
#include "worker/kafka/rewrite.h"
#include "worker/kafka/sasl_client.h"
#include "worker/kafka/sniff.h"
#include "common/tls.h"
#include "common/transport.h"

#define FETCH_SNIFF_BYTES 64   /* first read of a fetch: enough to tell TLS/HTTP */

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

void
upstream_fetch_discard(struct worker *w)
{
	if (w->fetch)
		fetch_discard(w->fetch);
	w->fetch = NULL;
}
