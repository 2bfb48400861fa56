/*
 * fetchwalk — an incremental walk over a flexible Fetch response, and the
 * length-preserving rewrite of its top-level tag section; see fetchwalk.h.
 *
 * The walk is a table of pieces, one state each; a piece is parsed whole
 * from the bytes present (a partial reader whose frame ends at the
 * response's end) or not at all, so the state only moves on success:
 *
 *   HEAD      size, correlation id, header tags, ThrottleTimeMs, ErrorCode,
 *             SessionId, the Responses count
 *   TOPIC     Topic (v12) or TopicId (v13+), the Partitions count
 *   PART      PartitionIndex, ErrorCode, HighWatermark, LastStableOffset,
 *             LogStartOffset, the AbortedTransactions count (nullable)
 *   ABORTED   one aborted transaction: ProducerId, FirstOffset, tags
 *   RECORDS   PreferredReadReplica, the Records length (then opaque)
 *   TAGS      a tag section's count (a partition's, then a topic's)
 *   TAG_HDR   a field's tag and size (an unknown value is then opaque)
 *   TAG_VAL   a known partition struct (DivergingEpoch, CurrentLeader,
 *             SnapshotId), read by kc_ep_tag_value with kc_fe_partition_tag
 *   TOP       the top-level section: the tail
 */
#include "worker/kafka/fetchwalk.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "worker/kafka/codec.h"
#include "worker/kafka/rewrite_priv.h"

/* Smallest encodings, for kc_rd_array's early check (as kc_rw_fetch). */
#define FW_AT_MIN	16	/* two int64 */
#define FW_PART_MIN	15
#define FW_TOPIC_MIN	3

enum fw_state { FW_HEAD, FW_TOPIC, FW_PART, FW_ABORTED, FW_RECORDS, FW_TAGS, FW_TAG_HDR,
		FW_TAG_VAL, FW_TOP, FW_DONE };
enum fw_where { FW_IN_PART, FW_IN_TOPIC };

const char *
kc_fw_what_str(enum kc_fw_what w)
{
	switch (w) {
	case KC_FW_FORWARD: return "forward";
	case KC_FW_OPAQUE: return "opaque";
	case KC_FW_TAIL: return "tail";
	}
	return "unknown";
}

const char *
kc_fw_tail_str(enum kc_fw_tail t)
{
	switch (t) {
	case KC_FW_TAIL_SAME: return "same";
	case KC_FW_TAIL_REWRITTEN: return "rewritten";
	case KC_FW_TAIL_PADDED: return "padded";
	case KC_FW_TAIL_DROPPED: return "dropped";
	}
	return "unknown";
}

void
kc_fw_init(struct kc_fw *w, int16_t version, uint64_t frame_len)
{
	memset(w, 0, sizeof *w);
	w->ver = version;
	w->frame_len = frame_len;
	w->state = FW_HEAD;
}

/* A tag section of where begins (its count is the next piece). */
static void
fw_tags_begin(struct kc_fw *w, enum fw_where where)
{
	w->state = FW_TAGS;
	w->where = (uint8_t)where;
}

/* The current tag section is over: the next partition, topic or the top. */
static void
fw_tags_end(struct kc_fw *w)
{
	if (w->where == FW_IN_PART) {
		if (--w->parts_left > 0)
			w->state = FW_PART;
		else
			fw_tags_begin(w, FW_IN_TOPIC);
		return;
	}
	w->state = --w->topics_left > 0 ? FW_TOPIC : FW_TOP;
}

/* One field of the current tag section is over. */
static void
fw_tag_done(struct kc_fw *w)
{
	if (--w->tags_left > 0)
		w->state = FW_TAG_HDR;
	else
		fw_tags_end(w);
}

/*
 * The piece of the current state from r (which ends at the frame's end);
 * moves the state on only when r is still healthy.
 */
static void
fw_piece(struct kc_fw *w, struct kc_reader *r)
{
	uint32_t u, tag, size;
	int32_t n;

	switch ((enum fw_state)w->state) {
	case FW_HEAD:
		kc_rd_skip(r, 4);				/* size */
		(void)kc_rd_i32(r);				/* CorrelationId */
		kc_rd_tags(r);					/* header v1 */
		(void)kc_rd_i32(r);				/* ThrottleTimeMs */
		(void)kc_rd_i16(r);				/* ErrorCode */
		(void)kc_rd_i32(r);				/* SessionId */
		n = kc_rd_array(r, true, false, FW_TOPIC_MIN);	/* Responses */
		if (!kc_rd_ok(r))
			return;
		w->topics_left = n;
		w->state = n > 0 ? FW_TOPIC : FW_TOP;
		return;
	case FW_TOPIC:
		if (w->ver >= 13)
			kc_rd_skip(r, 16);			/* TopicId */
		else
			(void)kc_rd_string(r, true, false, NULL);	/* Topic */
		n = kc_rd_array(r, true, false, FW_PART_MIN);	/* Partitions */
		if (!kc_rd_ok(r))
			return;
		w->parts_left = n;
		if (n > 0)
			w->state = FW_PART;
		else
			fw_tags_begin(w, FW_IN_TOPIC);
		return;
	case FW_PART:
		(void)kc_rd_i32(r);				/* PartitionIndex */
		(void)kc_rd_i16(r);				/* ErrorCode */
		(void)kc_rd_i64(r);				/* HighWatermark */
		(void)kc_rd_i64(r);				/* LastStableOffset */
		(void)kc_rd_i64(r);				/* LogStartOffset */
		n = kc_rd_array(r, true, true, FW_AT_MIN);	/* AbortedTransactions */
		if (!kc_rd_ok(r))
			return;
		w->aborted_left = n;
		w->state = n > 0 ? FW_ABORTED : FW_RECORDS;
		return;
	case FW_ABORTED:
		(void)kc_rd_i64(r);				/* ProducerId */
		(void)kc_rd_i64(r);				/* FirstOffset */
		kc_rd_tags(r);
		if (!kc_rd_ok(r))
			return;
		if (--w->aborted_left == 0)
			w->state = FW_RECORDS;
		return;
	case FW_RECORDS:
		(void)kc_rd_i32(r);				/* PreferredReadReplica */
		u = kc_rd_uvarint(r);				/* Records: N + 1, 0 null */
		if (!kc_rd_ok(r))
			return;
		if (u > 0 && u - 1 > kc_rd_left(r)) {
			kc_rd_fail(r, KC_MALFORMED, "records past end of frame");
			return;
		}
		w->opaque = u > 0 ? u - 1 : 0;
		fw_tags_begin(w, FW_IN_PART);
		return;
	case FW_TAGS:
		u = kc_rd_uvarint(r);
		if (!kc_rd_ok(r))
			return;
		w->tags_left = u;
		if (u > 0)
			w->state = FW_TAG_HDR;
		else
			fw_tags_end(w);
		return;
	case FW_TAG_HDR:
		tag = kc_rd_uvarint(r);
		size = kc_rd_uvarint(r);
		if (!kc_rd_ok(r))
			return;
		if (size > kc_rd_left(r)) {
			kc_rd_fail(r, KC_MALFORMED, "tagged field past end of frame");
			return;
		}
		w->tag = tag;
		w->tag_size = size;
		if (w->where == FW_IN_PART && tag <= 2) {
			w->state = FW_TAG_VAL;		/* a struct the schema defines */
			return;
		}
		w->opaque = size;			/* unknown: moved unread */
		fw_tag_done(w);
		return;
	case FW_TAG_VAL:
		if (kc_ep_tag_value(r, w->tag, w->tag_size, kc_fe_partition_tag, NULL))
			fw_tag_done(w);
		return;
	case FW_TOP:
	case FW_DONE:
		break;
	}
}

int
kc_fw_step(struct kc_fw *w, const uint8_t *p, size_t avail, enum kc_fw_what *what,
	   uint64_t *n, char *err, size_t errlen)
{
	uint64_t left = w->frame_len - w->pos;
	size_t used = 0;

	if (w->opaque) {
		*what = KC_FW_OPAQUE;
		*n = w->opaque;
		w->pos += w->opaque;
		w->opaque = 0;
		return KC_OK;
	}
	if (w->state == FW_DONE) {
		kc_set_err(err, errlen, "Fetch response walked past its end");
		return KC_MALFORMED;
	}
	if (avail > left)
		avail = (size_t)left;
	/* as many whole pieces as are present, up to an opaque span or the top */
	while (w->state != FW_TOP && !w->opaque) {
		struct kc_reader r;

		kc_rd_init_partial(&r, p + used, (size_t)(left - used), avail - used);
		fw_piece(w, &r);
		if (r.status == KC_NEED_MORE)
			break;
		if (r.status != KC_OK) {
			kc_set_err(err, errlen, r.err);
			return KC_MALFORMED;
		}
		size_t k = (size_t)(r.p - (p + used));
		used += k;
		w->pos += k;
	}
	if (used) {
		*what = KC_FW_FORWARD;
		*n = used;
		return KC_OK;
	}
	if (w->opaque)
		return kc_fw_step(w, p, avail, what, n, err, errlen);
	if (w->state == FW_TOP) {
		if (left == 0) {
			kc_set_err(err, errlen, "Fetch response without its tagged fields");
			return KC_MALFORMED;
		}
		*what = KC_FW_TAIL;
		*n = left;
		w->pos = w->frame_len;
		w->state = FW_DONE;
		return KC_OK;
	}
	return KC_NEED_MORE;
}

/* ---- the top-level tag section, keeping its length ---- */

/* Writes at p one tagged field of exactly total bytes (tag above min_tag,
 * zero value): its width, or 0 when no tag/size encoding makes total. */
static size_t
fw_pad(uint8_t *p, size_t total, uint32_t min_tag)
{
	for (size_t wt = 1; wt <= 5; wt++) {
		/* the smallest tag >= min_tag that encodes in wt bytes */
		uint64_t tag = wt == 1 ? 0 : (uint64_t)1 << (7 * (wt - 1));
		if (tag < min_tag)
			tag = min_tag;
		if (tag > UINT32_MAX || kc_uvarint_size((uint32_t)tag) != wt)
			continue;
		for (size_t ws = 1; ws <= 5 && wt + ws <= total; ws++) {
			size_t size = total - wt - ws;
			if (size > UINT32_MAX || kc_uvarint_size((uint32_t)size) != ws)
				continue;
			size_t o = kc_put_uvarint(p, (uint32_t)tag);
			o += kc_put_uvarint(p + o, (uint32_t)size);
			memset(p + o, 0, size);
			return total;
		}
	}
	return 0;
}

/*
 * The section's fields (NodeEndpoints rebuilt, or dropped) in exactly len
 * bytes, padded when shorter: KC_OK with *out, 1 when they do not fit (or
 * would leave a single byte, which no field can fill), KC_MALFORMED.
 */
static int
fw_section(const uint8_t *sec, size_t len, const struct kc_broker_map *map, bool drop,
	   uint8_t **out, bool *padded, const char **why)
{
	struct rw_out t = { NULL, 0, 0 };
	uint32_t nf, max_tag, pad_tag = KC_FW_PAD_TAG;
	size_t w, pw, at;
	uint8_t *o;

	if (kc_ne_fields(sec, len, map, drop, &t, &nf, &max_tag, why) != KC_OK) {
		free(t.b);
		return KC_MALFORMED;
	}
	*padded = false;
	w = kc_uvarint_size(nf);
	if (w + t.len == len) {
		pw = 0;
	} else {
		/* one more field, after every tag present (ascending order) */
		pad_tag = max_tag >= KC_FW_PAD_TAG ? max_tag + 1 : KC_FW_PAD_TAG;
		w = kc_uvarint_size(nf + 1);
		if (max_tag == UINT32_MAX || w + t.len + 2 > len) {
			free(t.b);
			return 1;
		}
		pw = len - w - t.len;
		*padded = true;
	}
	o = malloc(len);
	if (o == NULL) {
		free(t.b);
		*why = "out of memory";
		return KC_MALFORMED;
	}
	at = kc_put_uvarint(o, *padded ? nf + 1 : nf);
	if (t.len > 0)
		memcpy(o + at, t.b, t.len);
	at += t.len;
	free(t.b);
	if (*padded && fw_pad(o + at, pw, pad_tag) != pw) {
		free(o);
		return 1;
	}
	*out = o;
	return KC_OK;
}

int
kc_rw_fetch_tail(int v, const uint8_t *sec, size_t len, const struct kc_broker_map *map,
		 uint8_t **out, enum kc_fw_tail *how, char *err, size_t errlen)
{
	struct kc_reader r;
	const char *why = "malformed";
	bool padded;
	int found = 0, rc;

	*out = NULL;
	kc_rd_init(&r, sec, len);
	if (!kc_ne_scan(&r, v >= FE_NODE_ENDPOINTS_FROM, &found)) {
		kc_set_err(err, errlen, r.err);
		return KC_MALFORMED;
	}
	/* (bytes after the section's end stay in len: replaced when rebuilt) */
	if (found == 0) {
		*how = KC_FW_TAIL_SAME;
		return KC_OK;
	}
	rc = fw_section(sec, len, map, false, out, &padded, &why);
	if (rc == KC_OK) {
		*how = padded ? KC_FW_TAIL_PADDED : KC_FW_TAIL_REWRITTEN;
		return KC_OK;
	}
	if (rc == 1)	/* longer, or one byte short: no hint, the same length */
		rc = fw_section(sec, len, map, true, out, &padded, &why);
	if (rc == KC_OK) {
		*how = KC_FW_TAIL_DROPPED;
		return KC_OK;
	}
	if (rc == 1)
		why = "no padding makes the tagged fields' length";
	kc_set_err(err, errlen, why);
	return KC_MALFORMED;
}
