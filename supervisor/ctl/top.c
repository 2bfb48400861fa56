/*
 * top — ferryctl's live views: `status -w` (the status table every second)
 * and `top` (per cluster: state, workers, connections, requests/s, bytes/s
 * both ways and the p99 of upstream latency, from /admin/clusters and
 * /metrics every second). Keys without Enter on a terminal (q quits), frames
 * one after another elsewhere, one JSON document per line with --json.
 * See ctl_priv.h.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "common/http.h"
#include "ctl_priv.h"
#include "ctlconn.h"

/* --- status -w and top: a live view ------------------------------------- */

static volatile sig_atomic_t ctl_interrupted;

static void
ctl_on_signal(int sig)
{
	(void)sig;
	ctl_interrupted = 1;
}

/* Keys without Enter and without echo while a live view runs (stdin a
 * terminal); ISIG stays on, so Ctrl-C is still SIGINT. */
struct ctl_tty {
	bool raw;
	bool keys;                      /* stdin may still deliver keys */
	struct termios saved;
};

static void
ctl_tty_enter(struct ctl_tty *t)
{
	struct termios raw;

	t->raw = false;
	t->keys = true;
	if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &t->saved) == -1)
		return;
	raw = t->saved;
	raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
	raw.c_cc[VMIN] = 0;
	raw.c_cc[VTIME] = 0;
	if (tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0)
		t->raw = true;
}

static void
ctl_tty_leave(struct ctl_tty *t)
{
	if (t->raw)
		tcsetattr(STDIN_FILENO, TCSANOW, &t->saved);
	t->raw = false;
}

/* Wait until the monotonic deadline; true when asked to quit: q, Q, Ctrl-C
 * (SIGINT) or SIGTERM. stdin at EOF or not readable is simply ignored. */
static bool
ctl_wait_until(struct ctl_tty *t, long deadline)
{
	for (;;) {
		long left = deadline - ctlconn_now_ms();
		struct pollfd pfd = { STDIN_FILENO, POLLIN, 0 };
		char keys[64];
		ssize_t n;
		int pr;

		if (ctl_interrupted)
			return true;
		if (left <= 0)
			return false;
		pr = poll(&pfd, t->keys ? 1 : 0, (int)left);
		if (pr == -1 && errno != EINTR)
			t->keys = false;
		if (pr <= 0)
			continue;
		if (pfd.revents & (POLLERR | POLLNVAL)) {
			t->keys = false;
			continue;
		}
		n = read(STDIN_FILENO, keys, sizeof keys);
		if (n <= 0) {
			if (n == 0 || (errno != EINTR && errno != EAGAIN))
				t->keys = false;
			continue;
		}
		for (ssize_t i = 0; i < n; i++)
			if (keys[i] == 'q' || keys[i] == 'Q' || keys[i] == 3)
				return true;
	}
}

/* ferry_<field>{cluster="NAME"} VALUE lines of /metrics, for top. */
#define CTL_LAT_BUCKETS 32

struct ctl_sample {
	char name[256];
	double conns, requests, bytes_in, bytes_out;
	bool have_requests;
	/* ferry_request_duration_seconds_bucket summed over APIs, by le */
	double lat_le[CTL_LAT_BUCKETS], lat_n[CTL_LAT_BUCKETS];
	size_t n_lat;
};

struct ctl_samples {
	struct ctl_sample *v;
	size_t n;
	long at_ms;                     /* monotonic time of the scrape */
};

static struct ctl_sample *
ctl_sample_get(struct ctl_samples *ss, const char *name, bool create)
{
	for (size_t i = 0; i < ss->n; i++)
		if (strcmp(ss->v[i].name, name) == 0)
			return &ss->v[i];
	if (!create)
		return NULL;
	struct ctl_sample *nv = realloc(ss->v, (ss->n + 1) * sizeof *nv);
	if (nv == NULL)
		return NULL;
	ss->v = nv;
	memset(&nv[ss->n], 0, sizeof nv[ss->n]);
	snprintf(nv[ss->n].name, sizeof nv[ss->n].name, "%s", name);
	return &nv[ss->n++];
}

/* One bucket line (p..e) of the latency histogram: add v at its le. */
static void
ctl_lat_add(struct ctl_sample *smp, const char *p, const char *e, double v)
{
	const char *le = memmem(p, (size_t)(e - p), "le=\"", 4);
	if (le == NULL)
		return;
	le += 4;
	double bound = strncmp(le, "+Inf", 4) == 0 ? INFINITY : strtod(le, NULL);
	size_t i;
	for (i = 0; i < smp->n_lat; i++)
		if (smp->lat_le[i] == bound)
			break;
	if (i == smp->n_lat) {
		if (smp->n_lat == CTL_LAT_BUCKETS)
			return;
		/* keep the bounds sorted */
		while (i > 0 && smp->lat_le[i - 1] > bound) {
			smp->lat_le[i] = smp->lat_le[i - 1];
			smp->lat_n[i] = smp->lat_n[i - 1];
			i--;
		}
		smp->lat_le[i] = bound;
		smp->lat_n[i] = 0;
		smp->n_lat++;
	}
	smp->lat_n[i] += v;
}

/* The 99th percentile's bucket bound (seconds) of the requests answered
 * between two scrapes (all of them when nothing new); NAN when none. */
static double
ctl_lat_p99(const struct ctl_sample *s, const struct ctl_sample *b)
{
	double d[CTL_LAT_BUCKETS], total;
	if (s == NULL || s->n_lat == 0)
		return NAN;
	for (size_t i = 0; i < s->n_lat; i++) {
		d[i] = s->lat_n[i];
		for (size_t k = 0; b != NULL && k < b->n_lat; k++)
			if (b->lat_le[k] == s->lat_le[i])
				d[i] -= b->lat_n[k];
	}
	total = d[s->n_lat - 1];
	if (total <= 0) {
		for (size_t i = 0; i < s->n_lat; i++)
			d[i] = s->lat_n[i];
		total = d[s->n_lat - 1];
	}
	if (total <= 0)
		return NAN;
	for (size_t i = 0; i < s->n_lat; i++)
		if (d[i] >= 0.99 * total)
			return s->lat_le[i];
	return INFINITY;
}

/* Parse the exposition: per-cluster samples (families with more labels, such
 * as ferry_requests_total{cluster,api}, summed per cluster). */
static void
ctl_parse_metrics(const char *text, size_t len, struct ctl_samples *ss)
{
	static const char pre[] = "{cluster=\"";
	const char *p = text, *endp = text + len;

	while (p < endp) {
		const char *eol = memchr(p, '\n', (size_t)(endp - p));
		const char *e = eol ? eol : endp, *q, *brace;
		char field[128], name[256], num[64];
		size_t fl, nl = 0;

		if (*p == '#' || (brace = memchr(p, '{', (size_t)(e - p))) == NULL ||
		    (size_t)(e - brace) < sizeof pre ||
		    strncmp(brace, pre, sizeof pre - 1) != 0)
			goto next;
		fl = (size_t)(brace - p);
		if (fl >= sizeof field)
			goto next;
		memcpy(field, p, fl);
		field[fl] = '\0';
		for (q = brace + sizeof pre - 1; q < e && *q != '"'; q++) {
			if (*q == '\\' && q + 1 < e)
				q++;
			if (nl + 1 < sizeof name)
				name[nl++] = *q == 'n' && q[-1] == '\\' ? '\n' : *q;
		}
		name[nl] = '\0';
		/* other labels (api, reason, ...) follow: the values are summed */
		if (q + 1 < e && q[1] == ',') {
			while (q < e && *q != '}')
				q++;
			q--;
		}
		if (q + 3 > e || q[1] != '}' || q[2] != ' ')
			goto next;
		q += 3;
		if ((size_t)(e - q) >= sizeof num)
			goto next;
		memcpy(num, q, (size_t)(e - q));
		num[e - q] = '\0';
		{
			char *numend;
			double v = strtod(num, &numend);
			struct ctl_sample *smp;

			if (numend == num || *numend != '\0' ||
			    (smp = ctl_sample_get(ss, name, true)) == NULL)
				goto next;
			if (strcmp(field, "ferry_connections_active") == 0)
				smp->conns = v;
			else if (strcmp(field, "ferry_request_duration_seconds_bucket") == 0)
				ctl_lat_add(smp, p, e, v);
			else if (strcmp(field, "ferry_requests_total") == 0) {
				smp->requests += v;  /* one line per API */
				smp->have_requests = true;
			} else if (strcmp(field, "ferry_bytes_client_to_upstream_total") == 0)
				smp->bytes_in = v;
			else if (strcmp(field, "ferry_bytes_upstream_to_client_total") == 0)
				smp->bytes_out = v;
		}
next:
		p = e + 1;
	}
}

static void
ctl_fmt_rate(double v, const char *unit, char *buf, size_t len)
{
	static const char *const pfx[] = { "", "k", "M", "G", "T" };
	size_t i = 0;

	if (isnan(v)) {
		snprintf(buf, len, "-");
		return;
	}
	while (v >= 1000 && i + 1 < sizeof pfx / sizeof pfx[0]) {
		v /= 1000;
		i++;
	}
	snprintf(buf, len, "%.1f%s%s", v, pfx[i], unit);
}

/* A rate from two samples, NAN when there is no earlier one. */
static double
ctl_rate(double now, double before, bool have_before, double secs)
{
	if (!have_before || secs <= 0)
		return NAN;
	return now > before ? (now - before) / secs : 0.0;
}

#define CTL_TOP_COLS 10

/* One frame of `ferryctl top`. */
static int
ctl_top_frame(const json_t *clusters, const struct ctl_samples *cur, const struct ctl_samples *prev)
{
	static const char *const hdr[CTL_TOP_COLS] = {
		"NAME", "STATE", "GEN", "WORKERS", "CONNS", "REQ/S", "IN/S", "OUT/S", "P99", "REQUESTS",
	};
	double secs = prev->at_ms ? (double)(cur->at_ms - prev->at_ms) / 1000.0 : 0;
	size_t n = json_array_size(clusters), i, k, width[CTL_TOP_COLS];
	char (*cells)[CTL_TOP_COLS][64] = calloc(n ? n : 1, sizeof *cells);
	const json_t *c;

	if (cells == NULL) {
		ctl_err("out of memory");
		return CTL_EXIT_FAILED;
	}
	json_array_foreach(clusters, i, c) {
		const char *name = json_string_value(json_object_get(c, "name"));
		const char *state = json_string_value(json_object_get(c, "state"));
		const json_t *gen = json_object_get(c, "generation"), *w;
		const struct ctl_sample *s = ctl_sample_get((struct ctl_samples *)cur, name ? name : "", false);
		const struct ctl_sample *b = ctl_sample_get((struct ctl_samples *)prev, name ? name : "", false);
		size_t j, workers = 0;

		json_array_foreach(json_object_get(c, "workers"), j, w)
			if (json_is_integer(json_object_get(w, "pid")))
				workers++;
		snprintf(cells[i][0], 64, "%s", name ? name : "?");
		snprintf(cells[i][1], 64, "%s", state ? state : "?");
		if (json_is_integer(gen))
			snprintf(cells[i][2], 64, "%lld", (long long)json_integer_value(gen));
		else
			snprintf(cells[i][2], 64, "-");
		snprintf(cells[i][3], 64, "%zu", workers);
		snprintf(cells[i][4], 64, "%.0f", s ? s->conns : 0.0);
		ctl_fmt_rate(s ? ctl_rate(s->requests, b ? b->requests : 0, b != NULL, secs) : NAN,
		    "", cells[i][5], 64);
		ctl_fmt_rate(s ? ctl_rate(s->bytes_in, b ? b->bytes_in : 0, b != NULL, secs) : NAN,
		    "B", cells[i][6], 64);
		ctl_fmt_rate(s ? ctl_rate(s->bytes_out, b ? b->bytes_out : 0, b != NULL, secs) : NAN,
		    "B", cells[i][7], 64);
		double q = ctl_lat_p99(s, b);
		if (isnan(q))
			snprintf(cells[i][8], 64, "-");
		else if (isinf(q))
			snprintf(cells[i][8], 64, ">10s");
		else if (q < 1.0)
			snprintf(cells[i][8], 64, "%gms", q * 1000.0);
		else
			snprintf(cells[i][8], 64, "%gs", q);
		snprintf(cells[i][9], 64, "%.0f", s ? s->requests : 0.0);
	}
	for (k = 0; k < CTL_TOP_COLS; k++) {
		width[k] = strlen(hdr[k]);
		for (i = 0; i < n; i++)
			if (strlen(cells[i][k]) > width[k])
				width[k] = strlen(cells[i][k]);
	}
	for (k = 0; k < CTL_TOP_COLS; k++) {
		ctl_paint(CTL_BOLD, hdr[k], k + 1 < CTL_TOP_COLS ? width[k] : 0);
		fputs(k + 1 < CTL_TOP_COLS ? "  " : "\n", stdout);
	}
	for (i = 0; i < n; i++)
		for (k = 0; k < CTL_TOP_COLS; k++) {
			/* numbers right-aligned, text left */
			if (k >= 2) {
				printf("%*s", (int)width[k], cells[i][k]);
			} else {
				ctl_paint(k == 1 ? ctl_state_color(cells[i][k]) : NULL, cells[i][k],
				    width[k]);
			}
			fputs(k + 1 < CTL_TOP_COLS ? "  " : "\n", stdout);
		}
	free(cells);
	return CTL_EXIT_OK;
}

/* --json top: one line per refresh. */
static void
ctl_top_json(const json_t *clusters, const struct ctl_samples *cur, const struct ctl_samples *prev)
{
	double secs = prev->at_ms ? (double)(cur->at_ms - prev->at_ms) / 1000.0 : 0;
	json_t *out = json_array(), *doc;
	const json_t *c;
	size_t i;
	char *text;

	json_array_foreach(clusters, i, c) {
		const char *name = json_string_value(json_object_get(c, "name"));
		const struct ctl_sample *s = ctl_sample_get((struct ctl_samples *)cur, name ? name : "", false);
		const struct ctl_sample *b = ctl_sample_get((struct ctl_samples *)prev, name ? name : "", false);
		double r[3] = { NAN, NAN, NAN };
		json_t *o;

		if (s != NULL) {
			r[0] = ctl_rate(s->requests, b ? b->requests : 0, b != NULL, secs);
			r[1] = ctl_rate(s->bytes_in, b ? b->bytes_in : 0, b != NULL, secs);
			r[2] = ctl_rate(s->bytes_out, b ? b->bytes_out : 0, b != NULL, secs);
		}
		o = json_pack("{s:s?, s:O, s:O, s:I, s:I}", "name", name,
		    "state", json_object_get(c, "state") ? json_object_get(c, "state") : json_null(),
		    "generation", json_object_get(c, "generation") ? json_object_get(c, "generation") : json_null(),
		    "connections", (json_int_t)(s ? s->conns : 0),
		    "requests", (json_int_t)(s ? s->requests : 0));
		if (o == NULL)
			continue;
		json_object_set_new(o, "requestsPerSecond", isnan(r[0]) ? json_null() : json_real(r[0]));
		json_object_set_new(o, "bytesInPerSecond", isnan(r[1]) ? json_null() : json_real(r[1]));
		json_object_set_new(o, "bytesOutPerSecond", isnan(r[2]) ? json_null() : json_real(r[2]));
		double q = ctl_lat_p99(s, b);
		json_object_set_new(o, "p99UpstreamSeconds", isnan(q) || isinf(q) ? json_null() :
		    json_real(q));
		json_array_append_new(out, o);
	}
	doc = json_pack("{s:o}", "clusters", out);
	if (doc != NULL && (text = json_dumps(doc, JSON_COMPACT)) != NULL) {
		printf("%s\n", text);
		free(text);
	}
	json_decref(doc);
}

/* One GET; the body as JSON (status 200 only), or NULL with the exit code
 * and a message in err. */
static json_t *
ctl_get_json(const struct ctl_opts *o, const char *path, struct ctl_reply *r, int *rc,
	     char *err, size_t errlen)
{
	json_t *j;

	if (ctl_request(o, "GET", path, NULL, 0, r, err, errlen) == -1) {
		*rc = CTL_EXIT_UNREACHABLE;
		return NULL;
	}
	if (r->status == 401) {
		ctl_unauthorized(o, r, err, errlen);
		*rc = CTL_EXIT_FAILED;
		return NULL;
	}
	if (r->status != 200) {
		json_t *e = json_loadb(r->body, r->body_len, 0, NULL);
		const char *msg = json_string_value(json_object_get(e, "error"));

		snprintf(err, errlen, "%s%s", msg ? "" : "garbled reply from ferryd: HTTP ",
		    msg ? msg : http_status_reason(r->status));
		json_decref(e);
		*rc = msg ? CTL_EXIT_FAILED : CTL_EXIT_UNREACHABLE;
		return NULL;
	}
	if ((j = json_loadb(r->body, r->body_len, 0, NULL)) == NULL ||
	    !json_is_array(json_object_get(j, "clusters"))) {
		snprintf(err, errlen, "garbled reply from ferryd");
		*rc = CTL_EXIT_UNREACHABLE;
		json_decref(j);
		return NULL;
	}
	return j;
}

/*
 * status -w and top: a frame every second (a terminal is cleared before
 * each; elsewhere frames follow one another), until q, Ctrl-C, SIGTERM or
 * -n frames. A frame that cannot reach ferryd says so and the view goes
 * on. Returns the exit code of the last frame.
 */
int
ctl_live(const struct ctl_opts *opts, bool top, const char *name)
{
	struct ctl_opts o = *opts;
	struct ctl_samples cur = { NULL, 0, 0 }, prev = { NULL, 0, 0 };
	struct sigaction sa;
	struct ctl_tty tty;
	bool clear = isatty(STDOUT_FILENO) == 1 && !o.json;
	char path[2400];
	long frame = 0, start = ctlconn_now_ms();
	int rc = CTL_EXIT_OK;
	bool one;

	o.timeout_ms = 5000;
	ctl_status_path(&o, name, path, sizeof path, &one);
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = ctl_on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	/* a frame goes out in one write */
	setvbuf(stdout, NULL, _IOFBF, 1 << 16);
	ctl_tty_enter(&tty);
	for (;;) {
		struct ctl_reply r;
		char err[512] = "", clock[32];
		time_t now = time(NULL);
		struct tm tm;

		localtime_r(&now, &tm);
		strftime(clock, sizeof clock, "%H:%M:%S", &tm);
		if (clear)
			fputs("\033[H\033[2J", stdout);
		if (top) {
			json_t *cl = ctl_get_json(&o, "/admin/clusters", &r, &rc, err, sizeof err);

			free(r.raw);
			if (cl != NULL) {
				cur.n = 0;
				if (ctl_request(&o, "GET", "/metrics", NULL, 0, &r, err, sizeof err) == -1) {
					rc = CTL_EXIT_UNREACHABLE;
				} else {
					cur.at_ms = ctlconn_now_ms();
					ctl_parse_metrics(r.body, r.body_len, &cur);
					rc = ctl_exit_for(r.status);
					if (rc != CTL_EXIT_OK)
						snprintf(err, sizeof err, "/metrics: HTTP %d", r.status);
					else if (!ctl_metrics_ok(r.body, r.body_len))
						rc = CTL_EXIT_UNREACHABLE;
				}
				free(r.raw);
			}
			if (cl != NULL && rc == CTL_EXIT_OK) {
				if (o.json) {
					ctl_top_json(json_object_get(cl, "clusters"), &cur, &prev);
				} else {
					printf("ferry top  %s  every 1s, q or Ctrl-C quits\n\n", clock);
					rc = ctl_top_frame(json_object_get(cl, "clusters"), &cur, &prev);
				}
				struct ctl_samples t = prev;
				prev = cur;
				cur = t;
			}
			json_decref(cl);
		} else if (ctl_request(&o, "GET", path, NULL, 0, &r, err, sizeof err) == -1) {
			rc = CTL_EXIT_UNREACHABLE;
		} else if (r.status == 401) {
			ctl_unauthorized(&o, &r, err, sizeof err);
			rc = CTL_EXIT_FAILED;
			free(r.raw);
		} else {
			if (o.json) {
				/* one document per line */
				json_t *j = json_loadb(r.body, r.body_len, 0, NULL);
				char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;

				if (text != NULL) {
					printf("%s\n", text);
					rc = ctl_exit_for(r.status);
				} else {
					fwrite(r.body, 1, r.body_len, stdout);
					snprintf(err, sizeof err, "garbled reply from ferryd (HTTP %d): "
					    "not JSON", r.status);
					rc = CTL_EXIT_UNREACHABLE;
				}
				free(text);
				json_decref(j);
			} else {
				fflush(stdout);
				rc = ctl_cmd_status(&r, one);
				if (clear)
					printf("\nevery 1s  %s  q or Ctrl-C quits\n", clock);
			}
			free(r.raw);
		}
		if (err[0] != '\0') {
			if (clear)
				printf("ferryctl: %s\n\nevery 1s  %s  q or Ctrl-C quits\n", err, clock);
			else
				ctl_err("%s", err);
		}
		fflush(stdout);
		frame++;
		if ((o.count && frame >= o.count) || ctl_wait_until(&tty, start + frame * 1000))
			break;
	}
	ctl_tty_leave(&tty);
	free(cur.v);
	free(prev.v);
	return rc;
}
