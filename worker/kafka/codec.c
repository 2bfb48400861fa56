/*
 * codec — Kafka wire primitives and header rules for ferry.
 *
 * Everything here is a pure function over byte buffers: the bounded reader
 * and writer used by the rewriters, the flexible-version table that decides
 * request/response header versions, request-header parsing with a precise
 * NEED_MORE / MALFORMED split, and Produce acks extraction (acks=0 requests
 * get no response, so the worker must not queue them).
 *
 * Sources: apache/kafka clients/src/main/resources/common/message/ JSON schemas
 * (validVersions / flexibleVersions), ApiMessageTypeGenerator (header
 * versions), ByteUtils (varints), MessageDataGenerator (0x7fff string limit).
 */
#include "worker/kafka/codec.h"

#include <string.h>

#include "common/kafka_api.h"

/*
 * First flexible version of every known API key, -1 = never flexible.
 * apache/kafka message schemas (Kafka 4.4, key numbers from ApiKeys).
 */
static const int8_t kc_flex_from[KC_API_KEY_MAX_KNOWN + 1] = {
	[0] = 9,	/* Produce */
	[1] = 12,	/* Fetch */
	[2] = 6,	/* ListOffsets */
	[3] = 9,	/* Metadata */
	[4] = 4,	/* LeaderAndIsr */
	[5] = 2,	/* StopReplica */
	[6] = 6,	/* UpdateMetadata */
	[7] = 3,	/* ControlledShutdown (v3 existed before 4.0 trimmed it) */
	[8] = 8,	/* OffsetCommit */
	[9] = 6,	/* OffsetFetch */
	[10] = 3,	/* FindCoordinator */
	[11] = 6,	/* JoinGroup */
	[12] = 4,	/* Heartbeat */
	[13] = 4,	/* LeaveGroup */
	[14] = 4,	/* SyncGroup */
	[15] = 5,	/* DescribeGroups */
	[16] = 3,	/* ListGroups */
	[17] = -1,	/* SaslHandshake: never */
	[18] = 3,	/* ApiVersions */
	[19] = 5,	/* CreateTopics */
	[20] = 4,	/* DeleteTopics */
	[21] = 2,	/* DeleteRecords */
	[22] = 2,	/* InitProducerId */
	[23] = 4,	/* OffsetForLeaderEpoch */
	[24] = 3,	/* AddPartitionsToTxn */
	[25] = 3,	/* AddOffsetsToTxn */
	[26] = 3,	/* EndTxn */
	[27] = 1,	/* WriteTxnMarkers */
	[28] = 3,	/* TxnOffsetCommit */
	[29] = 2,	/* DescribeAcls */
	[30] = 2,	/* CreateAcls */
	[31] = 2,	/* DeleteAcls */
	[32] = 4,	/* DescribeConfigs */
	[33] = 2,	/* AlterConfigs */
	[34] = 2,	/* AlterReplicaLogDirs */
	[35] = 2,	/* DescribeLogDirs */
	[36] = 2,	/* SaslAuthenticate */
	[37] = 2,	/* CreatePartitions */
	[38] = 2,	/* CreateDelegationToken */
	[39] = 2,	/* RenewDelegationToken */
	[40] = 2,	/* ExpireDelegationToken */
	[41] = 2,	/* DescribeDelegationToken */
	[42] = 2,	/* DeleteGroups */
	[43] = 2,	/* ElectLeaders */
	[44] = 1,	/* IncrementalAlterConfigs */
	[45] = 0,	/* AlterPartitionReassignments */
	[46] = 0,	/* ListPartitionReassignments */
	[47] = -1,	/* OffsetDelete: never */
	[48] = 1,	/* DescribeClientQuotas */
	[49] = 1,	/* AlterClientQuotas */
	[50] = 0,	/* DescribeUserScramCredentials */
	[51] = 0,	/* AlterUserScramCredentials */
	[52] = 0,	/* Vote */
	[53] = 1,	/* BeginQuorumEpoch */
	[54] = 1,	/* EndQuorumEpoch */
	/* 55 .. 94: flexible from v0 (zero-initialised) */
};

void
kc_set_err(char *err, size_t errlen, const char *why)
{
	size_t n;

	if (err == NULL || errlen == 0)
		return;
	n = strlen(why);
	if (n >= errlen)
		n = errlen - 1;
	memcpy(err, why, n);
	err[n] = '\0';
}

_Static_assert(KC_API_KEY_MAX_KNOWN == KAFKA_API_KEY_MAX_KNOWN,
	       "common/kafka_api.h names the keys the codec knows");

const char *
kc_api_name(int16_t api_key)
{
	return kafka_api_name(api_key);
}

const char *
kc_status_str(enum kc_status s)
{
	switch (s) {
	case KC_OK:
		return "ok";
	case KC_NEED_MORE:
		return "need more";
	case KC_MALFORMED:
		return "malformed";
	}
	return "unknown";
}

bool
kc_is_flexible(int16_t api_key, int16_t api_version)
{
	int from;

	if (api_key < 0 || api_version < 0)
		return false;
	if (api_key > KC_API_KEY_MAX_KNOWN)
		return true;
	from = kc_flex_from[api_key];
	return from >= 0 && api_version >= from;
}

int
kc_request_header_version(int16_t api_key, int16_t api_version)
{
	if (api_key == KC_API_CONTROLLED_SHUTDOWN && api_version == 0)
		return 0;
	return kc_is_flexible(api_key, api_version) ? 2 : 1;
}

int
kc_response_header_version(int16_t api_key, int16_t api_version)
{
	if (api_key == KC_API_API_VERSIONS)
		return 0;
	return kc_is_flexible(api_key, api_version) ? 1 : 0;
}

/* ---- varints ---- */

size_t
kc_uvarint_size(uint32_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

size_t
kc_put_uvarint(uint8_t *p, uint32_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

int
kc_get_uvarint(const uint8_t *p, size_t n, uint32_t *v)
{
	uint32_t val = 0;
	size_t i;

	for (i = 0; i < 5; i++) {
		if (i >= n)
			return 0;
		/* 5th byte: no continuation bit and no bits above 32 */
		if (i == 4 && (p[i] & 0xf0) != 0)
			return -1;
		val |= (uint32_t)(p[i] & 0x7f) << (7 * i);
		if ((p[i] & 0x80) == 0) {
			*v = val;
			return (int)i + 1;
		}
	}
	return -1;
}

/* ---- reader ---- */

void
kc_rd_init(struct kc_reader *r, const uint8_t *buf, size_t len)
{
	r->p = buf;
	r->end = buf + len;
	r->avail = r->end;
	r->status = KC_OK;
	r->err = NULL;
}

void
kc_rd_init_partial(struct kc_reader *r, const uint8_t *buf, size_t frame_len, size_t avail)
{
	kc_rd_init(r, buf, frame_len);
	if (avail < frame_len)
		r->avail = buf + avail;
}

bool
kc_rd_fail(struct kc_reader *r, int status, const char *why)
{
	if (r->status == KC_OK) {
		r->status = status;
		r->err = why;
	}
	return false;
}

bool
kc_rd_need(struct kc_reader *r, size_t n)
{
	if (r->status != KC_OK)
		return false;
	if (n > (size_t)(r->end - r->p))
		return kc_rd_fail(r, KC_MALFORMED, "length past end of frame");
	if (n > (size_t)(r->avail - r->p))
		return kc_rd_fail(r, KC_NEED_MORE, "truncated");
	return true;
}

bool
kc_rd_skip(struct kc_reader *r, size_t n)
{
	if (!kc_rd_need(r, n))
		return false;
	r->p += n;
	return true;
}

int8_t
kc_rd_i8(struct kc_reader *r)
{
	int8_t v;

	if (!kc_rd_need(r, 1))
		return 0;
	v = (int8_t)r->p[0];
	r->p += 1;
	return v;
}

int16_t
kc_rd_i16(struct kc_reader *r)
{
	int16_t v;

	if (!kc_rd_need(r, 2))
		return 0;
	v = kc_get_i16(r->p);
	r->p += 2;
	return v;
}

int32_t
kc_rd_i32(struct kc_reader *r)
{
	int32_t v;

	if (!kc_rd_need(r, 4))
		return 0;
	v = kc_get_i32(r->p);
	r->p += 4;
	return v;
}

int64_t
kc_rd_i64(struct kc_reader *r)
{
	uint64_t u;

	if (!kc_rd_need(r, 8))
		return 0;
	u = (uint64_t)(uint32_t)kc_get_i32(r->p) << 32 |
	    (uint32_t)kc_get_i32(r->p + 4);
	r->p += 8;
	return (int64_t)u;
}

uint32_t
kc_rd_uvarint(struct kc_reader *r)
{
	uint32_t v = 0;
	int n;

	if (r->status != KC_OK)
		return 0;
	n = kc_get_uvarint(r->p, (size_t)(r->avail - r->p), &v);
	if (n < 0) {
		kc_rd_fail(r, KC_MALFORMED, "varint longer than 5 bytes");
		return 0;
	}
	if (n == 0) {
		/* ran out: is it the frame or just the bytes present? */
		if (r->avail < r->end)
			kc_rd_fail(r, KC_NEED_MORE, "truncated");
		else
			kc_rd_fail(r, KC_MALFORMED, "varint past end of frame");
		return 0;
	}
	r->p += n;
	return v;
}

int32_t
kc_rd_string(struct kc_reader *r, bool compact, bool nullable, const uint8_t **s)
{
	int32_t len;

	if (s != NULL)
		*s = NULL;
	if (compact) {
		uint32_t u = kc_rd_uvarint(r);

		if (r->status != KC_OK)
			return 0;
		if (u == 0)
			len = -1;
		else if (u - 1 > KC_MAX_STRING) {
			kc_rd_fail(r, KC_MALFORMED, "string longer than 0x7fff");
			return 0;
		} else
			len = (int32_t)(u - 1);
	} else {
		len = kc_rd_i16(r);
		if (r->status != KC_OK)
			return 0;
		if (len < -1) {
			kc_rd_fail(r, KC_MALFORMED, "negative string length");
			return 0;
		}
	}
	if (len == -1) {
		if (!nullable) {
			kc_rd_fail(r, KC_MALFORMED, "null in non-nullable string");
			return 0;
		}
		return -1;
	}
	if (!kc_rd_need(r, (size_t)len))
		return 0;
	if (s != NULL)
		*s = r->p;
	r->p += len;
	return len;
}

int32_t
kc_rd_bytes(struct kc_reader *r, bool compact, bool nullable, const uint8_t **s)
{
	int64_t len;

	if (s != NULL)
		*s = NULL;
	if (compact) {
		uint32_t u = kc_rd_uvarint(r);

		if (r->status != KC_OK)
			return 0;
		len = (int64_t)u - 1;
	} else {
		len = kc_rd_i32(r);
		if (r->status != KC_OK)
			return 0;
		if (len < -1) {
			kc_rd_fail(r, KC_MALFORMED, "negative bytes length");
			return 0;
		}
	}
	if (len == -1) {
		if (!nullable) {
			kc_rd_fail(r, KC_MALFORMED, "null in non-nullable bytes");
			return 0;
		}
		return -1;
	}
	if (len > INT32_MAX) {
		kc_rd_fail(r, KC_MALFORMED, "bytes too long");
		return 0;
	}
	if (!kc_rd_need(r, (size_t)len))
		return 0;
	if (s != NULL)
		*s = r->p;
	r->p += len;
	return (int32_t)len;
}

int32_t
kc_rd_array(struct kc_reader *r, bool compact, bool nullable, size_t min_elem)
{
	int64_t n;

	if (compact) {
		uint32_t u = kc_rd_uvarint(r);

		if (r->status != KC_OK)
			return 0;
		n = (int64_t)u - 1;
	} else {
		n = kc_rd_i32(r);
		if (r->status != KC_OK)
			return 0;
		if (n < -1) {
			kc_rd_fail(r, KC_MALFORMED, "negative array length");
			return 0;
		}
	}
	if (n == -1) {
		if (!nullable) {
			kc_rd_fail(r, KC_MALFORMED, "null in non-nullable array");
			return 0;
		}
		return -1;
	}
	if (n > INT32_MAX ||
	    (uint64_t)n * min_elem > (uint64_t)(r->end - r->p)) {
		kc_rd_fail(r, KC_MALFORMED, "array length past end of frame");
		return 0;
	}
	return (int32_t)n;
}

bool
kc_rd_i32_array(struct kc_reader *r, bool compact)
{
	int32_t n = kc_rd_array(r, compact, false, 4);

	if (r->status != KC_OK)
		return false;
	return kc_rd_skip(r, (size_t)n * 4);
}

bool
kc_rd_tags(struct kc_reader *r)
{
	uint32_t n, i;

	n = kc_rd_uvarint(r);
	for (i = 0; i < n && r->status == KC_OK; i++) {
		uint32_t size;

		(void)kc_rd_uvarint(r);		/* tag */
		size = kc_rd_uvarint(r);
		if (r->status != KC_OK)
			break;
		if (size > (size_t)(r->end - r->p))
			return kc_rd_fail(r, KC_MALFORMED, "tagged field past end of frame");
		kc_rd_skip(r, size);
	}
	return r->status == KC_OK;
}

/* ---- writer ---- */

void
kc_wr_init(struct kc_writer *w, uint8_t *buf, size_t cap)
{
	w->p = buf;
	w->end = buf + cap;
	w->overflow = false;
}

void
kc_wr_bytes(struct kc_writer *w, const void *src, size_t n)
{
	if (w->overflow || n > (size_t)(w->end - w->p)) {
		w->overflow = true;
		return;
	}
	if (n > 0)
		memcpy(w->p, src, n);
	w->p += n;
}

void
kc_wr_i8(struct kc_writer *w, int8_t v)
{
	uint8_t b = (uint8_t)v;

	kc_wr_bytes(w, &b, 1);
}

void
kc_wr_i16(struct kc_writer *w, int16_t v)
{
	uint8_t b[2];

	kc_put_i16(b, v);
	kc_wr_bytes(w, b, 2);
}

void
kc_wr_i32(struct kc_writer *w, int32_t v)
{
	uint8_t b[4];

	kc_put_i32(b, v);
	kc_wr_bytes(w, b, 4);
}

void
kc_wr_uvarint(struct kc_writer *w, uint32_t v)
{
	uint8_t b[5];

	kc_wr_bytes(w, b, kc_put_uvarint(b, v));
}

void
kc_wr_string(struct kc_writer *w, bool compact, const char *s, size_t len)
{
	if (s != NULL && len > KC_MAX_STRING) {
		w->overflow = true;
		return;
	}
	if (compact)
		kc_wr_uvarint(w, s == NULL ? 0 : (uint32_t)len + 1);
	else
		kc_wr_i16(w, s == NULL ? -1 : (int16_t)len);
	if (s != NULL)
		kc_wr_bytes(w, s, len);
}

void
kc_wr_request_header(struct kc_writer *w, int16_t key, int16_t version, int32_t corr,
    const char *client_id)
{
	kc_wr_i32(w, 0);
	kc_wr_i16(w, key);
	kc_wr_i16(w, version);
	kc_wr_i32(w, corr);
	kc_wr_string(w, false, client_id, client_id != NULL ? strlen(client_id) : 0);
	if (kc_request_header_version(key, version) >= 2)
		kc_wr_uvarint(w, 0);	/* header tags */
}

size_t
kc_wr_frame_end(struct kc_writer *w, uint8_t *buf)
{
	size_t n;

	if (w->overflow)
		return 0;
	n = (size_t)(w->p - buf);
	kc_put_i32(buf, (int32_t)(n - 4));
	return n;
}

/* ---- headers ---- */

static int
kc_rd_result(const struct kc_reader *r, char *err, size_t errlen)
{
	if (r->status == KC_MALFORMED)
		kc_set_err(err, errlen, r->err);
	return r->status;
}

int
kc_parse_request_header(const uint8_t *buf, size_t avail, uint64_t max_frame,
    struct kc_req_header *h, char *err, size_t errlen)
{
	struct kc_reader r;
	const uint8_t *cid;
	int32_t size, cid_len = -1;

	if (avail < 4)
		return KC_NEED_MORE;
	size = kc_get_i32(buf);
	if (size < 0) {
		kc_set_err(err, errlen, "negative request size");
		return KC_MALFORMED;
	}
	if (size < 8) {
		kc_set_err(err, errlen, "request size below 8");
		return KC_MALFORMED;
	}
	if ((uint64_t)size > max_frame) {
		kc_set_err(err, errlen, "request larger than max frame");
		return KC_MALFORMED;
	}
	if (avail < 12)
		return KC_NEED_MORE;

	memset(h, 0, sizeof(*h));
	h->size = size;
	h->api_key = kc_get_i16(buf + 4);
	h->api_version = kc_get_i16(buf + 6);
	h->correlation_id = kc_get_i32(buf + 8);
	h->client_id_len = -1;
	h->client_id = NULL;
	if (h->api_key < 0) {
		kc_set_err(err, errlen, "negative api key");
		return KC_MALFORMED;
	}
	if (h->api_version < 0) {
		kc_set_err(err, errlen, "negative api version");
		return KC_MALFORMED;
	}
	h->header_version = kc_request_header_version(h->api_key, h->api_version);

	kc_rd_init_partial(&r, buf, (size_t)size + 4, avail);
	r.p += 12;
	if (h->header_version >= 1) {
		cid_len = kc_rd_string(&r, false, true, &cid);
		if (r.status == KC_OK) {
			h->client_id_len = (int16_t)cid_len;
			h->client_id = cid;
		}
	}
	if (h->header_version >= 2)
		kc_rd_tags(&r);
	if (r.status != KC_OK)
		return kc_rd_result(&r, err, errlen);
	h->header_len = (size_t)(r.p - buf);
	return KC_OK;
}

int
kc_parse_response_prefix(const uint8_t *buf, size_t avail, uint64_t max_frame,
    int32_t *size, int32_t *correlation_id, char *err, size_t errlen)
{
	int32_t sz;

	if (avail < 4)
		return KC_NEED_MORE;
	sz = kc_get_i32(buf);
	if (sz < 0) {
		kc_set_err(err, errlen, "negative response size");
		return KC_MALFORMED;
	}
	if (sz < 4) {
		kc_set_err(err, errlen, "response size below 4");
		return KC_MALFORMED;
	}
	if ((uint64_t)sz > max_frame) {
		kc_set_err(err, errlen, "response larger than max frame");
		return KC_MALFORMED;
	}
	if (avail < 8)
		return KC_NEED_MORE;
	*size = sz;
	*correlation_id = kc_get_i32(buf + 4);
	return KC_OK;
}

int
kc_produce_acks(const uint8_t *buf, size_t avail, const struct kc_req_header *h, int16_t *acks)
{
	struct kc_reader r;
	size_t frame_len;
	int16_t v;

	if (h->api_key != KC_API_PRODUCE || h->size < 8)
		return KC_MALFORMED;
	frame_len = (size_t)h->size + 4;
	if (h->header_len < 12 || h->header_len > frame_len)
		return KC_MALFORMED;
	if (avail < h->header_len)
		return KC_NEED_MORE;
	v = h->api_version;
	kc_rd_init_partial(&r, buf, frame_len, avail);
	r.p += h->header_len;
	if (v >= 3)
		(void)kc_rd_string(&r, v >= 9, true, NULL);	/* transactional_id */
	*acks = kc_rd_i16(&r);
	return r.status;
}
