/*
 * rewrite_share — broker-address rewriting of the KIP-932 share-group data
 * responses: ShareFetch (key 78) and ShareAcknowledge (key 79), v1-2.  A
 * share consumer fetches from and acknowledges to each partition's leader;
 * a response for a partition the broker no longer leads carries error
 * NOT_LEADER_OR_FOLLOWER, the new leader in CurrentLeader, and that
 * leader's address in NodeEndpoints, which the client dials at once.  So
 * every NodeEndpoints entry must become the proxy's address of its node.
 *
 * Unlike Produce and Fetch (KIP-951), NodeEndpoints is a regular field here,
 * the last one before the top-level tag section.  One validating pass walks
 * every field of the version to the end of the message (records skipped by
 * their length, unread) and records where the array and the tag section
 * start; only then does the broker map run.  The output is the bytes before
 * the array in one copy, the array rebuilt (entries the map rejects and
 * negative node ids dropped, the count re-encoded), and the tag section
 * copied byte for byte.  Bytes after the end of the message are accepted and
 * dropped (kc_rw_end).
 *
 * Schema facts relied on (apache/kafka clients/src/main/resources/common/
 * message/, Kafka 4.4; flexible from v0, so response header v1, and every
 * struct ends with a tag section):
 *
 * ShareFetchResponse.json, valid 1-2:
 *   ThrottleTimeMs int32, ErrorCode int16, ErrorMessage nullable string,
 *   AcquisitionLockTimeoutMs int32 (v1+),
 *   Responses [ TopicId uuid,
 *               Partitions [ PartitionIndex int32, ErrorCode int16,
 *                 ErrorMessage nullable string, AcknowledgeErrorCode int16,
 *                 AcknowledgeErrorMessage nullable string,
 *                 CurrentLeader { LeaderId int32, LeaderEpoch int32 },
 *                 Records records (nullable in v0 only),
 *                 AcquiredRecords [ FirstOffset int64, LastOffset int64,
 *                                   DeliveryCount int16 ] ] ],
 *   NodeEndpoints [ NodeId int32, Host string, Port int32,
 *                   Rack nullable string ]
 *   v2 (KIP-1206, KIP-1222) changes the request only.
 *
 * ShareAcknowledgeResponse.json, valid 1-2:
 *   ThrottleTimeMs int32, ErrorCode int16, ErrorMessage nullable string,
 *   AcquisitionLockTimeoutMs int32 (v2+),
 *   Responses [ TopicId uuid,
 *               Partitions [ PartitionIndex int32, ErrorCode int16,
 *                 ErrorMessage nullable string,
 *                 CurrentLeader { LeaderId int32, LeaderEpoch int32 } ] ],
 *   NodeEndpoints, as in ShareFetch.
 *
 * v0 of both (the early access of Kafka 4.0, removed in 4.1, reachable only
 * with unstable.api.versions.enable) is not parsed: apiversions.c caps both
 * keys at 1-2.
 */
#include "worker/kafka/codec.h"
#include "worker/kafka/rewrite.h"
#include "worker/kafka/rewrite_priv.h"

/* Smallest encodings, for kc_rd_array's early length check. */
#define SH_TOPIC_MIN	18	/* uuid, empty partitions, tags */
#define SF_PART_MIN	22	/* ShareFetch partition: all null/empty */
#define SA_PART_MIN	17	/* ShareAcknowledge partition */
#define SF_ACQ_MIN	19	/* AcquiredRecords element */

static void
sh_leader(struct kc_reader *r)
{
	(void)kc_rd_i32(r);				/* LeaderId */
	(void)kc_rd_i32(r);				/* LeaderEpoch */
	kc_rd_tags(r);
}

static void
sf_partition(struct kc_reader *r)
{
	int32_t i, n;

	(void)kc_rd_i32(r);				/* PartitionIndex */
	(void)kc_rd_i16(r);				/* ErrorCode */
	(void)kc_rd_string(r, true, true, NULL);	/* ErrorMessage */
	(void)kc_rd_i16(r);				/* AcknowledgeErrorCode */
	(void)kc_rd_string(r, true, true, NULL);	/* AcknowledgeErrorMessage */
	sh_leader(r);					/* CurrentLeader */
	(void)kc_rd_bytes(r, true, false, NULL);	/* Records: opaque */
	n = kc_rd_array(r, true, false, SF_ACQ_MIN);	/* AcquiredRecords */
	for (i = 0; i < n && kc_rd_ok(r); i++) {
		(void)kc_rd_i64(r);			/* FirstOffset */
		(void)kc_rd_i64(r);			/* LastOffset */
		(void)kc_rd_i16(r);			/* DeliveryCount */
		kc_rd_tags(r);
	}
	kc_rd_tags(r);
}

static void
sa_partition(struct kc_reader *r)
{
	(void)kc_rd_i32(r);				/* PartitionIndex */
	(void)kc_rd_i16(r);				/* ErrorCode */
	(void)kc_rd_string(r, true, true, NULL);	/* ErrorMessage */
	sh_leader(r);					/* CurrentLeader */
	kc_rd_tags(r);
}

int
kc_rw_share(int16_t key, int v, const uint8_t *frame, size_t len,
    const struct kc_broker_map *map, uint8_t **out, size_t *out_len, size_t *trailing,
    char *err, size_t errlen)
{
	struct kc_reader r;
	struct kc_ep_node e;
	bool fetch = key == KC_API_SHARE_FETCH;
	size_t ne_off, entries_off, tags_off, end;
	int32_t i, j, n, np;

	if (kc_rw_check_frame(frame, len, err, errlen) != KC_OK)
		return KC_MALFORMED;
	kc_rd_init(&r, frame, len);
	kc_rw_skip_header(&r, key, (int16_t)v);
	(void)kc_rd_i32(&r);				/* ThrottleTimeMs */
	(void)kc_rd_i16(&r);				/* ErrorCode */
	(void)kc_rd_string(&r, true, true, NULL);	/* ErrorMessage */
	if (fetch || v >= 2)
		(void)kc_rd_i32(&r);			/* AcquisitionLockTimeoutMs */
	n = kc_rd_array(&r, true, false, SH_TOPIC_MIN);	/* Responses */
	for (i = 0; i < n && kc_rd_ok(&r); i++) {
		kc_rd_skip(&r, 16);			/* TopicId */
		np = kc_rd_array(&r, true, false, fetch ? SF_PART_MIN : SA_PART_MIN);
		for (j = 0; j < np && kc_rd_ok(&r); j++) {
			if (fetch)
				sf_partition(&r);
			else
				sa_partition(&r);
		}
		kc_rd_tags(&r);
	}
	ne_off = (size_t)(r.p - frame);
	n = kc_rd_array(&r, true, false, KC_EP_NODE_MIN);	/* NodeEndpoints */
	entries_off = (size_t)(r.p - frame);
	for (i = 0; i < n && kc_rd_ok(&r); i++)
		kc_ep_node(&r, false, &e);
	tags_off = (size_t)(r.p - frame);
	kc_rd_tags(&r);
	if (kc_rw_end(&r, frame, &end, err, errlen) != KC_OK)
		return KC_MALFORMED;
	*trailing = len - end;
	len = end;	/* trailing bytes are dropped */

	return kc_ep_rebuild(frame, len, ne_off, entries_off, tags_off, n, false, false, map,
	    out, out_len, err, errlen);
}
