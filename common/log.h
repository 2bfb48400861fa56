/*
 * log — structured logging to stderr, logfmt or JSON, one line per event.
 *
 * Every process (supervisor, worker, ferryctl) has one logger configured by
 * log_init(); the process kind (proc), cluster name, generation and pid are
 * stamped on each line so the interleaved stderr of ferryd and its workers
 * stays readable. Under systemd-journald (stderr is $JOURNAL_STREAM) lines
 * get a syslog priority prefix instead of a timestamp. log_ratelimit
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

/* proc: "supervisor", "worker", "ferryctl"; cluster may be NULL. Also
 * detects whether stderr is journald's stream (log_journald_detect()). */
void log_init(const char *proc, const char *cluster, enum log_level level, bool json);
void log_set_level(enum log_level level);
bool log_enabled(enum log_level level);
/* The worker generation stamped on every line as gen= (0: none, the
 * supervisor's lines carry gen per event instead). */
void log_set_generation(uint64_t gen);

/* True when fd 2 is the stream systemd-journald handed us: $JOURNAL_STREAM
 * is "DEV:INODE" and equals fstat(2)'s st_dev:st_ino. */
bool log_journald_detect(void);

/* What a line carries besides the event (one per process; exposed so the
 * formatter can be unit-tested). */
struct log_line_ctx {
	const char *proc;
	const char *cluster;     /* "" or NULL: left out */
	uint64_t gen;            /* 0: left out */
	long pid;
	bool json;
	bool journald;           /* "<N>" syslog priority prefix, no ts */
};

/*
 * Format one line (newline-terminated) into buf[cap] (cap >= 256); returns
 * its length. Fields in order: ts, level, proc, cluster, gen, pid, msg,
 * then the event's key=value pairs. logfmt: msg is quoted with \" \\ \n
 * \t and \xHH escapes; control characters in the pairs are escaped the
 * same way so one event is always one line. JSON: one object, every value a
 * string, escaped per RFC 8259, invalid UTF-8 replaced by U+FFFD; a line
 * too long for buf is cut inside a value and still closed ("...}" valid).
 * journald: the line starts with <3> error, <4> warn, <6> info, <7> debug
 * and has no ts (the journal stamps it).
 */
size_t log_format_line(char *buf, size_t cap, const struct log_line_ctx *ctx,
		       enum log_level level, uint64_t wall_ms, const char *msg, const char *kv);

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
