/*
 * rewrite — broker-address rewriting of Metadata (v0-13) and FindCoordinator
 * (v0-6) responses, the dispatch of ApiVersions responses to the
 * intersection in apiversions.c, of Produce, Fetch and DescribeCluster
 * responses to rewrite_endpoints.c and of ShareFetch and ShareAcknowledge
 * responses to rewrite_share.c, and the helpers they share
 * (rewrite_priv.h).
 *
 * Every response goes through two passes.  The first validates the whole
 * frame against the schema of its version (apache/kafka MetadataResponse.json
 * and FindCoordinatorResponse.json, plus Metadata v13's last error_code
 * from KIP-1102) and records where the address-bearing entries are and where
 * the message ends; no callback runs on a frame that does not parse
 * completely.  Bytes after the end of the message are accepted and dropped:
 * the second pass works on the frame cut at that end (kc_rw_end).  The
 * second pass calls the broker map once per entry and emits the new frame:
 * untouched byte ranges (headers with their tags, racks, unknown tagged
 * fields, the topics that follow the brokers) are copied verbatim, only
 * node/host/port are re-encoded, and the count varint and the size prefix are
 * recomputed.  The output buffer is the only allocation; it is sized from the
 * input up front and grown only if mapped hosts are much longer than upstream
 * ones.
 */
#include "worker/kafka/rewrite.h"

#include <stdlib.h>
#include <string.h>

#include "worker/kafka/apiversions.h"
#include "worker/kafka/codec.h"
#include "worker/kafka/rewrite_priv.h"

/* COORDINATOR_NOT_AVAILABLE */
#define KC_ERR_COORDINATOR_NOT_AVAILABLE	15

int
kc_rw_fail(struct rw_out *o, char *err, size_t errlen, const char *why)
{
	free(o->b);
	o->b = NULL;
	kc_set_err(err, errlen, why);
	return KC_MALFORMED;
}

int
kc_rw_finish(struct rw_out *o, uint8_t **out, size_t *out_len, char *err, size_t errlen)
{
	if (o->len - 4 > (size_t)INT32_MAX)
		return kc_rw_fail(o, err, errlen, "rewritten frame too large");
	kc_put_i32(o->b, (int32_t)(o->len - 4));
	*out = o->b;
	*out_len = o->len;
	o->b = NULL;
	return KC_OK;
}

int
kc_rw_check_frame(const uint8_t *frame, size_t len, char *err, size_t errlen)
{
	if (frame == NULL || len < 8) {
		kc_set_err(err, errlen, "response shorter than 8 bytes");
		return KC_MALFORMED;
	}
	if ((uint64_t)(uint32_t)kc_get_i32(frame) != (uint64_t)len - 4 ||
	    kc_get_i32(frame) < 0) {
		kc_set_err(err, errlen, "size prefix does not match frame length");
		return KC_MALFORMED;
	}
	return KC_OK;
}

/* Size prefix, correlation id and (response header v1) the header tags. */
void
kc_rw_skip_header(struct kc_reader *r, int16_t key, int16_t v)
{
	kc_rd_skip(r, 8);
	if (kc_response_header_version(key, v) >= 1)
		kc_rd_tags(r);
}

int
kc_rw_end(struct kc_reader *r, const uint8_t *frame, size_t *plen, char *err, size_t errlen)
{
	if (r->status != KC_OK) {
		/* whole frames only: running out is malformed too */
		kc_set_err(err, errlen, r->err);
		return KC_MALFORMED;
	}
	/*
	 * Bytes left after a complete message are not an error: librdkafka and
	 * the Java client ignore them (librdkafka's mock cluster writes the
	 * last empty tag section of Metadata v9+ twice), so a proxy must too.
	 */
	*plen = (size_t)(r->p - frame);
	return KC_OK;
}

bool
kc_response_needs_rewrite(int16_t api_key, int16_t api_version)
{
	if (api_version < 0)
		return false;
	switch (api_key) {
	case KC_API_PRODUCE:
		return api_version >= PR_NODE_ENDPOINTS_FROM && api_version <= PR_MAX_VERSION;
	case KC_API_FETCH:
		return api_version >= FE_NODE_ENDPOINTS_FROM && api_version <= FE_MAX_VERSION;
	case KC_API_METADATA:
		return api_version <= MD_MAX_VERSION;
	case KC_API_FIND_COORDINATOR:
		return api_version <= FC_MAX_VERSION;
	case KC_API_API_VERSIONS:
		return api_version <= AV_MAX_VERSION;
	case KC_API_DESCRIBE_CLUSTER:
		return api_version <= DC_MAX_VERSION;
	case KC_API_SHARE_FETCH:
	case KC_API_SHARE_ACKNOWLEDGE:
		return api_version >= SH_MIN_VERSION && api_version <= SH_MAX_VERSION;
	default:
		return false;
	}
}

/* Versions kc_rewrite_response has a schema for (a superset of the above:
 * Produce and Fetch responses older than NodeEndpoints are validated and
 * copied unchanged). */
static bool
rw_has_schema(int16_t api_key, int16_t v)
{
	if (v < 0)
		return false;
	switch (api_key) {
	case KC_API_PRODUCE:
		return v <= PR_MAX_VERSION;
	case KC_API_FETCH:
		return v <= FE_MAX_VERSION;
	default:
		return kc_response_needs_rewrite(api_key, v);
	}
}

/* ---- Metadata ---- */

struct md_broker {
	const uint8_t *start, *host, *tail, *end;
	int32_t node_id, host_len, port;
};

struct md_pos {
	size_t count_off, count_width, brokers_off, rest_off;
	size_t end_off;		/* end of the message; trailing bytes follow */
	int32_t nbrokers, controller_id;
};

static void
md_broker(struct kc_reader *r, int v, struct md_broker *b)
{
	bool flex = v >= 9;

	b->start = r->p;
	b->node_id = kc_rd_i32(r);
	b->host_len = kc_rd_string(r, flex, false, &b->host);
	b->port = kc_rd_i32(r);
	b->tail = r->p;
	if (v >= 1)
		(void)kc_rd_string(r, flex, true, NULL);	/* rack */
	if (flex)
		kc_rd_tags(r);
	b->end = r->p;
}

static void
md_partition(struct kc_reader *r, int v)
{
	bool flex = v >= 9;

	(void)kc_rd_i16(r);		/* error_code */
	(void)kc_rd_i32(r);		/* partition_index */
	(void)kc_rd_i32(r);		/* leader_id */
	if (v >= 7)
		(void)kc_rd_i32(r);	/* leader_epoch */
	kc_rd_i32_array(r, flex);	/* replica_nodes */
	kc_rd_i32_array(r, flex);	/* isr_nodes */
	if (v >= 5)
		kc_rd_i32_array(r, flex);	/* offline_replicas */
	if (flex)
		kc_rd_tags(r);
}

static void
md_topic(struct kc_reader *r, int v)
{
	bool flex = v >= 9;
	int32_t i, n;

	(void)kc_rd_i16(r);				/* error_code */
	(void)kc_rd_string(r, flex, v >= 12, NULL);	/* name */
	if (v >= 10)
		kc_rd_skip(r, 16);			/* topic_id */
	if (v >= 1)
		(void)kc_rd_i8(r);			/* is_internal */
	n = kc_rd_array(r, flex, false, flex ? 12 : 18);	/* partitions */
	for (i = 0; i < n && kc_rd_ok(r); i++)
		md_partition(r, v);
	if (v >= 8)
		(void)kc_rd_i32(r);	/* topic_authorized_operations */
	if (flex)
		kc_rd_tags(r);
}

static int
md_validate(const uint8_t *frame, size_t len, int v, struct md_pos *pos,
    char *err, size_t errlen)
{
	struct kc_reader r;
	struct md_broker b;
	bool flex = v >= 9;
	int32_t i, n;

	if (kc_rw_check_frame(frame, len, err, errlen) != KC_OK)
		return KC_MALFORMED;
	kc_rd_init(&r, frame, len);
	kc_rw_skip_header(&r, KC_API_METADATA, (int16_t)v);
	if (v >= 3)
		(void)kc_rd_i32(&r);			/* throttle_time_ms */
	pos->count_off = (size_t)(r.p - frame);
	pos->nbrokers = kc_rd_array(&r, flex, false, 10);
	pos->count_width = (size_t)(r.p - frame) - pos->count_off;
	pos->brokers_off = (size_t)(r.p - frame);
	for (i = 0; i < pos->nbrokers && kc_rd_ok(&r); i++)
		md_broker(&r, v, &b);
	pos->rest_off = (size_t)(r.p - frame);
	if (v >= 2)
		(void)kc_rd_string(&r, flex, true, NULL);	/* cluster_id */
	pos->controller_id = v >= 1 ? kc_rd_i32(&r) : -1;
	n = kc_rd_array(&r, flex, false, 4);		/* topics */
	for (i = 0; i < n && kc_rd_ok(&r); i++)
		md_topic(&r, v);
	if (v >= 8 && v <= 10)
		(void)kc_rd_i32(&r);	/* cluster_authorized_operations */
	if (v >= 13)
		(void)kc_rd_i16(&r);	/* error_code */
	if (flex)
		kc_rd_tags(&r);
	return kc_rw_end(&r, frame, &pos->end_off, err, errlen);
}

int
kc_metadata_walk(int16_t version, const uint8_t *frame, size_t len, kc_broker_fn fn,
    void *ctx, int32_t *controller_id, char *err, size_t errlen)
{
	struct md_pos pos;
	struct md_broker b;
	struct kc_reader r;
	int32_t i;

	if (version < 0 || version > MD_MAX_VERSION) {
		kc_set_err(err, errlen, "unsupported Metadata version");
		return KC_MALFORMED;
	}
	if (md_validate(frame, len, version, &pos, err, errlen) != KC_OK)
		return KC_MALFORMED;
	if (controller_id != NULL)
		*controller_id = pos.controller_id;
	kc_rd_init(&r, frame, pos.end_off);
	r.p += pos.brokers_off;
	for (i = 0; i < pos.nbrokers; i++) {
		md_broker(&r, version, &b);
		if (fn != NULL)
			fn(ctx, b.node_id, (const char *)b.host, (size_t)b.host_len, b.port);
	}
	return KC_OK;
}

static int
md_rewrite(int v, const uint8_t *frame, size_t len, const struct kc_broker_map *map,
    uint8_t **out, size_t *out_len, size_t *trailing, char *err, size_t errlen)
{
	struct rw_out o = { NULL, 0, 0 };
	struct md_pos pos;
	struct md_broker b;
	struct kc_reader r;
	bool flex = v >= 9;
	size_t count_at, w, esz, left;
	int32_t i;
	uint32_t kept = 0;

	if (md_validate(frame, len, v, &pos, err, errlen) != KC_OK)
		return KC_MALFORMED;
	*trailing = len - pos.end_off;
	len = pos.end_off;	/* trailing bytes are dropped */
	if (!rw_reserve(&o, len + (size_t)pos.nbrokers * 32 + 16))
		return kc_rw_fail(&o, err, errlen, "out of memory");
	rw_put(&o, frame, pos.count_off);
	count_at = o.len;
	o.len += pos.count_width;	/* patched below; can only shrink */

	kc_rd_init(&r, frame, len);
	r.p += pos.brokers_off;
	for (i = 0; i < pos.nbrokers; i++) {
		const char *h = NULL;
		size_t hl = 0;
		int32_t port = -1;

		md_broker(&r, v, &b);
		left = len - (size_t)(b.end - frame);
		if (b.node_id < 0) {
			/* error entries are left alone */
			esz = (size_t)(b.end - b.start);
			if (!rw_reserve(&o, o.len + esz + left))
				return kc_rw_fail(&o, err, errlen, "out of memory");
			rw_put(&o, b.start, esz);
			kept++;
			continue;
		}
		if (map->map(map->ctx, b.node_id, (const char *)b.host, (size_t)b.host_len,
		    b.port, &h, &hl, &port) != 0)
			continue;	/* no proxy address: drop the broker */
		if (!rw_host_ok(h, hl))
			return kc_rw_fail(&o, err, errlen, "mapped host invalid or too long");
		esz = 4 + rw_string_size(flex, hl) + 4 + (size_t)(b.end - b.tail);
		if (!rw_reserve(&o, o.len + esz + left))
			return kc_rw_fail(&o, err, errlen, "out of memory");
		rw_i32(&o, b.node_id);
		rw_string(&o, flex, h != NULL ? h : "", hl);
		rw_i32(&o, port);
		rw_put(&o, b.tail, (size_t)(b.end - b.tail));	/* rack + tags */
		kept++;
	}
	if (flex) {
		w = kc_uvarint_size(kept + 1);
		kc_put_uvarint(o.b + count_at, kept + 1);
		if (w < pos.count_width) {
			memmove(o.b + count_at + w, o.b + count_at + pos.count_width,
			    o.len - count_at - pos.count_width);
			o.len -= pos.count_width - w;
		}
	} else
		kc_put_i32(o.b + count_at, (int32_t)kept);

	left = len - pos.rest_off;
	if (!rw_reserve(&o, o.len + left))
		return kc_rw_fail(&o, err, errlen, "out of memory");
	rw_put(&o, frame + pos.rest_off, left);
	return kc_rw_finish(&o, out, out_len, err, errlen);
}

/* ---- FindCoordinator ---- */

/*
 * One coordinator.  v0-v3 (single, top level): start = error_code (after
 * throttle_time_ms in v1+), error_message sits before node_id in v1+, tail =
 * the top-level tags (v3) or the end.  v4+ (array entry): start = key, tail =
 * error_code, tags = the entry's tag section.
 */
struct fc_entry {
	const uint8_t *start, *nodep, *host, *tail, *tags, *end;
	int32_t node_id, host_len, port;
};

struct fc_pos {
	struct fc_entry single;		/* v0-v3 */
	size_t entries_off, rest_off;	/* v4+ */
	size_t end_off;			/* end of the message; trailing bytes follow */
	int32_t n;
};

static void
fc_entry_v4(struct kc_reader *r, struct fc_entry *e)
{
	e->start = r->p;
	(void)kc_rd_string(r, true, false, NULL);	/* key */
	e->nodep = r->p;
	e->node_id = kc_rd_i32(r);
	e->host_len = kc_rd_string(r, true, false, &e->host);
	e->port = kc_rd_i32(r);
	e->tail = r->p;
	(void)kc_rd_i16(r);				/* error_code */
	(void)kc_rd_string(r, true, true, NULL);	/* error_message */
	e->tags = r->p;
	kc_rd_tags(r);
	e->end = r->p;
}

static int
fc_validate(const uint8_t *frame, size_t len, int v, struct fc_pos *pos,
    char *err, size_t errlen)
{
	struct kc_reader r;
	struct fc_entry *e = &pos->single, tmp;
	bool flex = v >= 3;
	int32_t i;

	if (kc_rw_check_frame(frame, len, err, errlen) != KC_OK)
		return KC_MALFORMED;
	kc_rd_init(&r, frame, len);
	kc_rw_skip_header(&r, KC_API_FIND_COORDINATOR, (int16_t)v);
	if (v >= 1)
		(void)kc_rd_i32(&r);			/* throttle_time_ms */
	if (v <= 3) {
		e->start = r.p;
		(void)kc_rd_i16(&r);			/* error_code */
		if (v >= 1)
			(void)kc_rd_string(&r, flex, true, NULL);	/* error_message */
		e->nodep = r.p;
		e->node_id = kc_rd_i32(&r);
		e->host_len = kc_rd_string(&r, flex, false, &e->host);
		e->port = kc_rd_i32(&r);
		e->tail = e->tags = r.p;
		if (flex)
			kc_rd_tags(&r);
		e->end = r.p;
		pos->n = 1;
	} else {
		pos->n = kc_rd_array(&r, true, false, 14);	/* coordinators */
		pos->entries_off = (size_t)(r.p - frame);
		for (i = 0; i < pos->n && kc_rd_ok(&r); i++)
			fc_entry_v4(&r, &tmp);
		pos->rest_off = (size_t)(r.p - frame);
		kc_rd_tags(&r);
	}
	return kc_rw_end(&r, frame, &pos->end_off, err, errlen);
}

/* Calls the map for e; 1 = mapped, 0 = no proxy address, -1 = bad mapping. */
static int
fc_map(const struct kc_broker_map *map, const struct fc_entry *e, const char **h,
    size_t *hl, int32_t *port)
{
	*h = NULL;
	*hl = 0;
	*port = -1;
	if (map->map(map->ctx, e->node_id, (const char *)e->host, (size_t)e->host_len,
	    e->port, h, hl, port) != 0)
		return 0;
	if (!rw_host_ok(*h, *hl))
		return -1;
	if (*h == NULL)
		*h = "";
	return 1;
}

static int
fc_rewrite_single(int v, const uint8_t *frame, size_t len, const struct fc_entry *e,
    const struct kc_broker_map *map, uint8_t **out, size_t *out_len, char *err, size_t errlen)
{
	struct rw_out o = { NULL, 0, 0 };
	bool flex = v >= 3;
	const char *h;
	size_t hl, need;
	int32_t port;
	int rc;

	if (e->node_id < 0) {
		/* not available upstream: nothing to rewrite */
		if (!rw_reserve(&o, len))
			return kc_rw_fail(&o, err, errlen, "out of memory");
		rw_put(&o, frame, len);
		return kc_rw_finish(&o, out, out_len, err, errlen);
	}
	rc = fc_map(map, e, &h, &hl, &port);
	if (rc < 0)
		return kc_rw_fail(&o, err, errlen, "mapped host invalid or too long");
	if (rc > 0) {
		need = (size_t)(e->nodep - frame) + 4 + rw_string_size(flex, hl) + 4 +
		    (size_t)(frame + len - e->tail);
		if (!rw_reserve(&o, need))
			return kc_rw_fail(&o, err, errlen, "out of memory");
		rw_put(&o, frame, (size_t)(e->nodep - frame));	/* .. error_message */
		rw_i32(&o, e->node_id);
		rw_string(&o, flex, h, hl);
		rw_i32(&o, port);
	} else {
		need = (size_t)(e->start - frame) + 2 + (v >= 1 ? rw_null_size(flex) : 0) +
		    4 + rw_string_size(flex, 0) + 4 + (size_t)(frame + len - e->tail);
		if (!rw_reserve(&o, need))
			return kc_rw_fail(&o, err, errlen, "out of memory");
		rw_put(&o, frame, (size_t)(e->start - frame));	/* header, throttle */
		rw_i16(&o, KC_ERR_COORDINATOR_NOT_AVAILABLE);
		if (v >= 1)
			rw_null(&o, flex);			/* error_message */
		rw_i32(&o, -1);
		rw_string(&o, flex, "", 0);
		rw_i32(&o, -1);
	}
	rw_put(&o, e->tail, (size_t)(frame + len - e->tail));	/* v3 tags */
	return kc_rw_finish(&o, out, out_len, err, errlen);
}

static int
fc_rewrite_multi(const uint8_t *frame, size_t len, const struct fc_pos *pos,
    const struct kc_broker_map *map, uint8_t **out, size_t *out_len, char *err, size_t errlen)
{
	struct rw_out o = { NULL, 0, 0 };
	struct kc_reader r;
	struct fc_entry e;
	const char *h;
	size_t hl, esz, left;
	int32_t i, port;
	int rc;

	if (!rw_reserve(&o, len + (size_t)pos->n * 32 + 16))
		return kc_rw_fail(&o, err, errlen, "out of memory");
	rw_put(&o, frame, pos->entries_off);	/* header, throttle, count */
	kc_rd_init(&r, frame, len);
	r.p += pos->entries_off;
	for (i = 0; i < pos->n; i++) {
		fc_entry_v4(&r, &e);
		left = len - (size_t)(e.end - frame);
		if (e.node_id < 0) {
			esz = (size_t)(e.end - e.start);
			if (!rw_reserve(&o, o.len + esz + left))
				return kc_rw_fail(&o, err, errlen, "out of memory");
			rw_put(&o, e.start, esz);
			continue;
		}
		rc = fc_map(map, &e, &h, &hl, &port);
		if (rc < 0)
			return kc_rw_fail(&o, err, errlen, "mapped host invalid or too long");
		if (rc > 0)
			esz = (size_t)(e.nodep - e.start) + 4 + rw_string_size(true, hl) + 4 +
			    (size_t)(e.end - e.tail);
		else
			esz = (size_t)(e.nodep - e.start) + 4 + 1 + 4 + 2 + 1 +
			    (size_t)(e.end - e.tags);
		if (!rw_reserve(&o, o.len + esz + left))
			return kc_rw_fail(&o, err, errlen, "out of memory");
		rw_put(&o, e.start, (size_t)(e.nodep - e.start));	/* key */
		if (rc > 0) {
			rw_i32(&o, e.node_id);
			rw_string(&o, true, h, hl);
			rw_i32(&o, port);
			rw_put(&o, e.tail, (size_t)(e.end - e.tail));	/* error, message, tags */
		} else {
			rw_i32(&o, -1);
			rw_string(&o, true, "", 0);
			rw_i32(&o, -1);
			rw_i16(&o, KC_ERR_COORDINATOR_NOT_AVAILABLE);
			rw_null(&o, true);
			rw_put(&o, e.tags, (size_t)(e.end - e.tags));
		}
	}
	left = len - pos->rest_off;
	if (!rw_reserve(&o, o.len + left))
		return kc_rw_fail(&o, err, errlen, "out of memory");
	rw_put(&o, frame + pos->rest_off, left);
	return kc_rw_finish(&o, out, out_len, err, errlen);
}

static int
fc_rewrite(int v, const uint8_t *frame, size_t len, const struct kc_broker_map *map,
    uint8_t **out, size_t *out_len, size_t *trailing, char *err, size_t errlen)
{
	struct fc_pos pos;

	if (fc_validate(frame, len, v, &pos, err, errlen) != KC_OK)
		return KC_MALFORMED;
	*trailing = len - pos.end_off;
	len = pos.end_off;	/* trailing bytes are dropped */
	if (v <= 3)
		return fc_rewrite_single(v, frame, len, &pos.single, map, out, out_len,
		    err, errlen);
	return fc_rewrite_multi(frame, len, &pos, map, out, out_len, err, errlen);
}

/* ---- ApiVersions ---- */

static int
av_rewrite(int16_t v, const uint8_t *frame, size_t len, uint8_t **out, size_t *out_len,
    size_t *trailing, char *err, size_t errlen)
{
	uint8_t *b;
	size_t n = 0;
	int rc;

	if (kc_rw_check_frame(frame, len, err, errlen) != KC_OK)
		return KC_MALFORMED;
	b = malloc(len);
	if (b == NULL) {
		kc_set_err(err, errlen, "out of memory");
		return KC_MALFORMED;
	}
	rc = kc_av_intersect(frame, len, v, b, len, &n, trailing, err, errlen);
	if (rc != KC_OK) {
		free(b);
		return KC_MALFORMED;
	}
	*out = b;
	*out_len = n;
	return KC_OK;
}

static int
rw_dispatch(int16_t api_key, int16_t api_version, const uint8_t *frame, size_t len,
    const struct kc_broker_map *map, uint8_t **out, size_t *out_len, size_t *trailing,
    char *err, size_t errlen)
{
	if (api_key == KC_API_API_VERSIONS && api_version >= 0)
		return av_rewrite(api_version, frame, len, out, out_len, trailing, err, errlen);
	if (!rw_has_schema(api_key, api_version)) {
		kc_set_err(err, errlen, "response version not rewritable");
		return KC_MALFORMED;
	}
	if (map == NULL || map->map == NULL) {
		kc_set_err(err, errlen, "no broker map");
		return KC_MALFORMED;
	}
	switch (api_key) {
	case KC_API_METADATA:
		return md_rewrite(api_version, frame, len, map, out, out_len, trailing,
		    err, errlen);
	case KC_API_FIND_COORDINATOR:
		return fc_rewrite(api_version, frame, len, map, out, out_len, trailing,
		    err, errlen);
	case KC_API_PRODUCE:
		return kc_rw_produce(api_version, frame, len, map, out, out_len, trailing,
		    err, errlen);
	case KC_API_FETCH:
		return kc_rw_fetch(api_version, frame, len, map, out, out_len, trailing,
		    err, errlen);
	case KC_API_SHARE_FETCH:
	case KC_API_SHARE_ACKNOWLEDGE:
		return kc_rw_share(api_key, api_version, frame, len, map, out, out_len,
		    trailing, err, errlen);
	default:
		return kc_rw_describe_cluster(api_version, frame, len, map, out, out_len,
		    trailing, err, errlen);
	}
}

int
kc_rewrite_response(int16_t api_key, int16_t api_version, const uint8_t *frame, size_t len,
    struct kc_broker_map *map, uint8_t **out, size_t *out_len,
    char *err, size_t errlen)
{
	size_t trailing = 0;
	int rc;

	*out = NULL;
	*out_len = 0;
	if (map != NULL)
		map->trailing = 0;
	rc = rw_dispatch(api_key, api_version, frame, len, map, out, out_len, &trailing,
	    err, errlen);
	if (rc == KC_OK && map != NULL)
		map->trailing = trailing;
	return rc;
}
