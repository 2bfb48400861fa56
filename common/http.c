/*
 * http — incremental HTTP/1.1 request parser, response formatter and a
 * one-shot response parser; see http.h for what is accepted and why.
 *
 * The request parser works line by line as bytes arrive: the request line
 * and each header field are checked as soon as their line is complete, so a
 * malformed request is refused without waiting for the rest of it. Strings
 * are copied out of the input buffer (which may move as it grows); only the
 * body points into it, once the request is complete.
 */
#include "common/http.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static enum http_result http_fail(struct http_parser *p, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

void
http_parser_init(struct http_parser *p)
{
	memset(p, 0, sizeof *p);
	p->state = HTTP_PARSER_HEAD;
}

void
http_parser_free(struct http_parser *p)
{
	size_t i;

	for (i = 0; i < p->req.n_headers; i++) {
		free(p->req.headers[i].name);
		free(p->req.headers[i].value);
	}
	free(p->req.headers);
	free(p->req.target);
	free(p->req.path);
	free(p->req.query);
	free(p->buf);
	memset(p, 0, sizeof *p);
}

const char *
http_parser_state_str(enum http_parser_state s)
{
	switch (s) {
	case HTTP_PARSER_HEAD:
		return "head";
	case HTTP_PARSER_BODY:
		return "body";
	case HTTP_PARSER_DONE:
		return "done";
	case HTTP_PARSER_ERROR:
		return "error";
	}
	return "unknown";
}

static enum http_result
http_fail(struct http_parser *p, int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p->error, sizeof p->error, fmt, ap);
	va_end(ap);
	p->status = status;
	p->state = HTTP_PARSER_ERROR;
	return HTTP_ERROR;
}

/* RFC 9110 tchar */
static bool
http_is_tchar(unsigned char c)
{
	if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
		return true;
	return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool
http_is_token(const char *s, size_t n)
{
	size_t i;

	if (n == 0)
		return false;
	for (i = 0; i < n; i++)
		if (!http_is_tchar((unsigned char)s[i]))
			return false;
	return true;
}

static int
http_hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static char *
http_strndup(const char *s, size_t n)
{
	char *d = malloc(n + 1);

	if (d == NULL)
		return NULL;
	memcpy(d, s, n);
	d[n] = '\0';
	return d;
}

int
http_pct_decode_into(const char *s, size_t n, bool plus_space, char *out, size_t cap)
{
	size_t i, j = 0;
	int hi, lo;

	if (cap == 0)
		return -1;
	for (i = 0; i < n; i++) {
		char c = s[i];

		if (c == '+' && plus_space) {
			c = ' ';
		} else if (c == '%') {
			if (i + 2 >= n)
				return -1;
			hi = http_hexval((unsigned char)s[i + 1]);
			lo = http_hexval((unsigned char)s[i + 2]);
			if (hi < 0 || lo < 0)
				return -1;
			c = (char)(hi << 4 | lo);
			i += 2;
		}
		if (c == '\0' || j + 1 >= cap)
			return -1;
		out[j++] = c;
	}
	out[j] = '\0';
	return 0;
}

/* Percent-decode s[0..n) into a new string (plus_space: a '+' is a space,
 * as in a query); NULL on bad escapes, %00 or out of memory. */
static char *
http_pct_decode(const char *s, size_t n, bool plus_space)
{
	char *d = malloc(n + 1);

	if (d != NULL && http_pct_decode_into(s, n, plus_space, d, n + 1) == -1) {
		free(d);
		d = NULL;
	}
	return d;
}

int
http_query_next(const char *query, size_t *pos, char **name, char **value)
{
	size_t n = query ? strlen(query) : 0;

	*name = *value = NULL;
	while (*pos < n) {
		const char *p = query + *pos, *amp = memchr(p, '&', n - *pos);
		size_t len = amp ? (size_t)(amp - p) : n - *pos;
		const char *eq = memchr(p, '=', len);

		*pos += len + (amp ? 1 : 0);
		if (len == 0)
			continue;
		if (eq == p)
			return -1;
		*name = http_pct_decode(p, eq ? (size_t)(eq - p) : len, true);
		*value = eq ? http_pct_decode(eq + 1, len - (size_t)(eq - p) - 1, true) :
		    http_strndup("", 0);
		if (*name == NULL || *value == NULL || (*name)[0] == '\0') {
			free(*name);
			free(*value);
			*name = *value = NULL;
			return -1;
		}
		return 1;
	}
	return 0;
}

static enum http_result
http_parse_target(struct http_parser *p, const char *t, size_t n)
{
	struct http_request *r = &p->req;
	const char *path = t, *end = t + n, *q, *hash;
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)t[i];
		if (c <= 0x20 || c >= 0x7f)
			return http_fail(p, 400, "invalid character in request target");
	}
	if (n >= 7 && (strncasecmp(t, "http://", 7) == 0 ||
	    (n >= 8 && strncasecmp(t, "https://", 8) == 0))) {
		/* absolute form: skip scheme and authority */
		const char *auth = memchr(t, ':', n) + 3;
		path = memchr(auth, '/', (size_t)(end - auth));
		if (path == NULL)
			path = end;
		if (path == auth)
			return http_fail(p, 400, "request target has no host");
	} else if (!(n == 1 && t[0] == '*') && t[0] != '/')
		return http_fail(p, 400, "request target must be an absolute path");

	if ((r->target = http_strndup(t, n)) == NULL)
		return http_fail(p, 500, "out of memory");
	if ((hash = memchr(path, '#', (size_t)(end - path))) != NULL)
		end = hash;
	q = memchr(path, '?', (size_t)(end - path));
	if (q != NULL) {
		if ((r->query = http_strndup(q + 1, (size_t)(end - q - 1))) == NULL)
			return http_fail(p, 500, "out of memory");
		end = q;
	}
	if (path == end)
		r->path = http_strndup("/", 1);
	else if ((r->path = http_pct_decode(path, (size_t)(end - path), false)) == NULL)
		return http_fail(p, 400, "bad percent-encoding in request target");
	if (r->path == NULL)
		return http_fail(p, 500, "out of memory");
	return HTTP_NEED_MORE;
}

static enum http_result
http_parse_request_line(struct http_parser *p, const char *line, size_t n)
{
	struct http_request *r = &p->req;
	const char *sp1, *sp2, *ver;
	size_t mlen, tlen, vlen;

	sp1 = memchr(line, ' ', n);
	if (sp1 == NULL)
		return http_fail(p, 400, "malformed request line");
	mlen = (size_t)(sp1 - line);
	sp2 = memchr(sp1 + 1, ' ', n - mlen - 1);
	if (sp2 == NULL)
		return http_fail(p, 400, "malformed request line");
	tlen = (size_t)(sp2 - sp1 - 1);
	ver = sp2 + 1;
	vlen = n - (size_t)(ver - line);

	if (!http_is_token(line, mlen))
		return http_fail(p, 400, "malformed request method");
	if (mlen >= HTTP_METHOD_MAX)
		return http_fail(p, 501, "method not implemented");
	memcpy(r->method, line, mlen);
	r->method[mlen] = '\0';

	if (vlen != 8 || memcmp(ver, "HTTP/", 5) != 0 || ver[6] != '.' ||
	    ver[5] < '0' || ver[5] > '9' || ver[7] < '0' || ver[7] > '9')
		return http_fail(p, 400, "malformed HTTP version");
	if (ver[5] != '1')
		return http_fail(p, 505, "HTTP version not supported");
	r->version_minor = ver[7] - '0';

	if (tlen == 0)
		return http_fail(p, 400, "malformed request line");
	return http_parse_target(p, sp1 + 1, tlen);
}

static enum http_result
http_parse_header_line(struct http_parser *p, const char *line, size_t n)
{
	struct http_request *r = &p->req;
	struct http_header *h;
	const char *colon, *v, *ve;
	size_t i;

	if (line[0] == ' ' || line[0] == '\t')
		return http_fail(p, 400, "obsolete header line folding");
	colon = memchr(line, ':', n);
	if (colon == NULL)
		return http_fail(p, 400, "malformed header field");
	if (!http_is_token(line, (size_t)(colon - line)))
		return http_fail(p, 400, "malformed header field name");
	v = colon + 1;
	ve = line + n;
	while (v < ve && (*v == ' ' || *v == '\t'))
		v++;
	while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
		ve--;
	for (i = 0; i < (size_t)(ve - v); i++) {
		unsigned char c = (unsigned char)v[i];
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return http_fail(p, 400, "invalid character in header field value");
	}
	if (r->n_headers >= HTTP_MAX_HEADERS)
		return http_fail(p, 431, "too many header fields");
	h = realloc(r->headers, (r->n_headers + 1) * sizeof *h);
	if (h == NULL)
		return http_fail(p, 500, "out of memory");
	r->headers = h;
	h = &r->headers[r->n_headers];
	h->name = http_strndup(line, (size_t)(colon - line));
	h->value = http_strndup(v, (size_t)(ve - v));
	if (h->name == NULL || h->value == NULL) {
		free(h->name);
		free(h->value);
		return http_fail(p, 500, "out of memory");
	}
	r->n_headers++;
	return HTTP_NEED_MORE;
}

const char *
http_request_header(const struct http_request *r, const char *name)
{
	size_t i;

	for (i = 0; i < r->n_headers; i++)
		if (strcasecmp(r->headers[i].name, name) == 0)
			return r->headers[i].value;
	return NULL;
}

/* Content-Length: a list of equal decimal values across every field. */
static enum http_result
http_check_framing(struct http_parser *p)
{
	struct http_request *r = &p->req;
	bool seen = false, te = false;
	uint64_t len = 0;
	size_t i;

	for (i = 0; i < r->n_headers; i++) {
		const char *name = r->headers[i].name, *s = r->headers[i].value;

		if (strcasecmp(name, "Transfer-Encoding") == 0) {
			te = true;
			continue;
		}
		if (strcasecmp(name, "Expect") == 0) {
			if (strcasecmp(s, "100-continue") == 0)
				r->expect_continue = true;
			continue;
		}
		if (strcasecmp(name, "Content-Length") != 0)
			continue;
		for (;;) {
			uint64_t v = 0;
			size_t digits = 0;

			while (*s == ' ' || *s == '\t')
				s++;
			while (*s >= '0' && *s <= '9') {
				if (v > (UINT64_MAX - 9) / 10)
					return http_fail(p, 400, "Content-Length out of range");
				v = v * 10 + (uint64_t)(*s++ - '0');
				digits++;
			}
			while (*s == ' ' || *s == '\t')
				s++;
			if (digits == 0 || (*s != ',' && *s != '\0'))
				return http_fail(p, 400, "malformed Content-Length");
			if (seen && v != len)
				return http_fail(p, 400, "conflicting Content-Length values");
			seen = true;
			len = v;
			if (*s == '\0')
				break;
			s++;
		}
	}
	if (te && seen)
		return http_fail(p, 400, "both Transfer-Encoding and Content-Length");
	if (te)
		return http_fail(p, 411, "Transfer-Encoding is not supported; send Content-Length");
	if (seen && len > HTTP_MAX_BODY)
		return http_fail(p, 413, "request body larger than %u bytes", HTTP_MAX_BODY);
	r->has_content_length = seen;
	r->content_length = (size_t)len;
	return HTTP_NEED_MORE;
}

static enum http_result
http_check_body(struct http_parser *p)
{
	struct http_request *r = &p->req;

	if (p->len - p->head_len < r->content_length)
		return HTTP_NEED_MORE;
	r->body = p->buf + p->head_len;
	r->body_len = r->content_length;
	p->state = HTTP_PARSER_DONE;
	return HTTP_DONE;
}

static enum http_result
http_parse_head(struct http_parser *p)
{
	enum http_result rc;

	for (;;) {
		const char *line = p->buf + p->scanned, *nl;
		size_t n;

		/* resume the LF search where the last feed stopped, so a line
		 * trickling in byte by byte is not rescanned each time */
		nl = memchr(line + p->searched, '\n', p->len - p->scanned - p->searched);
		if (nl == NULL) {
			p->searched = p->len - p->scanned;
			if (p->len > HTTP_MAX_HEAD) {
				if (!p->head_started)
					return http_fail(p, 414, "request line too long");
				return http_fail(p, 431, "request header section too large");
			}
			return HTTP_NEED_MORE;
		}
		if ((size_t)(nl - p->buf) + 1 > HTTP_MAX_HEAD) {
			if (!p->head_started)
				return http_fail(p, 414, "request line too long");
			return http_fail(p, 431, "request header section too large");
		}
		n = (size_t)(nl - line);
		if (n > 0 && line[n - 1] == '\r')
			n--;
		if (memchr(line, '\r', n) != NULL)
			return http_fail(p, 400, "bare CR in request head");
		if (memchr(line, '\0', n) != NULL)
			return http_fail(p, 400, "NUL byte in request head");
		p->scanned = (size_t)(nl - p->buf) + 1;
		p->searched = 0;

		if (!p->head_started) {
			if (n == 0)
				continue;       /* RFC 9112 §2.2: skip leading CRLFs */
			p->head_started = true;
			rc = http_parse_request_line(p, line, n);
		} else if (n == 0) {
			p->head_len = p->scanned;
			if ((rc = http_check_framing(p)) != HTTP_NEED_MORE)
				return rc;
			p->state = HTTP_PARSER_BODY;
			return http_check_body(p);
		} else
			rc = http_parse_header_line(p, line, n);
		if (rc != HTTP_NEED_MORE)
			return rc;
	}
}

enum http_result
http_parser_feed(struct http_parser *p, const char *data, size_t n)
{
	switch (p->state) {
	case HTTP_PARSER_DONE:
		return HTTP_DONE;
	case HTTP_PARSER_ERROR:
		return HTTP_ERROR;
	case HTTP_PARSER_HEAD:
	case HTTP_PARSER_BODY:
		break;
	}
	if (p->len + n + 1 > p->cap) {
		size_t cap = p->cap ? p->cap : 1024;
		char *b;

		/* the caller feeds bounded chunks; the limits below are checked
		 * right after, so growth stays within head + body + one chunk */
		while (cap < p->len + n + 1)
			cap *= 2;
		if ((b = realloc(p->buf, cap)) == NULL)
			return http_fail(p, 500, "out of memory");
		p->buf = b;
		p->cap = cap;
	}
	if (n > 0)
		memcpy(p->buf + p->len, data, n);
	p->len += n;
	p->buf[p->len] = '\0';

	if (p->state == HTTP_PARSER_HEAD)
		return http_parse_head(p);
	return http_check_body(p);
}

bool
http_parser_wants_continue(const struct http_parser *p)
{
	return p->state == HTTP_PARSER_BODY && p->req.expect_continue &&
	    p->len - p->head_len < p->req.content_length;
}

const char *
http_status_reason(int status)
{
	switch (status) {
	case 100: return "Continue";
	case 200: return "OK";
	case 202: return "Accepted";
	case 204: return "No Content";
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 409: return "Conflict";
	case 411: return "Length Required";
	case 413: return "Content Too Large";
	case 414: return "URI Too Long";
	case 415: return "Unsupported Media Type";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 503: return "Service Unavailable";
	case 505: return "HTTP Version Not Supported";
	}
	return status >= 500 ? "Error" : status >= 400 ? "Client Error" : "Status";
}

char *
http_format_response(int status, const char *content_type,
		     const char *extra_headers, const char *body,
		     size_t body_len, bool omit_body, size_t *out_len)
{
	char head[1024];
	int hn;
	size_t total;
	char *out;

	hn = snprintf(head, sizeof head,
	    "HTTP/1.1 %d %s\r\n"
	    "%s%s%s"
	    "Content-Length: %zu\r\n"
	    "Cache-Control: no-store\r\n"
	    "Connection: close\r\n",
	    status, http_status_reason(status),
	    content_type ? "Content-Type: " : "",
	    content_type ? content_type : "",
	    content_type ? "\r\n" : "",
	    body_len);
	if (hn < 0 || (size_t)hn >= sizeof head)
		return NULL;
	total = (size_t)hn + (extra_headers ? strlen(extra_headers) : 0) + 2 +
	    (omit_body ? 0 : body_len);
	if ((out = malloc(total + 1)) == NULL)
		return NULL;
	memcpy(out, head, (size_t)hn);
	*out_len = (size_t)hn;
	if (extra_headers) {
		memcpy(out + *out_len, extra_headers, strlen(extra_headers));
		*out_len += strlen(extra_headers);
	}
	memcpy(out + *out_len, "\r\n", 2);
	*out_len += 2;
	if (!omit_body && body_len > 0) {
		memcpy(out + *out_len, body, body_len);
		*out_len += body_len;
	}
	out[*out_len] = '\0';
	return out;
}

/* One response head starting at buf: status and the offset of the body.
 * Returns 0, or -1 with err set. */
static int
http_response_head(const char *buf, size_t len, int *status, size_t *head_len,
		   bool *has_cl, size_t *cl, char *err, size_t errlen)
{
	const char *p = buf, *end = buf + len, *nl;
	bool first = true;

	*has_cl = false;
	*cl = 0;
	for (;;) {
		size_t n;

		if ((nl = memchr(p, '\n', (size_t)(end - p))) == NULL) {
			snprintf(err, errlen, "truncated response head");
			return -1;
		}
		n = (size_t)(nl - p);
		if (n > 0 && p[n - 1] == '\r')
			n--;
		if (first) {
			if (n < 12 || memcmp(p, "HTTP/1.", 7) != 0 || p[8] != ' ' ||
			    p[9] < '1' || p[9] > '5' || p[10] < '0' || p[10] > '9' ||
			    p[11] < '0' || p[11] > '9' || (n > 12 && p[12] != ' ')) {
				snprintf(err, errlen, "malformed status line");
				return -1;
			}
			*status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
			first = false;
		} else if (n == 0) {
			*head_len = (size_t)(nl + 1 - buf);
			return 0;
		} else if (n > 15 && strncasecmp(p, "Content-Length:", 15) == 0) {
			const char *v = p + 15, *ve = p + n;
			uint64_t val = 0;
			size_t digits = 0;

			while (v < ve && (*v == ' ' || *v == '\t'))
				v++;
			while (v < ve && *v >= '0' && *v <= '9' && val < UINT32_MAX) {
				val = val * 10 + (uint64_t)(*v++ - '0');
				digits++;
			}
			while (v < ve && (*v == ' ' || *v == '\t'))
				v++;
			if (digits == 0 || v != ve || val >= UINT32_MAX) {
				snprintf(err, errlen, "malformed Content-Length");
				return -1;
			}
			*has_cl = true;
			*cl = (size_t)val;
		}
		p = nl + 1;
	}
}

int
http_response_parse(const char *buf, size_t len, int *status,
		    const char **body, size_t *body_len,
		    char *err, size_t errlen)
{
	size_t off = 0, head_len, cl;
	bool has_cl;

	for (;;) {
		if (http_response_head(buf + off, len - off, status, &head_len,
		    &has_cl, &cl, err, errlen) == -1)
			return -1;
		off += head_len;
		if (*status >= 200)
			break;
		/* 1xx interim response: no body, the real one follows */
	}
	if (has_cl) {
		if (len - off < cl) {
			snprintf(err, errlen, "truncated response body (%zu of %zu bytes)",
			    len - off, cl);
			return -1;
		}
		*body_len = cl;
	} else
		*body_len = len - off;
	*body = buf + off;
	return 0;
}
