/*
 * log — structured logging to stderr, logfmt or JSON, one line per event.
 *
 * Every process (supervisor, worker, ferryctl) has one logger configured by
 * log_init(); the role and cluster name are stamped on each line so the
 * interleaved stderr of ferryd and its workers stays readable. log_ratelimit
 * lets hot paths (malformed frames from a peer) log at a bounded rate.
 */
#ifndef FERRY_COMMON_LOG_H
#define FERRY_COMMON_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR };

const char *log_level_str(enum log_level l);
/* "debug" ... "error" -> level; -1 if unknown. */
int log_level_parse(const char *s);

/* role: "supervisor", "worker", "ferryctl"; cluster may be NULL. */
void log_init(const char *role, const char *cluster, enum log_level level, bool json);
void log_set_level(enum log_level level);
bool log_enabled(enum log_level level);

/* msg is a short event description; the format after it adds key=value
 * pairs in logfmt syntax, e.g.
 *   log_msg(LOG_INFO, "worker started", "pid=%d gen=%llu", pid, gen);
 * In JSON mode the pairs are converted to JSON members. */
void log_msg(enum log_level level, const char *msg, const char *kvfmt, ...)
	__attribute__((format(printf, 3, 4)));

#define log_debug(msg, ...) do { if (log_enabled(LOG_DEBUG)) log_msg(LOG_DEBUG, msg, __VA_ARGS__); } while (0)
#define log_info(msg, ...)  log_msg(LOG_INFO, msg, __VA_ARGS__)
#define log_warn(msg, ...)  log_msg(LOG_WARN, msg, __VA_ARGS__)
#define log_error(msg, ...) log_msg(LOG_ERROR, msg, __VA_ARGS__)

/* A token bucket: at most `burst` events, refilled at `per_sec`. Returns
 * true when this event may be logged; counts the suppressed ones so the next
 * logged line can say how many were dropped. */
struct log_ratelimit {
	double tokens;
	uint64_t last_ms;
	uint64_t suppressed;
};
bool log_ratelimit_ok(struct log_ratelimit *rl, unsigned per_sec, unsigned burst,
		      uint64_t *suppressed_out);

/* Monotonic and wall clocks in milliseconds. */
uint64_t clock_mono_ms(void);
uint64_t clock_wall_ms(void);
/* RFC 3339 UTC "2026-11-21T08:04:05.123Z" from wall-clock ms. */
void clock_fmt_rfc3339(uint64_t wall_ms, char *buf, size_t len);

#endif
