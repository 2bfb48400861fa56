/*
 * http — a small, pure HTTP/1.1 message parser and formatter for the admin
 * API (supervisor/admin_http.c) and its client (ferryctl). No sockets here.
 *
 * The request parser is incremental: bytes are fed as they arrive with
 * http_parser_feed(), which copies them into the parser's own buffer, and
 * the answer is one of "need more", "done" or "error". An error carries the
 * HTTP status to answer with (400 malformed, 411 chunked/Transfer-Encoding,
 * 413 body too large, 414/431 request line or header section too large,
 * 501 method name too long, 505 HTTP version other than 1.x) and a short
 * message.
 *
 * What is accepted (RFC 9112, kept deliberately narrow):
 *   - request line "METHOD SP target SP HTTP/1.x"; leading empty lines are
 *     skipped; lines end in CRLF or a bare LF; a bare CR is an error;
 *   - target in origin form ("/path?query") or absolute form
 *     ("http://host/path"); the path is percent-decoded (NUL rejected);
 *   - header names are tokens, looked up case-insensitively; no whitespace
 *     before the colon; obsolete line folding is an error;
 *   - the header section (request line included) is at most
 *     HTTP_MAX_HEAD bytes and HTTP_MAX_HEADERS fields;
 *   - a body only through Content-Length (at most HTTP_MAX_BODY bytes;
 *     repeated equal values are tolerated, differing ones are an error);
 *     any Transfer-Encoding is refused with 411, and with 400 when it comes
 *     together with Content-Length (request smuggling);
 *   - Host is not required (a local admin API talked to by hand).
 * Bytes after a complete request are kept but ignored: the admin API closes
 * the connection after each response.
 *
 * The response side has a formatter (status line, Content-Type,
 * Content-Length, Connection: close) and, for ferryctl, a parser of one
 * complete response.
 */
#ifndef FERRY_COMMON_HTTP_H
#define FERRY_COMMON_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include "common/config.h"

#define HTTP_MAX_HEAD    (16u * 1024)        /* request line + header fields */
/* A request body is at most a config file: one limit for both (config.h). */
#define HTTP_MAX_BODY    CFG_MAX_FILE_BYTES
#define HTTP_MAX_HEADERS 100
#define HTTP_METHOD_MAX  16

enum http_result {
	HTTP_ERROR = -1,
	HTTP_NEED_MORE = 0,
	HTTP_DONE = 1,
};

struct http_header {
	char *name;             /* as received */
	char *value;            /* surrounding whitespace trimmed */
};

struct http_request {
	char method[HTTP_METHOD_MAX];
	char *target;           /* raw request target */
	char *path;             /* decoded path, always starts with '/' (or "*") */
	char *query;            /* raw query without '?'; NULL if none */
	int version_minor;      /* HTTP/1.<n>: 0 or 1 */
	struct http_header *headers;
	size_t n_headers;
	bool has_content_length;
	size_t content_length;
	bool expect_continue;   /* "Expect: 100-continue" */
	const char *body;       /* content_length bytes inside the parser buffer */
	size_t body_len;
};

enum http_parser_state {
	HTTP_PARSER_HEAD = 0,
	HTTP_PARSER_BODY,
	HTTP_PARSER_DONE,
	HTTP_PARSER_ERROR,
};

struct http_parser {
	enum http_parser_state state;
	char *buf;              /* every byte fed so far (NUL-terminated) */
	size_t len, cap;
	size_t scanned;         /* start of the next header line to look at */
	size_t searched;        /* bytes after `scanned` known to hold no LF */
	bool head_started;      /* the request line has been seen */
	size_t head_len;        /* bytes of the header section incl. blank line */
	struct http_request req;
	int status;             /* on HTTP_ERROR: status code to answer with */
	char error[128];        /* on HTTP_ERROR: what was wrong */
};

void http_parser_init(struct http_parser *p);
void http_parser_free(struct http_parser *p);

/* Append n bytes and parse as far as possible. Returns HTTP_DONE once a whole
 * request is in (p->req is then complete and stays valid until
 * http_parser_free), HTTP_NEED_MORE when more bytes are needed, HTTP_ERROR for
 * a request that can never be valid (p->status, p->error). After DONE or
 * ERROR further calls return the same result and discard the bytes. */
enum http_result http_parser_feed(struct http_parser *p, const char *data, size_t n);

/* True once the header section is complete, the body is still missing and
 * the client asked for "100 Continue" (answered once by the caller). */
bool http_parser_wants_continue(const struct http_parser *p);

/* Percent-decode s[0..n) into out (cap bytes, NUL-terminated); with
 * plus_space a '+' is a space (a query string's values). -1 for a bad
 * escape, a decoded NUL, or a result that does not fit. */
int http_pct_decode_into(const char *s, size_t n, bool plus_space, char *out, size_t cap);

/* Case-insensitive lookup of the first header named `name`; NULL if absent. */
const char *http_request_header(const struct http_request *r, const char *name);

const char *http_status_reason(int status);

/* The next name=value pair of a raw query string (r->query) from *pos:
 * 1 with *name and *value (malloc'd, percent-decoded, '+' a space, the
 * value "" when the pair has no '='), 0 when none is left, -1 when the
 * pair is malformed (a bad escape or %00, an empty name) or out of memory.
 * Empty pairs ("a=1&&b=2") are skipped. */
int http_query_next(const char *query, size_t *pos, char **name, char **value);
const char *http_parser_state_str(enum http_parser_state s);

/* A whole response with "Connection: close": status line, Content-Type
 * (omitted when NULL), Content-Length, `extra_headers` (zero or more complete
 * "Name: value\r\n" lines, may be NULL), blank line, then body unless
 * omit_body (HEAD). Returns a malloc'd buffer and its length in *out_len,
 * NULL on allocation failure. */
char *http_format_response(int status, const char *content_type,
			   const char *extra_headers, const char *body,
			   size_t body_len, bool omit_body, size_t *out_len);

/* Parse one complete response held in buf[0..len) (the client reads until
 * EOF). On success returns 0 and sets *status and the body span: when
 * Content-Length is present the body is exactly that long (a shorter buffer
 * is an error), otherwise it is the rest of the buffer. Returns -1 with a
 * message in err for a garbled response. */
int http_response_parse(const char *buf, size_t len, int *status,
			const char **body, size_t *body_len,
			char *err, size_t errlen);

#endif
