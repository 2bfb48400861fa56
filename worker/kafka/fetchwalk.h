/*
 * fetchwalk — an incremental walk over a flexible Fetch response (v12-18)
 * as it arrives, so that a large one can be streamed instead of collected
 * whole: the worker forwards the small parsed parts as they are, moves the
 * record sets (and unknown tagged values) without reading them, and holds
 * only the top-level tagged-field section, the last thing in the message,
 * where KIP-951 NodeEndpoints (v16+) may carry upstream broker addresses.
 * Pure: no I/O, no allocation.
 *
 * The walk is fed the frame from its first byte (the size prefix): at each
 * step the caller passes the bytes it has from the walk's position on, and
 * gets one of
 *   KC_FW_FORWARD  n parsed bytes (whole pieces: header, topic, partition
 *                  fields, aborted transactions, the records' length,
 *                  tag headers and known tagged structs): forward them;
 *   KC_FW_OPAQUE   the next n bytes are a record set or an unknown tagged
 *                  value: move them unread (the caller never shows them
 *                  to the walk);
 *   KC_FW_TAIL     the top-level tagged-field section starts here and runs
 *                  the n bytes to the end of the frame (the walk is over;
 *                  kc_rw_fetch_tail validates and rewrites it);
 * or KC_NEED_MORE when the bytes present do not hold the next piece (pass
 * at least one more byte), or KC_MALFORMED (err set) when the response can
 * never parse. Each piece is parsed whole or not at all, with the same
 * bounded reader and checks as kc_rw_fetch (counts that cannot fit the
 * rest of the frame, lengths past its end, tagged values their struct does
 * not fill exactly); nothing is ever read past the frame's declared size.
 * A piece is small (the largest is a known tagged struct or the response
 * header's tags); the caller decides what to do with one larger than its
 * buffer.
 *
 * kc_rw_fetch_tail rewrites the held section keeping its length (the size
 * prefix is already on its way to the client): unchanged without
 * NodeEndpoints; rebuilt through the broker map when that fits, padded
 * with a field of tag KC_FW_PAD_TAG (or above the highest tag present)
 * when the rebuilt section is shorter by two bytes or more; otherwise
 * NodeEndpoints is replaced by padding (the client gets no leader hint and
 * refreshes its metadata; the caller counts it). Unknown tagged fields are
 * skipped by every client (KIP-482), so the padding is invisible to them.
 */
#ifndef FERRY_WORKER_KAFKA_FETCHWALK_H
#define FERRY_WORKER_KAFKA_FETCHWALK_H

#include <stddef.h>
#include <stdint.h>

#include "worker/kafka/rewrite.h"

/* The padding field's tag: FetchResponse defines top-level tag 0 only
 * (NodeEndpoints, v16+), and 127 is the largest tag that still encodes in
 * one byte, well above anything the schema is likely to add. When the
 * section holds a tag >= 127 the padding takes the next tag above it. */
#define KC_FW_PAD_TAG 127

enum kc_fw_what { KC_FW_FORWARD = 0, KC_FW_OPAQUE, KC_FW_TAIL };
const char *kc_fw_what_str(enum kc_fw_what w);

struct kc_fw {
	uint64_t frame_len;    /* 4 + size prefix */
	uint64_t pos;          /* bytes of the frame walked */
	uint64_t opaque;       /* an opaque span to hand out next */
	int16_t ver;
	uint8_t state, where;  /* fetchwalk.c's enum fw_state, fw_where */
	int32_t topics_left, parts_left, aborted_left;
	uint32_t tags_left, tag, tag_size;
};

/* A walk over a Fetch v12-18 response of frame_len bytes (size prefix
 * included, >= 8: the caller has parsed the prefix). */
void kc_fw_init(struct kc_fw *w, int16_t version, uint64_t frame_len);
/*
 * The next step from the walk's position: p holds the avail bytes present
 * from there (bytes past the frame's end are ignored). KC_OK with *what,
 * *n (the walk moves past them), KC_NEED_MORE, or KC_MALFORMED (err set).
 */
int kc_fw_step(struct kc_fw *w, const uint8_t *p, size_t avail, enum kc_fw_what *what,
	       uint64_t *n, char *err, size_t errlen);

enum kc_fw_tail {
	KC_FW_TAIL_SAME = 0,   /* no NodeEndpoints: forward the section as it is */
	KC_FW_TAIL_REWRITTEN,  /* rebuilt, exactly as long */
	KC_FW_TAIL_PADDED,     /* rebuilt and padded to the same length */
	KC_FW_TAIL_DROPPED,    /* NodeEndpoints replaced by padding (no hint) */
};
const char *kc_fw_tail_str(enum kc_fw_tail t);

/*
 * The top-level tagged-field section of a Fetch response of version v
 * (len bytes, from its field count to the end of the frame; bytes after
 * the section's end are kept in the length and replaced when it is
 * rewritten). Validated like kc_rw_fetch. KC_OK with *how; unless
 * KC_FW_TAIL_SAME, *out is a malloc'd section of exactly len bytes with no
 * upstream address in it. KC_MALFORMED (err set) when it does not parse
 * or memory runs out ("out of memory").
 */
int kc_rw_fetch_tail(int v, const uint8_t *sec, size_t len, const struct kc_broker_map *map,
		     uint8_t **out, enum kc_fw_tail *how, char *err, size_t errlen);

#endif
