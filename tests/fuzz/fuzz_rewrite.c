/*
 * fuzz_rewrite — libFuzzer harness for kc_rewrite_response
 * (worker/kafka/rewrite*.c + apiversions.c): Metadata (3), FindCoordinator
 * (10) and ApiVersions (18) responses, plus every other key
 * kc_response_needs_rewrite accepts (found by probing it at start-up:
 * Produce 0, Fetch 1, DescribeCluster 60, ShareFetch 78 and
 * ShareAcknowledge 79 at the time of writing).
 *
 * Input: [key][version][map mode] then the response frame (size prefix
 * included).
 *   key:     bit 7 clear: the key itself when kc_response_needs_rewrite
 *            accepts it for some version, otherwise one of those keys
 *            (byte % their number); bit 7 set: the raw key (byte & 0x7f).
 *   version: bit 7 clear: byte % (max accepted version + 1) for an
 *            accepted key, the byte itself for a raw one;
 *            bit 7 set: (byte & 0x7f) - 8, i.e. -8..119, accepted or not.
 *   map mode: bits 0-1 the proxy host (0 "proxy.local", 1 a 300-byte name,
 *            2 "", 3 NULL with length 0); bits 2-4 m: node ids divisible
 *            by m+1 have no proxy address (m = 0: all mapped); bit 5 port =
 *            node*7+1 instead of 19000+node; bit 6 invalid mappings: node
 *            ids = 1 mod 4 get a 0x8000-byte host, = 3 mod 4 NULL with
 *            length 3.
 *
 * Oracles (besides ASan/UBSan and leak checking):
 *   - only KC_OK / KC_MALFORMED; on MALFORMED *out is NULL and err is set;
 *     keys with no rewritable version are refused; a (key, version) that
 *     kc_response_needs_rewrite rejects (other than ApiVersions) never calls
 *     the map and, when accepted, is copied byte for byte;
 *   - the map runs only for a frame that validated (never on MALFORMED,
 *     unless the failure is the invalid mapping itself), with an upstream
 *     host inside the frame; an invalid mapping always fails the rewrite;
 *   - output: size prefix = length - 4, correlation id kept, length bounded
 *     (ApiVersions never grows; others grow by at most the mapped hosts);
 *   - idempotence: rewriting the output again with the same map succeeds,
 *     is byte-identical and reports no trailing bytes;
 *   - trailing bytes after a complete message (accepted and dropped, their
 *     number in map->trailing, 0 on failure): the frame cut before them
 *     rewrites to the same output; a copy-only response is the input less
 *     them;
 *   - Metadata: kc_metadata_walk agrees with the rewrite on validity; the
 *     output's brokers are exactly the negative-id ones plus the mapped
 *     ones, each carrying its proxy address;
 *   - ApiVersions: kc_apiversions_intersect gives the same bytes, with or
 *     without a map; in a successful (error 0) output refused keys are gone,
 *     capped keys lie inside their cap, and kc_apiversions_find agrees with
 *     the input; any other key without a map is refused.
 */
#include <stdbool.h>
#include <string.h>

#include "tests/fuzz/fuzz_common.h"
#include "worker/kafka/apiversions.h"
#include "worker/kafka/codec.h"
#include "worker/kafka/rewrite.h"

#define LONG_HOST_LEN	300
#define BAD_HOST_LEN	0x8000

struct keyent {
	int16_t key, minv, maxv;
};

static struct keyent keys[64];
static size_t nkeys;
static char long_host[LONG_HOST_LEN + 1];
static char *bad_host;

static void
init_once(void)
{
	int k, v;

	if (bad_host != NULL)
		return;
	memset(long_host, 'h', LONG_HOST_LEN);
	long_host[LONG_HOST_LEN] = '\0';
	bad_host = malloc(BAD_HOST_LEN);
	FUZZ_CHECK(bad_host != NULL, "oom");
	memset(bad_host, 'b', BAD_HOST_LEN);
	for (k = 0; k <= 1024 && nkeys < 64; k++) {
		int minv = -1, maxv = -1;

		for (v = 0; v <= 256; v++) {
			if (!kc_response_needs_rewrite((int16_t)k, (int16_t)v))
				continue;
			if (minv < 0)
				minv = v;
			maxv = v;
		}
		if (maxv < 0)
			continue;
		/* the accepted versions of a key form one range */
		for (v = minv; v <= maxv; v++)
			FUZZ_CHECK(kc_response_needs_rewrite((int16_t)k, (int16_t)v),
			    "key %d: accepted versions not contiguous (v%d)", k, v);
		FUZZ_CHECK(!kc_response_needs_rewrite((int16_t)k, -1), "key %d v-1 accepted", k);
		keys[nkeys].key = (int16_t)k;
		keys[nkeys].minv = (int16_t)minv;
		keys[nkeys].maxv = (int16_t)maxv;
		nkeys++;
	}
	FUZZ_CHECK(nkeys > 0, "no rewritable key");
}

/* ---- the deterministic broker map ---- */

struct mapctx {
	uint8_t mode;
	const uint8_t *frame;
	size_t len;
	int calls;
	bool bad_returned;
	unsigned sum;
};

/* 0 and the proxy address, or -1 (no proxy address).  *bad: invalid mapping. */
static int
lookup(uint8_t mode, int32_t node, const char **h, size_t *hl, int32_t *port, bool *bad)
{
	uint32_t m = (mode >> 2) & 7;

	*bad = false;
	if (m != 0 && (uint32_t)node % (m + 1) == 0)
		return -1;
	if ((mode & 0x40) && (node & 3) == 1) {
		*h = bad_host;
		*hl = BAD_HOST_LEN;
		*port = 1;
		*bad = true;
		return 0;
	}
	if ((mode & 0x40) && (node & 3) == 3) {
		*h = NULL;
		*hl = 3;
		*port = 1;
		*bad = true;
		return 0;
	}
	switch (mode & 3) {
	case 0: *h = "proxy.local"; *hl = 11; break;
	case 1: *h = long_host; *hl = LONG_HOST_LEN; break;
	case 2: *h = ""; *hl = 0; break;
	default: *h = NULL; *hl = 0; break;
	}
	*port = (mode & 0x20) ? (int32_t)((uint32_t)node * 7u + 1u) : (int32_t)(19000u + (uint32_t)node);
	return 0;
}

static int
map_fn(void *vctx, int32_t node, const char *uh, size_t uhl, int32_t up, const char **h,
    size_t *hl, int32_t *port)
{
	struct mapctx *c = vctx;
	const uint8_t *u = (const uint8_t *)uh;
	bool bad;
	size_t i;
	int rc;

	(void)up;
	c->calls++;
	FUZZ_CHECK(node >= 0, "map called for node %d", node);
	FUZZ_CHECK(u != NULL && u >= c->frame && uhl <= c->len && u + uhl <= c->frame + c->len,
	    "upstream host outside the frame");
	for (i = 0; i < uhl; i++)
		c->sum += u[i];
	rc = lookup(c->mode, node, h, hl, port, &bad);
	if (rc == 0 && bad)
		c->bad_returned = true;
	return rc;
}

static const struct keyent *
find_key(int16_t key)
{
	size_t i;

	for (i = 0; i < nkeys; i++)
		if (keys[i].key == key)
			return &keys[i];
	return NULL;
}

static size_t
max_host_len(uint8_t mode)
{
	return (mode & 3) == 1 ? LONG_HOST_LEN : 11;
}

/* ---- Metadata broker checks via kc_metadata_walk ---- */

struct walk {
	uint8_t mode;
	int n, neg, nonneg, mapped;
	bool check_mapped;	/* output: every node >= 0 carries its proxy address */
};

static void
walk_fn(void *vctx, int32_t node, const char *host, size_t hl, int32_t port)
{
	struct walk *w = vctx;
	const char *eh = NULL;
	size_t ehl = 0;
	int32_t ep = 0;
	bool bad;

	w->n++;
	if (node < 0) {
		w->neg++;
		return;
	}
	w->nonneg++;
	if (lookup(w->mode, node, &eh, &ehl, &ep, &bad) == 0 && !bad)
		w->mapped++;
	if (!w->check_mapped)
		return;
	FUZZ_CHECK(lookup(w->mode, node, &eh, &ehl, &ep, &bad) == 0 && !bad,
	    "output keeps node %d that has no proxy address", node);
	FUZZ_CHECK(hl == ehl && (hl == 0 || memcmp(host, eh, hl) == 0) && port == ep,
	    "output node %d: host/port are not the proxy's", node);
}

/* ---- ApiVersions checks ---- */

static void
check_apiversions(const uint8_t *frame, size_t n, int16_t v, const uint8_t *out, size_t out_len)
{
	static const int16_t probe[] = { 0, 1, 3, 4, 7, 10, 17, 18, 27, 36, 55, 60, 78, 87, 100 };
	uint8_t *buf = malloc(n ? n : 1);
	size_t blen = 0, i;
	char err[96] = "";

	FUZZ_CHECK(buf != NULL, "oom");
	FUZZ_CHECK(kc_apiversions_intersect(frame, n, v, buf, n, &blen, err, sizeof err) == KC_OK,
	    "intersect fails where the rewrite succeeded: %s", err);
	FUZZ_CHECK(blen == out_len && memcmp(buf, out, out_len) == 0,
	    "intersect and rewrite differ");
	free(buf);
	if (out_len < 10 || (out[8] | out[9]) != 0)
		return;		/* error responses are relayed unchanged */
	for (i = 0; i < sizeof probe / sizeof probe[0]; i++) {
		int16_t lo = 0, hi = 0, cmin, cmax, ilo, ihi;
		int rc = kc_apiversions_find(out, out_len, v, probe[i], &lo, &hi);
		int irc = kc_apiversions_find(frame, n, v, probe[i], &ilo, &ihi);

		FUZZ_CHECK(rc == KC_OK || rc == KC_APIVERSIONS_ABSENT,
		    "intersected output does not parse (key %d): %d", probe[i], rc);
		FUZZ_CHECK(irc == KC_OK || irc == KC_APIVERSIONS_ABSENT,
		    "input intersects but does not parse for find (key %d): %d", probe[i], irc);
		if (irc == KC_APIVERSIONS_ABSENT)
			FUZZ_CHECK(rc == KC_APIVERSIONS_ABSENT, "key %d appeared", probe[i]);
		if (rc != KC_OK)
			continue;
		FUZZ_CHECK(!kc_api_refused(probe[i]), "refused key %d kept", probe[i]);
		if (kc_api_cap(probe[i], &cmin, &cmax))
			FUZZ_CHECK(lo >= cmin && hi <= cmax && lo <= hi,
			    "key %d: [%d,%d] outside cap [%d,%d]", probe[i], lo, hi, cmin, cmax);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kc_broker_map map;
	struct mapctx ctx;
	const struct keyent *ke = NULL;
	int16_t key, v;
	uint8_t mode, *frame, *out = NULL, *out2 = NULL;
	size_t n, out_len = 12345, out2_len = 0;
	char err[96] = "", err2[96] = "";
	bool rewritten;
	int rc, rc2;

	init_once();
	if (size < 3)
		return 0;
	if (data[0] & 0x80) {
		key = (int16_t)(data[0] & 0x7f);
	} else {
		ke = find_key((int16_t)data[0]);
		if (ke == NULL)
			ke = &keys[data[0] % nkeys];
		key = ke->key;
	}
	if (data[1] & 0x80)
		v = (int16_t)((data[1] & 0x7f) - 8);
	else
		v = ke != NULL ? (int16_t)(data[1] % (ke->maxv + 1)) : (int16_t)data[1];
	mode = data[2];
	n = size - 3;
	frame = fuzz_dup(data + 3, n);

	memset(&ctx, 0, sizeof ctx);
	ctx.mode = mode;
	ctx.frame = frame;
	ctx.len = n;
	memset(&map, 0, sizeof map);
	map.map = map_fn;
	map.ctx = &ctx;
	map.trailing = 777;	/* must be reset */

	rewritten = kc_response_needs_rewrite(key, v) || (key == KC_API_API_VERSIONS && v >= 0);
	rc = kc_rewrite_response(key, v, frame, n, &map, &out, &out_len, err, sizeof err);
	FUZZ_CHECK(rc == KC_OK || rc == KC_MALFORMED, "status %d", rc);
	if (find_key(key) == NULL)
		FUZZ_CHECK(rc == KC_MALFORMED, "key %d (no schema) v%d accepted", key, v);
	if (rc == KC_OK)
		FUZZ_CHECK(n >= 8 && map.trailing <= n - 8 && out_len >= 8,
		    "%zu trailing bytes reported for a %zu-byte frame", map.trailing, n);
	else
		FUZZ_CHECK(map.trailing == 0, "%zu trailing bytes reported on failure", map.trailing);
	if (!rewritten) {
		FUZZ_CHECK(ctx.calls == 0, "map called for key %d v%d", key, v);
		if (rc == KC_OK)
			FUZZ_CHECK(out_len == n - map.trailing &&
			    memcmp(out + 4, frame + 4, out_len - 4) == 0,
			    "key %d v%d (no addresses) not copied unchanged", key, v);
	}
	if (rc != KC_OK) {
		FUZZ_CHECK(out == NULL && out_len == 0, "output left on failure");
		FUZZ_CHECK(err[0] != '\0', "failure without a reason");
		FUZZ_CHECK(ctx.calls == 0 || ctx.bad_returned,
		    "map called %d times on a frame that failed: %s", ctx.calls, err);
	} else {
		FUZZ_CHECK(!ctx.bad_returned, "invalid mapping accepted");
		FUZZ_CHECK(out != NULL && out_len >= 8, "output of %zu bytes", out_len);
		FUZZ_CHECK((uint64_t)(uint32_t)kc_get_i32(out) == (uint64_t)out_len - 4,
		    "size prefix %d for %zu bytes", kc_get_i32(out), out_len);
		FUZZ_CHECK(memcmp(out + 4, frame + 4, 4) == 0, "correlation id changed");
		if (key == KC_API_API_VERSIONS)
			FUZZ_CHECK(ctx.calls == 0 && out_len <= n, "ApiVersions grew: %zu > %zu",
			    out_len, n);
		else
			FUZZ_CHECK(out_len <= n + (size_t)ctx.calls * (max_host_len(mode) + 5),
			    "output %zu bytes from %zu with %d mapped hosts", out_len, n, ctx.calls);

		/* idempotence: the output is itself a valid response for the map */
		{
			struct mapctx ctx2;
			struct kc_broker_map map2 = { .map = map_fn, .ctx = &ctx2, .trailing = 777 };

			memset(&ctx2, 0, sizeof ctx2);
			ctx2.mode = mode;
			ctx2.frame = out;
			ctx2.len = out_len;
			rc2 = kc_rewrite_response(key, v, out, out_len, &map2, &out2, &out2_len,
			    err2, sizeof err2);
			FUZZ_CHECK(rc2 == KC_OK, "key %d v%d: rewritten output does not rewrite "
			    "again: %s", key, v, err2);
			FUZZ_CHECK(out2_len == out_len && memcmp(out2, out, out_len) == 0,
			    "key %d v%d: second rewrite differs (%zu vs %zu bytes)", key, v,
			    out2_len, out_len);
			FUZZ_CHECK(map2.trailing == 0, "rewritten output has %zu trailing bytes",
			    map2.trailing);
			free(out2);
		}

		/* trailing bytes change nothing: the frame without them, same output */
		if (map.trailing > 0) {
			struct mapctx ctx3;
			struct kc_broker_map map3 = { .map = map_fn, .ctx = &ctx3, .trailing = 777 };
			size_t cut = n - map.trailing;
			uint8_t *f3 = fuzz_dup(frame, cut), *out3 = NULL;
			size_t out3_len = 0;

			kc_put_i32(f3, (int32_t)(cut - 4));
			memset(&ctx3, 0, sizeof ctx3);
			ctx3.mode = mode;
			ctx3.frame = f3;
			ctx3.len = cut;
			rc2 = kc_rewrite_response(key, v, f3, cut, &map3, &out3, &out3_len, err2,
			    sizeof err2);
			FUZZ_CHECK(rc2 == KC_OK && map3.trailing == 0,
			    "key %d v%d: the frame without its %zu trailing bytes fails: %s", key, v,
			    map.trailing, err2);
			FUZZ_CHECK(out3_len == out_len && memcmp(out3, out, out_len) == 0,
			    "key %d v%d: trailing bytes changed the output", key, v);
			free(out3);
			free(f3);
		}
		if (key == KC_API_API_VERSIONS)
			check_apiversions(frame, n, v, out, out_len);
	}

	/* Metadata: the walk validates exactly like the rewrite */
	if (key == KC_API_METADATA) {
		struct walk win, wout;
		int32_t ctrl = 7;
		int wr;

		memset(&win, 0, sizeof win);
		win.mode = mode;
		err2[0] = '\0';
		wr = kc_metadata_walk(v, frame, n, walk_fn, &win, &ctrl, err2, sizeof err2);
		FUZZ_CHECK(wr == KC_OK || wr == KC_MALFORMED, "walk status %d", wr);
		if (rc == KC_OK || !ctx.bad_returned)
			FUZZ_CHECK((wr == KC_OK) == (rc == KC_OK),
			    "v%d: walk says %d, rewrite says %d (%s / %s)", v, wr, rc, err2, err);
		if (wr != KC_OK)
			FUZZ_CHECK(win.n == 0, "walk called back on a malformed frame");
		if (rc == KC_OK) {
			FUZZ_CHECK(ctx.calls == win.nonneg, "map called %d times for %d brokers",
			    ctx.calls, win.nonneg);
			if (v == 0)
				FUZZ_CHECK(ctrl == -1, "v0 controller %d", ctrl);
			memset(&wout, 0, sizeof wout);
			wout.mode = mode;
			wout.check_mapped = true;
			FUZZ_CHECK(kc_metadata_walk(v, out, out_len, walk_fn, &wout, NULL, NULL, 0) == KC_OK,
			    "rewritten Metadata does not walk");
			FUZZ_CHECK(wout.neg == win.neg && wout.nonneg == win.mapped,
			    "brokers: in %d neg + %d mapped, out %d neg + %d", win.neg, win.mapped,
			    wout.neg, wout.nonneg);
		}
	}

	/* without a map: refused, except ApiVersions (map unused) which is unaffected */
	{
		uint8_t *o = NULL;
		size_t ol = 0;
		int nrc = kc_rewrite_response(key, v, frame, n, NULL, &o, &ol, err2, sizeof err2);

		if (key == KC_API_API_VERSIONS && v >= 0) {
			FUZZ_CHECK(nrc == rc, "ApiVersions with and without a map: %d vs %d", nrc, rc);
			if (nrc == KC_OK)
				FUZZ_CHECK(ol == out_len && memcmp(o, out, ol) == 0,
				    "ApiVersions with and without a map differ");
		} else {
			FUZZ_CHECK(nrc == KC_MALFORMED && o == NULL, "key %d v%d without a map: %d",
			    key, v, nrc);
		}
		free(o);
	}

	/* find never misbehaves on whatever the input is */
	if (key == KC_API_API_VERSIONS) {
		int16_t lo, hi;
		int frc = kc_apiversions_find(frame, n, v, (int16_t)(mode & 0x7f), &lo, &hi);

		FUZZ_CHECK(frc == KC_OK || frc == KC_APIVERSIONS_ABSENT || frc == KC_MALFORMED,
		    "find: %d", frc);
	}

	/* the v0 unsupported-version reply is always accepted */
	if (key == KC_API_API_VERSIONS && n >= 8) {
		uint8_t rep[32];
		size_t rl = kc_build_apiversions_unsupported(rep, sizeof rep, kc_get_i32(frame + 4));

		uint8_t *o = NULL;
		size_t ol = 0;

		FUZZ_CHECK(rl == 20, "unsupported reply %zu bytes", rl);
		FUZZ_CHECK(kc_rewrite_response(KC_API_API_VERSIONS, (int16_t)(v < 0 ? 0 : v), rep, rl,
		    NULL, &o, &ol, err2, sizeof err2) == KC_OK, "own unsupported reply: %s", err2);
		FUZZ_CHECK(ol == rl && memcmp(o, rep, rl) == 0, "own unsupported reply changed");
		free(o);
	}

	free(out);
	free(frame);
	return 0;
}
