/*
 * Unit tests for worker/frame: the Kafka framing of one connection, fed
 * hostile and boundary frames the way conn.c feeds it (bytes appended as
 * reads bring them, moved to the front when the buffer end is reached; the
 * parsed bytes and the rewritten frames taken as writes take them), with no
 * socket: size prefixes below 8, negative, above max_frame_bytes and exactly
 * at it; a header split across reads at every byte; a header larger than
 * the buffer; responses out of FIFO order or unasked; acks=0 Produce;
 * ApiVersions above the codec answered here; max_inflight backpressure and
 * the drain boundary; a Metadata response rewritten whole; SASL v0 raw
 * token framing and the pre-authentication limit; who the client says it
 * is (client_id, software, asserted SASL name) read on the way, whole or
 * split, never a password, never a reason to close; a Fetch v16+ response
 * above the buffer streamed (its record sets bypassable) with only its
 * top-level tags rewritten, to the same length.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/kafka_fixtures.h"
#include "worker/frame.h"

#define MAX_FRAME 4096

static struct metrics *m;
static struct frame f;
static struct tmap tm;

static void
setup_with(size_t buf_size, uint64_t max_frame, uint64_t sasl_max, size_t max_inflight)
{
	m = calloc(1, sizeof *m);
	cr_assert_not_null(m);
	struct frame_limits lim = {
		.max_frame_bytes = max_frame,
		.sasl_max_frame_bytes = sasl_max,
		.max_inflight = max_inflight,
		.buf_size = buf_size,
	};
	struct kc_broker_map bm = mk_map(&tm, proxy_map, 3);
	frame_init(&f, &lim, m, &bm);
}

static void
setup(void)
{
	setup_with(1024, MAX_FRAME, MAX_FRAME, 8);
}

static void
teardown(void)
{
	free(f.req.buf);
	free(f.resp.buf);
	f.req.buf = f.resp.buf = NULL;
	frame_free(&f);
	cr_expect_eq(m->in_flight, 0, "frame_free leaves requests in flight");
	free(m);
}

/* Append what a read brings (the bytes move to the front when the end of
 * the buffer is reached, as conn.c's read does). Returns the bytes taken. */
static size_t
feed(struct frame_dir *d, const void *p, size_t n)
{
	size_t took = 0;
	if (!d->buf) {
		d->buf = malloc(f.lim.buf_size);
		cr_assert_not_null(d->buf);
		d->start = d->end = d->fwd = 0;
	}
	while (took < n) {
		size_t room = frame_dir_room(&f, d);
		if (!room)
			break;
		size_t k = room < n - took ? room : n - took;
		memcpy(d->buf + d->end, (const uint8_t *)p + took, k);
		d->end += k;
		took += k;
	}
	return took;
}

/* Write what is parsed, as conn.c's flush does: the pass-through bytes,
 * then a rewritten or synthetic frame. What was written goes to sink. */
static void
flush(struct frame_dir *d, struct bb *sink)
{
	if (d->fwd) {
		bb_raw(sink, d->buf + d->start, d->fwd);
		d->start += d->fwd;
		d->fwd = 0;
	}
	if (d->out) {
		bb_raw(sink, d->out + d->out_off, d->out_len - d->out_off);
		if (d->out_owned)
			free(d->out);
		d->out = NULL;
		d->out_owned = false;
	}
}

static uint64_t started_total;

/* Request steps until one is not FRAME_OK; its status. */
static int
req_run(bool may_start)
{
	int r;
	uint64_t started;
	while ((r = frame_req_step(&f, 1.0, may_start, &started)) == FRAME_OK)
		started_total += started;
	return r;
}

static int
resp_run(void)
{
	int r;
	while ((r = frame_resp_step(&f, 1.5)) == FRAME_OK)
		;
	return r;
}

/* ---- request builders (kafka-protocol: request header v0-2) ---- */

/* size placeholder, key, version, correlation id, client id, header tags */
static void
req_head(struct bb *b, int16_t key, int16_t ver, int32_t corr)
{
	int hv = kc_request_header_version(key, ver);
	bb_init(b);
	bb_i32(b, 0);
	bb_i16(b, key);
	bb_i16(b, ver);
	bb_i32(b, corr);
	if (hv >= 1)
		bb_str(b, false, "test-client");   /* never compact, even in v2 */
	if (hv >= 2)
		bb_uv(b, 0);
}

/* Metadata v1, every topic. */
static void
req_metadata(struct bb *b, int32_t corr)
{
	req_head(b, KC_API_METADATA, 1, corr);
	bb_arr(b, false, -1);
	bb_fix(b);
}

/* Produce v7 (transactional_id null, acks, timeout, no topics). */
static void
req_produce(struct bb *b, int32_t corr, int16_t acks)
{
	req_head(b, KC_API_PRODUCE, 7, corr);
	bb_i16(b, -1);
	bb_i16(b, acks);
	bb_i32(b, 30000);
	bb_arr(b, false, 0);
	bb_fix(b);
}

/* A response header v0 and an int16 error code: enough body for a
 * pass-through response. */
static void
resp_simple(struct bb *b, int32_t corr)
{
	bb_init(b);
	bb_i32(b, 0);
	bb_i32(b, corr);
	bb_i16(b, 0);
	bb_fix(b);
}

/* ---- size prefix ---- */

static void
expect_refused(const uint8_t *p, size_t n, const char *why, _Atomic uint64_t *counter)
{
	feed(&f.req, p, n);
	cr_assert_eq(req_run(true), FRAME_MALFORMED);
	cr_expect(strstr(f.why, why) != NULL, "why: %s", f.why);
	cr_expect_eq(*counter, 1);
	cr_expect_eq(f.fifo_len, 0);
	cr_expect_eq(f.req.fwd, 0, "nothing of a refused frame is forwarded");
}

Test(frame, size_below_8, .init = setup, .fini = teardown)
{
	uint8_t p[12] = { 0, 0, 0, 7, 0, 3, 0, 1, 0, 0, 0, 1 };
	expect_refused(p, sizeof p, "size 7 below 8", &m->malformed_requests);
}

Test(frame, size_zero, .init = setup, .fini = teardown)
{
	uint8_t p[4] = { 0, 0, 0, 0 };
	expect_refused(p, sizeof p, "size 0 below 8", &m->malformed_requests);
}

Test(frame, negative_size, .init = setup, .fini = teardown)
{
	uint8_t p[4] = { 0xff, 0xff, 0xff, 0xf0 };
	expect_refused(p, sizeof p, "negative size", &m->malformed_requests);
}

Test(frame, size_above_max_frame_bytes, .init = setup, .fini = teardown)
{
	uint8_t p[4];
	kc_put_i32(p, MAX_FRAME + 1);
	expect_refused(p, sizeof p, "exceeds max_frame_bytes (4096)", &m->frame_too_large);
	cr_expect_eq(m->malformed_requests, 0);
}

Test(frame, tls_client_hello_on_plaintext, .init = setup, .fini = teardown)
{
	uint8_t p[8] = { 0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01 };
	expect_refused(p, sizeof p, "TLS ClientHello on a plaintext listener", &m->tls_on_plaintext);
	/* the same bytes after a request are just a (too large) size */
	cr_expect_eq(frame_check_prefix(&f, p, 3), FRAME_NEED_MORE);
}

Test(frame, size_exactly_max_frame_bytes_streams, .init = setup, .fini = teardown)
{
	/* A Metadata v1 header followed by body bytes up to the limit: the
	 * frame is forwarded as it arrives, never held whole. */
	struct bb b, up;
	req_head(&b, KC_API_METADATA, 1, 5);
	bb_arr(&b, false, -1);
	while (b.n < 4 + MAX_FRAME)
		bb_u8(&b, 0xab);
	bb_fix(&b);
	bb_init(&up);
	size_t off = 0;
	while (off < b.n) {
		off += feed(&f.req, b.b + off, b.n - off);
		int r = req_run(true);
		cr_assert_eq(r, FRAME_NEED_MORE, "%s", f.why);
		flush(&f.req, &up);
	}
	cr_expect_eq(started_total, 4 + MAX_FRAME);
	cr_expect_eq(f.fifo_len, 1);
	cr_expect_eq(f.req.frame_left, 0);
	cr_expect(!frame_req_partial(&f));
	assert_bytes(up.b, up.n, b.b, b.n, "forwarded");
	cr_expect_eq(m->requests, 1);
	cr_expect_eq(m->in_flight, 1);
	bb_free(&b);
	bb_free(&up);
}

Test(frame, header_split_at_every_byte)
{
	struct bb b;
	req_metadata(&b, 77);
	for (size_t k = 0; k <= b.n; k++) {
		setup();
		started_total = 0;
		feed(&f.req, b.b, k);
		int r = req_run(true);
		cr_assert_eq(r, FRAME_NEED_MORE, "split %zu: %s", k, f.why);
		/* the header needs every byte up to the end of the client id
		 * (the Metadata v1 body is 4 bytes) */
		bool whole = k >= b.n - 4;
		cr_expect_eq(f.fifo_len, whole ? 1 : 0, "split %zu", k);
		cr_expect_eq(f.req_need_more, !whole && k > 0, "split %zu", k);
		cr_expect(k == 0 || frame_req_partial(&f) == (k < b.n), "split %zu", k);
		feed(&f.req, b.b + k, b.n - k);
		cr_assert_eq(req_run(true), FRAME_NEED_MORE, "split %zu: %s", k, f.why);
		cr_expect_eq(f.fifo_len, 1, "split %zu", k);
		cr_expect_eq(f.fifo[f.fifo_head].corr, 77);
		cr_expect_eq(f.req.fwd, b.n, "split %zu: fwd %zu", k, f.req.fwd);
		cr_expect_eq(started_total, b.n);
		cr_expect(!frame_req_partial(&f));
		cr_expect_eq(m->malformed_requests, 0);
		teardown();
	}
	bb_free(&b);
}

Test(frame, header_larger_than_the_buffer)
{
	setup_with(64, MAX_FRAME, MAX_FRAME, 8);
	struct bb b;
	bb_init(&b);
	bb_i32(&b, 0);
	bb_i16(&b, KC_API_METADATA);
	bb_i16(&b, 1);
	bb_i32(&b, 1);
	bb_i16(&b, 200);                        /* client id of 200 bytes */
	for (int i = 0; i < 200; i++)
		bb_u8(&b, 'x');
	bb_arr(&b, false, -1);
	bb_fix(&b);
	feed(&f.req, b.b, b.n);                  /* the first 64 bytes */
	cr_assert_eq(req_run(true), FRAME_MALFORMED);
	cr_expect(strstr(f.why, "request header larger than 64 bytes") != NULL, "%s", f.why);
	cr_expect_eq(m->malformed_requests, 1);
	bb_free(&b);
	teardown();
}

Test(frame, unknown_api_key_refused, .init = setup, .fini = teardown)
{
	struct bb b;
	req_head(&b, KC_API_KEY_MAX_KNOWN + 1, 0, 1);
	bb_fix(&b);
	expect_refused(b.b, b.n, "unknown API key", &m->malformed_requests);
	bb_free(&b);
}

Test(frame, header_the_codec_rejects, .init = setup, .fini = teardown)
{
	/* a client id longer than the frame */
	uint8_t p[16] = { 0, 0, 0, 12, 0, 3, 0, 1, 0, 0, 0, 9, 0x7f, 0x00, 'a', 'b' };
	expect_refused(p, sizeof p, "malformed request", &m->malformed_requests);
}

/* ---- the FIFO ---- */

Test(frame, responses_in_order_pass_through, .init = setup, .fini = teardown)
{
	struct bb r1, r2, s1, s2, cli, up;
	req_produce(&r1, 1, 1);
	req_produce(&r2, 2, -1);
	bb_init(&up);
	feed(&f.req, r1.b, r1.n);
	feed(&f.req, r2.b, r2.n);
	cr_assert_eq(req_run(true), FRAME_NEED_MORE);
	flush(&f.req, &up);
	cr_expect_eq(f.fifo_len, 2);
	cr_expect(!frame_owes_nothing(&f));
	resp_simple(&s1, 1);
	resp_simple(&s2, 2);
	bb_init(&cli);
	/* the two responses in one read, cut inside the second's prefix */
	feed(&f.resp, s1.b, s1.n);
	feed(&f.resp, s2.b, 3);
	cr_assert_eq(resp_run(), FRAME_NEED_MORE, "%s", f.why);
	flush(&f.resp, &cli);
	cr_expect_eq(f.fifo_len, 1);
	feed(&f.resp, s2.b + 3, s2.n - 3);
	cr_assert_eq(resp_run(), FRAME_NEED_MORE, "%s", f.why);
	flush(&f.resp, &cli);
	cr_expect_eq(f.fifo_len, 0);
	cr_expect(frame_owes_nothing(&f));
	cr_expect(f.seen_response);
	cr_expect_eq(m->responses, 2);
	cr_expect_eq(cli.n, s1.n + s2.n);
	cr_expect_eq(m->api[KC_API_PRODUCE].responses, 2, "latency observed per response");
	bb_free(&r1); bb_free(&r2); bb_free(&s1); bb_free(&s2); bb_free(&cli); bb_free(&up);
}

Test(frame, response_out_of_fifo_order, .init = setup, .fini = teardown)
{
	struct bb r1, r2, s2;
	req_metadata(&r1, 1);
	req_metadata(&r2, 2);
	feed(&f.req, r1.b, r1.n);
	feed(&f.req, r2.b, r2.n);
	cr_assert_eq(req_run(true), FRAME_NEED_MORE);
	resp_simple(&s2, 2);
	feed(&f.resp, s2.b, s2.n);
	cr_assert_eq(resp_run(), FRAME_UPSTREAM);
	cr_expect(strstr(f.why, "correlation id 2 does not match request 1 (Metadata)") != NULL,
	    "%s", f.why);
	cr_expect_eq(m->correlation_mismatch, 1);
	cr_expect_eq(f.fifo_len, 2, "nothing popped");
	bb_free(&r1); bb_free(&r2); bb_free(&s2);
}

Test(frame, response_nobody_asked_for, .init = setup, .fini = teardown)
{
	struct bb s;
	resp_simple(&s, 9);
	feed(&f.resp, s.b, s.n);
	cr_assert_eq(resp_run(), FRAME_UPSTREAM);
	cr_expect(strstr(f.why, "nobody asked for") != NULL, "%s", f.why);
	cr_expect_eq(m->correlation_mismatch, 1);
	bb_free(&s);
}

Test(frame, malformed_response_prefix, .init = setup, .fini = teardown)
{
	struct bb r;
	req_metadata(&r, 1);
	feed(&f.req, r.b, r.n);
	cr_assert_eq(req_run(true), FRAME_NEED_MORE);
	uint8_t p[8] = { 0, 0, 0, 2, 0, 0, 0, 1 };     /* size 2 < 4 */
	feed(&f.resp, p, sizeof p);
	cr_assert_eq(resp_run(), FRAME_UPSTREAM);
	cr_expect_eq(m->malformed_responses, 1);
	bb_free(&r);
}

Test(frame, response_above_max_frame_bytes, .init = setup, .fini = teardown)
{
	struct bb r;
	req_metadata(&r, 1);
	feed(&f.req, r.b, r.n);
	cr_assert_eq(req_run(true), FRAME_NEED_MORE);
	uint8_t p[8] = { 0, 0, 0x10, 0x01, 0, 0, 0, 1 };
	feed(&f.resp, p, sizeof p);
	cr_assert_eq(resp_run(), FRAME_UPSTREAM);
	cr_expect_eq(m->frame_too_large, 1);
	bb_free(&r);
}

Test(frame, produce_acks_0_owes_no_response, .init = setup, .fini = teardown)
{
	struct bb r0, r1;
	req_produce(&r0, 10, 0);
	req_produce(&r1, 11, 1);
	feed(&f.req, r0.b, r0.n);
	cr_assert_eq(req_run(true), FRAME_NEED_MORE);
	cr_expect_eq(f.fifo_len, 0, "acks=0 is owed nothing");
	cr_expect_eq(m->requests, 1, "but it is a request");
	cr_expect_eq(f.req.fwd, r0.n);
	feed(&f.req, r1.b, r1.n);
	cr_assert_eq(req_run(true), FRAME_NEED_MORE);
	cr_expect_eq(f.fifo_len, 1);
	cr_expect_eq(f.fifo[f.fifo_head].corr, 11);
	bb_free(&r0); bb_free(&r1);
}

Test(frame, produce_acks_split_needs_more, .init = setup, .fini = teardown)
{
	struct bb r;
	req_produce(&r, 10, 0);
	/* header and transactional_id whole, acks not yet there */
	feed(&f.req, r.b, r.n - 10);
	cr_assert_eq(req_run(true), FRAME_NEED_MORE);
	cr_expect_eq(started_total, 0);
	cr_expect(f.req_need_more);
	cr_expect_eq(f.requests, 0, "not a request until its acks are there");
	feed(&f.req, r.b + r.n - 10, 10);
	cr_assert_eq(req_run(true), FRAME_NEED_MORE);
	cr_expect_eq(started_total, r.n);
	cr_expect_eq(f.fifo_len, 0);
	cr_expect_eq(f.requests, 1, "counted once");
	cr_expect_eq(m->requests, 1);
	bb_free(&r);
}

Test(frame, apiversions_above_the_codec_answered_here, .init = setup, .fini = teardown)
{
	struct bb r, up, cli;
	req_head(&r, KC_API_API_VERSIONS, 9, 42);
	bb_str(&r, true, "client");
	bb_str(&r, true, "1.0");
	bb_uv(&r, 0);
	bb_fix(&r);
	bb_init(&up);
	bb_init(&cli);
	feed(&f.req, r.b, r.n);
	cr_assert_eq(req_run(true), FRAME_NEED_MORE);
	flush(&f.req, &up);
	cr_expect_eq(up.n, 0, "not forwarded");
	cr_expect_eq(f.fifo_len, 1);
	cr_expect_eq(m->in_flight, 0, "a synthetic answer is not in flight upstream");
	cr_expect_eq(resp_run(), FRAME_NEED_MORE);
	flush(&f.resp, &cli);
	cr_expect_eq(f.fifo_len, 0);
	cr_assert_geq(cli.n, 10);
	cr_expect_eq(kc_get_i32(cli.b), (int32_t)cli.n - 4);
	cr_expect_eq(kc_get_i32(cli.b + 4), 42);
	cr_expect_eq(kc_get_i16(cli.b + 8), 35, "UNSUPPORTED_VERSION");
	bb_free(&r); bb_free(&up); bb_free(&cli);
}

Test(frame, max_inflight_backpressure)
{
	setup_with(1024, MAX_FRAME, MAX_FRAME, 2);
	struct bb r[3], s;
	for (int i = 0; i < 3; i++) {
		req_produce(&r[i], i, 1);
		feed(&f.req, r[i].b, r[i].n);
	}
	cr_assert_eq(req_run(true), FRAME_NEED_MORE);
	cr_expect_eq(f.fifo_len, 2);
	cr_expect(f.inflight_paused);
	cr_expect_eq(m->inflight_paused, 1);
	cr_assert_eq(req_run(true), FRAME_NEED_MORE);
	cr_expect_eq(m->inflight_paused, 1, "counted once");
	cr_expect_eq(frame_req_unparsed(&f), r[2].n);
	resp_simple(&s, 0);
	feed(&f.resp, s.b, s.n);
	cr_assert_eq(resp_run(), FRAME_NEED_MORE);
	cr_assert_eq(req_run(true), FRAME_NEED_MORE);
	cr_expect_eq(f.fifo_len, 2);
	cr_expect(!f.inflight_paused);
	cr_expect_eq(frame_req_unparsed(&f), 0);
	for (int i = 0; i < 3; i++)
		bb_free(&r[i]);
	bb_free(&s);
	teardown();
}

Test(frame, drain_boundary_starts_nothing_but_finishes_the_frame, .init = setup,
     .fini = teardown)
{
	struct bb r1, r2;
	req_metadata(&r1, 1);
	req_metadata(&r2, 2);
	feed(&f.req, r1.b, r1.n - 2);
	cr_assert_eq(req_run(true), FRAME_NEED_MORE);
	cr_expect(frame_req_partial(&f));
	feed(&f.req, r1.b + r1.n - 2, 2);
	feed(&f.req, r2.b, r2.n);
	cr_assert_eq(req_run(false), FRAME_NEED_MORE);
	cr_expect_eq(f.req.fwd, r1.n, "the frame in progress is finished");
	cr_expect_eq(f.fifo_len, 1, "no new request at the boundary");
	cr_expect_eq(frame_req_unparsed(&f), r2.n);
	bb_free(&r1); bb_free(&r2);
}

/* ---- rewrite ---- */

Test(frame, metadata_response_rewritten_whole, .init = setup, .fini = teardown)
{
	struct bb r, s, want, cli;
	req_metadata(&r, 7);                       /* build_md answers correlation id 7 */
	feed(&f.req, r.b, r.n);
	cr_assert_eq(req_run(true), FRAME_NEED_MORE);
	bb_init(&cli);
	flush(&f.req, &cli);
	cli.n = 0;
	build_md(&s, 1, UP, 3);
	build_md(&want, 1, PX, 3);
	/* byte by byte: collected whole, rewritten once */
	for (size_t i = 0; i < s.n; i++) {
		feed(&f.resp, s.b + i, 1);
		cr_assert_eq(resp_run(), FRAME_NEED_MORE, "byte %zu: %s", i, f.why);
		cr_expect(i + 1 == s.n || cli.n == 0);
		flush(&f.resp, &cli);
	}
	assert_bytes(cli.b, cli.n, want.b, want.n, "rewritten Metadata v1");
	cr_expect_eq(tm.calls, 3);
	cr_expect(f.upstream_answered, "a well-formed Metadata answer");
	cr_expect_eq(m->responses_rewritten, 1);
	cr_expect(frame_owes_nothing(&f));
	bb_free(&r); bb_free(&s); bb_free(&want); bb_free(&cli);
}

Test(frame, malformed_rewritten_response_is_the_upstreams, .init = setup, .fini = teardown)
{
	struct bb r, s;
	req_metadata(&r, 7);
	feed(&f.req, r.b, r.n);
	cr_assert_eq(req_run(true), FRAME_NEED_MORE);
	build_md(&s, 1, UP, 3);
	s.n -= 3;                                  /* cut inside the last field */
	bb_fix(&s);
	feed(&f.resp, s.b, s.n);
	cr_assert_eq(resp_run(), FRAME_UPSTREAM);
	cr_expect(strstr(f.why, "malformed Metadata v1 response") != NULL, "%s", f.why);
	cr_expect_eq(tm.calls, 0, "nothing mapped from a bad frame");
	cr_expect(!f.upstream_answered);
	bb_free(&r); bb_free(&s);
}

/* ---- Fetch v16+ streamed ---- */

/* Frames up to 1 MiB through the 1 KiB buffer. */
static void
setup_big(void)
{
	setup_with(1024, 1 << 20, 1 << 20, 8);
}

/* A Fetch v16 request with correlation id 7 (build_fe's) in the FIFO. */
static void
fetch_requested(int16_t ver)
{
	struct bb r, up;
	req_head(&r, KC_API_FETCH, ver, 7);
	bb_raw(&r, "fetch request body", 18);
	bb_fix(&r);
	feed(&f.req, r.b, r.n);
	cr_assert_eq(req_run(true), FRAME_NEED_MORE, "%s", f.why);
	bb_init(&up);
	flush(&f.req, &up);
	bb_free(&up);
	bb_free(&r);
}

/*
 * Delivers s to the response side in chunks of `chunk` bytes; with
 * `bypass`, the rest of every pass-through span not in the buffer is moved
 * by the caller (spliced) instead. What the client gets goes to cli.
 * Returns the last status.
 */
static int
resp_deliver(const struct bb *s, size_t chunk, bool bypass, struct bb *cli)
{
	size_t pos = 0;
	int r;
	bb_init(cli);
	for (;;) {
		r = resp_run();
		if (r != FRAME_NEED_MORE)
			return r;
		size_t had = cli->n;
		flush(&f.resp, cli);
		if (cli->n > had)
			continue;   /* written: parse again (conn.c's pump does) */
		if (bypass && f.resp.frame_left && frame_resp_unparsed(&f) == 0 && pos < s->n) {
			size_t n = f.resp.frame_left < 777 ? (size_t)f.resp.frame_left : 777;
			bb_raw(cli, s->b + pos, n);
			frame_dir_bypass(&f, &f.resp, n);
			pos += n;
			continue;
		}
		if (pos == s->n)
			return r;
		size_t c = chunk < s->n - pos ? chunk : s->n - pos;
		size_t took = feed(&f.resp, s->b + pos, c);
		cr_assert_gt(took, 0, "the buffer must take bytes (pos %zu)", pos);
		pos += took;
	}
}

/* A valid Fetch response of s's length, no upstream host; the number of
 * NodeEndpoints entries it carries. */
static int
fetch_check(int16_t v, const struct bb *s, const struct bb *cli)
{
	struct tmap t2;
	struct kc_broker_map bm = mk_map(&t2, NULL, 0);
	uint8_t *o = NULL;
	size_t on;
	char err[128];
	cr_assert_eq(cli->n, s->n, "the length is kept");
	cr_assert_null(memmem(cli->b, cli->n, "internal.example", 16), "an upstream host left");
	cr_assert_eq(kc_rewrite_response(KC_API_FETCH, v, cli->b, cli->n, &bm, &o, &on, err,
	    sizeof err), KC_OK, "%s", err);
	free(o);
	return t2.calls;
}

Test(frame, fetch_v16_streamed_not_collected, .init = setup_big, .fini = teardown)
{
	static const size_t chunks[] = { 1, 13, 1000, 4096 };
	struct fe_opts none = { NULL, 0, false, true, 20000 };
	struct fe_opts ne = { UP, 3, true, true, 20000 };
	struct bb s, cli;
	uint64_t rewritten = 0;
	for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
		for (int bypass = 0; bypass < 2; bypass++) {
			/* without NodeEndpoints: byte for byte */
			fetch_requested(16);
			build_fe(&s, 16, &none);
			uint32_t frames = f.resp.frames;
			cr_assert_eq(resp_deliver(&s, chunks[c], bypass, &cli), FRAME_NEED_MORE,
			    "%s", f.why);
			assert_bytes(cli.b, cli.n, s.b, s.n, "streamed Fetch v16");
			cr_expect_eq(f.resp.frames - frames, 2, "two opaque spans");
			cr_expect(frame_owes_nothing(&f));
			cr_expect_eq(m->responses_rewritten, rewritten);
			bb_free(&s); bb_free(&cli);
			/* with NodeEndpoints: rewritten, same length */
			fetch_requested(17);
			build_fe(&s, 17, &ne);
			tm.calls = 0;
			cr_assert_eq(resp_deliver(&s, chunks[c], bypass, &cli), FRAME_NEED_MORE,
			    "%s", f.why);
			cr_expect_eq(fetch_check(17, &s, &cli), 3, "the leader hints are kept");
			cr_expect_eq(tm.calls, 3);
			cr_expect_eq(m->responses_rewritten, ++rewritten);
			cr_expect(frame_owes_nothing(&f));
			bb_free(&s); bb_free(&cli);
		}
	}
	cr_expect_eq(m->leader_hints_dropped, 0);
	cr_expect_eq(m->responses, 2 * 2 * 4);
}

Test(frame, fetch_v16_hint_that_cannot_fit_is_dropped_and_counted, .init = setup_big,
     .fini = teardown)
{
	static const struct tmap_ent longer[] = {
		{ 1, "a-much-longer-proxy-host-name-1.example.com", 19001 },
		{ 2, "a-much-longer-proxy-host-name-2.example.com", 19002 },
		{ 3, "a-much-longer-proxy-host-name-3.example.com", 19003 },
	};
	struct fe_opts ne = { UP, 3, true, false, 5000 };
	struct bb s, cli;
	f.map = mk_map(&tm, longer, 3);
	fetch_requested(18);
	build_fe(&s, 18, &ne);
	cr_assert_eq(resp_deliver(&s, 500, true, &cli), FRAME_NEED_MORE, "%s", f.why);
	cr_expect_eq(fetch_check(18, &s, &cli), 0, "no leader hint");
	cr_expect_eq(m->leader_hints_dropped, 1);
	bb_free(&s); bb_free(&cli);
}

Test(frame, fetch_v16_below_the_buffer_is_collected_whole, .init = setup, .fini = teardown)
{
	struct fe_opts ne = { UP, 3, true, false, 0 };
	struct bb s, cli;
	fetch_requested(16);
	build_fe(&s, 16, &ne);
	cr_assert_lt(s.n, f.lim.buf_size);
	cr_assert_eq(resp_deliver(&s, 1, false, &cli), FRAME_NEED_MORE, "%s", f.why);
	/* collected: the rewritten frame is shorter (proxy.local), no padding */
	cr_expect_eq(cli.n, s.n - 3 * 13);
	cr_expect_eq(m->responses_rewritten, 1);
	bb_free(&s); bb_free(&cli);
}

Test(frame, fetch_v16_streamed_malformed_is_the_upstreams)
{
	struct fe_opts ne = { UP, 3, true, false, 5000 };
	struct bb s, cli;
	/* a records length past the frame's end */
	setup_big();
	fetch_requested(16);
	build_fe(&s, 16, &ne);
	s.n = 3000;
	bb_fix(&s);
	cr_assert_eq(resp_deliver(&s, 100, false, &cli), FRAME_UPSTREAM);
	cr_expect(strstr(f.why, "malformed Fetch v16 response") != NULL, "%s", f.why);
	cr_expect_eq(m->malformed_responses, 1);
	bb_free(&s); bb_free(&cli);
	teardown();
	/* a header tag section larger than the buffer */
	setup_big();
	fetch_requested(16);
	bb_init(&s);
	bb_i32(&s, 0);
	bb_i32(&s, 7);
	bb_uv(&s, 1);
	bb_uv(&s, 5);
	bb_uv(&s, 1500);
	for (int i = 0; i < 1500; i++)
		bb_u8(&s, 0);
	bb_fix(&s);
	cr_assert_eq(resp_deliver(&s, 4096, false, &cli), FRAME_UPSTREAM);
	cr_expect(strstr(f.why, "larger than 1024 bytes") != NULL, "%s", f.why);
	bb_free(&s); bb_free(&cli);
	teardown();
	/* top-level tagged fields above FRAME_TAIL_MAX */
	setup_big();
	fetch_requested(16);
	bb_init(&s);
	bb_head(&s, true);
	bb_i32(&s, 0);
	bb_i16(&s, 0);
	bb_i32(&s, 0);
	bb_arr(&s, true, 0);
	bb_uv(&s, 1);
	bb_uv(&s, 9);
	bb_uv(&s, FRAME_TAIL_MAX);
	for (int i = 0; i < FRAME_TAIL_MAX; i++)
		bb_u8(&s, 0);
	bb_fix(&s);
	cr_assert_eq(resp_deliver(&s, 4096, false, &cli), FRAME_UPSTREAM);
	cr_expect(strstr(f.why, "top-level tagged fields") != NULL, "%s", f.why);
	bb_free(&s); bb_free(&cli);
	teardown();
}

/* ---- SASL ---- */

static void
req_sasl_handshake(struct bb *b, int16_t ver, int32_t corr, const char *mech)
{
	req_head(b, KC_API_SASL_HANDSHAKE, ver, corr);
	bb_str(b, false, mech);
	bb_fix(b);
}

static void
raw_token(struct bb *b, const char *tok, size_t len)
{
	bb_init(b);
	bb_i32(b, (int32_t)len);
	bb_raw(b, tok, len);
}

Test(frame, sasl_v0_raw_token_framing, .init = setup, .fini = teardown)
{
	struct bb hs, tok, hs_resp, srv, md, up, cli;
	req_sasl_handshake(&hs, 0, 3, "PLAIN");
	raw_token(&tok, "\0alice\0secret", 13);
	req_metadata(&md, 4);
	bb_init(&up);
	bb_init(&cli);
	/* the handshake and the client's token in one read */
	feed(&f.req, hs.b, hs.n);
	feed(&f.req, tok.b, tok.n);
	cr_assert_eq(req_run(true), FRAME_NEED_MORE);
	flush(&f.req, &up);
	cr_expect_eq(up.n, hs.n, "the token waits for the handshake's answer");
	cr_expect_eq(f.sasl.phase, SASL_V0_WAIT);
	cr_expect_eq(frame_req_unparsed(&f), tok.n);
	/* the broker accepts PLAIN */
	bb_init(&hs_resp);
	bb_i32(&hs_resp, 0);
	bb_i32(&hs_resp, 3);
	bb_i16(&hs_resp, 0);
	bb_arr(&hs_resp, false, 1);
	bb_str(&hs_resp, false, "PLAIN");
	bb_fix(&hs_resp);
	feed(&f.resp, hs_resp.b, hs_resp.n);
	cr_assert_eq(resp_run(), FRAME_NEED_MORE, "%s", f.why);
	flush(&f.resp, &cli);
	cr_expect_eq(f.sasl.phase, SASL_RAW_CLIENT);
	/* the raw token: by its length prefix, no FIFO entry */
	cr_assert_eq(req_run(true), FRAME_NEED_MORE, "%s", f.why);
	flush(&f.req, &up);
	cr_expect_eq(up.n, hs.n + tok.n);
	cr_expect_eq(f.fifo_len, 0);
	cr_expect_eq(f.sasl.phase, SASL_RAW_SERVER);
	cr_expect(!frame_owes_nothing(&f), "the broker's token is owed");
	/* nothing else from the client until the broker's token */
	feed(&f.req, md.b, md.n);
	cr_assert_eq(req_run(true), FRAME_NEED_MORE);
	cr_expect_eq(f.fifo_len, 0);
	/* the broker's (empty) token: authenticated, Kafka framing again */
	raw_token(&srv, "", 0);
	feed(&f.resp, srv.b, srv.n);
	cr_assert_eq(resp_run(), FRAME_NEED_MORE, "%s", f.why);
	flush(&f.resp, &cli);
	cr_expect_eq(f.sasl.phase, SASL_KAFKA);
	cr_expect(f.sasl.authenticated);
	cr_expect_eq(cli.n, hs_resp.n + srv.n);
	cr_assert_eq(req_run(true), FRAME_NEED_MORE);
	cr_expect_eq(f.fifo_len, 1, "the Metadata request parsed");
	cr_expect(frame_owes_nothing(&f) == false);
	bb_free(&hs); bb_free(&tok); bb_free(&hs_resp); bb_free(&srv); bb_free(&md);
	bb_free(&up); bb_free(&cli);
}

Test(frame, sasl_v0_unrelayed_mechanism_refused, .init = setup, .fini = teardown)
{
	struct bb hs;
	req_sasl_handshake(&hs, 0, 3, "GSSAPI");
	feed(&f.req, hs.b, hs.n);
	cr_assert_eq(req_run(true), FRAME_MALFORMED);
	cr_expect_eq(m->sasl_refused, 1);
	cr_expect_eq(f.req.fwd, 0, "refused before anything is forwarded");
	bb_free(&hs);
}

Test(frame, raw_client_token_over_the_preauth_limit)
{
	setup_with(1024, MAX_FRAME, 64, 8);
	f.sasl.phase = SASL_RAW_CLIENT;
	f.sasl.mech = SASL_MECH_PLAIN;
	uint8_t p[4];
	kc_put_i32(p, 65);
	feed(&f.req, p, sizeof p);
	cr_assert_eq(req_run(true), FRAME_MALFORMED);
	cr_expect(strstr(f.why, "over sasl_max_frame_bytes") != NULL, "%s", f.why);
	cr_expect_eq(m->sasl_frame_too_large, 1);
	teardown();
}

Test(frame, preauth_limit_after_a_handshake)
{
	setup_with(1024, MAX_FRAME, 64, 8);
	struct bb hs, big;
	req_sasl_handshake(&hs, 1, 1, "PLAIN");
	feed(&f.req, hs.b, hs.n);
	cr_assert_eq(req_run(true), FRAME_NEED_MORE);
	req_head(&big, KC_API_SASL_AUTHENTICATE, 1, 2);
	while (big.n < 4 + 65)
		bb_u8(&big, 0);
	bb_fix(&big);
	feed(&f.req, big.b, big.n);
	cr_assert_eq(req_run(true), FRAME_MALFORMED);
	cr_expect(strstr(f.why, "before SASL authentication exceeds sasl_max_frame_bytes (64)")
	    != NULL, "%s", f.why);
	cr_expect_eq(frame_sasl_limit(&f), 64);
	bb_free(&hs); bb_free(&big);
	teardown();
}

Test(frame, legacy_gssapi_token_refused, .init = setup, .fini = teardown)
{
	uint8_t p[12] = { 0, 0, 0, 8, 0x60, 0x82, 0x01, 0x00, 0x06, 0x09, 0x2a, 0x86 };
	expect_refused(p, sizeof p, "bare GSSAPI token", &m->sasl_refused);
}

/* ---- who the client says it is (clientinfo.h) ---- */

/* ApiVersions v3: compact software name and version, tagged fields. */
static void
req_apiversions_v3(struct bb *b, int32_t corr, const char *name, const char *ver)
{
	req_head(b, KC_API_API_VERSIONS, 3, corr);
	bb_str(b, true, name);
	bb_str(b, true, ver);
	bb_uv(b, 0);
	bb_fix(b);
}

/* SaslAuthenticate v1 with token tok[0..n). */
static void
req_sasl_authenticate(struct bb *b, int32_t corr, const void *tok, size_t n)
{
	req_head(b, KC_API_SASL_AUTHENTICATE, 1, corr);
	bb_bytes(b, false, tok, n);
	bb_fix(b);
}

static bool
struct_has(const void *p, size_t n, const char *needle)
{
	return memmem(p, n, needle, strlen(needle)) != NULL;
}

Test(frame, client_info_on_the_way, .init = setup, .fini = teardown)
{
	struct bb av, hs, auth, up;
	req_apiversions_v3(&av, 1, "librdkafka", "2.0.2");
	req_sasl_handshake(&hs, 1, 2, "PLAIN");
	req_sasl_authenticate(&auth, 3, "\0alice\0s3cr3t-pw", 17);
	bb_init(&up);
	feed(&f.req, av.b, av.n);
	cr_assert_eq(req_run(true), FRAME_NEED_MORE, "%s", f.why);
	cr_expect(f.ci_changed);
	cr_expect(f.ci.client_id_seen);
	cr_expect_str_eq(f.ci.client_id, "test-client");
	cr_expect(f.ci.software_seen && f.ci.software_valid);
	cr_expect_str_eq(f.ci.software_name, "librdkafka");
	cr_expect_str_eq(f.ci.software_version, "2.0.2");
	f.ci_changed = false;
	feed(&f.req, hs.b, hs.n);
	feed(&f.req, auth.b, auth.n);
	cr_assert_eq(req_run(true), FRAME_NEED_MORE, "%s", f.why);
	flush(&f.req, &up);
	cr_expect_eq(up.n, av.n + hs.n + auth.n, "every request forwarded unchanged");
	cr_expect(f.ci_changed);
	cr_expect_str_eq(f.ci.mech_name, "PLAIN");
	cr_expect(f.ci.principal_seen);
	cr_expect_str_eq(f.ci.principal, "alice");
	cr_expect(!struct_has(&f.ci, sizeof f.ci, "s3cr3t"), "the password is never kept");
	cr_expect_eq(f.fifo_len, 3);
	bb_free(&av); bb_free(&hs); bb_free(&auth); bb_free(&up);
}

Test(frame, client_info_split_at_every_byte)
{
	struct bb av;
	req_apiversions_v3(&av, 1, "confluent-kafka-python", "2.3.0-rdkafka-2.3.0");
	for (size_t cut = 1; cut < av.n; cut++) {
		setup();
		struct bb up;
		bb_init(&up);
		feed(&f.req, av.b, cut);
		int r = req_run(true);
		cr_assert_eq(r, FRAME_NEED_MORE, "cut %zu: %s", cut, f.why);
		flush(&f.req, &up);
		/* nothing is forwarded before the fields are read (the last
		 * byte, the tagged fields, is not one of them) */
		if (cut < av.n - 1) {
			cr_expect_eq(up.n, 0, "cut %zu: forwarded before the fields were read", cut);
			cr_expect(!f.ci.software_seen, "cut %zu", cut);
		} else {
			cr_expect(f.ci.software_seen, "cut %zu", cut);
		}
		feed(&f.req, av.b + cut, av.n - cut);
		cr_assert_eq(req_run(true), FRAME_NEED_MORE, "cut %zu: %s", cut, f.why);
		flush(&f.req, &up);
		cr_expect_eq(up.n, av.n, "cut %zu", cut);
		cr_expect_str_eq(f.ci.software_name, "confluent-kafka-python", "cut %zu", cut);
		cr_expect_eq(f.requests, 1, "cut %zu: counted once", cut);
		bb_free(&up);
		teardown();
	}
	bb_free(&av);
}

Test(frame, client_info_too_large_to_read_is_not_a_close)
{
	/* a 256-byte buffer, a PLAIN token of 300 bytes (under the limits) */
	setup_with(256, MAX_FRAME, MAX_FRAME, 8);
	struct bb hs, auth, up;
	uint8_t tok[300];
	memset(tok, 'a', sizeof tok);
	tok[0] = 0;
	tok[10] = 0;
	req_sasl_handshake(&hs, 1, 1, "PLAIN");
	req_sasl_authenticate(&auth, 2, tok, sizeof tok);
	bb_init(&up);
	feed(&f.req, hs.b, hs.n);
	cr_assert_eq(req_run(true), FRAME_NEED_MORE);
	flush(&f.req, &up);
	size_t off = 0;
	while (off < auth.n) {
		off += feed(&f.req, auth.b + off, auth.n - off);
		int r = req_run(true);
		cr_assert(r == FRAME_NEED_MORE, "%s", f.why);
		flush(&f.req, &up);
	}
	cr_expect_eq(up.n, hs.n + auth.n, "streamed through");
	cr_expect(!f.ci.principal_seen, "not learned");
	cr_expect(!f.ci.sasl_first_pending);
	cr_expect_str_eq(f.ci.mech_name, "PLAIN");
	bb_free(&hs); bb_free(&auth); bb_free(&up);
	teardown();
}

Test(frame, client_info_of_a_raw_token, .init = setup, .fini = teardown)
{
	struct bb hs, tok, hs_resp, up, cli;
	req_sasl_handshake(&hs, 0, 3, "SCRAM-SHA-256");
	const char first[] = "n,,n=bob,r=fyko+d2lbbFgONRv9qkxdawL";
	raw_token(&tok, first, sizeof first - 1);
	bb_init(&up);
	bb_init(&cli);
	feed(&f.req, hs.b, hs.n);
	cr_assert_eq(req_run(true), FRAME_NEED_MORE);
	bb_init(&hs_resp);
	bb_i32(&hs_resp, 0);
	bb_i32(&hs_resp, 3);
	bb_i16(&hs_resp, 0);
	bb_arr(&hs_resp, false, 1);
	bb_str(&hs_resp, false, "SCRAM-SHA-256");
	bb_fix(&hs_resp);
	feed(&f.resp, hs_resp.b, hs_resp.n);
	cr_assert_eq(resp_run(), FRAME_NEED_MORE, "%s", f.why);
	flush(&f.resp, &cli);
	f.ci_changed = false;
	/* the token in two reads: read whole before it is forwarded */
	feed(&f.req, tok.b, 6);
	cr_assert_eq(req_run(true), FRAME_NEED_MORE);
	flush(&f.req, &up);
	cr_expect_eq(up.n, hs.n);
	feed(&f.req, tok.b + 6, tok.n - 6);
	cr_assert_eq(req_run(true), FRAME_NEED_MORE, "%s", f.why);
	flush(&f.req, &up);
	cr_expect_eq(up.n, hs.n + tok.n);
	cr_expect(f.ci_changed);
	cr_expect_str_eq(f.ci.principal, "bob");
	cr_expect_eq(f.sasl.phase, SASL_RAW_SERVER);
	bb_free(&hs); bb_free(&tok); bb_free(&hs_resp); bb_free(&up); bb_free(&cli);
}

/* ---- the rest of a frame moved by the caller (zero copy) ---- */

/* A Produce request whose records are larger than the buffer: its header
 * is parsed from the buffer, the rest bypasses it (frame_dir_bypass), and
 * the next request is parsed as if the rest had streamed through. */
Test(frame, bypassed_rest_of_a_pass_through_frame, .init = setup, .fini = teardown)
{
	struct bb big, md, up;
	req_head(&big, KC_API_PRODUCE, 7, 1);
	bb_i16(&big, -1);
	bb_i16(&big, 1);
	bb_i32(&big, 30000);
	uint8_t records[3000];
	memset(records, 0xab, sizeof records);
	bb_raw(&big, records, sizeof records);
	bb_fix(&big);
	req_metadata(&md, 2);
	bb_init(&up);
	cr_assert_eq(f.req.frames, 0);
	feed(&f.req, big.b, 100);
	f.req_since = 1.0;   /* (conn.c starts the request clock) */
	cr_assert_eq(req_run(true), FRAME_NEED_MORE);
	cr_assert_eq(f.req.frames, 1, "a pass-through frame begun");
	cr_assert_eq(f.req.fwd, 100);
	cr_assert_eq(f.req.frame_left, big.n - 100);
	flush(&f.req, &up);
	/* the caller splices the rest in two pieces */
	frame_dir_bypass(&f, &f.req, 1000);
	f.req.piped += 1000;
	cr_assert_eq(f.req.frame_left, big.n - 1100);
	cr_assert_neq(f.req_since, 0, "the frame is not complete");
	frame_dir_bypass(&f, &f.req, big.n - 1100);
	f.req.piped += big.n - 1100;
	cr_assert_eq(f.req.frame_left, 0);
	cr_assert_eq(f.req_since, 0, "complete: the request clock stops");
	/* more than frame_left is never taken off */
	frame_dir_bypass(&f, &f.req, 5);
	cr_assert_eq(f.req.frame_left, 0);
	/* the pipe's bytes are owed like the buffer's */
	cr_assert(!frame_owes_nothing(&f));
	/* the next request is parsed from the buffer */
	feed(&f.req, md.b, md.n);
	cr_assert_eq(req_run(true), FRAME_NEED_MORE);
	cr_assert_eq(f.req.frames, 2);
	cr_assert_eq(f.req.fwd, md.n);
	cr_assert_eq(f.fifo_len, 2);
	flush(&f.req, &up);
	/* responses: a pass-through one counts a frame, a rewritten one not */
	struct bb s1, cli;
	resp_simple(&s1, 1);
	bb_init(&cli);
	feed(&f.resp, s1.b, 8);
	cr_assert_eq(resp_run(), FRAME_NEED_MORE, "%s", f.why);
	cr_assert_eq(f.resp.frames, 1);
	frame_dir_bypass(&f, &f.resp, s1.n - 8);
	cr_assert_eq(f.resp.frame_left, 0);
	cr_assert_eq(f.req_since, 0);
	flush(&f.resp, &cli);
	f.req.piped = 0;
	bb_free(&big);
	bb_free(&md);
	bb_free(&up);
	bb_free(&s1);
	bb_free(&cli);
	/* (the Metadata request stays in flight: frame_free takes it) */
}

Test(frame, status_names)
{
	cr_expect_str_eq(frame_status_str(FRAME_OK), "ok");
	cr_expect_str_eq(frame_status_str(FRAME_NEED_MORE), "need-more");
	cr_expect_str_eq(frame_status_str(FRAME_MALFORMED), "malformed");
	cr_expect_str_eq(frame_status_str(FRAME_UPSTREAM), "upstream");
	cr_expect_str_eq(frame_status_str(FRAME_NO_MEMORY), "no-memory");
	cr_expect_str_eq(frame_status_str((enum frame_status)7), "unknown");
	/* one convention with the codec and SASL */
	cr_expect_eq(FRAME_OK, KC_OK);
	cr_expect_eq(FRAME_NEED_MORE, KC_NEED_MORE);
	cr_expect_eq(FRAME_MALFORMED, KC_MALFORMED);
	cr_expect_eq(SASL_OK, KC_OK);
	cr_expect_eq(SASL_NEED_MORE, KC_NEED_MORE);
	cr_expect_eq(SASL_MALFORMED, KC_MALFORMED);
}
