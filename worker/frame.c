/*
 * frame — the Kafka framing of one connection; see frame.h.
 */
#include "worker/frame.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "worker/kafka/apiversions.h"
#include "worker/kafka/sniff.h"

const char *
frame_status_str(enum frame_status s)
{
	switch (s) {
	case FRAME_OK: return "ok";
	case FRAME_NEED_MORE: return "need-more";
	case FRAME_MALFORMED: return "malformed";
	case FRAME_UPSTREAM: return "upstream";
	case FRAME_NO_MEMORY: return "no-memory";
	}
	return "unknown";
}

void
frame_init(struct frame *f, const struct frame_limits *lim, struct metrics *m,
	   const struct kc_broker_map *map)
{
	memset(f, 0, sizeof *f);
	ci_init(&f->ci);
	f->lim = *lim;
	f->m = m;
	f->map = *map;
}

void
frame_dir_free(struct frame_dir *d)
{
	free(d->acc);
	d->acc = NULL;
	d->acc_tail = false;
	d->walking = false;
	if (d->out_owned)
		free(d->out);
	d->out = NULL;
	d->out_owned = false;
}

/* ---- why a connection closes ------------------------------------------- */

/* The reason in f->why; returns status. */
static int
frame_set(struct frame *f, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int
frame_set(struct frame *f, int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(f->why, sizeof f->why, fmt, ap);
	va_end(ap);
	return status;
}

/* The client's bytes break the protocol or a limit. */
#define frame_fail(f, ...) frame_set((f), FRAME_MALFORMED, __VA_ARGS__)
/* The upstream's bytes break the protocol. */
#define frame_upstream(f, ...) frame_set((f), FRAME_UPSTREAM, __VA_ARGS__)
#define frame_no_memory(f, ...) frame_set((f), FRAME_NO_MEMORY, __VA_ARGS__)

/* ---- FIFO of in-flight requests ---------------------------------------- */


static int
frame_fifo_push(struct frame *f, int32_t corr, int16_t key, int16_t ver, bool synthetic,
		double now)
{
	if (f->fifo_len == f->fifo_cap) {
		/* frame_req_step never pushes beyond max_inflight: grow up to it
		 * (also when it is not a power of two). */
		size_t max = f->lim.max_inflight;
		size_t ncap = f->fifo_cap ? f->fifo_cap * 2 : 16;
		if (ncap > max)
			ncap = max;
		if (ncap <= f->fifo_len)
			return -1;
		struct frame_inflight *n = malloc(ncap * sizeof *n);
		if (!n)
			return -1;
		for (size_t i = 0; i < f->fifo_len; i++)
			n[i] = f->fifo[(f->fifo_head + i) % f->fifo_cap];
		free(f->fifo);
		f->fifo = n;
		f->fifo_cap = ncap;
		f->fifo_head = 0;
	}
	struct frame_inflight *e = &f->fifo[(f->fifo_head + f->fifo_len) % f->fifo_cap];
	e->corr = corr;
	e->key = key;
	e->ver = ver;
	e->synthetic = synthetic;
	e->sent = now;
	f->fifo_len++;
	if (!synthetic)
		METRIC_ADD(f->m, in_flight, 1);
	return 0;
}

const struct frame_inflight *
frame_fifo_head(const struct frame *f)
{
	return f->fifo_len ? &f->fifo[f->fifo_head] : NULL;
}

static void
frame_fifo_pop(struct frame *f)
{
	if (!f->fifo[f->fifo_head].synthetic)
		METRIC_SUB(f->m, in_flight, 1);
	f->fifo_head = (f->fifo_head + 1) % f->fifo_cap;
	f->fifo_len--;
}

/* ---- requests: client -> upstream -------------------------------------- */

int
frame_check_prefix(struct frame *f, const uint8_t *p, size_t avail)
{
	if (avail < 4)
		return FRAME_NEED_MORE;
	/* A TLS record: content type handshake (22), version 3.x. As a size
	 * prefix that is 0x1603xxxx, ~370 MB: no Kafka client opens with it. */
	if (!f->seen_request && p[0] == 0x16 && p[1] == 0x03 && p[2] <= 0x04) {
		METRIC_ADD(f->m, tls_on_plaintext, 1);
		return frame_fail(f, "TLS ClientHello on a plaintext listener "
		    "(client configured for SSL, ferry listener is plain TCP)");
	}
	int32_t size = kc_get_i32(p);
	if (size < 0) {
		METRIC_ADD(f->m, malformed_requests, 1);
		return frame_fail(f, "malformed request: negative size %d", size);
	}
	if (size < 8) {
		METRIC_ADD(f->m, malformed_requests, 1);
		return frame_fail(f, "malformed request: size %d below 8", size);
	}
	if ((uint64_t)size > f->lim.max_frame_bytes) {
		METRIC_ADD(f->m, frame_too_large, 1);
		return frame_fail(f, "request of %d bytes exceeds max_frame_bytes (%llu)", size,
		    (unsigned long long)f->lim.max_frame_bytes);
	}
	return FRAME_OK;
}

uint64_t
frame_sasl_limit(const struct frame *f)
{
	const struct frame_limits *l = &f->lim;
	return l->sasl_max_frame_bytes < l->max_frame_bytes ? l->sasl_max_frame_bytes
	    : l->max_frame_bytes;
}

/*
 * What the client says of itself in the request whose header h was just
 * accepted (clientinfo.h). FRAME_NEED_MORE only while the fields can still
 * arrive whole in the buffer (the request is small); a field that cannot
 * (a token larger than the buffer) is not learned. Never closes: the
 * broker judges the request.
 */
static int
req_client_info(struct frame *f, const uint8_t *p, size_t avail, const struct kc_req_header *h)
{
	char err[96];
	bool first = !f->ci.client_id_seen;
	int r = ci_on_request(&f->ci, p, avail, h, err, sizeof err);

	if (r == CI_NEED_MORE) {
		if (4 + (uint64_t)h->size <= f->lim.buf_size)
			return FRAME_NEED_MORE;
		f->ci.sasl_first_pending = false;
	}
	if (first || h->api_key == KC_API_API_VERSIONS || h->api_key == KC_API_SASL_HANDSHAKE ||
	    h->api_key == KC_API_SASL_AUTHENTICATE)
		f->ci_changed = true;
	return FRAME_OK;
}

/* A client token of a legacy raw SASL exchange (no Kafka header, no
 * correlation id): streamed by its length prefix. Same returns as
 * frame_req_step. */
static int
req_raw_token(struct frame *f, const uint8_t *p, size_t avail, uint64_t *started)
{
	uint64_t frame = 0;
	char err[160];
	if (f->ci.sasl_first_pending) {
		/* the first token after the handshake carries the identity */
		int c = ci_on_raw_token(&f->ci, p, avail, err, sizeof err);
		if (c == CI_NEED_MORE) {
			int32_t len = avail >= 4 ? kc_get_i32(p) : 0;
			if (len >= 0 && 4 + (uint64_t)len <= f->lim.buf_size) {
				f->req_need_more = true;
				return FRAME_NEED_MORE;
			}
			f->ci.sasl_first_pending = false;
		}
		f->ci_changed = true;
	}
	int r = sasl_on_raw_token(&f->sasl, true, p, avail, frame_sasl_limit(f), &frame, err,
	    sizeof err);
	if (r == SASL_NEED_MORE) {
		f->req_need_more = true;
		return FRAME_NEED_MORE;
	}
	if (r == SASL_TOO_LARGE) {
		METRIC_ADD(f->m, sasl_frame_too_large, 1);
		return frame_fail(f, "%s: over sasl_max_frame_bytes before authentication "
		    "(%s exchange, legacy raw framing)", err, f->sasl.mech_name);
	}
	if (r != SASL_OK) {
		METRIC_ADD(f->m, malformed_requests, 1);
		return frame_fail(f, "malformed SASL exchange: %s", err);
	}
	f->req.frame_left = frame;
	f->req.frames++;
	*started = frame;
	return FRAME_OK;
}

int
frame_req_step(struct frame *f, double now, bool may_start, uint64_t *started)
{
	struct frame_dir *d = &f->req;
	*started = 0;
	if (!d->buf) {
		f->req_need_more = false;
		return FRAME_NEED_MORE;
	}
	size_t at = d->start + d->fwd;
	size_t avail = d->end - at;
	if (d->frame_left) {
		size_t take = avail < d->frame_left ? avail : (size_t)d->frame_left;
		d->fwd += take;
		d->frame_left -= take;
		if (d->frame_left == 0)
			f->req_since = 0;   /* this frame is complete */
		return take > 0 ? FRAME_OK : FRAME_NEED_MORE;
	}
	if (d->skip_left) {
		if (d->fwd)
			return FRAME_NEED_MORE;
		size_t take = avail < d->skip_left ? avail : (size_t)d->skip_left;
		d->start += take;
		d->skip_left -= take;
		if (d->skip_left == 0)
			f->req_since = 0;
		return take > 0 ? FRAME_OK : FRAME_NEED_MORE;
	}
	f->req_need_more = false;
	if (avail == 0 || !may_start)
		return FRAME_NEED_MORE;
	if (!sasl_client_parse_ok(&f->sasl))
		return FRAME_NEED_MORE;  /* the broker answers first (v0 handshake, raw token) */
	if (f->sasl.phase == SASL_RAW_CLIENT)
		return req_raw_token(f, d->buf + at, avail, started);
	if (f->fifo_len >= f->lim.max_inflight) {
		/* Backpressure, not an error: the next request waits (and the
		 * client is not read past it) until responses drain. */
		if (!f->inflight_paused) {
			f->inflight_paused = true;
			METRIC_ADD(f->m, inflight_paused, 1);
		}
		return FRAME_NEED_MORE;
	}
	f->inflight_paused = false;

	const uint8_t *p = d->buf + at;
	int r = frame_check_prefix(f, p, avail);
	if (r < 0)
		return r;
	if (r == FRAME_NEED_MORE || avail < 6)
		goto need_more;
	/* Keys newer than the codec's table: their header layout is a guess
	 * and nothing in ferry has vetted what their responses carry. */
	int16_t key = kc_get_i16(p + 4);
	if (!f->seen_request && sasl_legacy_gssapi(p, avail)) {
		METRIC_ADD(f->m, sasl_refused, 1);
		return frame_fail(f, "a bare GSSAPI token with no SaslHandshake (a Kafka 0.9 "
		    "client) is not relayed: use a client with SaslHandshake v1");
	}
	if (key > KC_API_KEY_MAX_KNOWN) {
		METRIC_ADD(f->m, malformed_requests, 1);
		return frame_fail(f, "refused request with unknown API key %d", key);
	}
	struct kc_req_header h;
	char err[128];
	r = kc_parse_request_header(p, avail, f->lim.max_frame_bytes, &h, err, sizeof err);
	if (r == KC_NEED_MORE)
		goto need_more;
	if (r != KC_OK) {
		METRIC_ADD(f->m, malformed_requests, 1);
		return frame_fail(f, "malformed request: %s", err);
	}
	/* SASL pass-through: the pre-authentication limit, the mechanism of
	 * a handshake (a v0 one stops parsing until its answer). */
	if (!sasl_frame_allowed(&f->sasl, h.api_key, (uint64_t)h.size, frame_sasl_limit(f))) {
		METRIC_ADD(f->m, sasl_frame_too_large, 1);
		return frame_fail(f, "%s request of %d bytes before SASL authentication exceeds "
		    "sasl_max_frame_bytes (%llu)", kc_api_name(h.api_key), h.size,
		    (unsigned long long)frame_sasl_limit(f));
	}
	r = sasl_on_request(&f->sasl, p, avail, &h, err, sizeof err);
	if (r == SASL_NEED_MORE)
		goto need_more;
	if (r == SASL_REFUSED) {
		METRIC_ADD(f->m, sasl_refused, 1);
		return frame_fail(f, "%s", err);
	}
	if (r != SASL_OK) {
		METRIC_ADD(f->m, malformed_requests, 1);
		return frame_fail(f, "%s", err);
	}
	if (req_client_info(f, p, avail, &h) == FRAME_NEED_MORE)
		goto need_more;
	if (h.api_key == 18 && !kc_request_allowed(18, h.api_version)) {
		/* Client ahead of the proxy: answer UNSUPPORTED_VERSION ourselves,
		 * in order, so it retries at a version we parse. */
		f->seen_request = true;
		f->requests++;
		if (frame_fifo_push(f, h.correlation_id, h.api_key, h.api_version, true, now) == -1)
			return frame_no_memory(f, "out of memory for the in-flight queue");
		d->skip_left = 4 + (uint64_t)h.size;
		*started = d->skip_left;
		return FRAME_OK;
	}
	if (!kc_request_allowed(h.api_key, h.api_version)) {
		METRIC_ADD(f->m, malformed_requests, 1);
		return frame_fail(f, "refused request %s (key %d) v%d", kc_api_name(h.api_key),
		    h.api_key, h.api_version);
	}
	bool expects_response = true;
	if (h.api_key == 0) {
		int16_t acks;
		r = kc_produce_acks(p, avail, &h, &acks);
		if (r == KC_NEED_MORE)
			goto need_more;
		if (r != KC_OK) {
			METRIC_ADD(f->m, malformed_requests, 1);
			return frame_fail(f, "malformed Produce request");
		}
		expects_response = acks != 0;
	}
	/* (counted once its header, and a Produce's acks, are whole: a step
	 * that needs more bytes parses the same header again) */
	f->seen_request = true;
	f->requests++;
	if (expects_response &&
	    frame_fifo_push(f, h.correlation_id, h.api_key, h.api_version, false, now) == -1)
		return frame_no_memory(f, "out of memory for the in-flight queue");
	METRIC_ADD(f->m, requests, 1);
	metrics_request(f->m, h.api_key);
	d->frame_left = 4 + (uint64_t)h.size;
	d->frames++;
	*started = d->frame_left;
	return FRAME_OK;

need_more:
	/* The header must fit in one buffer; the caller moves the bytes to
	 * its front when its end is reached. */
	if (at == 0 && d->end == f->lim.buf_size) {
		METRIC_ADD(f->m, malformed_requests, 1);
		return frame_fail(f, "request header larger than %zu bytes", f->lim.buf_size);
	}
	f->req_need_more = true;
	return FRAME_NEED_MORE;
}

static int
resp_finish_rewrite(struct frame *f)
{
	struct frame_dir *d = &f->resp;
	struct kc_broker_map map = f->map;
	uint8_t *out = NULL;
	size_t out_len = 0;
	char err[128];
	int r = kc_rewrite_response(d->acc_key, d->acc_ver, d->acc, d->acc_len, &map, &out,
	    &out_len, err, sizeof err);
	free(d->acc);
	d->acc = NULL;
	if (r != KC_OK) {
		METRIC_ADD(f->m, malformed_responses, 1);
		return frame_upstream(f, "malformed %s v%d response: %s",
		    kc_api_name(d->acc_key), d->acc_ver, err);
	}
	/* A well-formed Kafka answer: what "reachable" means (a bare TCP
	 * connect does not claim it). */
	if (d->acc_key == KC_API_API_VERSIONS || d->acc_key == KC_API_METADATA)
		f->upstream_answered = true;
	d->out = out;
	d->out_len = out_len;
	d->out_off = 0;
	d->out_owned = true;
	METRIC_ADD(f->m, responses_rewritten, 1);
	if (map.trailing) {
		/* librdkafka's mock writes Metadata's final tag byte twice */
		METRIC_ADD(f->m, responses_trailing_bytes, 1);
		log_debug("dropped bytes after a complete response", "api=%s version=%d bytes=%zu",
		    kc_api_name(d->acc_key), d->acc_ver, map.trailing);
	}
	return FRAME_OK;
}

/* The collected tail of a streamed Fetch response, rewritten to the same
 * length (the size prefix has gone out): into out. */
static int
resp_finish_tail(struct frame *f)
{
	struct frame_dir *d = &f->resp;
	struct kc_broker_map map = f->map;
	enum kc_fw_tail how = KC_FW_TAIL_SAME;
	uint8_t *out = NULL;
	char err[128];
	int r = kc_rw_fetch_tail(d->acc_ver, d->acc, d->acc_len, &map, &out, &how, err,
	    sizeof err);
	d->acc_tail = false;
	if (r != KC_OK) {
		free(d->acc);
		d->acc = NULL;
		METRIC_ADD(f->m, malformed_responses, 1);
		return frame_upstream(f, "malformed Fetch v%d response: %s", d->acc_ver, err);
	}
	if (how == KC_FW_TAIL_SAME) {
		out = d->acc;   /* forwarded as it is */
	} else {
		free(d->acc);
		METRIC_ADD(f->m, responses_rewritten, 1);
	}
	d->acc = NULL;
	d->out = out;
	d->out_len = d->acc_len;
	d->out_off = 0;
	d->out_owned = true;
	if (how == KC_FW_TAIL_DROPPED) {
		METRIC_ADD(f->m, leader_hints_dropped, 1);
		log_debug("leader hints dropped from a streamed Fetch response: rewritten, they "
		    "do not fit its length (the client refreshes its metadata)",
		    "version=%d tail_bytes=%zu", d->acc_ver, d->acc_len);
	}
	return FRAME_OK;
}

/* The next piece of a streamed Fetch response (frame.h). */
static int
resp_walk(struct frame *f)
{
	static const uint8_t none;
	struct frame_dir *d = &f->resp;
	size_t at = d->start + d->fwd;
	size_t avail = d->buf ? d->end - at : 0;
	enum kc_fw_what what = KC_FW_FORWARD;
	uint64_t n = 0;
	char err[128];
	int r = kc_fw_step(&d->fw, avail ? d->buf + at : &none, avail, &what, &n, err,
	    sizeof err);
	if (r == KC_NEED_MORE) {
		if (at == 0 && d->end == f->lim.buf_size) {
			METRIC_ADD(f->m, malformed_responses, 1);
			return frame_upstream(f, "Fetch v%d response: a field section larger "
			    "than %zu bytes", d->fw.ver, f->lim.buf_size);
		}
		return FRAME_NEED_MORE;
	}
	if (r != KC_OK) {
		METRIC_ADD(f->m, malformed_responses, 1);
		return frame_upstream(f, "malformed Fetch v%d response: %s", d->fw.ver, err);
	}
	switch (what) {
	case KC_FW_FORWARD:
		d->fwd += (size_t)n;
		return FRAME_OK;
	case KC_FW_OPAQUE:
		d->frame_left = n;
		d->frames++;
		return FRAME_OK;
	case KC_FW_TAIL:
		break;
	}
	d->walking = false;
	if (n > FRAME_TAIL_MAX) {
		METRIC_ADD(f->m, malformed_responses, 1);
		return frame_upstream(f, "Fetch v%d response: %llu bytes of top-level tagged "
		    "fields, above %d", d->fw.ver, (unsigned long long)n, FRAME_TAIL_MAX);
	}
	d->acc = malloc((size_t)n);
	if (!d->acc)
		return frame_no_memory(f, "out of memory for a %llu byte Fetch tail",
		    (unsigned long long)n);
	d->acc_need = (size_t)n;
	d->acc_len = 0;
	d->acc_key = KC_API_FETCH;
	d->acc_ver = d->fw.ver;
	d->acc_tail = true;
	return FRAME_OK;
}

int
frame_resp_step(struct frame *f, double now)
{
	struct frame_dir *d = &f->resp;
	if (d->out)
		return FRAME_NEED_MORE;
	size_t avail = d->buf ? d->end - (d->start + d->fwd) : 0;
	if (d->frame_left) {
		size_t take = avail < d->frame_left ? avail : (size_t)d->frame_left;
		d->fwd += take;
		d->frame_left -= take;
		return take > 0 ? FRAME_OK : FRAME_NEED_MORE;
	}
	if (d->acc) {
		if (avail == 0 || d->fwd)
			return FRAME_NEED_MORE;   /* (d->buf may be NULL; a streamed
			                             response's parts go first) */
		size_t take = d->acc_need - d->acc_len;
		if (take > avail)
			take = avail;
		memcpy(d->acc + d->acc_len, d->buf + d->start, take);
		d->acc_len += take;
		d->start += take;
		if (d->acc_len == d->acc_need)
			return d->acc_tail ? resp_finish_tail(f) : resp_finish_rewrite(f);
		return take > 0 ? FRAME_OK : FRAME_NEED_MORE;
	}
	if (d->walking)
		return resp_walk(f);
	if (f->sasl.phase == SASL_RAW_SERVER) {
		/* The broker's token of a legacy raw SASL exchange. */
		if (avail == 0)
			return FRAME_NEED_MORE;
		uint64_t frame = 0;
		char err[160];
		int r = sasl_on_raw_token(&f->sasl, false, d->buf + d->start + d->fwd, avail,
		    f->lim.max_frame_bytes, &frame, err, sizeof err);
		if (r == SASL_NEED_MORE)
			return FRAME_NEED_MORE;
		if (r != SASL_OK) {
			if (r == SASL_TOO_LARGE)
				METRIC_ADD(f->m, frame_too_large, 1);
			else
				METRIC_ADD(f->m, malformed_responses, 1);
			return frame_upstream(f, "%s", err);
		}
		d->frame_left = frame;
		d->frames++;
		if (f->sasl.authenticated && f->sasl.phase == SASL_KAFKA)
			log_debug("SASL raw exchange relayed", "mechanism=%s", f->sasl.mech_name);
		return FRAME_OK;
	}
	const struct frame_inflight *head = frame_fifo_head(f);
	if (head && head->synthetic) {
		if (d->fwd)
			return FRAME_NEED_MORE;
		size_t n = kc_build_apiversions_unsupported(d->small, sizeof d->small, head->corr);
		d->out = d->small;
		d->out_len = n;
		d->out_off = 0;
		d->out_owned = false;
		frame_fifo_pop(f);
		METRIC_ADD(f->m, responses, 1);
		return FRAME_OK;
	}
	if (avail == 0)
		return FRAME_NEED_MORE;
	const uint8_t *p = d->buf + d->start + d->fwd;
	int32_t size = 0, corr = 0;
	char err[128];
	int r = kc_parse_response_prefix(p, avail, f->lim.max_frame_bytes, &size, &corr, err,
	    sizeof err);
	if (r == KC_NEED_MORE)
		return FRAME_NEED_MORE;
	if (r != KC_OK) {
		/* (size is not set on failure; avail >= 4 here) */
		int32_t raw = kc_get_i32(p);
		if (raw > 0 && (uint64_t)raw > f->lim.max_frame_bytes)
			METRIC_ADD(f->m, frame_too_large, 1);
		else
			METRIC_ADD(f->m, malformed_responses, 1);
		if (!f->seen_response) {
			/* Say what the peer speaks instead (TLS, HTTP, ...). */
			char what[200];
			enum kc_sniff v = kc_sniff_response(p, avail, f->lim.max_frame_bytes);
			if (v != KC_SNIFF_KAFKA && v != KC_SNIFF_NEED_MORE)
				return frame_upstream(f, "%s", kc_sniff_describe(v, p, avail,
				    f->lim.max_frame_bytes, what, sizeof what));
		}
		return frame_upstream(f, "malformed response: %s", err);
	}
	if (!head) {
		METRIC_ADD(f->m, correlation_mismatch, 1);
		return frame_upstream(f, "a response (correlation id %d) nobody asked for",
		    corr);
	}
	if (corr != head->corr) {
		METRIC_ADD(f->m, correlation_mismatch, 1);
		return frame_upstream(f, "response correlation id %d does not match request "
		    "%d (%s)", corr, head->corr, kc_api_name(head->key));
	}
	f->seen_response = true;
	if (head->key == KC_API_SASL_HANDSHAKE || head->key == KC_API_SASL_AUTHENTICATE) {
		/* Its error code moves the SASL state on (sasl.h). */
		r = sasl_on_response(&f->sasl, head->key, head->ver, p, avail, err, sizeof err);
		if (r == SASL_NEED_MORE) {
			if (d->start + d->fwd == 0 && d->end == f->lim.buf_size) {
				METRIC_ADD(f->m, malformed_responses, 1);
				return frame_upstream(f, "%s response header larger than %zu "
				    "bytes", kc_api_name(head->key), f->lim.buf_size);
			}
			return FRAME_NEED_MORE;
		}
		if (r != SASL_OK) {
			METRIC_ADD(f->m, malformed_responses, 1);
			return frame_upstream(f, "%s", err);
		}
	}
	bool rewrite = kc_response_needs_rewrite(head->key, head->ver);
	if (rewrite && head->key == KC_API_FETCH && 4 + (uint64_t)size > f->lim.buf_size) {
		/* streamed: only its tagged fields are held (frame.h) */
		kc_fw_init(&d->fw, head->ver, 4 + (uint64_t)size);
		d->walking = true;
	} else if (rewrite) {
		if (d->fwd)
			return FRAME_NEED_MORE;  /* flush what precedes it first */
		d->acc_need = 4 + (size_t)size;
		d->acc = malloc(d->acc_need);
		if (!d->acc)
			return frame_no_memory(f, "out of memory for a %zu byte response", d->acc_need);
		d->acc_len = 0;
		d->acc_key = head->key;
		d->acc_ver = head->ver;
	} else {
		d->frame_left = 4 + (uint64_t)size;
		d->frames++;
	}
	/* the upstream latency of this API (the caller's clock) */
	double lat = now - head->sent;
	metrics_observe(f->m, head->key, lat > 0 ? (uint64_t)(lat * 1e6) : 0);
	frame_fifo_pop(f);
	METRIC_ADD(f->m, responses, 1);
	return FRAME_OK;
}

/* ---- what the data path asks ------------------------------------------- */

void
frame_free(struct frame *f)
{
	frame_dir_free(&f->req);
	frame_dir_free(&f->resp);
	/* Requests still owed a response are no longer in flight. */
	while (f->fifo_len)
		frame_fifo_pop(f);
	free(f->fifo);
	f->fifo = NULL;
	f->fifo_cap = f->fifo_head = 0;
}

void
frame_dir_bypass(struct frame *f, struct frame_dir *d, uint64_t n)
{
	d->frame_left -= n < d->frame_left ? n : d->frame_left;
	if (d == &f->req && d->frame_left == 0)
		f->req_since = 0;   /* this request frame is complete */
}

bool
frame_owes_nothing(const struct frame *f)
{
	return f->fifo_len == 0 && f->req.frame_left == 0 && f->req.fwd == 0 &&
	       f->req.skip_left == 0 && f->resp.fwd == 0 && f->resp.frame_left == 0 &&
	       f->req.piped == 0 && f->resp.piped == 0 &&
	       !f->resp.acc && !f->resp.out && !f->resp.walking &&
	       f->sasl.phase != SASL_RAW_SERVER;  /* the broker's raw token is owed */
}

size_t
frame_req_unparsed(const struct frame *f)
{
	const struct frame_dir *d = &f->req;
	return d->buf ? d->end - (d->start + d->fwd) : 0;
}

size_t
frame_resp_unparsed(const struct frame *f)
{
	const struct frame_dir *d = &f->resp;
	return d->buf ? d->end - (d->start + d->fwd) : 0;
}

bool
frame_req_partial(const struct frame *f)
{
	return f->req.frame_left || f->req.skip_left || f->req_need_more;
}

bool
frame_dir_has_room(const struct frame *f, const struct frame_dir *d)
{
	return !d->buf || d->end < f->lim.buf_size || d->start > 0;
}

size_t
frame_dir_room(const struct frame *f, struct frame_dir *d)
{
	if (d->end == f->lim.buf_size) {
		if (d->start == 0)
			return 0;
		memmove(d->buf, d->buf + d->start, d->end - d->start);
		d->end -= d->start;
		d->start = 0;
	}
	return f->lim.buf_size - d->end;
}
