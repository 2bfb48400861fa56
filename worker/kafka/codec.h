/*
 * codec — the pure Kafka wire codec of ferry: big-endian integers, unsigned
 * varints, (compact) strings, arrays and bytes, tagged-field sections, the
 * per-API header-version rules, request-header parsing and Produce acks
 * extraction.  No sockets, no event loop, no logging, no configuration:
 * every function works on caller-supplied byte buffers and never allocates.
 *
 * Return conventions: functions returning int use enum kc_status (KC_OK = 0,
 * KC_NEED_MORE = 1 when the bytes present do not yet cover what is needed,
 * KC_MALFORMED = -1 when the frame can never parse).  On failure a short
 * static reason is copied into err (err may be NULL).  Every parser of the
 * worker follows it: sasl.h (SASL_OK, SASL_NEED_MORE, SASL_MALFORMED and
 * more negative reasons) and worker/frame.h (FRAME_OK, FRAME_NEED_MORE,
 * FRAME_MALFORMED, ...) spell their values from these; 0 is always "done,
 * go on", 1 "wait for more bytes", negative "never".
 *
 * The bounded reader (struct kc_reader) is shared with rewrite.c and
 * apiversions.c: it knows the end of the frame (reading past it is
 * malformed) and the end of the bytes present (reading past that, but inside
 * the frame, needs more).  Its status is sticky: after the first failure
 * every read returns 0 and does nothing, so walkers check once at the end.
 */
#ifndef FERRY_WORKER_KAFKA_CODEC_H
#define FERRY_WORKER_KAFKA_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum kc_status { KC_OK = 0, KC_NEED_MORE = 1, KC_MALFORMED = -1 };

/* Kafka's generated code rejects longer strings on read and write. */
#define KC_MAX_STRING		0x7fff
/* Largest API key this codec has a name and a flexible-version rule for. */
#define KC_API_KEY_MAX_KNOWN	94

enum kc_api_key {
	KC_API_PRODUCE = 0,
	KC_API_FETCH = 1,
	KC_API_METADATA = 3,
	KC_API_CONTROLLED_SHUTDOWN = 7,
	KC_API_FIND_COORDINATOR = 10,
	KC_API_SASL_HANDSHAKE = 17,
	KC_API_API_VERSIONS = 18,
	KC_API_SASL_AUTHENTICATE = 36,
	KC_API_DESCRIBE_CLUSTER = 60,
	KC_API_SHARE_FETCH = 78,
	KC_API_SHARE_ACKNOWLEDGE = 79
};

struct kc_req_header {
	int32_t size;            /* value of the size prefix */
	int16_t api_key, api_version;
	int32_t correlation_id;
	int16_t client_id_len;   /* -1 = null */
	const uint8_t *client_id;/* points into the buffer */
	size_t header_len;       /* bytes from the start of the size prefix to the start of the body */
	int header_version;      /* 0, 1 or 2 */
};

/*
 * buf points at the 4-byte size prefix; avail = bytes available (may be less
 * than the frame).  KC_NEED_MORE if avail does not cover the whole header;
 * KC_MALFORMED for size < 8 or > max_frame, negative sizes, negative api key
 * or version, bad string lengths (past the frame end, < -1), bad tag sections.
 */
int kc_parse_request_header(const uint8_t *buf, size_t avail, uint64_t max_frame,
			    struct kc_req_header *h, char *err, size_t errlen);
/* For responses: size prefix + correlation id (8 bytes). size < 4 or > max_frame → malformed. */
int kc_parse_response_prefix(const uint8_t *buf, size_t avail, uint64_t max_frame,
			     int32_t *size, int32_t *correlation_id, char *err, size_t errlen);

/* Request header version: 2 when flexible, 1 otherwise, 0 for ControlledShutdown v0. */
int kc_request_header_version(int16_t api_key, int16_t api_version);
/* Response header version: 1 when flexible, 0 otherwise; ApiVersions always 0. */
int kc_response_header_version(int16_t api_key, int16_t api_version);
/*
 * Whether (key, version) uses the flexible (KIP-482) encoding.  Known keys
 * 0..KC_API_KEY_MAX_KNOWN follow the apache/kafka schemas.  Keys above that
 * are assumed flexible from v0 (every API added since KIP-482 is; this is
 * also grepplabs/kafka-proxy's rule).  Negative keys/versions: false.
 */
bool kc_is_flexible(int16_t api_key, int16_t api_version);

/*
 * Produce (key 0) acks: buf at the size prefix, avail bytes, h parsed by
 * kc_parse_request_header.  Walks transactional_id (v3+, nullable string;
 * compact in v9+) then reads acks INT16.  KC_OK / KC_NEED_MORE / KC_MALFORMED
 * (also for a header that is not Produce).
 */
int kc_produce_acks(const uint8_t *buf, size_t avail, const struct kc_req_header *h, int16_t *acks);

const char *kc_api_name(int16_t api_key);  /* "Produce", "Fetch", ..., "Unknown" */
const char *kc_status_str(enum kc_status s);

/* ---- big-endian helpers (no bounds checks: the caller has checked) ---- */

static inline int16_t
kc_get_i16(const uint8_t *p)
{
	return (int16_t)(uint16_t)((uint16_t)p[0] << 8 | p[1]);
}

static inline int32_t
kc_get_i32(const uint8_t *p)
{
	return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3]);
}

static inline void
kc_put_i16(uint8_t *p, int16_t v)
{
	uint16_t u = (uint16_t)v;

	p[0] = (uint8_t)(u >> 8);
	p[1] = (uint8_t)u;
}

static inline void
kc_put_i32(uint8_t *p, int32_t v)
{
	uint32_t u = (uint32_t)v;

	p[0] = (uint8_t)(u >> 24);
	p[1] = (uint8_t)(u >> 16);
	p[2] = (uint8_t)(u >> 8);
	p[3] = (uint8_t)u;
}

/* ---- unsigned varints ---- */

/* Bytes needed to encode v (1..5). */
size_t kc_uvarint_size(uint32_t v);
/* Writes v at p (which must hold kc_uvarint_size(v) bytes); returns the width. */
size_t kc_put_uvarint(uint8_t *p, uint32_t v);
/*
 * Decodes a varint of at most 5 bytes from p[0..n).  Returns the width, 0
 * when the n bytes run out before the last byte, or -1 when it is longer than
 * 5 bytes or does not fit 32 bits.
 */
int kc_get_uvarint(const uint8_t *p, size_t n, uint32_t *v);

/* ---- bounded reader ---- */

struct kc_reader {
	const uint8_t *p;	/* cursor */
	const uint8_t *end;	/* frame end: reading past it is malformed */
	const uint8_t *avail;	/* end of bytes present (<= end): past it needs more */
	int status;		/* enum kc_status, sticky */
	const char *err;	/* static reason once status != KC_OK */
};

/* Whole frame present. */
void kc_rd_init(struct kc_reader *r, const uint8_t *buf, size_t len);
/* frame_len bytes make the frame, only avail of them are present. */
void kc_rd_init_partial(struct kc_reader *r, const uint8_t *buf, size_t frame_len, size_t avail);
/* Marks the reader failed (first failure wins); returns false. */
bool kc_rd_fail(struct kc_reader *r, int status, const char *why);
static inline bool
kc_rd_ok(const struct kc_reader *r)
{
	return r->status == KC_OK;
}
static inline size_t
kc_rd_left(const struct kc_reader *r)
{
	return (size_t)(r->end - r->p);
}
/* True when n more bytes can be read; otherwise fails the reader. */
bool kc_rd_need(struct kc_reader *r, size_t n);
bool kc_rd_skip(struct kc_reader *r, size_t n);
int8_t kc_rd_i8(struct kc_reader *r);
int16_t kc_rd_i16(struct kc_reader *r);
int32_t kc_rd_i32(struct kc_reader *r);
int64_t kc_rd_i64(struct kc_reader *r);
uint32_t kc_rd_uvarint(struct kc_reader *r);
/*
 * A string: INT16 length (compact: varint N+1).  Returns the length, or -1
 * for null (only when nullable; otherwise the reader fails).  Lengths above
 * KC_MAX_STRING or past the frame end fail.  *s (may be NULL) gets the bytes.
 */
int32_t kc_rd_string(struct kc_reader *r, bool compact, bool nullable, const uint8_t **s);
/* BYTES: INT32 length (compact: varint N+1); -1 for null when nullable. */
int32_t kc_rd_bytes(struct kc_reader *r, bool compact, bool nullable, const uint8_t **s);
/*
 * An array count: INT32 (compact: varint N+1).  Returns N, or -1 for null
 * (nullable only).  min_elem is the smallest encoded element size: a count
 * that cannot fit in the rest of the frame fails at once.
 */
int32_t kc_rd_array(struct kc_reader *r, bool compact, bool nullable, size_t min_elem);
/* Skips an array of INT32 (compact or not, non-nullable). */
bool kc_rd_i32_array(struct kc_reader *r, bool compact);
/* Skips a tagged-field section, checking every size against the frame. */
bool kc_rd_tags(struct kc_reader *r);

/* ---- bounded writer ---- */

struct kc_writer {
	uint8_t *p, *end;
	bool overflow;		/* sticky: a write did not fit */
};

void kc_wr_init(struct kc_writer *w, uint8_t *buf, size_t cap);
void kc_wr_bytes(struct kc_writer *w, const void *src, size_t n);
void kc_wr_i8(struct kc_writer *w, int8_t v);
void kc_wr_i16(struct kc_writer *w, int16_t v);
void kc_wr_i32(struct kc_writer *w, int32_t v);
void kc_wr_uvarint(struct kc_writer *w, uint32_t v);
/* A (compact) string; s == NULL writes null. */
void kc_wr_string(struct kc_writer *w, bool compact, const char *s, size_t len);

/* A request frame begins at buf: a size placeholder and the request header
 * (v1, or v2 with empty tags when (key, version) is flexible; client_id
 * NULL = null). kc_wr_frame_end fills the size prefix: the frame's length,
 * or 0 when a write did not fit. */
void kc_wr_request_header(struct kc_writer *w, int16_t key, int16_t version, int32_t corr,
			  const char *client_id);
size_t kc_wr_frame_end(struct kc_writer *w, uint8_t *buf);

/* Copies a static reason into err (NULL-safe). */
void kc_set_err(char *err, size_t errlen, const char *why);

#endif
