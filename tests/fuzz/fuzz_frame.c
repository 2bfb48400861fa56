/*
 * fuzz_frame — libFuzzer harness for the Kafka frame codec
 * (worker/kafka/codec.c): request-header parsing, Produce acks, the response
 * prefix, and the bounded reader/writer primitives under them.
 *
 * Input: byte 0 selects the mode.
 *   bit 7 clear: parser mode.  Bits 0-1 pick max_frame (100 MiB, 64, 4096,
 *     UINT64_MAX); the rest of the input is the bytes present at the start
 *     of a request (and, separately, of a response).
 *   bit 7 set: reader machine.  Byte 1 = bytes cut off the end ("present"
 *     vs frame length), byte 2 = number of op bytes that follow; the rest is
 *     the buffer the ops read.
 *
 * Oracles (besides ASan/UBSan):
 *   - every result is KC_OK, KC_NEED_MORE or KC_MALFORMED, and a MALFORMED
 *     one carries a reason;
 *   - a parsed header is self-consistent (sizes, header version, client id
 *     inside the header, header_len within the frame and the bytes present);
 *   - "present" monotonicity: parsing a prefix of the bytes gives NEED_MORE
 *     or the same answer as the whole (an identical header / acks); once the
 *     prefix covers header_len the header parses;
 *   - the API tables agree with each other (name non-NULL, refused keys not
 *     allowed, capped keys allowed exactly inside the cap);
 *   - SASL pass-through (worker/kafka/sasl.c) on a parsed header, and on the
 *     same bytes as a SaslHandshake / SaslAuthenticate response and a raw
 *     token: statuses are known ones, a prefix answers NEED_MORE (state
 *     untouched) or the same as the whole with the same state, a failure
 *     changes nothing, the state always encodes / decodes to itself;
 *   - reader machine: the cursor stays inside [buf, avail], a failed status
 *     is sticky and moves nothing, a reader over a partial frame never
 *     disagrees with one over the whole frame while it is OK, and everything
 *     read round-trips through the writer.
 */
#include <stdbool.h>
#include <string.h>

#include "tests/fuzz/fuzz_common.h"
#include "worker/kafka/apiversions.h"
#include "worker/kafka/codec.h"
#include "worker/kafka/sasl.h"

static const uint64_t max_frames[4] = { 100u << 20, 64, 4096, UINT64_MAX };

static void
check_status(int st, const char *err)
{
	FUZZ_CHECK(st == KC_OK || st == KC_NEED_MORE || st == KC_MALFORMED, "status %d", st);
	if (st == KC_MALFORMED)
		FUZZ_CHECK(err[0] != '\0', "malformed without a reason");
	FUZZ_CHECK(strlen(kc_status_str((enum kc_status)st)) > 0, "status name");
}

static bool
same_header(const struct kc_req_header *a, const struct kc_req_header *b)
{
	return a->size == b->size && a->api_key == b->api_key &&
	    a->api_version == b->api_version && a->correlation_id == b->correlation_id &&
	    a->client_id_len == b->client_id_len && a->client_id == b->client_id &&
	    a->header_len == b->header_len && a->header_version == b->header_version;
}

static void
check_tables(int16_t key, int16_t ver)
{
	int16_t lo = 0, hi = 0;
	bool flex = kc_is_flexible(key, ver);
	int rqv = kc_request_header_version(key, ver);
	int rsv = kc_response_header_version(key, ver);
	const char *name = kc_api_name(key);

	FUZZ_CHECK(name != NULL, "kc_api_name(%d) is NULL", key);
	FUZZ_CHECK(strlen(name) > 0, "kc_api_name(%d) is empty", key);
	if (key == KC_API_CONTROLLED_SHUTDOWN && ver == 0)
		FUZZ_CHECK(rqv == 0, "ControlledShutdown v0 header %d", rqv);
	else
		FUZZ_CHECK(rqv == (flex ? 2 : 1), "request header v%d for %d/%d", rqv, key, ver);
	if (key == KC_API_API_VERSIONS)
		FUZZ_CHECK(rsv == 0, "ApiVersions response header v%d", rsv);
	else
		FUZZ_CHECK(rsv == (flex ? 1 : 0), "response header v%d for %d/%d", rsv, key, ver);
	if (kc_api_refused(key))
		FUZZ_CHECK(!kc_request_allowed(key, ver), "refused key %d allowed", key);
	else if (kc_api_cap(key, &lo, &hi))
		FUZZ_CHECK(kc_request_allowed(key, ver) == (ver >= lo && ver <= hi),
		    "cap %d [%d,%d] v%d", key, lo, hi, ver);
	else
		FUZZ_CHECK(kc_request_allowed(key, ver) == (key >= 0 && ver >= 0), "plain key %d", key);
}

/* The prefix lengths worth checking: all small ones, the ones around
 * interesting offsets, and a few pseudo-random ones. */
static size_t
prefix_lengths(size_t n, size_t extra, const uint8_t *buf, size_t *out, size_t cap)
{
	size_t k = 0, i;
	uint32_t s = 0x9e3779b9u;

	for (i = 0; i < n && i < 40 && k < cap; i++)
		out[k++] = i;
	if (extra > 0 && extra - 1 < n && k < cap)
		out[k++] = extra - 1;
	if (extra < n && k < cap)
		out[k++] = extra;
	for (i = 0; i < n && i < 16; i++)
		s ^= (uint32_t)buf[i] << (8 * (i % 4));
	if (s == 0)
		s = 1;
	for (i = 0; i < 16 && n > 0 && k < cap; i++)
		out[k++] = fuzz_rand(&s) % n;
	return k;
}

static bool
same_sasl(const struct sasl *a, const struct sasl *b)
{
	return a->phase == b->phase && a->mech == b->mech && a->rounds == b->rounds &&
	    a->started == b->started && a->authenticated == b->authenticated &&
	    a->no_sasl == b->no_sasl && a->ok_pending == b->ok_pending;
}

static void
check_sasl_state(const struct sasl *s)
{
	struct sasl t;
	char err[96];

	FUZZ_CHECK((unsigned)s->phase < SASL_PHASE_COUNT && (unsigned)s->mech < SASL_MECH_COUNT,
	    "sasl phase %d mech %d", s->phase, s->mech);
	if (s->phase != SASL_KAFKA)
		return;
	FUZZ_CHECK(sasl_decode(sasl_encode(s), &t, err, sizeof err) == 0, "decode: %s", err);
	FUZZ_CHECK(same_sasl(s, &t), "sasl state does not round-trip");
}

/* A status of sasl_on_*: known, and a failure leaves the state alone. */
static void
check_sasl_status(int st, const struct sasl *before, const struct sasl *after)
{
	FUZZ_CHECK(st == SASL_OK || st == SASL_NEED_MORE || st == SASL_MALFORMED ||
	    st == SASL_REFUSED || st == SASL_TOO_LARGE, "sasl status %d", st);
	FUZZ_CHECK(strlen(sasl_status_str((enum sasl_status)st)) > 0, "sasl status name");
	if (st != SASL_OK)
		FUZZ_CHECK(same_sasl(before, after), "sasl status %d changed the state", st);
	check_sasl_state(after);
}

/* The request as seen by a connection in each interesting state. */
static void
sasl_checks(const uint8_t *buf, size_t n, const struct kc_req_header *h, const size_t *lens,
	    size_t nl)
{
	struct sasl init[3], s, sk;
	char err[256];

	sasl_init(&init[0]);
	sasl_init(&init[1]);
	init[1].started = true;
	init[1].mech = SASL_MECH_OTHER;
	init[1].ok_pending = true;
	sasl_init(&init[2]);
	init[2].authenticated = true;
	for (size_t j = 0; j < 3; j++) {
		bool allowed = sasl_frame_allowed(&init[j], h->api_key, (uint64_t)h->size, 64);
		if ((uint64_t)h->size <= 64 || init[j].authenticated)
			FUZZ_CHECK(allowed, "a frame within the limit refused");
		s = init[j];
		err[0] = '\0';
		int st = sasl_on_request(&s, buf, n, h, err, sizeof err);
		check_sasl_status(st, &init[j], &s);
		FUZZ_CHECK(st != SASL_TOO_LARGE, "TOO_LARGE from a request");
		if (st == SASL_MALFORMED || st == SASL_REFUSED)
			FUZZ_CHECK(err[0] != '\0', "sasl failure without a reason");
		if (st == SASL_REFUSED)
			FUZZ_CHECK(h->api_key == KC_API_SASL_HANDSHAKE && h->api_version == 0,
			    "refused a request that is not a v0 handshake");
		if (h->api_key != KC_API_SASL_HANDSHAKE)
			FUZZ_CHECK(st == SASL_OK, "a non-handshake request gave %d", st);
		if (st == SASL_OK && init[j].authenticated)
			FUZZ_CHECK(s.authenticated, "authenticated state lost");
		for (size_t i = 0; i < nl; i++) {
			if (lens[i] < h->header_len)
				continue;
			sk = init[j];
			int stk = sasl_on_request(&sk, buf, lens[i], h, NULL, 0);
			FUZZ_CHECK(stk == SASL_NEED_MORE || stk == st,
			    "sasl prefix %zu of %zu: %d, whole %d", lens[i], n, stk, st);
			if (stk == st)
				FUZZ_CHECK(same_sasl(&s, &sk), "sasl prefix %zu: other state", lens[i]);
			else
				FUZZ_CHECK(same_sasl(&init[j], &sk), "NEED_MORE changed the state");
		}
	}
}

/* The bytes as a SASL response to each version of both keys, and as a
 * raw token from either side. */
static void
sasl_response_checks(const uint8_t *buf, size_t n, const size_t *lens, size_t nl)
{
	static const enum sasl_mech mechs[] = { SASL_MECH_PLAIN, SASL_MECH_SCRAM_SHA_256,
		SASL_MECH_GSSAPI };
	struct sasl s0, s, sk;
	char err[256];
	uint64_t frame, framek;

	for (int key = 0; key < 2; key++) {
		int16_t api = key ? KC_API_SASL_AUTHENTICATE : KC_API_SASL_HANDSHAKE;
		for (int16_t ver = 0; ver <= (key ? 2 : 1); ver++) {
			sasl_init(&s0);
			s0.started = true;
			s0.mech = mechs[(size_t)ver % 3];
			s0.phase = api == KC_API_SASL_HANDSHAKE && ver == 0 ? SASL_V0_WAIT : SASL_KAFKA;
			s = s0;
			err[0] = '\0';
			int st = sasl_on_response(&s, api, ver, buf, n, err, sizeof err);
			check_sasl_status(st, &s0, &s);
			FUZZ_CHECK(st == SASL_OK || st == SASL_NEED_MORE || st == SASL_MALFORMED,
			    "response status %d", st);
			if (st == SASL_MALFORMED)
				FUZZ_CHECK(err[0] != '\0', "malformed response without a reason");
			for (size_t i = 0; i < nl; i++) {
				sk = s0;
				int stk = sasl_on_response(&sk, api, ver, buf, lens[i], NULL, 0);
				FUZZ_CHECK(stk == SASL_NEED_MORE || stk == st,
				    "sasl response prefix %zu of %zu: %d, whole %d", lens[i], n, stk, st);
				if (stk == st)
					FUZZ_CHECK(same_sasl(&s, &sk), "response prefix: other state");
			}
		}
	}
	for (int side = 0; side < 2; side++) {
		sasl_init(&s0);
		s0.mech = SASL_MECH_SCRAM_SHA_512;
		s0.phase = side ? SASL_RAW_CLIENT : SASL_RAW_SERVER;
		s = s0;
		frame = 0;
		int st = sasl_on_raw_token(&s, side == 1, buf, n, 4096, &frame, err, sizeof err);
		check_sasl_status(st, &s0, &s);
		if (st == SASL_OK)
			FUZZ_CHECK(frame >= 4 && frame <= 4096 + 4 && frame == 4 + (uint64_t)kc_get_i32(buf),
			    "raw frame %llu", (unsigned long long)frame);
		for (size_t i = 0; i < nl; i++) {
			sk = s0;
			framek = 0;
			int stk = sasl_on_raw_token(&sk, side == 1, buf, lens[i], 4096, &framek, NULL, 0);
			FUZZ_CHECK(stk == SASL_NEED_MORE || stk == st, "raw prefix %zu: %d vs %d",
			    lens[i], stk, st);
		}
	}
}

static void
parser_mode(uint8_t sel, const uint8_t *buf, size_t n)
{
	uint64_t max_frame = max_frames[sel & 3];
	struct kc_req_header h, hk;
	char err[96] = "", errk[96] = "";
	size_t lens[64], nl, i;
	int st, stk;

	memset(&h, 0, sizeof h);
	st = kc_parse_request_header(buf, n, max_frame, &h, err, sizeof err);
	check_status(st, err);
	if (st == KC_OK) {
		FUZZ_CHECK(h.size >= 8 && (uint64_t)h.size <= max_frame, "size %d", h.size);
		FUZZ_CHECK(h.size == kc_get_i32(buf), "size %d vs prefix", h.size);
		FUZZ_CHECK(h.api_key >= 0 && h.api_version >= 0, "key %d v%d", h.api_key, h.api_version);
		FUZZ_CHECK(h.api_key == kc_get_i16(buf + 4) && h.api_version == kc_get_i16(buf + 6) &&
		    h.correlation_id == kc_get_i32(buf + 8), "fixed fields");
		FUZZ_CHECK(h.header_version == kc_request_header_version(h.api_key, h.api_version),
		    "header version %d", h.header_version);
		FUZZ_CHECK(h.header_len >= 12 && h.header_len <= n &&
		    h.header_len <= (size_t)h.size + 4, "header_len %zu (n %zu, size %d)",
		    h.header_len, n, h.size);
		if (h.client_id_len < 0) {
			FUZZ_CHECK(h.client_id_len == -1 && h.client_id == NULL, "null client id");
		} else {
			FUZZ_CHECK(h.header_version >= 1, "client id in a v0 header");
			FUZZ_CHECK(h.client_id == buf + 14 &&
			    h.client_id + h.client_id_len <= buf + h.header_len,
			    "client id outside the header");
		}
		if (h.header_version == 0)
			FUZZ_CHECK(h.header_len == 12, "v0 header_len %zu", h.header_len);
		if (h.header_version == 1)
			FUZZ_CHECK(h.header_len == 14 + (size_t)(h.client_id_len < 0 ? 0 : h.client_id_len),
			    "v1 header_len %zu", h.header_len);
		check_tables(h.api_key, h.api_version);
	}

	/* bytes present: a prefix answers NEED_MORE or the same */
	nl = prefix_lengths(n, st == KC_OK ? h.header_len : 0, buf, lens, 64);
	for (i = 0; i < nl; i++) {
		size_t k = lens[i];

		memset(&hk, 0, sizeof hk);
		errk[0] = '\0';
		stk = kc_parse_request_header(buf, k, max_frame, &hk, errk, sizeof errk);
		check_status(stk, errk);
		FUZZ_CHECK(stk == KC_NEED_MORE || stk == st,
		    "prefix %zu of %zu: status %d, whole %d", k, n, stk, st);
		if (stk == KC_OK)
			FUZZ_CHECK(same_header(&h, &hk), "prefix %zu: different header", k);
		if (st == KC_OK && k >= h.header_len)
			FUZZ_CHECK(stk == KC_OK, "prefix %zu >= header_len %zu: status %d", k,
			    h.header_len, stk);
		if (stk == KC_MALFORMED)
			FUZZ_CHECK(strcmp(err, errk) == 0, "prefix %zu: reason '%s' vs '%s'", k, errk, err);
	}

	/* SASL pass-through */
	if (st == KC_OK)
		sasl_checks(buf, n, &h, lens, nl);
	sasl_response_checks(buf, n, lens, nl);

	/* Produce acks */
	if (st == KC_OK) {
		int16_t acks = 0, acksk = 0;
		int a = kc_produce_acks(buf, n, &h, &acks), ak;

		if (h.api_key != KC_API_PRODUCE) {
			FUZZ_CHECK(a == KC_MALFORMED, "acks of a non-Produce header: %d", a);
		} else {
			FUZZ_CHECK(a == KC_OK || a == KC_NEED_MORE || a == KC_MALFORMED, "acks status %d", a);
			if (a == KC_OK && h.api_version < 3)
				FUZZ_CHECK(acks == kc_get_i16(buf + h.header_len), "acks v<3");
			for (i = 0; i < nl; i++) {
				size_t k = lens[i];

				acksk = 0;
				ak = kc_produce_acks(buf, k, &h, &acksk);
				FUZZ_CHECK(ak == KC_NEED_MORE || ak == a,
				    "acks prefix %zu of %zu: %d, whole %d", k, n, ak, a);
				if (ak == KC_OK)
					FUZZ_CHECK(acksk == acks, "acks prefix %zu: %d vs %d", k, acksk, acks);
			}
		}
		hk = h;
		hk.api_key = KC_API_FETCH;
		FUZZ_CHECK(kc_produce_acks(buf, n, &hk, &acks) == KC_MALFORMED, "acks of Fetch");
	}

	/* response prefix */
	{
		int32_t sz = 0, corr = 0, szk, corrk;
		int rs, rk;

		err[0] = '\0';
		rs = kc_parse_response_prefix(buf, n, max_frame, &sz, &corr, err, sizeof err);
		check_status(rs, err);
		if (rs == KC_OK)
			FUZZ_CHECK(n >= 8 && sz >= 4 && (uint64_t)sz <= max_frame &&
			    sz == kc_get_i32(buf) && corr == kc_get_i32(buf + 4), "response prefix");
		for (i = 0; i <= n && i <= 9; i++) {
			errk[0] = '\0';
			szk = corrk = 0;
			rk = kc_parse_response_prefix(buf, i, max_frame, &szk, &corrk, errk, sizeof errk);
			check_status(rk, errk);
			FUZZ_CHECK(rk == KC_NEED_MORE || rk == rs, "response prefix %zu: %d vs %d", i, rk, rs);
			if (rk == KC_OK)
				FUZZ_CHECK(szk == sz && corrk == corr, "response prefix %zu fields", i);
		}
	}
}

/* ---- reader machine ---- */

enum { OP_I8, OP_I16, OP_I32, OP_I64, OP_UVARINT, OP_STRING, OP_BYTES, OP_ARRAY,
       OP_I32_ARRAY, OP_TAGS, OP_SKIP, OP_NEED, OP_COUNT };

struct rec {
	uint8_t op;		/* OP_* */
	bool compact;
	int64_t v;		/* value, or length for strings */
	const uint8_t *s;
};

struct res {
	int64_t v;
	const uint8_t *s;
	bool ok;
};

static struct res
vm_op(struct kc_reader *r, uint8_t op)
{
	struct res x = { 0, NULL, false };
	bool compact = (op >> 4) & 1, nullable = (op >> 5) & 1;
	size_t arg = op >> 4;

	switch (op % OP_COUNT) {
	case OP_I8: x.v = kc_rd_i8(r); break;
	case OP_I16: x.v = kc_rd_i16(r); break;
	case OP_I32: x.v = kc_rd_i32(r); break;
	case OP_I64: x.v = kc_rd_i64(r); break;
	case OP_UVARINT: x.v = kc_rd_uvarint(r); break;
	case OP_STRING: x.v = kc_rd_string(r, compact, nullable, &x.s); break;
	case OP_BYTES: x.v = kc_rd_bytes(r, compact, nullable, &x.s); break;
	case OP_ARRAY: x.v = kc_rd_array(r, compact, nullable, (size_t)(op >> 6)); break;
	case OP_I32_ARRAY: x.v = kc_rd_i32_array(r, compact); break;
	case OP_TAGS: x.v = kc_rd_tags(r); break;
	case OP_SKIP: x.v = kc_rd_skip(r, arg); break;
	case OP_NEED: x.v = kc_rd_need(r, arg); break;
	}
	x.ok = kc_rd_ok(r);
	return x;
}

static void
vm_mode(const uint8_t *data, size_t size)
{
	const uint8_t *ops, *buf0;
	uint8_t *buf;
	size_t nops, n, cut, i, nrec = 0;
	struct kc_reader part, full;
	struct rec recs[256];
	bool diverged = false;

	if (size < 3)
		return;
	cut = data[1];
	nops = data[2];
	if (nops > size - 3)
		nops = size - 3;
	ops = data + 3;
	buf0 = ops + nops;
	n = size - 3 - nops;
	buf = fuzz_dup(buf0, n);
	if (cut > n)
		cut = n;

	kc_rd_init_partial(&part, buf, n, n - cut);
	kc_rd_init(&full, buf, n);
	FUZZ_CHECK(part.avail == buf + (n - cut) && part.end == buf + n, "init_partial");
	for (i = 0; i < nops; i++) {
		uint8_t op = ops[i];
		const uint8_t *p0 = part.p;
		int st0 = part.status;
		struct res a = vm_op(&part, op), b;

		FUZZ_CHECK(part.p >= buf && part.p <= part.avail && part.avail <= part.end,
		    "cursor outside the bytes present after op %u", op);
		if (st0 != KC_OK)
			FUZZ_CHECK(part.status == st0 && part.p == p0, "status not sticky (op %u)", op);
		if (part.status == KC_NEED_MORE)
			FUZZ_CHECK(part.avail < part.end, "NEED_MORE on a whole frame");
		if (part.status != KC_OK)
			FUZZ_CHECK(part.err != NULL, "failed reader without a reason");
		if (a.ok && a.s != NULL)
			FUZZ_CHECK(a.s >= buf && a.v >= 0 && a.s + a.v <= part.p,
			    "returned span outside what was consumed (op %u)", op);
		if (a.ok && op % OP_COUNT == OP_ARRAY && a.v > 0)
			FUZZ_CHECK((uint64_t)a.v * (op >> 6) <= (uint64_t)(part.end - part.p),
			    "array count past the end of the frame");
		if (diverged)
			continue;
		b = vm_op(&full, op);
		if (st0 != KC_OK)
			continue;
		if (part.status == KC_OK) {
			FUZZ_CHECK(full.status == KC_OK && full.p == part.p && b.v == a.v && b.s == a.s,
			    "partial and whole readers disagree (op %u)", op);
			if (nrec < 256) {
				struct rec *rc = &recs[nrec++];

				rc->op = op % OP_COUNT;
				rc->compact = (op >> 4) & 1;
				rc->v = a.v;
				rc->s = a.s;
			}
		} else if (part.status == KC_MALFORMED) {
			FUZZ_CHECK(full.status == KC_MALFORMED, "malformed only when partial (op %u)", op);
			diverged = true;
		} else {
			diverged = true;
		}
	}

	/* writer round trip of everything read while OK */
	{
		size_t cap = 1, j;
		uint8_t *wb;
		struct kc_writer w;
		struct kc_reader rr;

		for (j = 0; j < nrec; j++)
			cap += 8 + (recs[j].op == OP_STRING && recs[j].v > 0 ? (size_t)recs[j].v : 0);
		wb = malloc(cap);
		FUZZ_CHECK(wb != NULL, "oom");
		kc_wr_init(&w, wb, cap);
		for (j = 0; j < nrec; j++) {
			const struct rec *rc = &recs[j];

			switch (rc->op) {
			case OP_I8: kc_wr_i8(&w, (int8_t)rc->v); break;
			case OP_I16: kc_wr_i16(&w, (int16_t)rc->v); break;
			case OP_I32: kc_wr_i32(&w, (int32_t)rc->v); break;
			case OP_UVARINT: kc_wr_uvarint(&w, (uint32_t)rc->v); break;
			case OP_STRING:
				kc_wr_string(&w, rc->compact, rc->v < 0 ? NULL : (const char *)rc->s,
				    rc->v < 0 ? 0 : (size_t)rc->v);
				break;
			default: break;
			}
			FUZZ_CHECK(w.p >= wb && w.p <= w.end, "writer cursor outside its buffer");
		}
		FUZZ_CHECK(!w.overflow, "writer overflow with a large enough buffer");
		kc_rd_init(&rr, wb, (size_t)(w.p - wb));
		for (j = 0; j < nrec; j++) {
			const struct rec *rc = &recs[j];
			const uint8_t *s = NULL;
			int64_t v;

			switch (rc->op) {
			case OP_I8: v = kc_rd_i8(&rr); break;
			case OP_I16: v = kc_rd_i16(&rr); break;
			case OP_I32: v = kc_rd_i32(&rr); break;
			case OP_UVARINT: v = kc_rd_uvarint(&rr); break;
			case OP_STRING: v = kc_rd_string(&rr, rc->compact, true, &s); break;
			default: continue;
			}
			FUZZ_CHECK(kc_rd_ok(&rr) && v == rc->v, "round trip of op %u: %lld vs %lld",
			    rc->op, (long long)v, (long long)rc->v);
			if (rc->op == OP_STRING && v > 0)
				FUZZ_CHECK(memcmp(s, rc->s, (size_t)v) == 0, "string round trip");
		}
		FUZZ_CHECK(rr.p == rr.end, "round trip left bytes");
		/* a writer that is too small overflows instead of writing past its end */
		if (w.p > wb) {
			struct kc_writer w2;
			size_t small = (size_t)(w.p - wb) - 1;

			kc_wr_init(&w2, wb, small);
			for (j = 0; j < nrec && !w2.overflow; j++) {
				const struct rec *rc = &recs[j];

				switch (rc->op) {
				case OP_I8: kc_wr_i8(&w2, (int8_t)rc->v); break;
				case OP_I16: kc_wr_i16(&w2, (int16_t)rc->v); break;
				case OP_I32: kc_wr_i32(&w2, (int32_t)rc->v); break;
				case OP_UVARINT: kc_wr_uvarint(&w2, (uint32_t)rc->v); break;
				case OP_STRING:
					kc_wr_string(&w2, rc->compact, rc->v < 0 ? NULL :
					    (const char *)rc->s, rc->v < 0 ? 0 : (size_t)rc->v);
					break;
				default: break;
				}
				FUZZ_CHECK(w2.p <= w2.end, "small writer past its end");
			}
			FUZZ_CHECK(w2.overflow, "small writer did not overflow");
		}
		free(wb);
	}

	/* varints: decode what is there, re-encode, compare widths */
	for (i = 0; i < n; i++) {
		uint32_t v = 0, v2 = 0;
		uint8_t tmp[5];
		int w = kc_get_uvarint(buf + i, n - i, &v);

		FUZZ_CHECK(w >= -1 && w <= 5, "varint width %d", w);
		if (w > 0) {
			size_t e = kc_put_uvarint(tmp, v);

			FUZZ_CHECK(e == kc_uvarint_size(v) && e <= (size_t)w, "varint re-encode %zu > %d", e, w);
			FUZZ_CHECK(kc_get_uvarint(tmp, e, &v2) == (int)e && v2 == v, "varint round trip");
		}
		if (i >= 8)
			break;
	}
	free(buf);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *buf;

	if (size < 1)
		return 0;
	if (data[0] & 0x80) {
		vm_mode(data, size);
		return 0;
	}
	buf = fuzz_dup(data + 1, size - 1);
	parser_mode(data[0], buf, size - 1);
	free(buf);
	return 0;
}
