/*
 * kafka_share_fixtures — ShareFetch (78) and ShareAcknowledge (79) response
 * builders for test_share and test_matrix, on top of kafka_fixtures.h, from
 * the schema facts below, independently of the code under test.
 *
 * Schema facts (apache/kafka clients/src/main/resources/common/message/,
 * Kafka 4.4; flexible from v0, so response header v1; valid versions 1-2):
 *  - ShareFetchResponse: ThrottleTimeMs i32, ErrorCode i16, ErrorMessage
 *    nstring, AcquisitionLockTimeoutMs i32 v1+, Responses [TopicId uuid,
 *    Partitions [PartitionIndex i32, ErrorCode i16, ErrorMessage nstring,
 *    AcknowledgeErrorCode i16, AcknowledgeErrorMessage nstring,
 *    CurrentLeader {LeaderId i32, LeaderEpoch i32}, Records records
 *    (nullable in v0 only), AcquiredRecords [FirstOffset i64, LastOffset
 *    i64, DeliveryCount i16]]], NodeEndpoints [NodeId i32, Host string,
 *    Port i32, Rack nstring].  v2 changes the request only.
 *  - ShareAcknowledgeResponse: ThrottleTimeMs, ErrorCode, ErrorMessage,
 *    AcquisitionLockTimeoutMs i32 v2+, Responses [TopicId uuid, Partitions
 *    [PartitionIndex i32, ErrorCode i16, ErrorMessage nstring,
 *    CurrentLeader {LeaderId i32, LeaderEpoch i32}]], NodeEndpoints (as
 *    ShareFetch).
 * Every struct ends with a tag section; the builders put unknown tags in
 * some of them (copied byte for byte by the rewriter).
 */
#ifndef FERRY_TESTS_UNIT_KAFKA_SHARE_FIXTURES_H
#define FERRY_TESTS_UNIT_KAFKA_SHARE_FIXTURES_H

#include "tests/unit/kafka_fixtures.h"

#define SH_TOPIC_A "\x40\x41\x42\x43\x44\x45\x46\x47\x48\x49\x4a\x4b\x4c\x4d\x4e\x4f"
#define SH_TOPIC_B "\x50\x51\x52\x53\x54\x55\x56\x57\x58\x59\x5a\x5b\x5c\x5d\x5e\x5f"

struct sh_opts {
	const struct node *ne;	/* NodeEndpoints entries */
	size_t nne;
	bool top_tag;		/* an unknown top-level tag 5 after NodeEndpoints */
	size_t big;		/* extra record bytes in the first partition */
};

static inline void
bb_sh_leader(struct bb *b, int32_t id, int32_t epoch, bool tagged)
{
	bb_i32(b, id);
	bb_i32(b, epoch);
	if (tagged)
		bb_raw(b, "\x01\x02\x01\x77", 4);	/* unknown tag 2 */
	else
		bb_u8(b, 0);
}

static inline void
bb_sh_endpoints(struct bb *b, const struct sh_opts *o)
{
	bb_node_endpoints(b, o != NULL ? o->ne : NULL, o != NULL ? o->nne : 0);
	if (o != NULL && o->top_tag)
		bb_raw(b, "\x01\x05\x03\xab\xcd\xef", 6);
	else
		bb_u8(b, 0);
}

/* ShareFetch: one topic of two partitions (records and two acquired
 * batches; NOT_LEADER_OR_FOLLOWER with messages, empty records), one of
 * one partition (no acquired records). */
static inline void
build_sf(struct bb *b, int v, const struct sh_opts *o)
{
	uint8_t *rec;
	size_t rn = 90 + (o != NULL ? o->big : 0);

	bb_init(b);
	bb_head(b, true);
	bb_i32(b, 7);					/* ThrottleTimeMs */
	bb_i16(b, 0);					/* ErrorCode */
	bb_str(b, true, NULL);				/* ErrorMessage */
	if (v >= 1)
		bb_i32(b, 30000);			/* AcquisitionLockTimeoutMs */
	bb_arr(b, true, 2);				/* Responses */
	bb_raw(b, SH_TOPIC_A, 16);
	bb_arr(b, true, 2);				/* Partitions */
	/* partition 0: records, two acquired batches */
	bb_i32(b, 0);
	bb_i16(b, 0);
	bb_str(b, true, NULL);
	bb_i16(b, 0);
	bb_str(b, true, NULL);
	bb_sh_leader(b, 1, 5, false);
	rec = malloc(rn);
	cr_assert_not_null(rec);
	fill_records(rec, rn, (uint32_t)(78 + v));
	bb_bytes(b, true, rec, rn);
	free(rec);
	bb_arr(b, true, 2);				/* AcquiredRecords */
	bb_i64(b, 0);
	bb_i64(b, 9);
	bb_i16(b, 1);
	bb_u8(b, 0);
	bb_i64(b, 10);
	bb_i64(b, 19);
	bb_i16(b, 2);
	bb_raw(b, "\x01\x04\x01\x44", 4);		/* unknown tag 4 */
	bb_raw(b, "\x01\x06\x02\x66\x66", 5);		/* partition tag 6 */
	/* partition 1: not the leader any more */
	bb_i32(b, 1);
	bb_i16(b, 6);					/* NOT_LEADER_OR_FOLLOWER */
	bb_str(b, true, "not the leader");
	bb_i16(b, 0);
	bb_str(b, true, "acks not applied");
	bb_sh_leader(b, 3, 8, true);
	bb_bytes(b, true, (const uint8_t *)"", 0);	/* Records: empty */
	bb_arr(b, true, 0);
	bb_u8(b, 0);
	bb_u8(b, 0);					/* topic tags */
	bb_raw(b, SH_TOPIC_B, 16);
	bb_arr(b, true, 1);
	bb_i32(b, 4);
	bb_i16(b, 0);
	bb_str(b, true, NULL);
	bb_i16(b, 0);
	bb_str(b, true, NULL);
	bb_sh_leader(b, 2, 1, false);
	bb_bytes(b, true, (const uint8_t *)"\x00\x01", 2);
	bb_arr(b, true, 0);
	bb_u8(b, 0);
	bb_raw(b, "\x01\x01\x01\x11", 4);		/* topic tag 1 */
	bb_sh_endpoints(b, o);
	bb_fix(b);
}

/* ShareAcknowledge: two topics, three partitions, one NOT_LEADER. */
static inline void
build_sa(struct bb *b, int v, const struct sh_opts *o)
{
	bb_init(b);
	bb_head(b, true);
	bb_i32(b, 3);					/* ThrottleTimeMs */
	bb_i16(b, 0);					/* ErrorCode */
	bb_str(b, true, "fine");			/* ErrorMessage */
	if (v >= 2)
		bb_i32(b, 15000);			/* AcquisitionLockTimeoutMs */
	bb_arr(b, true, 2);				/* Responses */
	bb_raw(b, SH_TOPIC_A, 16);
	bb_arr(b, true, 2);
	bb_i32(b, 0);
	bb_i16(b, 0);
	bb_str(b, true, NULL);
	bb_sh_leader(b, 1, 5, false);
	bb_u8(b, 0);
	bb_i32(b, 1);
	bb_i16(b, 6);
	bb_str(b, true, "not the leader");
	bb_sh_leader(b, 3, 8, true);
	bb_raw(b, "\x01\x06\x02\x66\x66", 5);
	bb_u8(b, 0);
	bb_raw(b, SH_TOPIC_B, 16);
	bb_arr(b, true, 1);
	bb_i32(b, 4);
	bb_i16(b, 0);
	bb_str(b, true, NULL);
	bb_sh_leader(b, 2, 1, false);
	bb_u8(b, 0);
	bb_raw(b, "\x01\x01\x01\x11", 4);
	bb_sh_endpoints(b, o);
	bb_fix(b);
}

/* build_sf or build_sa by key */
static inline void
build_share(struct bb *b, int16_t key, int v, const struct sh_opts *o)
{
	if (key == KC_API_SHARE_FETCH)
		build_sf(b, v, o);
	else
		build_sa(b, v, o);
}

#endif
