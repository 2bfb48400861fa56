/*
 * log — structured stderr logging (logfmt or JSON), rate limiting and the
 * clocks every module uses. The only process-wide state is the small logger
 * context below (role, cluster, level, format), set once by log_init().
 */
#include "common/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct {
	char role[16];
	char cluster[64];
	enum log_level level;
	bool json;
} log_ctx = { "ferry", "", LOG_INFO, false };

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
log_init(const char *role, const char *cluster, enum log_level level, bool json)
{
	snprintf(log_ctx.role, sizeof log_ctx.role, "%s", role ? role : "ferry");
	snprintf(log_ctx.cluster, sizeof log_ctx.cluster, "%s", cluster ? cluster : "");
	log_ctx.level = level;
	log_ctx.json = json;
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

/* Append s to the line, JSON-escaped. */
static size_t
log_json_escape(char *out, size_t pos, size_t cap, const char *s, size_t n)
{
	for (size_t i = 0; i < n && pos + 7 < cap; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\') {
			out[pos++] = '\\';
			out[pos++] = (char)c;
		} else if (c < 0x20) {
			pos += (size_t)snprintf(out + pos, cap - pos, "\\u%04x", c);
		} else {
			out[pos++] = (char)c;
		}
	}
	return pos;
}

/* Convert logfmt pairs (k=v k2="v 2") into JSON members appended to out. */
static size_t
log_kv_to_json(char *out, size_t pos, size_t cap, const char *kv)
{
	const char *p = kv;
	while (*p && pos + 16 < cap) {
		while (*p == ' ')
			p++;
		const char *k = p;
		while (*p && *p != '=' && *p != ' ')
			p++;
		size_t klen = (size_t)(p - k);
		if (klen == 0)
			break;
		const char *v = "";
		size_t vlen = 0;
		if (*p == '=') {
			p++;
			if (*p == '"') {
				v = ++p;
				while (*p && !(*p == '"' && p[-1] != '\\'))
					p++;
				vlen = (size_t)(p - v);
				if (*p == '"')
					p++;
			} else {
				v = p;
				while (*p && *p != ' ')
					p++;
				vlen = (size_t)(p - v);
			}
		}
		out[pos++] = ',';
		out[pos++] = '"';
		pos = log_json_escape(out, pos, cap, k, klen);
		out[pos++] = '"';
		out[pos++] = ':';
		out[pos++] = '"';
		pos = log_json_escape(out, pos, cap, v, vlen);
		if (pos + 2 < cap)
			out[pos++] = '"';
	}
	return pos;
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
	char ts[40];
	clock_fmt_rfc3339(clock_wall_ms(), ts, sizeof ts);
	char line[2048];
	size_t pos;
	if (log_ctx.json) {
		pos = (size_t)snprintf(line, sizeof line,
		    "{\"ts\":\"%s\",\"level\":\"%s\",\"role\":\"%s\",\"pid\":\"%d\"",
		    ts, log_level_str(level), log_ctx.role, (int)getpid());
		if (log_ctx.cluster[0])
			pos += (size_t)snprintf(line + pos, sizeof line - pos,
			    ",\"cluster\":\"%s\"", log_ctx.cluster);
		pos += (size_t)snprintf(line + pos, sizeof line - pos, ",\"msg\":\"");
		pos = log_json_escape(line, pos, sizeof line - 8, msg, strlen(msg));
		line[pos++] = '"';
		pos = log_kv_to_json(line, pos, sizeof line - 4, kv);
		line[pos++] = '}';
	} else {
		pos = (size_t)snprintf(line, sizeof line, "ts=%s level=%s role=%s pid=%d",
		    ts, log_level_str(level), log_ctx.role, (int)getpid());
		if (log_ctx.cluster[0])
			pos += (size_t)snprintf(line + pos, sizeof line - pos,
			    " cluster=%s", log_ctx.cluster);
		pos += (size_t)snprintf(line + pos, sizeof line - pos, " msg=\"%s\"%s%s",
		    msg, kv[0] ? " " : "", kv);
		if (pos > sizeof line - 2)
			pos = sizeof line - 2;
	}
	line[pos++] = '\n';
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
