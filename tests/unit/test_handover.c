/*
 * Unit tests for live handover: the connection record (common/ipc.c:
 * ipc_conn_record_check, sizes and fields), and the pure decisions of
 * worker/handover.c: when a leaving connection may move, how closes are
 * spread, and how a received record is adopted.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>

#include "common/ipc.h"
#include "worker/handover.h"

#define REC sizeof(struct ipc_conn_record)

static uint8_t payload[IPC_CONN_RECORD_MAX + 16];

/* A record followed by n pending bytes (0x5a...) in payload; its length. */
static size_t
make(const struct ipc_conn_record *r, size_t n)
{
	memcpy(payload, r, REC);
	memset(payload + REC, 0x5a, n);
	return REC + n;
}

static struct ipc_conn_record
good(uint32_t flags, uint32_t pending)
{
	struct ipc_conn_record r;
	handover_record_init(&r, 42, -1, 0, flags & IPC_CONN_F_UPSTREAM, 3, pending, 0);
	return r;
}

static int
check(size_t len, size_t nfds, char *err)
{
	struct ipc_conn_record out;
	return ipc_conn_record_check(payload, len, nfds, &out, err, 128);
}

/* ---- the record ------------------------------------------------------------ */

Test(record, init_and_check_round_trip)
{
	struct ipc_conn_record r;
	handover_record_init(&r, 7, 2, 0, true, 1234, 10, 0);
	size_t len = make(&r, 10);
	struct ipc_conn_record out;
	char err[128] = "";
	cr_assert_eq(ipc_conn_record_check(payload, len, 2, &out, err, sizeof err), 0, "%s", err);
	cr_expect_eq(out.id, 7);
	cr_expect_eq(out.broker_index, 2);
	cr_expect_eq(out.flags, IPC_CONN_F_UPSTREAM);
	cr_expect_eq(out.upstream_try, 0);
	cr_expect_eq(out.sasl, 0);
	cr_expect_eq(out.requests, 1234);
	cr_expect_eq(out.pending_len, 10);
	cr_expect_eq(out.version, IPC_CONN_RECORD_V1);
}

Test(record, good_client_only_no_pending)
{
	struct ipc_conn_record r = good(0, 0);
	char err[128] = "";
	cr_expect_eq(check(make(&r, 0), 1, err), 0, "%s", err);
}

Test(record, good_with_the_largest_pending)
{
	struct ipc_conn_record r = good(IPC_CONN_F_UPSTREAM, IPC_CONN_PENDING_MAX);
	char err[128] = "";
	cr_expect_eq(check(make(&r, IPC_CONN_PENDING_MAX), 2, err), 0, "%s", err);
}

Test(record, short_payload)
{
	struct ipc_conn_record r = good(0, 0);
	make(&r, 0);
	char err[128] = "";
	cr_expect_eq(check(REC - 1, 1, err), -1);
	cr_expect(strstr(err, "need") != NULL, "%s", err);
	cr_expect_eq(check(0, 1, err), -1);
}

Test(record, pending_len_does_not_match)
{
	char err[128] = "";
	struct ipc_conn_record r = good(0, 10);
	cr_expect_eq(check(make(&r, 5), 1, err), -1, "fewer bytes than pending_len");
	cr_expect(strstr(err, "pending") != NULL, "%s", err);
	cr_expect_eq(check(make(&r, 11), 1, err), -1, "more bytes than pending_len");
	r = good(0, 0);
	cr_expect_eq(check(make(&r, 1), 1, err), -1, "a byte after a record with none");
}

Test(record, pending_too_large)
{
	char err[128] = "";
	struct ipc_conn_record r = good(0, IPC_CONN_PENDING_MAX + 1);
	cr_expect_eq(check(make(&r, IPC_CONN_PENDING_MAX + 1), 1, err), -1);
	r.pending_len = UINT32_MAX;
	cr_expect_eq(check(make(&r, 0), 1, err), -1);
}

Test(record, wrong_version)
{
	char err[128] = "";
	struct ipc_conn_record r = good(0, 0);
	r.version = 0;
	cr_expect_eq(check(make(&r, 0), 1, err), -1);
	cr_expect(strstr(err, "version") != NULL, "%s", err);
	r.version = IPC_CONN_RECORD_VERSION + 1;
	cr_expect_eq(check(make(&r, 0), 1, err), -1);
}

Test(record, unknown_flags)
{
	char err[128] = "";
	struct ipc_conn_record r = good(0, 0);
	r.flags = 0x2;
	cr_expect_eq(check(make(&r, 0), 1, err), -1);
	cr_expect(strstr(err, "flags") != NULL, "%s", err);
	r.flags = IPC_CONN_F_UPSTREAM | 0x80000000u;
	cr_expect_eq(check(make(&r, 0), 2, err), -1);
}

Test(record, wrong_fd_count)
{
	char err[128] = "";
	struct ipc_conn_record r = good(IPC_CONN_F_UPSTREAM, 0);
	size_t len = make(&r, 0);
	cr_expect_eq(check(len, 1, err), -1, "upstream flag, client fd only");
	cr_expect(strstr(err, "descriptor") != NULL, "%s", err);
	cr_expect_eq(check(len, 0, err), -1);
	cr_expect_eq(check(len, 3, err), -1);
	r = good(0, 0);
	len = make(&r, 0);
	cr_expect_eq(check(len, 2, err), -1, "no upstream flag, two fds");
	cr_expect_eq(check(len, 0, err), -1, "no fd at all");
}

Test(record, negative_indexes)
{
	char err[128] = "";
	struct ipc_conn_record r = good(0, 0);
	r.broker_index = -2;
	cr_expect_eq(check(make(&r, 0), 1, err), -1);
	r.broker_index = INT32_MIN;
	cr_expect_eq(check(make(&r, 0), 1, err), -1);
	r = good(0, 0);
	r.upstream_try = -1;
	cr_expect_eq(check(make(&r, 0), 1, err), -1);
	cr_expect(strstr(err, "upstream") != NULL, "%s", err);
}

Test(record, envelope_size_rule)
{
	/* CONN_OUT / CONN_IN carry a record, its client part and at most
	 * IPC_CONN_PENDING_MAX bytes; CONN_TAKEN / CONN_DONE exactly an ack. */
	static uint8_t buf[sizeof(struct ipc_hdr) + IPC_MAX_PAYLOAD];
	struct ipc_msg m;
	char err[128];
	ssize_t n = ipc_encode(buf, sizeof buf, IPC_CONN_OUT, 1, payload, REC - 1);
	cr_expect_eq(ipc_decode(buf, (size_t)n, &m, err, sizeof err), -1);
	n = ipc_encode(buf, sizeof buf, IPC_CONN_IN, 1, payload, IPC_CONN_RECORD_MAX);
	cr_expect_eq(ipc_decode(buf, (size_t)n, &m, err, sizeof err), 0, "%s", err);
	n = ipc_encode(buf, sizeof buf, IPC_CONN_IN, 1, payload, IPC_CONN_RECORD_MAX + 1);
	cr_expect_eq(ipc_decode(buf, (size_t)n, &m, err, sizeof err), -1);
	struct ipc_conn_ack a = { .id = 9, .adopted = 1 };
	n = ipc_encode(buf, sizeof buf, IPC_CONN_TAKEN, 1, &a, sizeof a - 1);
	cr_expect_eq(ipc_decode(buf, (size_t)n, &m, err, sizeof err), -1);
	n = ipc_encode(buf, sizeof buf, IPC_CONN_DONE, 1, &a, sizeof a);
	cr_expect_eq(ipc_decode(buf, (size_t)n, &m, err, sizeof err), 0, "%s", err);
}

/* ---- version 2: the client part ------------------------------------------------ */

#define CC sizeof(struct ipc_conn_client)

/* A version 2 record for hc, then n pending bytes, in payload; its length. */
static size_t
make2(uint32_t flags, const struct handover_client *hc, size_t n, struct ipc_conn_client *cc)
{
	struct ipc_conn_record r;
	struct ipc_conn_client local;
	if (!cc)
		cc = &local;
	handover_record_init(&r, 11, -1, 0, flags & IPC_CONN_F_UPSTREAM, 5, n, 0);
	handover_client_encode(&r, cc, hc);
	memcpy(payload, &r, REC);
	memcpy(payload + REC, cc, CC);
	memset(payload + REC + CC, 0x5a, n);
	return REC + CC + n;
}

static struct handover_client
client(void)
{
	struct handover_client hc;
	memset(&hc, 0, sizeof hc);
	struct sockaddr_in *a = (struct sockaddr_in *)&hc.addr;
	a->sin_family = AF_INET;
	a->sin_port = htons(40123);
	a->sin_addr.s_addr = htonl(0x7f000002);
	hc.proxied = true;
	hc.since_ms = 1764000000123;
	hc.age_ms = 1500;
	hc.age_rnd = 0xdeadbeef;
	ci_init(&hc.ci);
	hc.ci.client_id_seen = true;
	strcpy(hc.ci.client_id, "orders-app");
	hc.ci.software_seen = hc.ci.software_valid = true;
	strcpy(hc.ci.software_name, "apache-kafka-java");
	strcpy(hc.ci.software_version, "4.1.0");
	hc.ci.mech = SASL_MECH_SCRAM_SHA_512;
	strcpy(hc.ci.mech_name, "SCRAM-SHA-512");
	hc.ci.principal_seen = true;
	strcpy(hc.ci.principal, "alice");
	return hc;
}

Test(record2, client_part_round_trip)
{
	struct handover_client hc = client();
	size_t len = make2(IPC_CONN_F_UPSTREAM, &hc, 7, NULL);
	struct handover_adopt a;
	char err[128] = "";
	cr_assert_eq(handover_adopt_plan(payload, len, 2, 3, 1, 0, 10, &a, err, sizeof err), 0,
	    "%s", err);
	cr_expect_eq(a.rec.version, IPC_CONN_RECORD_VERSION);
	cr_expect(a.has_client);
	cr_expect_eq(a.rec.pending_len, 7);
	cr_expect_eq(a.pending, payload + REC + CC, "pending bytes after the client part");
	const struct handover_client *b = &a.client;
	cr_expect_eq(b->addr.ss_family, AF_INET);
	cr_expect_eq(memcmp(&hc.addr, &b->addr, sizeof(struct sockaddr_in)), 0);
	cr_expect(b->proxied);
	cr_expect_eq(b->since_ms, hc.since_ms);
	cr_expect_eq(b->age_ms, 1500);
	cr_expect_eq(b->age_rnd, 0xdeadbeef);
	cr_expect_str_eq(b->ci.client_id, "orders-app");
	cr_expect(b->ci.client_id_seen && !b->ci.client_id_null);
	cr_expect_str_eq(b->ci.software_name, "apache-kafka-java");
	cr_expect_str_eq(b->ci.software_version, "4.1.0");
	cr_expect(b->ci.software_valid);
	cr_expect_eq(b->ci.mech, SASL_MECH_SCRAM_SHA_512);
	cr_expect_str_eq(b->ci.mech_name, "SCRAM-SHA-512");
	cr_expect_str_eq(b->ci.principal, "alice");
	cr_expect(b->ci.principal_seen);
}

Test(record2, ipv6_address_and_sasl_first_pending)
{
	struct handover_client hc = client();
	memset(&hc.addr, 0, sizeof hc.addr);
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&hc.addr;
	a6->sin6_family = AF_INET6;
	a6->sin6_port = htons(9);
	a6->sin6_addr.s6_addr[0] = 0x20;
	a6->sin6_addr.s6_addr[15] = 1;
	hc.ci.sasl_first_pending = true;
	hc.ci.principal_seen = false;
	hc.ci.principal[0] = 0;
	size_t len = make2(0, &hc, 0, NULL);
	struct handover_adopt a;
	char err[128] = "";
	cr_assert_eq(handover_adopt_plan(payload, len, 1, 3, 1, 0, 10, &a, err, sizeof err), 0,
	    "%s", err);
	cr_expect_eq(memcmp(&hc.addr, &a.client.addr, sizeof(struct sockaddr_in6)), 0);
	cr_expect(a.client.ci.sasl_first_pending, "the first token is still to come");
	cr_expect(!a.client.ci.principal_seen);
}

Test(record2, version_1_is_still_adopted_without_a_client)
{
	struct ipc_conn_record r = good(0, 3);
	size_t len = make(&r, 3);
	struct handover_adopt a;
	char err[128] = "";
	cr_assert_eq(handover_adopt_plan(payload, len, 1, 3, 1, 0, 10, &a, err, sizeof err), 0,
	    "%s", err);
	cr_expect(!a.has_client);
	cr_expect_eq(a.pending, payload + REC);
}

Test(record2, lengths_count_the_client_part)
{
	struct handover_client hc = client();
	char err[128] = "";
	size_t len = make2(0, &hc, 4, NULL);
	cr_expect_eq(check(len, 1, err), 0, "%s", err);
	cr_expect_eq(check(len - 1, 1, err), -1, "a pending byte short");
	cr_expect_eq(check(REC + CC - 1, 1, err), -1, "the client part cut");
	len = make2(0, &hc, 0, NULL);
	cr_expect_eq(check(len, 1, err), 0, "%s", err);
	cr_expect_eq(check(REC + 10, 1, err), -1, "version 2 without its client part");
}

/* A hostile client part: every field a worker could get wrong. */
static void
expect_bad(struct ipc_conn_client *cc, const char *what)
{
	struct handover_adopt a;
	char err[128] = "";
	memcpy(payload + REC, cc, CC);
	cr_expect_eq(handover_adopt_plan(payload, REC + CC, 1, 3, 1, 0, 10, &a, err, sizeof err),
	    -1, "%s adopted", what);
	cr_expect(err[0] != 0, "%s: a reason", what);
}

Test(record2, hostile_client_parts_are_refused)
{
	struct handover_client hc = client();
	struct ipc_conn_client cc, bad;
	make2(0, &hc, 0, &cc);
	bad = cc;
	memset(bad.client_id, 'x', sizeof bad.client_id);
	expect_bad(&bad, "client id without its NUL");
	bad = cc;
	memset(bad.principal, 'p', sizeof bad.principal);
	expect_bad(&bad, "principal without its NUL");
	bad = cc;
	bad.software_name[0] = '\n';
	expect_bad(&bad, "a control character");
	bad = cc;
	bad.mech_name[2] = (char)0xc3;
	expect_bad(&bad, "a byte above ASCII");
	bad = cc;
	memset(bad.software_version, 'v', sizeof bad.software_version);
	expect_bad(&bad, "software version without its NUL");
	bad = cc;
	bad.family = AF_UNIX;
	expect_bad(&bad, "a unix address");
	bad = cc;
	bad.flags |= 0x8000;
	expect_bad(&bad, "unknown flags");
	bad = cc;
	bad.mech = SASL_MECH_COUNT;
	expect_bad(&bad, "an unknown mechanism");
	bad = cc;
	bad.age_ms = UINT64_MAX;
	expect_bad(&bad, "an age of 584 million years");
	bad = cc;
	bad.since_ms = -1;
	expect_bad(&bad, "a start before 1970");
	/* and the good one is adopted */
	struct handover_adopt a;
	char err[128] = "";
	memcpy(payload + REC, &cc, CC);
	cr_expect_eq(handover_adopt_plan(payload, REC + CC, 1, 3, 1, 0, 10, &a, err, sizeof err), 0,
	    "%s", err);
}

/* ---- may it move now? --------------------------------------------------------- */

static struct handover_view
at_boundary(void)
{
	return (struct handover_view){ .upstream_open = true, .movable = true };
}

Test(decide, open_at_a_boundary_moves)
{
	struct handover_view v = at_boundary();
	cr_expect_eq(handover_decide(&v), HANDOVER_NOW);
	v.pending = 100;  /* a request read, not parsed: travels with it */
	cr_expect_eq(handover_decide(&v), HANDOVER_NOW);
	v.pending = IPC_CONN_PENDING_MAX;
	cr_expect_eq(handover_decide(&v), HANDOVER_NOW);
}

Test(decide, waits_while_anything_is_owed)
{
	struct handover_view v = at_boundary();
	v.owes = true;
	cr_expect_eq(handover_decide(&v), HANDOVER_WAIT);
	v = at_boundary();
	v.frame_partial = true;
	cr_expect_eq(handover_decide(&v), HANDOVER_WAIT);
	/* owed things come first, even for a connection that cannot move */
	v.movable = false;
	v.cli_eof = true;
	cr_expect_eq(handover_decide(&v), HANDOVER_WAIT);
}

Test(decide, not_connected_upstream_moves_client_only)
{
	struct handover_view v = { .upstream_open = false, .movable = true };
	cr_expect_eq(handover_decide(&v), HANDOVER_NOW);
	v.pending = 37;  /* sent before the upstream connected */
	cr_expect_eq(handover_decide(&v), HANDOVER_NOW);
}

Test(decide, what_cannot_move_drains)
{
	struct handover_view v = at_boundary();
	v.movable = false;  /* TLS */
	cr_expect_eq(handover_decide(&v), HANDOVER_DRAIN);
	v = at_boundary();
	v.cli_eof = true;
	cr_expect_eq(handover_decide(&v), HANDOVER_DRAIN);
	v = at_boundary();
	v.up_eof = true;
	cr_expect_eq(handover_decide(&v), HANDOVER_DRAIN);
	v = at_boundary();
	v.resp_unparsed = true;
	cr_expect_eq(handover_decide(&v), HANDOVER_DRAIN);
	v = at_boundary();
	v.pending = IPC_CONN_PENDING_MAX + 1;
	cr_expect_eq(handover_decide(&v), HANDOVER_DRAIN);
}

Test(decide, names)
{
	cr_expect_str_eq(handover_step_str(HANDOVER_NOW), "now");
	cr_expect_str_eq(handover_step_str(HANDOVER_WAIT), "wait");
	cr_expect_str_eq(handover_step_str(HANDOVER_DRAIN), "drain");
	cr_expect_str_eq(handover_exit_str(HANDOVER_EXIT_SPREAD), "spread");
	cr_expect_str_eq(handover_exit_str(HANDOVER_EXIT_HANDOVER), "handover");
	cr_expect_str_eq(handover_exit_str((enum handover_exit)99), "unknown");
}

/* ---- spread ------------------------------------------------------------------- */

Test(spread, window_is_bounded_by_the_deadline)
{
	cr_expect_eq(handover_spread_window(5000, 30000), 5000);
	cr_expect_eq(handover_spread_window(30000, 30000), 22500);
	cr_expect_eq(handover_spread_window(60000, 4000), 3000);
	cr_expect_eq(handover_spread_window(0, 30000), 0);
	cr_expect_eq(handover_spread_window(5000, 0), 0);
}

Test(spread, offsets_cover_the_window_uniformly)
{
	uint64_t w = 5000;
	cr_expect_eq(handover_spread_offset(w, 0), 0);
	cr_expect_lt(handover_spread_offset(w, UINT32_MAX), w);
	cr_expect_geq(handover_spread_offset(w, UINT32_MAX), w - 1);
	cr_expect_eq(handover_spread_offset(0, UINT32_MAX), 0);
	/* evenly spaced random values land evenly in 10 buckets */
	unsigned buckets[10] = { 0 };
	for (uint64_t i = 0; i < 10000; i++) {
		uint64_t off = handover_spread_offset(w, (uint32_t)(i * (UINT32_MAX / 10000)));
		cr_assert_lt(off, w);
		buckets[off / (w / 10)]++;
	}
	for (int b = 0; b < 10; b++)
		cr_expect(buckets[b] >= 990 && buckets[b] <= 1010, "bucket %d: %u", b, buckets[b]);
}

/* ---- adoption ---------------------------------------------------------------- */

static int
plan(size_t len, size_t nfds, uint64_t n_conns, struct handover_adopt *a, char *err)
{
	/* a cluster with 3 brokers and 2 upstream bootstrap addresses,
	 * max_connections 100 */
	return handover_adopt_plan(payload, len, nfds, 3, 2, n_conns, 100, a, err, 128);
}

Test(adopt, open_both_ways_with_pending_bytes)
{
	struct ipc_conn_record r;
	handover_record_init(&r, 77, 2, 0, true, 5, 9, 0);
	size_t len = make(&r, 9);
	struct handover_adopt a;
	char err[128] = "";
	cr_assert_eq(plan(len, 2, 0, &a, err), 0, "%s", err);
	cr_expect(a.open);
	cr_expect(a.seen_request);
	cr_expect_eq(a.rec.id, 77);
	cr_expect_eq(a.rec.broker_index, 2);
	cr_expect_eq(a.rec.pending_len, 9);
	cr_expect_eq(a.pending, payload + REC, "pending bytes follow the record");
	cr_expect_eq(a.pending[0], 0x5a);
	cr_expect_eq(a.pending[8], 0x5a);
}

Test(adopt, client_only_connects_as_fresh)
{
	struct ipc_conn_record r;
	handover_record_init(&r, 1, -1, 1, false, 0, 0, 0);
	struct handover_adopt a;
	char err[128] = "";
	cr_assert_eq(plan(make(&r, 0), 1, 99, &a, err), 0, "%s", err);
	cr_expect(!a.open);
	cr_expect(!a.seen_request, "no request parsed: TLS sniffing still applies");
	cr_expect_eq(a.rec.upstream_try, 1);
}

Test(adopt, record_must_fit_the_cluster)
{
	struct ipc_conn_record r;
	struct handover_adopt a;
	char err[128] = "";
	handover_record_init(&r, 1, 3, 0, true, 1, 0, 0);  /* broker index 3 of 3 */
	cr_expect_eq(plan(make(&r, 0), 2, 0, &a, err), -1);
	cr_expect(strstr(err, "broker index") != NULL, "%s", err);
	handover_record_init(&r, 1, -1, 2, true, 1, 0, 0);  /* upstream 2 of 2 */
	cr_expect_eq(plan(make(&r, 0), 2, 0, &a, err), -1);
	cr_expect(strstr(err, "upstream") != NULL, "%s", err);
	/* a broker connection's upstream_try is not an index into upstream */
	handover_record_init(&r, 1, 0, 5, true, 1, 0, 0);
	cr_expect_eq(plan(make(&r, 0), 2, 0, &a, err), 0, "%s", err);
}

Test(adopt, refused_at_max_connections)
{
	struct ipc_conn_record r;
	struct handover_adopt a;
	char err[128] = "";
	handover_record_init(&r, 1, -1, 0, true, 1, 0, 0);
	cr_expect_eq(plan(make(&r, 0), 2, 100, &a, err), -1);
	cr_expect(strstr(err, "max_connections") != NULL, "%s", err);
}

Test(adopt, a_bad_record_is_refused)
{
	struct ipc_conn_record r;
	struct handover_adopt a;
	char err[128] = "";
	handover_record_init(&r, 1, -1, 0, true, 1, 4, 0);
	cr_expect_eq(plan(make(&r, 3), 2, 0, &a, err), -1, "pending length");
	cr_expect_eq(plan(make(&r, 4), 1, 0, &a, err), -1, "fd count");
	cr_expect_eq(plan(REC / 2, 2, 0, &a, err), -1, "short");
}

/* An authenticated connection moves with its SASL state; a raw
 * exchange in progress never does */
Test(adopt, sasl_state_travels)
{
	struct sasl s;
	sasl_init(&s);
	s.mech = SASL_MECH_SCRAM_SHA_256;
	s.started = true;
	s.authenticated = true;
	s.rounds = 2;
	struct ipc_conn_record r;
	struct handover_adopt a;
	char err[128] = "";
	handover_record_init(&r, 5, -1, 0, true, 4, 0, sasl_encode(&s));
	cr_expect_neq(r.sasl, 0);
	cr_assert_eq(plan(make(&r, 0), 2, 0, &a, err), 0, "%s", err);
	cr_expect(a.sasl.authenticated);
	cr_expect(!sasl_preauth(&a.sasl), "no pre-authentication limit in the new worker");
	cr_expect_eq(a.sasl.mech, SASL_MECH_SCRAM_SHA_256);
	/* a fresh connection's state is 0 */
	handover_record_init(&r, 6, -1, 0, true, 0, 0, 0);
	cr_assert_eq(plan(make(&r, 0), 2, 0, &a, err), 0, "%s", err);
	cr_expect(sasl_preauth(&a.sasl));
	/* a raw exchange in progress or unknown bits: refused */
	s.phase = SASL_RAW_CLIENT;
	handover_record_init(&r, 7, -1, 0, true, 4, 0, sasl_encode(&s));
	cr_expect_eq(plan(make(&r, 0), 2, 0, &a, err), -1);
	cr_expect(strstr(err, "raw") != NULL, "%s", err);
	handover_record_init(&r, 8, -1, 0, true, 4, 0, 0x80000000u);
	cr_expect_eq(plan(make(&r, 0), 2, 0, &a, err), -1);
	cr_expect(strstr(err, "SASL") != NULL, "%s", err);
}
