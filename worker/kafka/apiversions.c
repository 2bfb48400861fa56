/*
 * apiversions — the proxy's version policy (caps of parsed APIs, refused
 * keys) and the ApiVersions messages that carry it to clients: intersection
 * of upstream responses, the synthetic UNSUPPORTED_VERSION reply, and the
 * requests of the worker's own metadata fetch.
 *
 * Sources: apache/kafka ApiVersionsRequest/Response.json (0-5, flexible 3+,
 * response header always v0; v4 and v5 change the request only), KIP-511
 * (v0-body fallback on UNSUPPORTED_VERSION), MetadataRequest.json (field versions), and the
 * "listeners" of each message schema for the refused list.
 */
#include "worker/kafka/apiversions.h"

#include <string.h>

#include "worker/kafka/codec.h"
#include "worker/kafka/rewrite_priv.h"

/*
 * The version policy: one row per API ferry caps or refuses, each with its
 * written reason.  docs/operations.md shows this table (rendered from it and
 * compared by tests/unit/test_api_doc.c), and the real-Kafka suite reads it
 * (tests/peers/api_policy) to fail when a broker advertises a version or a
 * key that ferry drops without a reason here.
 *
 * A cap is the newest version whose layout ferry parses, checked against
 * the schemas of Kafka 4.4.0 (apache/kafka clients/src/main/resources/
 * common/message) and a real broker: a newer one is not let through until
 * its schema has been read.  `held` says why versions above the cap that
 * Kafka already defines are not let through; NULL when the cap is the
 * newest version known.  Raising a cap is a one-line change here (once the
 * parser handles the new version).
 */
static const char why_zk[] = "ZooKeeper-era controller-to-broker API (removed in Kafka 4.0)";
static const char why_quorum[] = "KRaft quorum (controller-to-controller) API";
static const char why_share_fetch[] = "share groups (KIP-932): NodeEndpoints of the "
    "responses rewritten. v0 was the early access of Kafka 4.0 (removed in 4.1) and is "
    "not parsed";
static const char why_share_state[] =
    "inter-broker: share-partition leader to share coordinator (share-group state)";

static const struct kc_api_policy kc_policy[] = {
	{ 0, KC_POLICY_CAP, 0, 13, "KIP-951 NodeEndpoints of v10+ responses rewritten; "
	    "acks read from every request (acks=0 is never answered). v13 names topics by "
	    "id (KIP-516), which changes no address", NULL },
	{ 1, KC_POLICY_CAP, 0, 18, "KIP-951 NodeEndpoints of v16+ responses rewritten. "
	    "v18 (KIP-1166) adds a follower's high watermark to the request only", NULL },
	{ 3, KC_POLICY_CAP, 0, 13, "broker addresses rewritten", NULL },
	{ 4, KC_POLICY_REFUSED, 0, -1, why_zk, NULL },
	{ 5, KC_POLICY_REFUSED, 0, -1, why_zk, NULL },
	{ 6, KC_POLICY_REFUSED, 0, -1, why_zk, NULL },
	{ 7, KC_POLICY_REFUSED, 0, -1, "broker-to-controller API (shutdown of a broker)",
	    NULL },
	{ 10, KC_POLICY_CAP, 0, 6, "coordinator addresses rewritten", NULL },
	{ 17, KC_POLICY_CAP, 0, 1, "read: the mechanism and outcome of pass-through SASL",
	    NULL },
	{ 18, KC_POLICY_CAP, 0, 5, "intersected with this policy; a higher version is "
	    "answered UNSUPPORTED_VERSION (KIP-511) and the client retries lower. v5 "
	    "(KIP-1242) sends the client's cluster and node id for the broker to check: ferry "
	    "connects a broker port to the broker of that node id", NULL },
	{ 27, KC_POLICY_REFUSED, 0, -1, "inter-broker: the transaction coordinator writes "
	    "commit and abort markers to partition leaders", NULL },
	{ 36, KC_POLICY_CAP, 0, 2, "read: the outcome of pass-through SASL", NULL },
	{ 52, KC_POLICY_REFUSED, 0, -1, why_quorum, NULL },
	{ 53, KC_POLICY_REFUSED, 0, -1, why_quorum, NULL },
	{ 54, KC_POLICY_REFUSED, 0, -1, why_quorum, NULL },
	{ 55, KC_POLICY_REFUSED, 0, -1, "controller quorum: v2 responses list the "
	    "controllers' listener addresses, which ferry neither rewrites nor serves",
	    NULL },
	{ 56, KC_POLICY_REFUSED, 0, -1, "broker-to-controller API (ISR changes)", NULL },
	{ 58, KC_POLICY_REFUSED, 0, -1, "broker-to-controller API (forwarded requests)",
	    NULL },
	{ 59, KC_POLICY_REFUSED, 0, -1, why_quorum, NULL },
	{ 60, KC_POLICY_CAP, 0, 2, "broker addresses rewritten; a list of controllers "
	    "(EndpointType 2) is answered empty", NULL },
	{ 62, KC_POLICY_REFUSED, 0, -1, "broker-to-controller API (registration)", NULL },
	{ 63, KC_POLICY_REFUSED, 0, -1, "broker-to-controller API (heartbeat)", NULL },
	{ 67, KC_POLICY_REFUSED, 0, -1, "broker-to-controller API (producer id blocks)",
	    NULL },
	{ 70, KC_POLICY_REFUSED, 0, -1, why_quorum, NULL },
	{ 73, KC_POLICY_REFUSED, 0, -1, "broker-to-controller API (log directories)", NULL },
	{ 78, KC_POLICY_CAP, 1, 2, why_share_fetch, NULL },
	{ 79, KC_POLICY_CAP, 1, 2, why_share_fetch, NULL },
	{ 80, KC_POLICY_REFUSED, 0, -1, "controller quorum membership: the request carries "
	    "the controller's listener addresses; ferry fronts brokers, not controllers",
	    NULL },
	{ 81, KC_POLICY_REFUSED, 0, -1, "controller quorum membership: ferry does not "
	    "expose the controllers (DescribeQuorum refused, DescribeCluster's controllers "
	    "answered empty); manage them at the controllers", NULL },
	{ 82, KC_POLICY_REFUSED, 0, -1, why_quorum, NULL },
	{ 83, KC_POLICY_REFUSED, 0, -1, why_share_state, NULL },
	{ 84, KC_POLICY_REFUSED, 0, -1, why_share_state, NULL },
	{ 85, KC_POLICY_REFUSED, 0, -1, why_share_state, NULL },
	{ 86, KC_POLICY_REFUSED, 0, -1, why_share_state, NULL },
	{ 87, KC_POLICY_REFUSED, 0, -1, why_share_state, NULL },
	{ 94, KC_POLICY_REFUSED, 0, -1, "controller quorum membership, like RemoveRaftVoter: "
	    "ferry does not expose the controllers; manage them at the controllers", NULL },
};

#define NELEM(a)	(sizeof(a) / sizeof((a)[0]))

const struct kc_api_policy *
kc_api_policy(size_t *n)
{
	*n = NELEM(kc_policy);
	return kc_policy;
}

static const struct kc_api_policy *
kc_policy_of(int16_t api_key)
{
	size_t i;

	for (i = 0; i < NELEM(kc_policy); i++)
		if (kc_policy[i].key == api_key)
			return &kc_policy[i];
	return NULL;
}

bool
kc_api_refused(int16_t api_key)
{
	const struct kc_api_policy *p;

	/* Keys newer than the codec's table: their header layout is a guess
	 * and nothing has vetted what their responses carry. */
	if (api_key > KC_API_KEY_MAX_KNOWN)
		return true;
	p = kc_policy_of(api_key);
	return p != NULL && p->kind == KC_POLICY_REFUSED;
}

bool
kc_api_cap(int16_t api_key, int16_t *min, int16_t *max)
{
	const struct kc_api_policy *p = kc_policy_of(api_key);

	if (p == NULL || p->kind != KC_POLICY_CAP)
		return false;
	if (min != NULL)
		*min = p->min;
	if (max != NULL)
		*max = p->max;
	return true;
}

bool
kc_request_allowed(int16_t api_key, int16_t api_version)
{
	int16_t min, max;

	if (api_key < 0 || api_version < 0 || kc_api_refused(api_key))
		return false;
	if (kc_api_cap(api_key, &min, &max))
		return api_version >= min && api_version <= max;
	return true;
}

/* ---- parsing ---- */

struct av_pos {
	int16_t error_code;
	int v;			/* body layout actually parsed */
	int32_t n;
	size_t count_off, count_width, entries_off, rest_off;
	size_t end_off;		/* end of the message; trailing bytes follow */
};

static void
av_entry(struct kc_reader *r, int v, int16_t *key, int16_t *min, int16_t *max)
{
	*key = kc_rd_i16(r);
	*min = kc_rd_i16(r);
	*max = kc_rd_i16(r);
	if (v >= 3)
		kc_rd_tags(r);
}

/*
 * Parses the body as version v (0-5; v4 and v5 change only the request);
 * KC_OK or KC_MALFORMED with *why.  Bytes after the end of the message
 * (pos->end_off) are accepted: clients ignore them, and the callers drop
 * them.
 */
static int
av_layout(const uint8_t *frame, size_t len, int v, struct av_pos *pos, const char **why)
{
	struct kc_reader r;
	bool flex = v >= 3;
	int16_t k, lo, hi;
	int32_t i;

	kc_rd_init(&r, frame, len);
	kc_rd_skip(&r, 8);		/* size, correlation id; header v0 always */
	pos->v = v;
	pos->error_code = kc_rd_i16(&r);
	pos->count_off = (size_t)(r.p - frame);
	pos->n = kc_rd_array(&r, flex, false, flex ? 7 : 6);
	pos->count_width = (size_t)(r.p - frame) - pos->count_off;
	pos->entries_off = (size_t)(r.p - frame);
	for (i = 0; i < pos->n && kc_rd_ok(&r); i++)
		av_entry(&r, v, &k, &lo, &hi);
	pos->rest_off = (size_t)(r.p - frame);
	if (v >= 1)
		(void)kc_rd_i32(&r);	/* throttle_time_ms */
	if (flex)
		kc_rd_tags(&r);		/* features etc., preserved verbatim */
	if (r.status != KC_OK) {
		*why = r.err;
		return KC_MALFORMED;
	}
	pos->end_off = (size_t)(r.p - frame);
	return KC_OK;
}

static int
av_parse(const uint8_t *frame, size_t len, int16_t rv, struct av_pos *pos,
    char *err, size_t errlen)
{
	const char *why = "unsupported ApiVersions version", *why0 = NULL;

	if (frame == NULL || len < 8) {
		kc_set_err(err, errlen, "response shorter than 8 bytes");
		return KC_MALFORMED;
	}
	if (kc_get_i32(frame) < 0 || (uint64_t)kc_get_i32(frame) != (uint64_t)len - 4) {
		kc_set_err(err, errlen, "size prefix does not match frame length");
		return KC_MALFORMED;
	}
	if (rv < 0) {
		kc_set_err(err, errlen, why);
		return KC_MALFORMED;
	}
	if (rv <= AV_MAX_VERSION && av_layout(frame, len, rv, pos, &why) == KC_OK)
		return KC_OK;
	/* KIP-511: a version the broker does not know is answered with a v0 body */
	if (rv > 0 && av_layout(frame, len, 0, pos, &why0) == KC_OK &&
	    pos->error_code == KC_ERR_UNSUPPORTED_VERSION)
		return KC_OK;
	kc_set_err(err, errlen, why);
	return KC_MALFORMED;
}

/* Whether an entry survives, and with which range. */
static bool
av_keep(int16_t key, int16_t *min, int16_t *max)
{
	int16_t cmin, cmax;

	if (kc_api_refused(key))
		return false;
	if (kc_api_cap(key, &cmin, &cmax)) {
		if (*min < cmin)
			*min = cmin;
		if (*max > cmax)
			*max = cmax;
		if (*min > *max)
			return false;
	}
	return true;
}

int
kc_av_intersect(const uint8_t *frame, size_t len, int16_t request_version, uint8_t *out,
    size_t out_cap, size_t *out_len, size_t *trailing, char *err, size_t errlen)
{
	struct av_pos pos;
	struct kc_reader r;
	const uint8_t *start;
	int16_t k, lo, hi;
	uint32_t kept = 0;
	size_t o, esz;
	int32_t i;

	/*
	 * An error response (e.g. 35 UNSUPPORTED_VERSION) only tells the client
	 * which ApiVersions version to retry with; it carries no addresses and
	 * its body encoding varies between brokers (librdkafka's mock answers a
	 * v3 request with a compact count but no tags). Relay it unchanged: the
	 * retry's successful response is intersected, and a retry above our cap
	 * is answered by the proxy itself.
	 */
	if (len >= 10 && (frame[8] | frame[9]) != 0 && kc_get_i32(frame) == (int32_t)(len - 4)) {
		if (out == NULL || out_cap < len) {
			kc_set_err(err, errlen, "output buffer too small");
			return KC_MALFORMED;
		}
		memcpy(out, frame, len);
		*out_len = len;
		*trailing = 0;
		return KC_OK;
	}
	if (av_parse(frame, len, request_version, &pos, err, errlen) != KC_OK)
		return KC_MALFORMED;
	if (out == NULL || out_cap < len) {
		kc_set_err(err, errlen, "output buffer too small");
		return KC_MALFORMED;
	}
	/* count the survivors first: the count precedes the entries */
	kc_rd_init(&r, frame, len);
	r.p += pos.entries_off;
	for (i = 0; i < pos.n; i++) {
		av_entry(&r, pos.v, &k, &lo, &hi);
		if (av_keep(k, &lo, &hi))
			kept++;
	}

	memcpy(out, frame, pos.count_off);	/* size, corr, error_code */
	o = pos.count_off;
	if (pos.v >= 3)
		o += kc_put_uvarint(out + o, kept + 1);
	else {
		kc_put_i32(out + o, (int32_t)kept);
		o += 4;
	}
	kc_rd_init(&r, frame, len);
	r.p += pos.entries_off;
	for (i = 0; i < pos.n; i++) {
		start = r.p;
		av_entry(&r, pos.v, &k, &lo, &hi);
		if (!av_keep(k, &lo, &hi))
			continue;
		esz = (size_t)(r.p - start);
		memcpy(out + o, start, esz);	/* with the entry's tags */
		kc_put_i16(out + o + 2, lo);
		kc_put_i16(out + o + 4, hi);
		o += esz;
	}
	/* throttle and top-level tags; trailing bytes are dropped */
	memcpy(out + o, frame + pos.rest_off, pos.end_off - pos.rest_off);
	o += pos.end_off - pos.rest_off;
	kc_put_i32(out, (int32_t)(o - 4));
	*out_len = o;
	*trailing = len - pos.end_off;
	return KC_OK;
}

int
kc_apiversions_intersect(const uint8_t *frame, size_t len, int16_t request_version,
    uint8_t *out, size_t out_cap, size_t *out_len, char *err, size_t errlen)
{
	size_t trailing;

	return kc_av_intersect(frame, len, request_version, out, out_cap, out_len, &trailing,
	    err, errlen);
}

int
kc_apiversions_find(const uint8_t *frame, size_t len, int16_t request_version,
    int16_t api_key, int16_t *min, int16_t *max)
{
	struct av_pos pos;
	struct kc_reader r;
	int16_t k, lo, hi;
	int32_t i;

	if (av_parse(frame, len, request_version, &pos, NULL, 0) != KC_OK)
		return KC_MALFORMED;
	kc_rd_init(&r, frame, len);
	r.p += pos.entries_off;
	for (i = 0; i < pos.n; i++) {
		av_entry(&r, pos.v, &k, &lo, &hi);
		if (k == api_key) {
			if (min != NULL)
				*min = lo;
			if (max != NULL)
				*max = hi;
			return KC_OK;
		}
	}
	return KC_APIVERSIONS_ABSENT;
}

/* ---- building ---- */

size_t
kc_build_apiversions_request(uint8_t *buf, size_t cap, int32_t corr, const char *client_id)
{
	struct kc_writer w;

	kc_wr_init(&w, buf, cap);
	kc_wr_request_header(&w, KC_API_API_VERSIONS, 0, corr, client_id);
	return kc_wr_frame_end(&w, buf);
}

size_t
kc_build_metadata_request(uint8_t *buf, size_t cap, int16_t version, int32_t corr,
    const char *client_id)
{
	struct kc_writer w;
	bool flex = version >= 9;

	if (version < 1 || version > 13)
		return 0;
	kc_wr_init(&w, buf, cap);
	kc_wr_request_header(&w, KC_API_METADATA, version, corr, client_id);
	if (flex)
		kc_wr_uvarint(&w, 1);	/* topics: empty compact array */
	else
		kc_wr_i32(&w, 0);	/* topics: empty array */
	if (version >= 4)
		kc_wr_i8(&w, 0);	/* allow_auto_topic_creation */
	if (version >= 8 && version <= 10)
		kc_wr_i8(&w, 0);	/* include_cluster_authorized_operations */
	if (version >= 8)
		kc_wr_i8(&w, 0);	/* include_topic_authorized_operations */
	if (flex)
		kc_wr_uvarint(&w, 0);	/* tags */
	return kc_wr_frame_end(&w, buf);
}

size_t
kc_build_apiversions_unsupported(uint8_t *buf, size_t cap, int32_t corr)
{
	struct kc_writer w;
	int16_t min = 0, max = 0;

	(void)kc_api_cap(KC_API_API_VERSIONS, &min, &max);
	kc_wr_init(&w, buf, cap);
	kc_wr_i32(&w, 0);
	kc_wr_i32(&w, corr);
	kc_wr_i16(&w, KC_ERR_UNSUPPORTED_VERSION);
	kc_wr_i32(&w, 1);		/* api_keys: one entry */
	kc_wr_i16(&w, KC_API_API_VERSIONS);
	kc_wr_i16(&w, min);
	kc_wr_i16(&w, max);
	return kc_wr_frame_end(&w, buf);
}
