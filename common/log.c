/*
 * log — structured stderr logging (logfmt or JSON), rate limiting and the
 * clocks every module uses. The only process-wide state is the small logger
 * context below (proc, cluster, generation, level, format, journald), set
 * once by log_init() (and log_set_generation() in workers).
 */
#include "common/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static struct {
	char proc[16];
	char cluster[64];
	uint64_t gen;
	enum log_level level;
	bool json;
	bool journald;
} log_ctx = { "ferry", "", 0, LOG_INFO, false, false };

static const char *const log_names[] = { "debug", "info", "warn", "error" };

const char *
log_level_str(enum log_level l)
{
	if ((unsigned)l > LOG_ERROR)
		return "unknown";
	return log_names[l];
}

int
log_level_parse(const char *s)
{
	for (int i = 0; i <= LOG_ERROR; i++)
		if (strcmp(s, log_names[i]) == 0)
			return i;
	return -1;
}

void
log_init(const char *proc, const char *cluster, enum log_level level, bool json)
{
	snprintf(log_ctx.proc, sizeof log_ctx.proc, "%s", proc ? proc : "ferry");
	snprintf(log_ctx.cluster, sizeof log_ctx.cluster, "%s", cluster ? cluster : "");
	log_ctx.level = level;
	log_ctx.json = json;
	log_ctx.journald = log_journald_detect();
}

void
log_set_generation(uint64_t gen)
{
	log_ctx.gen = gen;
}

void
log_set_level(enum log_level level)
{
	log_ctx.level = level;
}

bool
log_enabled(enum log_level level)
{
	return level >= log_ctx.level;
}

uint64_t
clock_mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t
clock_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void
clock_fmt_rfc3339(uint64_t wall_ms, char *buf, size_t len)
{
	time_t t = (time_t)(wall_ms / 1000);
	struct tm tm;
	gmtime_r(&t, &tm);
	char base[32];
	strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, len, "%s.%03uZ", base, (unsigned)(wall_ms % 1000));
}

/* --- the formatter ------------------------------------------------------ */

/* A line being built: never writes past cap - reserve, so the closing bytes
 * (the reserve) always fit. */
struct log_buf {
	char *b;
	size_t cap, len;
	bool full;
};

static void
lb_put(struct log_buf *lb, const char *s, size_t n)
{
	if (lb->full)
		return;
	if (lb->len + n > lb->cap) {
		lb->full = true;
		return;
	}
	memcpy(lb->b + lb->len, s, n);
	lb->len += n;
}

static void
lb_puts(struct log_buf *lb, const char *s)
{
	lb_put(lb, s, strlen(s));
}

static void __attribute__((format(printf, 2, 3)))
lb_printf(struct log_buf *lb, const char *fmt, ...)
{
	char tmp[160];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	if (n > 0)
		lb_put(lb, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* Length of the well-formed UTF-8 sequence at s[0..n), 0 if there is none
 * (overlong forms, surrogates and code points above U+10FFFF are not). */
static size_t
log_utf8_len(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	size_t len;
	unsigned cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

/* s[0..n) as the inside of a JSON string; stops before an escape that would
 * not fit whole. */
static void
lb_json(struct log_buf *lb, const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;

	for (size_t i = 0; i < n && !lb->full;) {
		unsigned char c = u[i];
		char esc[8];
		size_t l;

		if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			lb_put(lb, esc, 2);
			i++;
		} else if (c < 0x20 || c == 0x7f) {
			const char *short_esc = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : NULL;
			if (short_esc) {
				lb_puts(lb, short_esc);
			} else {
				snprintf(esc, sizeof esc, "\\u%04x", c);
				lb_put(lb, esc, 6);
			}
			i++;
		} else if ((l = log_utf8_len(u + i, n - i)) == 0) {
			lb_puts(lb, "\\ufffd");
			i++;
		} else {
			lb_put(lb, s + i, l);
			i += l;
		}
	}
}

/* logfmt: quote=true for the inside of a quoted value (also escapes " and
 * \); otherwise only control characters are escaped. */
static void
lb_logfmt(struct log_buf *lb, const char *s, size_t n, bool quote)
{
	for (size_t i = 0; i < n && !lb->full; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[8];

		if (quote && (c == '"' || c == '\\')) {
			esc[0] = '\\';
			esc[1] = (char)c;
			lb_put(lb, esc, 2);
		} else if (c == '\n') {
			lb_puts(lb, "\\n");
		} else if (c == '\t') {
			lb_puts(lb, "\\t");
		} else if (c == '\r') {
			lb_puts(lb, "\\r");
		} else if (c < 0x20 || c == 0x7f) {
			snprintf(esc, sizeof esc, "\\x%02x", c);
			lb_put(lb, esc, 4);
		} else {
			lb_put(lb, s + i, 1);
		}
	}
}

/* Whether an event key repeats a field the line already has. */
static bool
log_fixed_key(const struct log_line_ctx *ctx, const char *k, size_t klen)
{
	static const char *const always[] = { "level", "proc", "pid", "msg" };

	for (size_t i = 0; i < sizeof always / sizeof always[0]; i++)
		if (klen == strlen(always[i]) && memcmp(k, always[i], klen) == 0)
			return true;
	if (klen == 2 && memcmp(k, "ts", 2) == 0)
		return !ctx->journald;
	if (klen == 7 && memcmp(k, "cluster", 7) == 0)
		return ctx->cluster && ctx->cluster[0];
	if (klen == 3 && memcmp(k, "gen", 3) == 0)
		return ctx->gen != 0;
	return false;
}

/* Convert logfmt pairs (k=v k2="v \"2\"") into JSON members. A member that
 * does not fit whole is cut inside its value. A key the line already has
 * (a supervisor event's pid is a worker's) becomes "event_KEY", so keys
 * stay unique. */
static void
lb_kv_json(struct log_buf *lb, const struct log_line_ctx *ctx, const char *kv)
{
	const char *p = kv;
	char val[1024];

	while (*p && !lb->full) {
		while (*p == ' ')
			p++;
		const char *k = p;
		while (*p && *p != '=' && *p != ' ')
			p++;
		size_t klen = (size_t)(p - k), vlen = 0;
		if (klen == 0) {
			if (*p)
				p++;
			continue;
		}
		if (*p == '=') {
			p++;
			if (*p == '"') {
				p++;
				while (*p && *p != '"') {
					if (*p == '\\' && p[1])
						p++;
					if (vlen < sizeof val)
						val[vlen++] = *p;
					p++;
				}
				if (*p == '"')
					p++;
			} else {
				while (*p && *p != ' ') {
					if (vlen < sizeof val)
						val[vlen++] = *p;
					p++;
				}
			}
		}
		/* the key and the value's quotes must fit, else stop here */
		size_t before = lb->len;
		lb_puts(lb, ",\"");
		if (log_fixed_key(ctx, k, klen))
			lb_puts(lb, "event_");
		lb_json(lb, k, klen);
		lb_puts(lb, "\":\"");
		if (lb->full) {
			lb->len = before;
			return;
		}
		lb_json(lb, val, vlen);
		lb->full = false;
		lb->cap += 1;
		lb_puts(lb, "\"");     /* the value's closing quote: reserved */
		lb->cap -= 1;
	}
}

static int
log_syslog_priority(enum log_level level)
{
	switch (level) {
	case LOG_ERROR:
		return 3;
	case LOG_WARN:
		return 4;
	case LOG_INFO:
		return 6;
	case LOG_DEBUG:
		return 7;
	}
	return 6;
}

size_t
log_format_line(char *buf, size_t cap, const struct log_line_ctx *ctx,
		enum log_level level, uint64_t wall_ms, const char *msg, const char *kv)
{
	/* reserve: a value's closing quote, "}" and "\n" */
	struct log_buf lb = { buf, cap - 3, 0, false };
	char ts[40];
	const char *cluster = ctx->cluster ? ctx->cluster : "";

	if (!msg)
		msg = "";
	if (!kv)
		kv = "";
	if (ctx->journald)
		lb_printf(&lb, "<%d>", log_syslog_priority(level));
	else
		clock_fmt_rfc3339(wall_ms, ts, sizeof ts);
	if (ctx->json) {
		lb_puts(&lb, "{");
		if (!ctx->journald)
			lb_printf(&lb, "\"ts\":\"%s\",", ts);
		lb_printf(&lb, "\"level\":\"%s\",\"proc\":\"", log_level_str(level));
		lb_json(&lb, ctx->proc, strlen(ctx->proc));
		lb_puts(&lb, "\"");
		if (cluster[0]) {
			lb_puts(&lb, ",\"cluster\":\"");
			lb_json(&lb, cluster, strlen(cluster));
			lb_puts(&lb, "\"");
		}
		if (ctx->gen)
			lb_printf(&lb, ",\"gen\":\"%llu\"", (unsigned long long)ctx->gen);
		lb_printf(&lb, ",\"pid\":\"%ld\",\"msg\":\"", ctx->pid);
		/* the fixed fields fit any cap >= 256 without the msg; the msg
		 * may be cut, its closing quote is reserved */
		lb_json(&lb, msg, strlen(msg));
		lb.full = false;
		lb.cap += 1;
		lb_puts(&lb, "\"");
		lb.cap -= 1;
		lb_kv_json(&lb, ctx, kv);
		lb.cap += 3;
		lb.full = false;
		lb_puts(&lb, "}");
	} else {
		if (!ctx->journald)
			lb_printf(&lb, "ts=%s ", ts);
		lb_printf(&lb, "level=%s proc=", log_level_str(level));
		lb_logfmt(&lb, ctx->proc, strlen(ctx->proc), false);
		if (cluster[0]) {
			bool plain = strcspn(cluster, " =\"\\") == strlen(cluster);
			lb_puts(&lb, plain ? " cluster=" : " cluster=\"");
			lb_logfmt(&lb, cluster, strlen(cluster), !plain);
			if (!plain)
				lb_puts(&lb, "\"");
		}
		if (ctx->gen)
			lb_printf(&lb, " gen=%llu", (unsigned long long)ctx->gen);
		lb_printf(&lb, " pid=%ld msg=\"", ctx->pid);
		lb_logfmt(&lb, msg, strlen(msg), true);
		lb.full = false;
		lb.cap += 1;
		lb_puts(&lb, "\"");
		lb.cap -= 1;
		if (kv[0]) {
			lb_puts(&lb, " ");
			lb_logfmt(&lb, kv, strlen(kv), false);
		}
		lb.cap += 3;
		lb.full = false;
	}
	lb.cap = cap;
	lb.full = false;
	lb_puts(&lb, "\n");
	return lb.len;
}

bool
log_journald_detect(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	char tail;

	if (js == NULL || sscanf(js, "%llu:%llu%c", &dev, &ino, &tail) != 2)
		return false;
	if (fstat(STDERR_FILENO, &st) != 0)
		return false;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void
log_msg(enum log_level level, const char *msg, const char *kvfmt, ...)
{
	if (!log_enabled(level))
		return;
	int saved = errno;
	char kv[1024] = "";
	if (kvfmt && *kvfmt) {
		va_list ap;
		va_start(ap, kvfmt);
		vsnprintf(kv, sizeof kv, kvfmt, ap);
		va_end(ap);
	}
	struct log_line_ctx ctx = {
		.proc = log_ctx.proc, .cluster = log_ctx.cluster, .gen = log_ctx.gen,
		.pid = (long)getpid(), .json = log_ctx.json, .journald = log_ctx.journald,
	};
	char line[4096];
	size_t pos = log_format_line(line, sizeof line, &ctx, level, clock_wall_ms(), msg, kv);
	/* One write per line so workers sharing stderr do not interleave. */
	ssize_t w = write(STDERR_FILENO, line, pos);
	(void)w;
	errno = saved;
}

bool
log_ratelimit_ok(struct log_ratelimit *rl, unsigned per_sec, unsigned burst,
		 uint64_t *suppressed_out)
{
	uint64_t now = clock_mono_ms();
	if (rl->last_ms == 0) {
		rl->tokens = burst;
		rl->last_ms = now;
	}
	rl->tokens += (double)(now - rl->last_ms) * per_sec / 1000.0;
	if (rl->tokens > burst)
		rl->tokens = burst;
	rl->last_ms = now;
	if (rl->tokens >= 1.0) {
		rl->tokens -= 1.0;
		if (suppressed_out)
			*suppressed_out = rl->suppressed;
		rl->suppressed = 0;
		return true;
	}
	rl->suppressed++;
	return false;
}
