/*
 * fuzz_conn — libFuzzer harness for the Kafka framing of one connection
 * (worker/frame.c, over worker/kafka/): a client byte stream and an
 * upstream byte stream fed through the two buffers as worker/conn.c feeds
 * them (appended as reads bring them, moved to the front when the end is
 * reached, parsed bytes and rewritten frames taken as writes take them).
 *
 * Input: byte 0 selects the limits: bits 0-1 the buffer size (64, 256,
 * 1024, 65536), bits 2-3 max_frame_bytes (4096, 64, 100 MiB, 1 MiB), bit 4
 * sasl_max_frame_bytes 64 (else = max_frame_bytes), bits 5-6
 * max_inflight (1, 2, 16, 1024); bytes 1-2 the client stream's length
 * (big-endian, cut to what follows); then the client stream, then the
 * upstream stream.
 *
 * Each run alternates a client phase (feed, parse, forward until nothing
 * moves) and an upstream phase (the same for responses) until neither
 * moves or a step fails. Three runs read the streams in different pieces:
 * all at once, byte by byte, and in pseudo-random pieces.
 *
 * Oracles (besides ASan/UBSan, and leaks):
 *   - every status is a known one; a negative one carries a reason;
 *   - after every step: start <= start+fwd <= end <= the buffer size, the
 *     FIFO within max_inflight, a collected frame never complete nor
 *     beside a pass-through frame, the in_flight gauge equal to the
 *     requests owed upstream (synthetic answers excluded);
 *   - split independence: the three runs end with the same status, the
 *     same bytes forwarded upstream, the same bytes delivered to the
 *     client, the same FIFO and SASL phase;
 *   - frame_free leaves nothing in flight.
 */
#include <stdbool.h>
#include <string.h>

#include "tests/fuzz/fuzz_common.h"
#include "worker/frame.h"

static const size_t buf_sizes[4] = { 64, 256, 1024, 65536 };
static const uint64_t max_frames[4] = { 4096, 64, 100u << 20, 1u << 20 };
static const size_t inflights[4] = { 1, 2, 16, 1024 };

struct sink {
	uint8_t *b;
	size_t n, cap;
};

static void
sink_add(struct sink *s, const uint8_t *p, size_t n)
{
	if (s->n + n > s->cap) {
		size_t cap = s->cap ? s->cap : 256;
		while (cap < s->n + n)
			cap *= 2;
		uint8_t *b = realloc(s->b, cap);
		FUZZ_CHECK(b != NULL, "oom");
		s->b = b;
		s->cap = cap;
	}
	if (n)
		memcpy(s->b + s->n, p, n);
	s->n += n;
}

struct run {
	struct frame f;
	struct metrics *m;
	struct sink up, cli;  /* forwarded upstream, delivered to the client */
	size_t cin, uin;      /* stream bytes read so far */
	int status;           /* 0 while no step failed */
	uint32_t rnd;         /* 0: pieces of a fixed size */
	size_t piece;
};

/* The broker map: every node id gets one proxy address; -1 drops it. */
static int
map_fn(void *ctx, int32_t node_id, const char *up_host, size_t up_host_len, int32_t up_port,
       const char **host, size_t *host_len, int32_t *port)
{
	(void)ctx;
	FUZZ_CHECK(up_host != NULL || up_host_len == 0, "host");
	(void)up_port;
	if (node_id % 7 == 6)
		return -1;
	*host = "proxy.local";
	*host_len = 11;
	*port = 19000 + node_id % 1000;
	return 0;
}

static size_t
feed(struct run *r, struct frame_dir *d, const uint8_t *p, size_t n)
{
	size_t took = 0;
	if (!d->buf) {
		d->buf = malloc(r->f.lim.buf_size);
		FUZZ_CHECK(d->buf != NULL, "oom");
		d->start = d->end = d->fwd = 0;
	}
	while (took < n) {
		size_t room = frame_dir_room(&r->f, d);
		if (!room)
			break;
		size_t k = room < n - took ? room : n - took;
		memcpy(d->buf + d->end, p + took, k);
		d->end += k;
		took += k;
	}
	return took;
}

/* Take what is parsed; true when anything was taken. */
static bool
flush(struct frame_dir *d, struct sink *s)
{
	bool any = false;
	if (d->fwd) {
		sink_add(s, d->buf + d->start, d->fwd);
		d->start += d->fwd;
		d->fwd = 0;
		any = true;
	}
	if (d->out) {
		FUZZ_CHECK(d->out_off <= d->out_len, "out_off %zu > out_len %zu", d->out_off,
		    d->out_len);
		sink_add(s, d->out + d->out_off, d->out_len - d->out_off);
		if (d->out_owned)
			free(d->out);
		d->out = NULL;
		d->out_owned = false;
		any = true;
	}
	return any;
}

static void
check_dir(const struct frame *f, const struct frame_dir *d, const char *what)
{
	if (d->buf)
		FUZZ_CHECK(d->start + d->fwd <= d->end && d->end <= f->lim.buf_size,
		    "%s: start %zu fwd %zu end %zu cap %zu", what, d->start, d->fwd, d->end,
		    f->lim.buf_size);
	else
		FUZZ_CHECK(d->fwd == 0, "%s: fwd without a buffer", what);
	if (d->acc)
		FUZZ_CHECK(d->acc_len < d->acc_need && d->frame_left == 0,
		    "%s: collected %zu of %zu, frame_left %llu", what, d->acc_len, d->acc_need,
		    (unsigned long long)d->frame_left);
}

static void
check(const struct run *r, int st)
{
	const struct frame *f = &r->f;
	FUZZ_CHECK(st == FRAME_OK || st == FRAME_NEED_MORE || st == FRAME_MALFORMED ||
	    st == FRAME_UPSTREAM || st == FRAME_NO_MEMORY, "status %d", st);
	FUZZ_CHECK(strcmp(frame_status_str((enum frame_status)st), "unknown") != 0, "name");
	if (st < 0)
		FUZZ_CHECK(f->why[0] != '\0', "status %d without a reason", st);
	check_dir(f, &f->req, "req");
	check_dir(f, &f->resp, "resp");
	FUZZ_CHECK(f->fifo_len <= f->lim.max_inflight, "fifo %zu > %zu", f->fifo_len,
	    f->lim.max_inflight);
	FUZZ_CHECK(f->req.skip_left == 0 || f->req.frame_left == 0, "skip and pass-through");
	FUZZ_CHECK((unsigned)f->sasl.phase < SASL_PHASE_COUNT, "sasl phase %d", f->sasl.phase);
	uint64_t owed = 0;
	for (size_t i = 0; i < f->fifo_len; i++)
		owed += !f->fifo[(f->fifo_head + i) % f->fifo_cap].synthetic;
	FUZZ_CHECK(r->m->in_flight == owed, "in_flight %llu, owed %llu",
	    (unsigned long long)r->m->in_flight, (unsigned long long)owed);
}

static size_t
piece(struct run *r, size_t left)
{
	size_t k = r->rnd ? 1 + fuzz_rand(&r->rnd) % 97 : r->piece;
	return k < left ? k : left;
}

/* One direction until nothing moves; true when anything moved. */
static bool
phase(struct run *r, bool client, const uint8_t *in, size_t n)
{
	struct frame_dir *d = client ? &r->f.req : &r->f.resp;
	size_t *at = client ? &r->cin : &r->uin;
	bool any = false;
	for (;;) {
		size_t took = *at < n ? feed(r, d, in + *at, piece(r, n - *at)) : 0;
		*at += took;
		bool stepped = false;
		int st;
		uint64_t started = 0;
		while ((st = client ? frame_req_step(&r->f, 1.0, true, &started)
		    : frame_resp_step(&r->f, 2.0)) == FRAME_OK) {
			stepped = true;
			check(r, st);
		}
		check(r, st);
		bool flushed = flush(d, client ? &r->up : &r->cli);
		if (st < 0) {
			r->status = st;
			return true;
		}
		if (!took && !stepped && !flushed)
			return any;
		any = true;
	}
}

static void
run(struct run *r, uint8_t sel, const uint8_t *cli, size_t ncli, const uint8_t *up, size_t nup)
{
	struct frame_limits lim = {
		.buf_size = buf_sizes[sel & 3],
		.max_frame_bytes = max_frames[(sel >> 2) & 3],
		.max_inflight = inflights[(sel >> 5) & 3],
	};
	lim.sasl_max_frame_bytes = (sel & 0x10) ? 64 : lim.max_frame_bytes;
	struct kc_broker_map map = { .map = map_fn, .ctx = NULL };
	r->m = calloc(1, sizeof *r->m);
	FUZZ_CHECK(r->m != NULL, "oom");
	frame_init(&r->f, &lim, r->m, &map);
	for (int round = 0; round < 100000 && r->status == 0; round++) {
		bool a = phase(r, true, cli, ncli);
		if (r->status)
			break;
		bool b = phase(r, false, up, nup);
		if (!a && !b)
			break;
	}
}

static void
run_free(struct run *r)
{
	free(r->f.req.buf);
	free(r->f.resp.buf);
	r->f.req.buf = r->f.resp.buf = NULL;
	frame_free(&r->f);
	FUZZ_CHECK(r->m->in_flight == 0, "in flight after frame_free");
	free(r->m);
	free(r->up.b);
	free(r->cli.b);
}

static void
same(const struct run *a, const struct run *b, const char *how)
{
	FUZZ_CHECK(a->status == b->status, "%s: status %d vs %d (%s | %s)", how, b->status,
	    a->status, b->f.why, a->f.why);
	FUZZ_CHECK(a->up.n == b->up.n && (a->up.n == 0 || memcmp(a->up.b, b->up.b, a->up.n) == 0),
	    "%s: forwarded %zu vs %zu bytes", how, b->up.n, a->up.n);
	FUZZ_CHECK(a->cli.n == b->cli.n &&
	    (a->cli.n == 0 || memcmp(a->cli.b, b->cli.b, a->cli.n) == 0),
	    "%s: delivered %zu vs %zu bytes", how, b->cli.n, a->cli.n);
	FUZZ_CHECK(a->f.fifo_len == b->f.fifo_len && a->f.requests == b->f.requests &&
	    a->f.sasl.phase == b->f.sasl.phase, "%s: fifo %zu/%zu requests %llu/%llu", how,
	    b->f.fifo_len, a->f.fifo_len, (unsigned long long)b->f.requests,
	    (unsigned long long)a->f.requests);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 3)
		return 0;
	uint8_t sel = data[0];
	size_t ncli = (size_t)data[1] << 8 | data[2];
	if (ncli > size - 3)
		ncli = size - 3;
	uint8_t *cli = fuzz_dup(data + 3, ncli);
	uint8_t *up = fuzz_dup(data + 3 + ncli, size - 3 - ncli);
	size_t nup = size - 3 - ncli;
	uint32_t seed = 0x9e3779b9u ^ (uint32_t)size;
	for (size_t i = 0; i < size && i < 16; i++)
		seed = seed * 31 + data[i];
	if (seed == 0)
		seed = 1;

	struct run whole = { .piece = SIZE_MAX }, bytes = { .piece = 1 }, random = { .rnd = seed };
	run(&whole, sel, cli, ncli, up, nup);
	run(&bytes, sel, cli, ncli, up, nup);
	run(&random, sel, cli, ncli, up, nup);
	same(&whole, &bytes, "byte by byte");
	same(&whole, &random, "random pieces");
	run_free(&whole);
	run_free(&bytes);
	run_free(&random);
	free(cli);
	free(up);
	return 0;
}
