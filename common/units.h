/*
 * units — parsing and printing of the value types used in configuration:
 * durations ("500ms", "30s", "10m", "1h"), sizes ("512KiB", "100MiB", plain
 * bytes), host:port addresses ("127.0.0.1:9092", "[::1]:9092",
 * "kafka-1.example:9092"), port ranges ("9193-9195") and integer ranges
 * ("1-3" or "1,2,5").
 *
 * Every parser returns 0 on success and -1 on malformed input, writing a
 * short human reason (no file:line; the caller adds it) into err. The only
 * one that allocates, units_parse_int_list, also returns -1 when out of
 * memory, with the reason "out of memory" (CFG_ERR_OOM).
 */
#ifndef FERRY_COMMON_UNITS_H
#define FERRY_COMMON_UNITS_H

#include <stddef.h>
#include <stdint.h>

#include "common/config.h"

int units_parse_duration_ms(const char *s, uint64_t *out, char *err, size_t errlen);
int units_parse_size(const char *s, uint64_t *out, char *err, size_t errlen);
int units_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out,
		    char *err, size_t errlen);
/* host:port; port 1..65535 (0 allowed when allow_zero). */
int units_parse_addr(const char *s, struct cfg_addr *out, int allow_zero,
		     char *err, size_t errlen);
/* "first-last" or a single "port". */
int units_parse_port_range(const char *s, uint16_t *first, uint16_t *last,
			   char *err, size_t errlen);
/* Integer list: "1-3", "1,2,5", "0-2,7". Non-negative int32, no duplicates.
 * *out is malloc'd. */
int units_parse_int_list(const char *s, int32_t **out, size_t *n,
			 char *err, size_t errlen);

/* Normalised printing, inverse of the parsers ("30s", "100MiB", "[::1]:9092"). */
void units_fmt_duration(uint64_t ms, char *buf, size_t len);
void units_fmt_size(uint64_t bytes, char *buf, size_t len);
void units_fmt_addr(const struct cfg_addr *a, char *buf, size_t len);

#endif
