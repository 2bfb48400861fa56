/*
 * sniff — what the first bytes an upstream sends on a connection say about
 * it: the start of a Kafka response, or something else (a TLS record, an
 * HTTP status line, other text, a size prefix no broker sends). Used to
 * tell an operator why an upstream is not counted as a healthy Kafka
 * broker. Pure: no sockets, no allocation, no logging.
 *
 * The first 4 bytes of a Kafka response are its big-endian size, and a
 * first answer to ApiVersions or Metadata is small. Other protocols give
 * themselves away in those same 4 bytes: a TLS record starts with content
 * type 20..23 (change_cipher_spec, alert, handshake, application_data) and
 * version 3.0..3.4 (0x14030000 read as a size is 335 MB); "HTTP" read as a
 * size is 1.2 GB; any printable ASCII first byte makes 512 MB or more.
 * These verdicts are given whatever max_frame is: no first response of a
 * broker is that large. Otherwise a size below 4 (a response carries at
 * least its correlation id) or above max_frame is BAD_SIZE, and anything
 * else is KAFKA ("could be": the frame's parser has the last word).
 */
#ifndef FERRY_WORKER_KAFKA_SNIFF_H
#define FERRY_WORKER_KAFKA_SNIFF_H

#include <stddef.h>
#include <stdint.h>

enum kc_sniff {
	KC_SNIFF_NEED_MORE = 0, /* fewer than 4 bytes */
	KC_SNIFF_KAFKA,         /* a plausible response size prefix */
	KC_SNIFF_TLS,           /* a TLS record header */
	KC_SNIFF_HTTP,          /* "HTTP" (a status line) */
	KC_SNIFF_TEXT,          /* other printable text (a banner, an error line) */
	KC_SNIFF_BAD_SIZE,      /* size prefix < 4 or > max_frame */
};

/* Verdict on the first n bytes of what an upstream sent (n may exceed 4). */
enum kc_sniff kc_sniff_response(const uint8_t *p, size_t n, uint64_t max_frame);

/* "need-more", "kafka", "TLS", "HTTP", "text", "bad-size". */
const char *kc_sniff_str(enum kc_sniff s);

/*
 * One line for an operator about a verdict other than KAFKA, naming what
 * the bytes look like and showing the first of them (hex for binary, quoted
 * text for HTTP and text), e.g.
 *   first response bytes look like TLS (15 03 03 00 02 02 46)
 *   first response bytes look like HTTP ("HTTP/1.1 400 Bad Request")
 *   malformed response: size prefix -2091169 (not 4..104857600) (ff e0 ...)
 * Written to buf (always NUL-terminated when len > 0); returns buf.
 */
char *kc_sniff_describe(enum kc_sniff s, const uint8_t *p, size_t n, uint64_t max_frame,
			char *buf, size_t len);

#endif
