/*
 * test_sni_rewrite — the metadata rewrite of an SNI gateway (gateway = sni):
 * every address-bearing response the rewriter handles (Metadata 0-13,
 * FindCoordinator 0-6, DescribeCluster 0-2, the NodeEndpoints of Produce
 * v10-13 and Fetch v16-18) comes out naming each broker by
 * sni_broker_pattern with its node id, on the one bootstrap port, byte for
 * byte as the same fixture built with those addresses. The map is the
 * worker's SNI map in miniature (sni_format + the bootstrap port), over any
 * node id (not a port range: 1000000 and INT32_MAX too), and the names
 * round-trip: sni_classify of each advertised name gives its node id back.
 * A long pattern (names far longer than the upstream's) makes the output
 * grow past the size the rewriter first allocates.
 */
#include "tests/unit/kafka_fixtures.h"

#include "common/sni.h"

#define SNI_PORT 9443
#define BOOT "kafka.example.com"
#define PAT "broker-$(nodeId).kafka.example.com"

struct smap {
	const char *pattern;
	char host[SNI_NAME_MAX + 1];
	int calls;
};

/* conn_map_broker's gateway = sni branch, without the worker */
static int
smap_fn(void *ctx, int32_t node, const char *uh, size_t uhl, int32_t up, const char **h,
	size_t *hl, int32_t *p)
{
	struct smap *m = ctx;
	(void)uh;
	(void)uhl;
	(void)up;
	m->calls++;
	int n = sni_format(m->pattern, node, m->host, sizeof m->host);
	if (n < 0)
		return -1;
	*h = m->host;
	*hl = (size_t)n;
	*p = SNI_PORT;
	return 0;
}

static struct kc_broker_map
mk_smap(struct smap *m, const char *pattern)
{
	memset(m, 0, sizeof *m);
	m->pattern = pattern;
	return (struct kc_broker_map){ .map = smap_fn, .ctx = m };
}

/* The fixture nodes with the SNI names of pattern. */
struct sni_nodes {
	struct node n[3];
	char host[3][SNI_NAME_MAX + 1];
};

static void
sni_nodes(struct sni_nodes *s, const struct node *up, const char *pattern)
{
	for (int i = 0; i < 3; i++) {
		s->n[i] = up[i];
		cr_assert_gt(sni_format(pattern, up[i].id, s->host[i], sizeof s->host[i]), 0);
		s->n[i].host = s->host[i];
		s->n[i].port = SNI_PORT;
	}
}

/* Rewrite in with the SNI map, compare with exp; the map ran `calls` times. */
static void
check_sni(int16_t key, int v, const struct bb *in, const struct bb *exp, int calls,
	  const char *pattern)
{
	struct smap m;
	struct kc_broker_map bm = mk_smap(&m, pattern);
	uint8_t *out = NULL;
	size_t n = 0;
	char err[128] = "", what[64];

	snprintf(what, sizeof what, "%s v%d", kc_api_name(key), v);
	int rc = kc_rewrite_response(key, (int16_t)v, in->b, in->n, &bm, &out, &n, err, sizeof err);
	cr_assert_eq(rc, KC_OK, "%s: %s", what, err);
	assert_bytes(out, n, exp->b, exp->n, what);
	cr_assert_eq(m.calls, calls, "%s: map ran %d times, not %d", what, m.calls, calls);
	free(out);
}

/* Upstream brokers with ids no port range would cover. */
static const struct node UPX[3] = {
	{ 0, "10.1.2.3", 9092, "rack-a", NULL, 0, 0 },
	{ 1000000, "kafka-1m.internal.example", 9093, NULL, "\x01\x05\x02\xaa\xbb", 5, 0 },
	{ INT32_MAX, "k", 9094, "rack-c", NULL, 0, 1 },
};

static const char LONG_PAT[] =
	"broker-$(nodeId).a-rather-long-label-to-make-names-grow-aaaaaaaaaaaaaa."
	"another-label-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb."
	"third-label-cccccccccccccccccccccccccccccccccccccccc."
	"fourth-label-dddddddddddddddddddddddddddddddd.example.com";

static void
check_all(const struct node *up, const char *pattern)
{
	struct sni_nodes s;
	struct bb in, exp;
	char why[200];

	cr_assert_eq(sni_pattern_check(pattern, why, sizeof why), 0, "%s", why);
	sni_nodes(&s, up, pattern);
	for (int v = 0; v <= 13; v++) {
		build_md(&in, v, up, 3);
		build_md(&exp, v, s.n, 3);
		check_sni(KC_API_METADATA, v, &in, &exp, 3, pattern);
		bb_free(&in);
		bb_free(&exp);
	}
	for (int v = 0; v <= 2; v++) {
		build_dc(&in, v, 1, up, 3);
		build_dc(&exp, v, 1, s.n, 3);
		check_sni(KC_API_DESCRIBE_CLUSTER, v, &in, &exp, 3, pattern);
		bb_free(&in);
		bb_free(&exp);
	}
	struct pr_opts pu = { up, 3, true, true }, px = { s.n, 3, true, true };
	for (int v = 10; v <= 13; v++) {
		build_pr(&in, v, &pu);
		build_pr(&exp, v, &px);
		check_sni(KC_API_PRODUCE, v, &in, &exp, 3, pattern);
		bb_free(&in);
		bb_free(&exp);
	}
	/* FindCoordinator: the coordinator's name and the one port; a
	 * "not available" entry (node -1) stays as it is */
	const struct coord cu[] = {
		{ "group-a", up[1].id, up[1].host, up[1].port, 0, "ok" },
		{ "group-b", -1, "", -1, 15, "not available" },
		{ "txn-c", up[2].id, up[2].host, up[2].port, 0, NULL },
	};
	const struct coord cx[] = {
		{ "group-a", up[1].id, s.host[1], SNI_PORT, 0, "ok" },
		{ "group-b", -1, "", -1, 15, "not available" },
		{ "txn-c", up[2].id, s.host[2], SNI_PORT, 0, NULL },
	};
	for (int v = 0; v <= 6; v++) {
		build_fc(&in, v, cu, 3);
		build_fc(&exp, v, cx, 3);
		check_sni(KC_API_FIND_COORDINATOR, v, &in, &exp, v <= 3 ? 1 : 2, pattern);
		bb_free(&in);
		bb_free(&exp);
	}
}

Test(sni_rewrite, every_api_names_brokers_by_pattern)
{
	check_all(UP, PAT);
}

Test(sni_rewrite, any_node_id_not_a_port_range)
{
	check_all(UPX, PAT);
}

Test(sni_rewrite, long_names_grow_the_output)
{
	cr_assert_gt(strlen(LONG_PAT), 200);
	check_all(UP, LONG_PAT);
	check_all(UPX, LONG_PAT);
}

/* Fetch v16-18 NodeEndpoints, through the shared fixture options. */
Test(sni_rewrite, fetch_node_endpoints)
{
	struct sni_nodes s;
	struct bb in, exp;

	sni_nodes(&s, UPX, PAT);
	for (int v = 16; v <= 18; v++) {
		struct fe_opts fu = { 0 }, fx = { 0 };
		fu.ne = UPX;
		fu.nne = 3;
		fu.with_ne = true;
		fx = fu;
		fx.ne = s.n;
		build_fe(&in, v, &fu);
		build_fe(&exp, v, &fx);
		check_sni(KC_API_FETCH, v, &in, &exp, 3, PAT);
		bb_free(&in);
		bb_free(&exp);
	}
}

struct walked {
	int n;
	int32_t id[3];
	char host[3][SNI_NAME_MAX + 1];
	int32_t port[3];
};

static void
walk_cb(void *ctx, int32_t node, const char *h, size_t hl, int32_t port)
{
	struct walked *w = ctx;
	if (w->n < 3) {
		w->id[w->n] = node;
		snprintf(w->host[w->n], sizeof w->host[w->n], "%.*s", (int)hl, h);
		w->port[w->n] = port;
	}
	w->n++;
}

/* What a client sees is what the gateway accepts: every advertised name
 * classifies back to its node id. */
Test(sni_rewrite, advertised_names_round_trip)
{
	struct smap m;
	struct kc_broker_map bm = mk_smap(&m, PAT);
	struct bb in;
	uint8_t *out = NULL;
	size_t n = 0;
	char err[128] = "";

	build_md(&in, 12, UPX, 3);
	cr_assert_eq(kc_rewrite_response(KC_API_METADATA, 12, in.b, in.n, &bm, &out, &n, err,
	    sizeof err), KC_OK, "%s", err);
	struct walked wk = { 0 };
	cr_assert_eq(kc_metadata_walk(12, out, n, walk_cb, &wk, NULL, err, sizeof err), KC_OK,
	    "%s", err);
	cr_assert_eq(wk.n, 3);
	for (int i = 0; i < 3; i++) {
		int32_t id = -5;
		cr_assert_eq(wk.port[i], SNI_PORT);
		cr_assert_eq(sni_classify(BOOT, PAT, wk.host[i], strlen(wk.host[i]), &id), SNI_BROKER,
		    "%s", wk.host[i]);
		cr_assert_eq(id, wk.id[i]);
		cr_assert_eq(id, UPX[i].id);
	}
	free(out);
	bb_free(&in);
}
