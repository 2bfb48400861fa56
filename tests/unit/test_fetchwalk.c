/*
 * Unit tests for worker/kafka/fetchwalk: the incremental walk over a Fetch
 * v12-18 response and the length-preserving rewrite of its top-level
 * tagged fields. The responses come from kafka_fixtures.h's build_fe
 * (written from the schema, independently of the code under test): two
 * topics, three partitions with null, empty and large record sets, null
 * and non-empty aborted transactions (and 1-byte and empty sets built
 * here), a partition's DivergingEpoch,
 * CurrentLeader, SnapshotId and an unknown tag, NodeEndpoints and an
 * unknown top-level tag.
 *
 * The walk is fed the way the worker feeds it (byte by byte, in random
 * chunks, whole), each step's bytes copied into a buffer of exactly their
 * size so that ASan catches a read past what is present; what it forwards,
 * what it says is opaque and the tail it hands out must put the response
 * back together byte for byte. Every strict prefix of a response (size
 * prefix fixed up) must be refused, by the walk or by the tail rewrite.
 * The rewritten responses are re-parsed with kc_rewrite_response: valid,
 * the same length, no upstream host left.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/kafka_fixtures.h"
#include "worker/kafka/fetchwalk.h"

/* What a walk saw. */
struct walked {
	struct bb out;         /* forwarded + opaque + tail, in order */
	size_t forwarded, opaque_bytes, opaque_spans, tail_len, steps;
	int status;            /* KC_OK (tail reached) or KC_MALFORMED */
	char err[128];
};

static uint32_t rng = 12345;

static size_t
rnd(size_t n)
{
	rng = rng * 1103515245u + 12345u;
	return (rng >> 8) % n;
}

/*
 * Walks in (n bytes) fed `chunk` bytes at a time (0: random 1..64, SIZE_MAX:
 * all at once). The frame's length is taken from its size prefix.
 */
static void
walk(int v, const uint8_t *in, size_t n, size_t chunk, struct walked *w)
{
	struct kc_fw fw;
	size_t fed = 0, pos = 0;

	memset(w, 0, sizeof *w);
	bb_init(&w->out);
	kc_fw_init(&fw, (int16_t)v, 4 + (uint64_t)(uint32_t)kc_get_i32(in));
	for (;;) {
		size_t avail = fed - pos;
		uint8_t *copy = malloc(avail ? avail : 1);
		enum kc_fw_what what;
		uint64_t k = 0;
		int r;

		cr_assert_not_null(copy);
		memcpy(copy, in + pos, avail);
		r = kc_fw_step(&fw, copy, avail, &what, &k, w->err, sizeof w->err);
		free(copy);
		w->steps++;
		if (r == KC_MALFORMED) {
			w->status = KC_MALFORMED;
			return;
		}
		if (r == KC_NEED_MORE) {
			cr_assert_lt(fed, n, "need more with the whole frame present (pos %zu)", pos);
			size_t c = chunk == 0 ? 1 + rnd(64) : chunk;
			fed = c > n - fed ? n : fed + c;
			continue;
		}
		cr_assert_eq(r, KC_OK);
		switch (what) {
		case KC_FW_FORWARD:
			cr_assert(k > 0 && k <= avail, "forward %llu of %zu", (unsigned long long)k,
			    avail);
			w->forwarded += k;
			break;
		case KC_FW_OPAQUE:
			cr_assert(k > 0 && pos + k <= n, "opaque %llu at %zu of %zu",
			    (unsigned long long)k, pos, n);
			w->opaque_bytes += k;
			w->opaque_spans++;
			break;
		case KC_FW_TAIL:
			cr_assert_eq(pos + k, n, "the tail runs to the frame's end");
			w->tail_len = k;
			break;
		}
		bb_raw(&w->out, in + pos, k);
		pos += k;
		if (fed < pos)
			fed = pos;   /* opaque bytes are moved by the caller */
		if (what == KC_FW_TAIL) {
			w->status = KC_OK;
			return;
		}
	}
}

/* The record bytes build_fe puts in a response: 70 + big in topic 0's
 * partition 0, an empty set in its partition 1, null in topic 1. */
static size_t
fe_record_bytes(size_t big)
{
	return 70 + big;
}

static void
check_walk_all_ways(int v, const struct fe_opts *o, size_t big_expect)
{
	static const size_t chunks[] = { 1, 0, 0, 0, 7, 4096, SIZE_MAX };
	struct bb in;
	struct walked w;

	build_fe(&in, v, o);
	for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
		walk(v, in.b, in.n, chunks[c], &w);
		cr_assert_eq(w.status, KC_OK, "v%d chunk %zu: %s", v, chunks[c], w.err);
		assert_bytes(w.out.b, w.out.n, in.b, in.n, "walked response");
		cr_assert_eq(w.opaque_bytes, fe_record_bytes(big_expect) + 3,
		    "v%d: the record set and the unknown partition tag's value are opaque "
		    "(%zu)", v, w.opaque_bytes);
		cr_assert_eq(w.opaque_spans, 2);
		bb_free(&w.out);
	}
	bb_free(&in);
}

Test(fetchwalk, walks_every_flexible_version_in_any_chunks)
{
	struct fe_opts o = { UP, 3, true, true, 0 };
	for (int v = 12; v <= 18; v++)
		check_walk_all_ways(v, &o, 0);
}

Test(fetchwalk, large_record_sets_are_one_opaque_span)
{
	struct fe_opts o = { UP, 3, true, false, 300000 };
	struct bb in;
	struct walked w;

	check_walk_all_ways(16, &o, 300000);
	build_fe(&in, 16, &o);
	walk(16, in.b, in.n, 0, &w);
	cr_assert_eq(w.status, KC_OK, "%s", w.err);
	cr_assert_lt(w.forwarded + w.tail_len, 1000, "only the small parts are parsed");
	bb_free(&w.out);
	bb_free(&in);
}

Test(fetchwalk, no_topics_and_no_tags)
{
	struct bb in;
	struct walked w;

	bb_init(&in);
	bb_head(&in, true);
	bb_i32(&in, 0);
	bb_i16(&in, 0);
	bb_i32(&in, 0);
	bb_arr(&in, true, 0);
	bb_u8(&in, 0);
	bb_fix(&in);
	walk(16, in.b, in.n, 1, &w);
	cr_assert_eq(w.status, KC_OK, "%s", w.err);
	cr_assert_eq(w.tail_len, 1);
	cr_assert_eq(w.opaque_spans, 0);
	bb_free(&w.out);
	/* without its tag section the message is incomplete */
	in.n--;
	bb_fix(&in);
	walk(16, in.b, in.n, SIZE_MAX, &w);
	cr_assert_eq(w.status, KC_MALFORMED);
	bb_free(&w.out);
	bb_free(&in);
}

/* Record sets of 1 byte and of 0 (empty, not null), v13+ topic ids. */
Test(fetchwalk, one_byte_and_empty_record_sets)
{
	struct bb in;
	struct walked w;

	for (size_t rn = 0; rn <= 1; rn++) {
		bb_init(&in);
		bb_head(&in, true);
		bb_i32(&in, 0);
		bb_i16(&in, 0);
		bb_i32(&in, 7);
		bb_arr(&in, true, 1);
		bb_raw(&in, "0123456789abcdef", 16);
		bb_arr(&in, true, 1);
		bb_i32(&in, 0);
		bb_i16(&in, 0);
		bb_i64(&in, 1);
		bb_i64(&in, 1);
		bb_i64(&in, 0);
		bb_arr(&in, true, 0);			/* AbortedTransactions: empty */
		bb_i32(&in, -1);
		bb_bytes(&in, true, (const uint8_t *)"\x80", rn);
		bb_u8(&in, 0);
		bb_u8(&in, 0);
		bb_u8(&in, 0);				/* top-level tags: none */
		bb_fix(&in);
		for (size_t chunk = 1; chunk <= 3; chunk++) {
			walk(18, in.b, in.n, chunk, &w);
			cr_assert_eq(w.status, KC_OK, "%zu record bytes: %s", rn, w.err);
			assert_bytes(w.out.b, w.out.n, in.b, in.n, "walked response");
			cr_assert_eq(w.opaque_bytes, rn);
			cr_assert_eq(w.opaque_spans, rn);
			cr_assert_eq(w.tail_len, 1);
			bb_free(&w.out);
		}
		bb_free(&in);
	}
}

Test(fetchwalk, every_strict_prefix_is_refused)
{
	struct fe_opts o = { UP, 3, true, true, 0 };
	struct tmap tm;
	struct kc_broker_map bm = mk_map(&tm, proxy_map, 3);
	struct bb in;
	struct walked w;

	build_fe(&in, 16, &o);
	uint8_t *f = malloc(in.n);
	cr_assert_not_null(f);
	for (size_t cut = 8; cut < in.n; cut++) {
		memcpy(f, in.b, cut);
		kc_put_i32(f, (int32_t)(cut - 4));
		walk(16, f, cut, cut % 2 ? 1 : SIZE_MAX, &w);
		if (w.status == KC_OK) {
			/* the walk reached the tail: the tail must be refused */
			uint8_t *out = NULL;
			enum kc_fw_tail how;
			char err[128];
			int r = kc_rw_fetch_tail(16, f + cut - w.tail_len, w.tail_len, &bm, &out,
			    &how, err, sizeof err);
			cr_assert_eq(r, KC_MALFORMED, "prefix of %zu/%zu bytes accepted", cut, in.n);
			cr_assert_null(out);
		}
		bb_free(&w.out);
	}
	cr_assert_eq(tm.calls, 0, "the map never ran on a malformed tail");
	free(f);
	bb_free(&in);
}

Test(fetchwalk, bad_counts_are_malformed_before_the_bytes_arrive)
{
	struct bb in;
	struct kc_fw fw;
	enum kc_fw_what what;
	uint64_t k;
	char err[128];

	/* a topic count that cannot fit the frame, with only the header present */
	bb_init(&in);
	bb_head(&in, true);
	bb_i32(&in, 0);
	bb_i16(&in, 0);
	bb_i32(&in, 0);
	bb_uv(&in, 100001);
	size_t head = in.n;
	for (int i = 0; i < 1000; i++)
		bb_u8(&in, 0);
	bb_fix(&in);
	kc_fw_init(&fw, 16, in.n);
	cr_assert_eq(kc_fw_step(&fw, in.b, head, &what, &k, err, sizeof err), KC_MALFORMED);
	cr_expect(strstr(err, "array") != NULL, "%s", err);
	bb_free(&in);

	/* a records length past the frame's end */
	bb_init(&in);
	bb_head(&in, true);
	bb_i32(&in, 0);
	bb_i16(&in, 0);
	bb_i32(&in, 0);
	bb_arr(&in, true, 1);
	bb_raw(&in, "0123456789abcdef", 16);
	bb_arr(&in, true, 1);
	bb_i32(&in, 0);
	bb_i16(&in, 0);
	bb_i64(&in, 0);
	bb_i64(&in, 0);
	bb_i64(&in, 0);
	bb_arr(&in, true, -1);
	bb_i32(&in, -1);
	bb_uv(&in, 5000 + 1);
	head = in.n;
	for (int i = 0; i < 300; i++)
		bb_u8(&in, 0);
	bb_fix(&in);
	kc_fw_init(&fw, 16, in.n);
	int r = kc_fw_step(&fw, in.b, head, &what, &k, err, sizeof err);
	cr_assert_eq(r, KC_MALFORMED);
	cr_expect(strstr(err, "records") != NULL, "%s", err);

	/* the same with a fitting length (also two varint bytes) is
	 * forwarded, then opaque */
	cr_assert_eq(kc_put_uvarint(in.b + head - 2, 200 + 1), 2);
	kc_fw_init(&fw, 16, in.n);
	cr_assert_eq(kc_fw_step(&fw, in.b, head, &what, &k, err, sizeof err), KC_OK);
	cr_assert_eq(what, KC_FW_FORWARD);
	cr_assert_eq(k, head);
	cr_assert_eq(kc_fw_step(&fw, in.b + head, 0, &what, &k, err, sizeof err), KC_OK);
	cr_assert_eq(what, KC_FW_OPAQUE);
	cr_assert_eq(k, 200);
	bb_free(&in);
}

Test(fetchwalk, partition_tag_values_are_validated)
{
	struct fe_opts o = { NULL, 0, false, false, 0 };
	struct bb in;
	struct walked w;

	build_fe(&in, 16, &o);
	/* CurrentLeader (tag 1, 9 bytes) of partition 0: its size one too large */
	uint8_t *p = memmem(in.b, in.n, "\x01\x09\x00\x00\x00\x02\x00\x00\x00\x09\x00", 11);
	cr_assert_not_null(p);
	p[1] = 0x0a;
	walk(16, in.b, in.n, 1, &w);
	cr_assert_eq(w.status, KC_MALFORMED);
	bb_free(&w.out);
	bb_free(&in);
}

/* ---- the tail ---- */

/* Hosts of n bytes. */
static char long_hosts[3][400];

static const char *
host_of(int i, size_t n)
{
	memset(long_hosts[i], 'h', n);
	long_hosts[i][n] = 0;
	return long_hosts[i];
}

/*
 * Streams in (Fetch v) as the worker does: the walked bytes unchanged, the
 * tail through kc_rw_fetch_tail. Returns how; *out is the client's frame.
 */
static enum kc_fw_tail
stream(int v, const struct bb *in, const struct tmap_ent *map, size_t nmap, struct bb *out,
       int *calls)
{
	struct tmap tm;
	struct kc_broker_map bm = mk_map(&tm, map, nmap);
	struct walked w;
	enum kc_fw_tail how = KC_FW_TAIL_SAME;
	uint8_t *t = NULL;
	char err[128];

	walk(v, in->b, in->n, 0, &w);
	cr_assert_eq(w.status, KC_OK, "%s", w.err);
	int r = kc_rw_fetch_tail(v, in->b + in->n - w.tail_len, w.tail_len, &bm, &t, &how, err,
	    sizeof err);
	cr_assert_eq(r, KC_OK, "%s", err);
	bb_init(out);
	bb_raw(out, in->b, in->n - w.tail_len);
	if (how == KC_FW_TAIL_SAME) {
		cr_assert_null(t);
		bb_raw(out, in->b + in->n - w.tail_len, w.tail_len);
	} else {
		cr_assert_not_null(t);
		bb_raw(out, t, w.tail_len);
		free(t);
	}
	if (calls)
		*calls = tm.calls;
	bb_free(&w.out);
	return how;
}

/* The client's frame is a valid Fetch response of the same length with no
 * upstream host; returns how many NodeEndpoints entries it carries and
 * checks they are the proxy's. */
static int
check_client_frame(int v, const struct bb *in, const struct bb *out, const char *what)
{
	struct tmap tm;
	struct kc_broker_map bm = mk_map(&tm, NULL, 0);
	uint8_t *o = NULL;
	size_t on = 0;
	char err[128];

	cr_assert_eq(out->n, in->n, "%s: the length is kept", what);
	cr_assert_eq(kc_get_i32(out->b), kc_get_i32(in->b));
	cr_assert_null(memmem(out->b, out->n, "internal.example", 16), "%s: upstream host left",
	    what);
	int r = kc_rewrite_response(KC_API_FETCH, (int16_t)v, out->b, out->n, &bm, &o, &on, err,
	    sizeof err);
	cr_assert_eq(r, KC_OK, "%s: not a valid Fetch v%d response: %s", what, v, err);
	cr_assert_eq(bm.trailing, 0, "%s", what);
	free(o);
	return tm.calls;
}

Test(fetchwalk, tail_without_node_endpoints_is_forwarded_as_is)
{
	struct fe_opts o = { NULL, 0, false, true, 5000 };
	struct bb in, out;

	build_fe(&in, 16, &o);
	cr_assert_eq(stream(16, &in, proxy_map, 3, &out, NULL), KC_FW_TAIL_SAME);
	assert_bytes(out.b, out.n, in.b, in.n, "Fetch v16 without NodeEndpoints");
	bb_free(&in);
	bb_free(&out);
}

Test(fetchwalk, tail_of_the_same_length_is_rewritten_in_place)
{
	/* proxy hosts exactly as long as the upstream ones */
	static const struct tmap_ent same[] = {
		{ 1, "ferry-1.proxy.example.co", 19001 },
		{ 2, "ferry-2.proxy.example.co", 19002 },
		{ 3, "ferry-3.proxy.example.co", 19003 },
	};
	struct node px[3];
	memcpy(px, UP, sizeof px);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(strlen(same[i].host), strlen(UP[i].host));
		px[i].host = same[i].host;
		px[i].port = same[i].port;
	}
	struct fe_opts o = { UP, 3, true, true, 2000 }, ox = { px, 3, true, true, 2000 };
	struct bb in, want, out;
	int calls;

	build_fe(&in, 17, &o);
	build_fe(&want, 17, &ox);
	cr_assert_eq(stream(17, &in, same, 3, &out, &calls), KC_FW_TAIL_REWRITTEN);
	cr_assert_eq(calls, 3);
	assert_bytes(out.b, out.n, want.b, want.n, "NodeEndpoints rewritten in place");
	bb_free(&in);
	bb_free(&want);
	bb_free(&out);
}

Test(fetchwalk, shorter_tail_is_padded_after_every_tag)
{
	struct fe_opts o = { UP, 3, true, true, 2000 };
	struct bb in, out;

	build_fe(&in, 16, &o);
	cr_assert_eq(stream(16, &in, proxy_map, 3, &out, NULL), KC_FW_TAIL_PADDED);
	cr_assert_eq(check_client_frame(16, &in, &out, "padded"), 3,
	    "the three leader hints are kept");
	/* the section: NodeEndpoints, tag 7, then the padding's tag 127 */
	struct walked w;
	walk(16, out.b, out.n, SIZE_MAX, &w);
	struct kc_reader r;
	kc_rd_init(&r, out.b + out.n - w.tail_len, w.tail_len);
	cr_assert_eq(kc_rd_uvarint(&r), 3);
	uint32_t last = 0;
	for (int i = 0; i < 3; i++) {
		uint32_t tag = kc_rd_uvarint(&r), size = kc_rd_uvarint(&r);
		cr_assert(i == 0 || tag > last, "tags ascend: %u after %u", tag, last);
		last = tag;
		kc_rd_skip(&r, size);
	}
	cr_assert_eq(last, KC_FW_PAD_TAG);
	cr_assert_eq(r.p, r.end);
	cr_assert(kc_rd_ok(&r));
	bb_free(&w.out);
	bb_free(&in);
	bb_free(&out);
}

Test(fetchwalk, longer_tail_drops_the_hint_for_padding)
{
	static const struct tmap_ent longer[] = {
		{ 1, "a-much-longer-proxy-host-name-1.example.com", 19001 },
		{ 2, "a-much-longer-proxy-host-name-2.example.com", 19002 },
		{ 3, "a-much-longer-proxy-host-name-3.example.com", 19003 },
	};
	struct fe_opts o = { UP, 3, true, true, 2000 };
	struct bb in, out;

	build_fe(&in, 18, &o);
	cr_assert_eq(stream(18, &in, longer, 3, &out, NULL), KC_FW_TAIL_DROPPED);
	cr_assert_eq(check_client_frame(18, &in, &out, "dropped"), 0, "no leader hint left");
	cr_assert_not_null(memmem(out.b, out.n, "\x07\x03\x01\x02\x03", 5),
	    "the other tagged field is kept");
	bb_free(&in);
	bb_free(&out);
}

/* A NodeEndpoints field of one entry with a host of hl bytes. */
static size_t
ne_field_len(size_t hl)
{
	size_t vs = 1 + 4 + kc_uvarint_size((uint32_t)hl + 1) + hl + 4 + 1 + 1;
	return 1 + kc_uvarint_size((uint32_t)vs) + vs;
}

/* One node, every difference of length from +40 to -300 bytes: the
 * outcome follows the difference, the frame is always valid. */
Test(fetchwalk, every_length_difference)
{
	struct node up1 = { 1, NULL, 9092, NULL, NULL, 0, 0 };
	up1.host = "kafka-1.internal.example-with-a-long-name-to-shrink-from-"
	    "kafka-1.internal.example-with-a-long-name-to-shrink-from-"
	    "kafka-1.internal.example-with-a-long-name-to-shrink-from-"
	    "kafka-1.internal.example-with-a-long-name-to-shrink-from-"
	    "kafka-1.internal.example-with-a-long-name-to-shrink-from-end";
	size_t ul = strlen(up1.host);
	struct fe_opts o = { &up1, 1, true, false, 100 };
	struct bb in, out;
	int seen[4] = { 0 };

	build_fe(&in, 16, &o);
	for (size_t hl = 0; hl <= ul + 40; hl++) {
		struct tmap_ent e = { 1, host_of(0, hl), 19001 };
		enum kc_fw_tail how = stream(16, &in, &e, 1, &out, NULL);
		int kept = check_client_frame(16, &in, &out, "one node");
		/* the field: tag, value size, value (count, node, host, port,
		 * null rack, no tags); the varints widen from 128 on */
		long diff = (long)ne_field_len(ul) - (long)ne_field_len(hl);
		enum kc_fw_tail want = diff == 0 ? KC_FW_TAIL_REWRITTEN
		    : diff >= 2 ? KC_FW_TAIL_PADDED : KC_FW_TAIL_DROPPED;
		cr_assert_eq(how, want, "host of %zu bytes (diff %ld): %s, not %s", hl, diff,
		    kc_fw_tail_str(how), kc_fw_tail_str(want));
		cr_assert_eq(kept, how == KC_FW_TAIL_DROPPED ? 0 : 1);
		seen[how]++;
		bb_free(&out);
	}
	for (int i = 1; i < 4; i++)
		cr_assert_gt(seen[i], 0, "%s never seen", kc_fw_tail_str((enum kc_fw_tail)i));
	bb_free(&in);
}

/* A section of tags 0, 1..126 (127 fields, a one-byte count): padding
 * makes 128, a two-byte count; and a tag above 127 moves the padding's. */
Test(fetchwalk, padding_count_width_and_high_tags)
{
	struct fe_opts o = { UP, 3, true, false, 10 };
	struct bb in, base, out;

	for (int variant = 0; variant < 2; variant++) {
		build_fe(&base, 16, &o);
		struct walked w;
		walk(16, base.b, base.n, SIZE_MAX, &w);
		bb_free(&w.out);
		/* replace the section: count, NodeEndpoints, then the others */
		const uint8_t *sec = base.b + base.n - w.tail_len;
		struct kc_reader r;
		kc_rd_init(&r, sec, w.tail_len);
		(void)kc_rd_uvarint(&r);
		const uint8_t *ne = r.p;
		(void)kc_rd_uvarint(&r);
		uint32_t sz = kc_rd_uvarint(&r);
		kc_rd_skip(&r, sz);
		bb_init(&in);
		bb_raw(&in, base.b, base.n - w.tail_len);
		if (variant == 0) {
			bb_uv(&in, 127);
			bb_raw(&in, ne, (size_t)(r.p - ne));
			for (uint32_t t = 1; t <= 126; t++) {
				bb_uv(&in, t);
				bb_uv(&in, 0);
			}
		} else {
			bb_uv(&in, 2);
			bb_raw(&in, ne, (size_t)(r.p - ne));
			bb_uv(&in, 300);
			bb_raw(&in, "\x02\xab\xcd", 3);
		}
		bb_fix(&in);
		cr_assert_eq(stream(16, &in, proxy_map, 3, &out, NULL), KC_FW_TAIL_PADDED);
		cr_assert_eq(check_client_frame(16, &in, &out, "wide"), 3);
		walk(16, out.b, out.n, SIZE_MAX, &w);
		kc_rd_init(&r, out.b + out.n - w.tail_len, w.tail_len);
		uint32_t nf = kc_rd_uvarint(&r), last = 0;
		cr_assert_eq(nf, variant == 0 ? 128 : 3);
		for (uint32_t i = 0; i < nf; i++) {
			uint32_t tag = kc_rd_uvarint(&r), size = kc_rd_uvarint(&r);
			cr_assert(i == 0 || tag > last, "tags ascend: %u after %u", tag, last);
			last = tag;
			kc_rd_skip(&r, size);
		}
		cr_assert(kc_rd_ok(&r));
		cr_assert_eq(r.p, r.end);
		cr_assert_eq(last, variant == 0 ? KC_FW_PAD_TAG : 301);
		bb_free(&w.out);
		bb_free(&in);
		bb_free(&base);
		bb_free(&out);
	}
}

Test(fetchwalk, trailing_bytes_in_the_tail)
{
	struct fe_opts o = { UP, 3, true, false, 10 };
	struct bb in, out;

	build_fe(&in, 16, &o);
	bb_raw(&in, "\x00\xaa\xbb", 3);   /* after the complete message */
	bb_fix(&in);
	cr_assert_eq(stream(16, &in, proxy_map, 3, &out, NULL), KC_FW_TAIL_PADDED);
	cr_assert_eq(check_client_frame(16, &in, &out, "trailing"), 3);
	bb_free(&out);
	bb_free(&in);
	/* without NodeEndpoints they stay, as the client would have had them */
	o.with_ne = false;
	build_fe(&in, 16, &o);
	bb_raw(&in, "\x00", 1);
	bb_fix(&in);
	cr_assert_eq(stream(16, &in, proxy_map, 3, &out, NULL), KC_FW_TAIL_SAME);
	assert_bytes(out.b, out.n, in.b, in.n, "trailing byte kept");
	bb_free(&out);
	bb_free(&in);
}

Test(fetchwalk, names)
{
	cr_expect_str_eq(kc_fw_what_str(KC_FW_OPAQUE), "opaque");
	cr_expect_str_eq(kc_fw_tail_str(KC_FW_TAIL_DROPPED), "dropped");
}
