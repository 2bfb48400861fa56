/*
 * fuzz_http — libFuzzer harness for the admin API's HTTP code
 * (common/http.c): the incremental request parser, the one-shot
 * response parser and the response formatter.
 *
 * Input: 4 bytes seeding the chunk splitter, then the request bytes.
 *
 * Oracles (besides ASan/UBSan and leak checking):
 *   - split independence: the request bytes fed at once, in pseudo-random
 *     chunks (zero-length feeds included) and one byte at a time (short
 *     inputs) give the same result: same HTTP_* answer, parser state, error
 *     status and message, and for a complete request the same method,
 *     target, path, query, version, header fields, framing and body;
 *   - after DONE or ERROR a further feed answers the same and stores nothing;
 *   - a complete request is sane (path starts with '/' or is "*", method a
 *     short token, body inside the buffer and no longer than the limit);
 *     an error has one of the documented statuses and a message;
 *   - http_response_parse keeps the body inside the buffer, and a response
 *     built by http_format_response parses back to its status and body.
 */
#include <stdbool.h>
#include <string.h>

#include "common/http.h"
#include "tests/fuzz/fuzz_common.h"

static enum http_result
feed_all(struct http_parser *p, const char *d, size_t n, int how, uint32_t seed)
{
	enum http_result r = HTTP_NEED_MORE;
	uint32_t s = seed ? seed : 1;
	size_t off = 0;

	if (how == 0)
		return http_parser_feed(p, d, n);
	while (off < n) {
		size_t k;

		if (how == 1) {
			uint32_t x = fuzz_rand(&s);

			k = x % 8 == 0 ? 0 : (x >> 3) % ((size_t)1 << (1 + (x >> 20) % 11));
		} else {
			k = 1;
		}
		if (k > n - off)
			k = n - off;
		r = http_parser_feed(p, d + off, k);
		off += k;
	}
	if (how == 1 && fuzz_rand(&s) % 2)
		r = http_parser_feed(p, d + n, 0);
	return r;
}

static bool
str_eq(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
}

static void
same_outcome(const struct http_parser *a, enum http_result ra, const struct http_parser *b,
    enum http_result rb, const char *how)
{
	const struct http_request *x = &a->req, *y = &b->req;
	size_t i;

	FUZZ_CHECK(ra == rb, "%s: result %d, at once %d", how, rb, ra);
	FUZZ_CHECK(a->state == b->state, "%s: state %s, at once %s", how,
	    http_parser_state_str(b->state), http_parser_state_str(a->state));
	if (ra == HTTP_ERROR) {
		FUZZ_CHECK(a->status == b->status && strcmp(a->error, b->error) == 0,
		    "%s: error %d '%s', at once %d '%s'", how, b->status, b->error, a->status, a->error);
		return;
	}
	if (ra != HTTP_DONE)
		return;
	FUZZ_CHECK(strcmp(x->method, y->method) == 0, "%s: method", how);
	FUZZ_CHECK(str_eq(x->target, y->target), "%s: target", how);
	FUZZ_CHECK(str_eq(x->path, y->path), "%s: path", how);
	FUZZ_CHECK(str_eq(x->query, y->query), "%s: query", how);
	FUZZ_CHECK(x->version_minor == y->version_minor, "%s: version", how);
	FUZZ_CHECK(x->n_headers == y->n_headers, "%s: %zu header fields, at once %zu", how,
	    y->n_headers, x->n_headers);
	for (i = 0; i < x->n_headers; i++)
		FUZZ_CHECK(strcmp(x->headers[i].name, y->headers[i].name) == 0 &&
		    strcmp(x->headers[i].value, y->headers[i].value) == 0, "%s: header %zu", how, i);
	FUZZ_CHECK(x->has_content_length == y->has_content_length &&
	    x->content_length == y->content_length && x->expect_continue == y->expect_continue,
	    "%s: framing", how);
	FUZZ_CHECK(x->body_len == y->body_len &&
	    (x->body_len == 0 || memcmp(x->body, y->body, x->body_len) == 0), "%s: body", how);
	FUZZ_CHECK(a->head_len == b->head_len, "%s: head length", how);
}

static void
check_sane(const struct http_parser *p, enum http_result r)
{
	const struct http_request *q = &p->req;
	size_t i;

	FUZZ_CHECK(r == HTTP_DONE || r == HTTP_NEED_MORE || r == HTTP_ERROR, "result %d", r);
	FUZZ_CHECK((r == HTTP_DONE) == (p->state == HTTP_PARSER_DONE) &&
	    (r == HTTP_ERROR) == (p->state == HTTP_PARSER_ERROR), "result %d in state %d", r, p->state);
	if (r == HTTP_ERROR) {
		static const int ok[] = { 400, 411, 413, 414, 431, 501, 505 };
		bool found = false;

		for (i = 0; i < sizeof ok / sizeof ok[0]; i++)
			found |= p->status == ok[i];
		FUZZ_CHECK(found, "undocumented error status %d (%s)", p->status, p->error);
		FUZZ_CHECK(p->error[0] != '\0', "error without a message");
		FUZZ_CHECK(http_status_reason(p->status) != NULL, "no reason phrase");
		return;
	}
	if (r != HTTP_DONE)
		return;
	FUZZ_CHECK(q->method[0] != '\0' && strlen(q->method) < HTTP_METHOD_MAX, "method");
	FUZZ_CHECK(q->target != NULL && q->path != NULL, "target/path missing");
	FUZZ_CHECK(q->path[0] == '/' || strcmp(q->path, "*") == 0, "path '%s'", q->path);
	FUZZ_CHECK(q->version_minor >= 0 && q->version_minor <= 9, "version 1.%d", q->version_minor);
	FUZZ_CHECK(q->n_headers <= HTTP_MAX_HEADERS, "%zu header fields", q->n_headers);
	for (i = 0; i < q->n_headers; i++) {
		const char *v = q->headers[i].value;
		size_t vl = strlen(v);

		FUZZ_CHECK(q->headers[i].name[0] != '\0', "empty header name");
		FUZZ_CHECK(vl == 0 || (v[0] != ' ' && v[0] != '\t' && v[vl - 1] != ' ' &&
		    v[vl - 1] != '\t'), "header value not trimmed");
	}
	FUZZ_CHECK(q->body_len == q->content_length && q->content_length <= HTTP_MAX_BODY, "body length");
	FUZZ_CHECK(q->body >= p->buf && q->body + q->body_len <= p->buf + p->len, "body outside buffer");
	FUZZ_CHECK(p->head_len <= HTTP_MAX_HEAD, "head of %zu bytes", p->head_len);
	FUZZ_CHECK(!http_parser_wants_continue(p), "wants 100-continue when done");
	if (q->n_headers > 0)
		FUZZ_CHECK(http_request_header(q, q->headers[0].name) == q->headers[0].value,
		    "header lookup");
}

static void
response_side(const char *d, size_t n, uint32_t seed)
{
	const char *body = NULL;
	size_t blen = 0, flen = 0;
	int status = 0, rc;
	char err[128] = "";
	char *f;

	rc = http_response_parse(d, n, &status, &body, &blen, err, sizeof err);
	if (rc == 0) {
		FUZZ_CHECK(status >= 200 && status <= 599, "response status %d", status);
		FUZZ_CHECK(body >= d && body + blen <= d + n, "response body outside the buffer");
	} else {
		FUZZ_CHECK(rc == -1 && err[0] != '\0', "response parse rc %d", rc);
	}

	/* formatter -> parser round trip, body = the input */
	status = 200 + (int)(seed % 400);
	f = http_format_response(status, (seed >> 9) & 1 ? "application/json" : NULL,
	    (seed >> 10) & 1 ? "Allow: GET, POST\r\nX-Ferry: 1\r\n" : NULL, d, n, false, &flen);
	FUZZ_CHECK(f != NULL, "format failed");
	FUZZ_CHECK(f[flen] == '\0', "formatted response not NUL-terminated");
	{
		int st2 = 0;

		rc = http_response_parse(f, flen, &st2, &body, &blen, err, sizeof err);
		FUZZ_CHECK(rc == 0, "own response does not parse: %s", err);
		FUZZ_CHECK(st2 == status && blen == n && (n == 0 || memcmp(body, d, n) == 0),
		    "own response parses to %d / %zu bytes", st2, blen);
	}
	free(f);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_parser a, b, c;
	enum http_result ra, rb, rc;
	uint32_t seed;
	const char *d;
	char *buf;
	size_t n, len_before;

	if (size < 4)
		return 0;
	seed = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 |
	    (uint32_t)data[3] << 24;
	n = size - 4;
	buf = (char *)fuzz_dup(data + 4, n);
	d = buf;

	http_parser_init(&a);
	ra = feed_all(&a, d, n, 0, seed);
	check_sane(&a, ra);

	http_parser_init(&b);
	rb = feed_all(&b, d, n, 1, seed);
	check_sane(&b, rb);
	same_outcome(&a, ra, &b, rb, "random chunks");

	if (n <= 4096) {
		http_parser_init(&c);
		rc = feed_all(&c, d, n, 2, seed);
		check_sane(&c, rc);
		same_outcome(&a, ra, &c, rc, "byte by byte");
		http_parser_free(&c);
	}

	/* DONE / ERROR are final */
	if (ra != HTTP_NEED_MORE) {
		len_before = a.len;
		FUZZ_CHECK(http_parser_feed(&a, "GET / HTTP/1.1\r\n\r\n", 18) == ra, "not final");
		FUZZ_CHECK(a.len == len_before, "bytes stored after the end");
		check_sane(&a, ra);
	}

	http_parser_free(&a);
	http_parser_free(&b);

	response_side(d, n, seed);
	free(buf);
	return 0;
}
