/*
 * request — one HTTP/1.1 request from ferryctl to ferryd and what every
 * command does with a reply it has no special meaning for; see ctl_priv.h.
 */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/http.h"
#include "ctl_priv.h"
#include "ctlconn.h"

#define CTL_REPLY_MAX    (64u * 1024 * 1024)

void
ctl_err(const char *fmt, ...)
{
	va_list ap;

	fputs("ferryctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* One request; the server closes the connection after its response. Returns
 * 0 with *reply filled, -1 when ferryd could not be reached or the reply is
 * garbled (message in err). */
int
ctl_request(const struct ctl_opts *o, const char *method, const char *path,
	    const char *body, size_t body_len, struct ctl_reply *reply,
	    char *err, size_t errlen)
{
	long deadline = ctlconn_now_ms() + (o->timeout_ms > 0 ? o->timeout_ms : CTL_TIMEOUT_MS);
	char head[2048], perr[128], rerr[256];
	struct ctlconn c;
	size_t cap = 0;
	bool tls_failed;
	int hn;
	ssize_t n;

	memset(reply, 0, sizeof *reply);
	if (ctlconn_open(&c, &o->conn, deadline, err, errlen, &tls_failed) == -1)
		return -1;

	hn = snprintf(head, sizeof head,
	    "%s %s HTTP/1.1\r\n"
	    "Host: %s\r\n"
	    "User-Agent: ferryctl/%s\r\n"
	    "Accept: application/json, text/plain\r\n"
	    "Connection: close\r\n",
	    method, path, o->address ? o->address : "localhost", FERRY_VERSION);
	/* the token goes to admin_listen only: the control socket is
	 * authorised by its permissions */
	if (o->address != NULL && o->token[0] != '\0' && hn > 0 && (size_t)hn < sizeof head)
		hn += snprintf(head + hn, sizeof head - (size_t)hn,
		    "Authorization: Bearer %s\r\n", o->token);
	if (strcmp(method, "POST") == 0 && hn > 0 && (size_t)hn < sizeof head)
		hn += snprintf(head + hn, sizeof head - (size_t)hn,
		    "Content-Type: text/plain\r\nContent-Length: %zu\r\n", body_len);
	if (hn > 0 && (size_t)hn < sizeof head)
		hn += snprintf(head + hn, sizeof head - (size_t)hn, "\r\n");
	if (hn < 0 || (size_t)hn >= sizeof head) {
		snprintf(err, errlen, "request too long");
		ctlconn_close(&c);
		return -1;
	}
	if (ctlconn_write_all(&c, head, (size_t)hn) == -1 ||
	    ctlconn_write_all(&c, body, body_len) == -1) {
		if (c.tls_err[0] != '\0')
			snprintf(err, errlen, "TLS: ferryd ended the session: %s%s", c.tls_err,
			    strstr(c.tls_err, "ca") || strstr(c.tls_err, "certificate") ?
			    " (ferryd does not accept this client certificate: --cert/--key)" : "");
		else
			snprintf(err, errlen, "cannot send request: %s", ctlconn_strerror(errno));
		ctlconn_close(&c);
		return -1;
	}
	reply->sent = true;

	for (;;) {
		if (reply->raw_len == cap) {
			char *nb;

			if (cap >= CTL_REPLY_MAX) {
				snprintf(err, errlen, "reply too large");
				goto fail;
			}
			cap = cap ? cap * 2 : 16384;
			if ((nb = realloc(reply->raw, cap + 1)) == NULL) {
				snprintf(err, errlen, "out of memory");
				goto fail;
			}
			reply->raw = nb;
		}
		n = ctlconn_read(&c, reply->raw + reply->raw_len, cap - reply->raw_len,
		    rerr, sizeof rerr);
		if (n == -1) {
			/* a reset after a complete response still counts */
			if (errno == ECONNRESET && reply->raw_len > 0)
				break;
			reply->timed_out = errno == EAGAIN || errno == EWOULDBLOCK ||
			    errno == ETIMEDOUT;
			if (rerr[0] != '\0')
				snprintf(err, errlen, "no reply from ferryd: TLS: %s%s", rerr,
				    strstr(rerr, "certificate") ? " (ferryd wants a client "
				    "certificate: --cert and --key)" : "");
			else
				snprintf(err, errlen, "no reply from ferryd: %s",
				    ctlconn_strerror(errno));
			goto fail;
		}
		if (n == 0)
			break;
		reply->raw_len += (size_t)n;
	}
	ctlconn_close(&c);
	if (reply->raw_len == 0) {
		snprintf(err, errlen, "ferryd closed the connection without a reply%s",
		    o->address && !o->conn.tls ? " (is it an HTTPS listener? use --cacert)" : "");
		goto fail;
	}
	reply->raw[reply->raw_len] = '\0';
	if (http_response_parse(reply->raw, reply->raw_len, &reply->status,
	    &reply->body, &reply->body_len, perr, sizeof perr) == -1) {
		snprintf(err, errlen, "garbled reply from ferryd: %s", perr);
		goto fail;
	}
	return 0;
fail:
	ctlconn_close(&c);
	free(reply->raw);
	bool sent = reply->sent, timed_out = reply->timed_out;
	memset(reply, 0, sizeof *reply);
	reply->sent = sent;
	reply->timed_out = timed_out;
	return -1;
}

/* The reply's body as JSON, or NULL (reported) when it is not JSON. */
json_t *
ctl_body_json(const struct ctl_reply *r)
{
	json_error_t je;
	json_t *j = json_loadb(r->body, r->body_len, 0, &je);

	if (j == NULL)
		ctl_err("garbled reply from ferryd (HTTP %d): %s", r->status, je.text);
	return j;
}

/* A 4xx/5xx with no command-specific meaning: print the API's message. */
int
ctl_http_failure(const struct ctl_reply *r)
{
	json_t *j = json_loadb(r->body, r->body_len, 0, NULL);
	const char *msg = json_string_value(json_object_get(j, "error"));

	if (msg == NULL) {
		/* ferryd's errors are JSON: this is something else answering */
		ctl_err("garbled reply (HTTP %d %s, not ferryd's JSON error)", r->status,
		    http_status_reason(r->status));
		json_decref(j);
		return CTL_EXIT_UNREACHABLE;
	}
	ctl_err("%s", msg);
	json_decref(j);
	return CTL_EXIT_FAILED;
}

bool
ctl_metrics_ok(const char *body, size_t len)
{
	bool up = false;

	for (size_t at = 0; at < len;) {
		const char *l = body + at, *nl = memchr(l, '\n', len - at);
		size_t n = nl ? (size_t)(nl - l) : len - at;
		char c = n ? l[0] : '#';

		if (!(c == '#' || c == '_' || c == ':' || (c >= 'a' && c <= 'z') ||
		    (c >= 'A' && c <= 'Z')) || memchr(l, '\0', n) != NULL) {
			ctl_err("garbled reply from ferryd: not a Prometheus exposition");
			return false;
		}
		if (n >= 9 && strncmp(l, "ferry_up ", 9) == 0)
			up = true;
		at += n + 1;
	}
	if (!up)
		ctl_err("garbled reply from ferryd: no ferry_up in /metrics");
	return up;
}

/* A 401 from admin_listen, explained: what ferryd said and what to do. */
void
ctl_unauthorized(const struct ctl_opts *o, const struct ctl_reply *r, char *err, size_t errlen)
{
	json_t *j = json_loadb(r->body, r->body_len, 0, NULL);
	const char *msg = json_string_value(json_object_get(j, "error"));

	snprintf(err, errlen, "ferryd refused the request (HTTP 401): %s; %s",
	    msg ? msg : "authentication required",
	    o->token[0] != '\0' ? "check the token (FERRY_TOKEN or --token-file) against "
	    "ferryd's admin_token_file" : "set FERRY_TOKEN or pass --token-file FILE "
	    "(or --cert/--key when ferryd checks client certificates)");
	json_decref(j);
}

int
ctl_exit_for(int status)
{
	return status >= 200 && status < 300 ? CTL_EXIT_OK : CTL_EXIT_FAILED;
}

/* Percent-encode a path segment (cluster names are plain, but be safe). */
void
ctl_pct_encode(const char *in, char *out, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t j = 0;

	for (; *in != '\0' && j + 4 < len; in++) {
		unsigned char c = (unsigned char)*in;

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~')
			out[j++] = (char)c;
		else {
			out[j++] = '%';
			out[j++] = hex[c >> 4];
			out[j++] = hex[c & 15];
		}
	}
	out[j] = '\0';
}
