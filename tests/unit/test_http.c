/*
 * test_http — the admin API's HTTP/1.1 request parser (complete, byte by
 * byte, need-more vs malformed, limits, Content-Length framing), the
 * response formatter and ferryctl's response parser.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/http.h"

static enum http_result
feed_str(struct http_parser *p, const char *s)
{
	return http_parser_feed(p, s, strlen(s));
}

/* Parse a whole request in one feed; returns the result, parser left for
 * the caller to inspect and free. */
static enum http_result
parse_all(struct http_parser *p, const char *s)
{
	http_parser_init(p);
	return feed_str(p, s);
}

static int
parse_status(const char *s)
{
	struct http_parser p;
	int st;

	if (parse_all(&p, s) != HTTP_ERROR) {
		http_parser_free(&p);
		return 0;
	}
	st = p.status;
	http_parser_free(&p);
	return st;
}

Test(http, simple_get)
{
	struct http_parser p;

	cr_assert_eq(parse_all(&p, "GET /admin/health HTTP/1.1\r\nHost: localhost\r\n"
	    "User-Agent: test\r\n\r\n"), HTTP_DONE);
	cr_assert_str_eq(p.req.method, "GET");
	cr_assert_str_eq(p.req.path, "/admin/health");
	cr_assert_str_eq(p.req.target, "/admin/health");
	cr_assert_null(p.req.query);
	cr_assert_eq(p.req.version_minor, 1);
	cr_assert_eq(p.req.n_headers, 2);
	cr_assert_str_eq(http_request_header(&p.req, "host"), "localhost");
	cr_assert_str_eq(http_request_header(&p.req, "USER-AGENT"), "test");
	cr_assert_null(http_request_header(&p.req, "Accept"));
	cr_assert_eq(p.req.body_len, 0);
	cr_assert_eq(p.state, HTTP_PARSER_DONE);
	http_parser_free(&p);
}

Test(http, http10_bare_lf_query_and_leading_crlf)
{
	struct http_parser p;

	cr_assert_eq(parse_all(&p, "\r\nGET /metrics?x=1&y HTTP/1.0\nAccept: */*\n\n"), HTTP_DONE);
	cr_assert_eq(p.req.version_minor, 0);
	cr_assert_str_eq(p.req.path, "/metrics");
	cr_assert_str_eq(p.req.query, "x=1&y");
	http_parser_free(&p);
}

Test(http, absolute_form_and_percent_decoding)
{
	struct http_parser p;

	cr_assert_eq(parse_all(&p, "GET http://localhost:9190/admin/clusters/a%2Db HTTP/1.1\r\n\r\n"),
	    HTTP_DONE);
	cr_assert_str_eq(p.req.path, "/admin/clusters/a-b");
	http_parser_free(&p);
	cr_assert_eq(parse_all(&p, "GET http://localhost HTTP/1.1\r\n\r\n"), HTTP_DONE);
	cr_assert_str_eq(p.req.path, "/");
	http_parser_free(&p);
}

Test(http, header_value_whitespace_trimmed)
{
	struct http_parser p;

	cr_assert_eq(parse_all(&p, "GET / HTTP/1.1\r\nX-A:  \t v a l \t \r\nX-Empty:\r\n\r\n"), HTTP_DONE);
	cr_assert_str_eq(http_request_header(&p.req, "x-a"), "v a l");
	cr_assert_str_eq(http_request_header(&p.req, "x-empty"), "");
	http_parser_free(&p);
}

Test(http, byte_by_byte)
{
	const char *req = "POST /admin/config/validate HTTP/1.1\r\nHost: x\r\n"
	    "Content-Length: 11\r\n\r\nhello world";
	struct http_parser p;
	size_t i, n = strlen(req);

	http_parser_init(&p);
	for (i = 0; i + 1 < n; i++)
		cr_assert_eq(http_parser_feed(&p, req + i, 1), HTTP_NEED_MORE, "at byte %zu", i);
	cr_assert_eq(http_parser_feed(&p, req + i, 1), HTTP_DONE);
	cr_assert_str_eq(p.req.method, "POST");
	cr_assert(p.req.has_content_length);
	cr_assert_eq(p.req.body_len, 11);
	cr_assert_eq(memcmp(p.req.body, "hello world", 11), 0);
	/* further bytes are ignored, the result stays */
	cr_assert_eq(feed_str(&p, "GET / HTTP/1.1\r\n\r\n"), HTTP_DONE);
	cr_assert_eq(p.req.body_len, 11);
	http_parser_free(&p);
}

Test(http, body_split_across_reads)
{
	struct http_parser p;
	static char big[100000];

	memset(big, 'x', sizeof big);
	http_parser_init(&p);
	cr_assert_eq(feed_str(&p, "POST /v HTTP/1.1\r\nContent-Length: 100000\r\n"), HTTP_NEED_MORE);
	cr_assert_eq(feed_str(&p, "\r\n"), HTTP_NEED_MORE);
	cr_assert_eq(p.state, HTTP_PARSER_BODY);
	cr_assert_eq(http_parser_feed(&p, big, 40000), HTTP_NEED_MORE);
	cr_assert_eq(http_parser_feed(&p, big, 59999), HTTP_NEED_MORE);
	/* one more byte plus a pipelined extra: done, extra ignored */
	cr_assert_eq(http_parser_feed(&p, "xGET", 4), HTTP_DONE);
	cr_assert_eq(p.req.body_len, 100000);
	cr_assert_eq(p.req.body[0], 'x');
	cr_assert_eq(p.req.body[99999], 'x');
	http_parser_free(&p);
}

Test(http, head_and_body_in_one_read_with_garbage_after)
{
	struct http_parser p;

	cr_assert_eq(parse_all(&p, "POST /v HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcdef"), HTTP_DONE);
	cr_assert_eq(p.req.body_len, 3);
	cr_assert_eq(memcmp(p.req.body, "abc", 3), 0);
	http_parser_free(&p);
}

Test(http, need_more_vs_malformed)
{
	struct http_parser p;

	/* incomplete but plausible: need more */
	cr_assert_eq(parse_all(&p, "GE"), HTTP_NEED_MORE);
	http_parser_free(&p);
	cr_assert_eq(parse_all(&p, "GET /admin/health HTTP/1.1\r\nHost: local"), HTTP_NEED_MORE);
	http_parser_free(&p);
	cr_assert_eq(parse_all(&p, "GET / HTTP/1.1\r\n"), HTTP_NEED_MORE);
	http_parser_free(&p);
	/* a malformed request line is refused as soon as its line is complete */
	cr_assert_eq(parse_all(&p, "GARBAGE\r\n"), HTTP_ERROR);
	cr_assert_eq(p.status, 400);
	cr_assert(strlen(p.error) > 0);
	/* sticky */
	cr_assert_eq(feed_str(&p, "\r\n"), HTTP_ERROR);
	http_parser_free(&p);
}

Test(http, malformed_request_lines)
{
	cr_assert_eq(parse_status("GET\r\n\r\n"), 400);
	cr_assert_eq(parse_status("GET /\r\n\r\n"), 400);
	cr_assert_eq(parse_status("GET  / HTTP/1.1\r\n\r\n"), 400);
	cr_assert_eq(parse_status("GET / HTTP/1.1 \r\n\r\n"), 400);
	cr_assert_eq(parse_status(" GET / HTTP/1.1\r\n\r\n"), 400);
	cr_assert_eq(parse_status("G(T / HTTP/1.1\r\n\r\n"), 400);
	cr_assert_eq(parse_status("GET admin HTTP/1.1\r\n\r\n"), 400);
	cr_assert_eq(parse_status("GET /a\x01 HTTP/1.1\r\n\r\n"), 400);
	cr_assert_eq(parse_status("GET /a\xff HTTP/1.1\r\n\r\n"), 400);
	cr_assert_eq(parse_status("GET / HTTP/1.1\r\r\n\r\n"), 400);
	cr_assert_eq(parse_status("GET / http/1.1\r\n\r\n"), 400);
	cr_assert_eq(parse_status("GET / HTTP/11\r\n\r\n"), 400);
	cr_assert_eq(parse_status("GET / HTTP/1.x\r\n\r\n"), 400);
	cr_assert_eq(parse_status("GET /%zz HTTP/1.1\r\n\r\n"), 400);
	cr_assert_eq(parse_status("GET /%00 HTTP/1.1\r\n\r\n"), 400);
	cr_assert_eq(parse_status("GET /% HTTP/1.1\r\n\r\n"), 400);
	cr_assert_eq(parse_status("GET http:/// HTTP/1.1\r\n\r\n"), 400);
	cr_assert_eq(parse_status("GET / HTTP/2.0\r\n\r\n"), 505);
	cr_assert_eq(parse_status("GET / HTTP/0.9\r\n\r\n"), 505);
	cr_assert_eq(parse_status("ABCDEFGHIJKLMNOPQRSTUVWXYZ / HTTP/1.1\r\n\r\n"), 501);
}

Test(http, malformed_headers)
{
	cr_assert_eq(parse_status("GET / HTTP/1.1\r\nNoColon\r\n\r\n"), 400);
	cr_assert_eq(parse_status("GET / HTTP/1.1\r\nHost : x\r\n\r\n"), 400);
	cr_assert_eq(parse_status("GET / HTTP/1.1\r\n: x\r\n\r\n"), 400);
	cr_assert_eq(parse_status("GET / HTTP/1.1\r\nA: b\r\n  folded\r\n\r\n"), 400);
	cr_assert_eq(parse_status("GET / HTTP/1.1\r\nA: b\x01\r\n\r\n"), 400);
	cr_assert_eq(parse_status("GET / HTTP/1.1\r\nA: b\rc\r\n\r\n"), 400);
	/* NUL inside the head */
	{
		struct http_parser p;
		static const char req[] = "GET / HTTP/1.1\r\nA: b\0c\r\n\r\n";

		http_parser_init(&p);
		cr_assert_eq(http_parser_feed(&p, req, sizeof req - 1), HTTP_ERROR);
		cr_assert_eq(p.status, 400);
		http_parser_free(&p);
	}
}

Test(http, header_section_limit)
{
	struct http_parser p;
	char *line = malloc(HTTP_MAX_HEAD + 64);
	cr_assert_not_null(line);
	size_t n;

	/* exactly at the limit is fine */
	n = (size_t)snprintf(line, 64, "GET / HTTP/1.1\r\nX-Pad: ");
	memset(line + n, 'a', HTTP_MAX_HEAD - n - 4);
	memcpy(line + HTTP_MAX_HEAD - 4, "\r\n\r\n", 5);
	cr_assert_eq(strlen(line), HTTP_MAX_HEAD);
	cr_assert_eq(parse_all(&p, line), HTTP_DONE);
	http_parser_free(&p);

	/* one byte more is 431, even without the final blank line */
	memset(line + n, 'a', HTTP_MAX_HEAD - n - 3);
	memcpy(line + HTTP_MAX_HEAD - 3, "\r\n\r\n", 5);
	cr_assert_eq(parse_all(&p, line), HTTP_ERROR);
	cr_assert_eq(p.status, 431);
	http_parser_free(&p);

	memset(line + n, 'a', HTTP_MAX_HEAD + 10 - n);
	line[HTTP_MAX_HEAD + 10] = '\0';
	cr_assert_eq(parse_all(&p, line), HTTP_ERROR);
	cr_assert_eq(p.status, 431);
	http_parser_free(&p);

	/* a request line that never ends is 414 */
	memcpy(line, "GET /", 5);
	memset(line + 5, 'a', HTTP_MAX_HEAD + 10);
	line[HTTP_MAX_HEAD + 15] = '\0';
	cr_assert_eq(parse_all(&p, line), HTTP_ERROR);
	cr_assert_eq(p.status, 414);
	http_parser_free(&p);
	free(line);
}

Test(http, header_limit_reached_incrementally)
{
	struct http_parser p;
	char hdr[64];
	int i;
	enum http_result rc = HTTP_NEED_MORE;

	http_parser_init(&p);
	feed_str(&p, "GET / HTTP/1.1\r\n");
	for (i = 0; i < 5000 && rc == HTTP_NEED_MORE; i++) {
		snprintf(hdr, sizeof hdr, "X-%d: %d\r\n", i, i);
		rc = feed_str(&p, hdr);
	}
	cr_assert_eq(rc, HTTP_ERROR);
	cr_assert_eq(p.status, 431);
	cr_assert_eq(i, HTTP_MAX_HEADERS + 1, "failed after %d headers", i);
	http_parser_free(&p);
}

Test(http, content_length_errors)
{
	cr_assert_eq(parse_status("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n"), 400);
	cr_assert_eq(parse_status("POST / HTTP/1.1\r\nContent-Length: +1\r\n\r\n"), 400);
	cr_assert_eq(parse_status("POST / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n"), 400);
	cr_assert_eq(parse_status("POST / HTTP/1.1\r\nContent-Length:\r\n\r\n"), 400);
	cr_assert_eq(parse_status("POST / HTTP/1.1\r\nContent-Length: 1 2\r\n\r\n"), 400);
	cr_assert_eq(parse_status("POST / HTTP/1.1\r\nContent-Length: 3\r\n"
	    "Content-Length: 4\r\n\r\nabcd"), 400);
	cr_assert_eq(parse_status("POST / HTTP/1.1\r\nContent-Length: 3, 4\r\n\r\nabcd"), 400);
	cr_assert_eq(parse_status("POST / HTTP/1.1\r\nContent-Length: "
	    "99999999999999999999999\r\n\r\n"), 400);
	cr_assert_eq(parse_status("POST / HTTP/1.1\r\nContent-Length: 4194305\r\n\r\n"), 413);
	cr_assert_eq(parse_status("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"), 411);
	cr_assert_eq(parse_status("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
	    "Content-Length: 3\r\n\r\nabc"), 400);
}

Test(http, content_length_accepted_forms)
{
	struct http_parser p;

	cr_assert_eq(parse_all(&p, "POST / HTTP/1.1\r\ncontent-length: 3\r\n"
	    "CONTENT-LENGTH: 3\r\n\r\nabc"), HTTP_DONE);
	cr_assert_eq(p.req.body_len, 3);
	http_parser_free(&p);
	cr_assert_eq(parse_all(&p, "POST / HTTP/1.1\r\nContent-Length: 3 , 3\r\n\r\nabc"), HTTP_DONE);
	http_parser_free(&p);
	cr_assert_eq(parse_all(&p, "POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n"), HTTP_DONE);
	cr_assert(p.req.has_content_length);
	cr_assert_eq(p.req.body_len, 0);
	http_parser_free(&p);
	/* POST without Content-Length: no body */
	cr_assert_eq(parse_all(&p, "POST / HTTP/1.1\r\n\r\n"), HTTP_DONE);
	cr_assert_not(p.req.has_content_length);
	http_parser_free(&p);
	/* exactly the maximum is accepted (needs the body) */
	cr_assert_eq(parse_all(&p, "POST / HTTP/1.1\r\nContent-Length: 4194304\r\n\r\n"),
	    HTTP_NEED_MORE);
	http_parser_free(&p);
}

Test(http, expect_continue)
{
	struct http_parser p;

	http_parser_init(&p);
	cr_assert_eq(feed_str(&p, "POST / HTTP/1.1\r\nExpect: 100-Continue\r\n"), HTTP_NEED_MORE);
	cr_assert_not(http_parser_wants_continue(&p));
	cr_assert_eq(feed_str(&p, "Content-Length: 2\r\n\r\n"), HTTP_NEED_MORE);
	cr_assert(http_parser_wants_continue(&p));
	cr_assert_eq(feed_str(&p, "ok"), HTTP_DONE);
	cr_assert_not(http_parser_wants_continue(&p));
	http_parser_free(&p);
}

Test(http, format_response)
{
	size_t len;
	char *r = http_format_response(404, "application/json", "Allow: GET\r\n",
	    "{}\n", 3, false, &len);

	cr_assert_not_null(r);
	cr_assert_eq(len, strlen(r));
	cr_assert(strncmp(r, "HTTP/1.1 404 Not Found\r\n", 24) == 0);
	cr_assert_not_null(strstr(r, "\r\nContent-Type: application/json\r\n"));
	cr_assert_not_null(strstr(r, "\r\nContent-Length: 3\r\n"));
	cr_assert_not_null(strstr(r, "\r\nConnection: close\r\n"));
	cr_assert_not_null(strstr(r, "\r\nAllow: GET\r\n"));
	cr_assert(strcmp(r + len - 7, "\r\n\r\n{}\n") == 0);
	free(r);

	/* HEAD: same headers, no body */
	r = http_format_response(200, NULL, NULL, "abc", 3, true, &len);
	cr_assert_not_null(r);
	cr_assert_null(strstr(r, "Content-Type"));
	cr_assert_not_null(strstr(r, "Content-Length: 3\r\n"));
	cr_assert(strcmp(r + len - 4, "\r\n\r\n") == 0);
	free(r);
}

Test(http, format_then_parse_response_roundtrip)
{
	const char *body;
	size_t len, blen;
	char err[128];
	int status;
	char *r = http_format_response(503, "application/json", NULL, "{\"ready\":false}\n",
	    16, false, &len);

	cr_assert_eq(http_response_parse(r, len, &status, &body, &blen, err, sizeof err), 0, "%s", err);
	cr_assert_eq(status, 503);
	cr_assert_eq(blen, 16);
	cr_assert_eq(memcmp(body, "{\"ready\":false}\n", 16), 0);
	/* truncated body */
	cr_assert_eq(http_response_parse(r, len - 1, &status, &body, &blen, err, sizeof err), -1);
	free(r);
}

Test(http, parse_response_variants)
{
	const char *body;
	size_t blen;
	char err[128];
	int status;
	const char *interim = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
	const char *noclen = "HTTP/1.0 200 OK\nX: y\n\nrest of it";

	cr_assert_eq(http_response_parse(interim, strlen(interim), &status, &body, &blen,
	    err, sizeof err), 0);
	cr_assert_eq(status, 200);
	cr_assert_eq(blen, 2);
	cr_assert_eq(http_response_parse(noclen, strlen(noclen), &status, &body, &blen,
	    err, sizeof err), 0);
	cr_assert_eq(blen, strlen("rest of it"));
	cr_assert_eq(http_response_parse("garbage", 7, &status, &body, &blen, err, sizeof err), -1);
	cr_assert_eq(http_response_parse("HTTP/1.1 200 OK\r\n", 17, &status, &body, &blen,
	    err, sizeof err), -1);
	cr_assert_eq(http_response_parse("HTTP/1.1 2000 OK\r\n\r\n", 20, &status, &body, &blen,
	    err, sizeof err), -1);
	cr_assert_eq(http_response_parse("HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", 38,
	    &status, &body, &blen, err, sizeof err), -1);
}

Test(http, status_reasons)
{
	cr_assert_str_eq(http_status_reason(200), "OK");
	cr_assert_str_eq(http_status_reason(405), "Method Not Allowed");
	cr_assert_str_eq(http_status_reason(503), "Service Unavailable");
	cr_assert_str_eq(http_parser_state_str(HTTP_PARSER_BODY), "body");
}
