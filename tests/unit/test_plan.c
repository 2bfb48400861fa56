/*
 * Unit tests for supervisor/plan: the reload diff and plan as a pure
 * function of (running clusters, new config), without processes.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdint.h>
#include <strings.h>
#include <stdio.h>
#include <string.h>

#include "supervisor/plan.h"

#define FERRY_HDR "[ferry]\ncontrol_socket = /tmp/f.sock\nadmin_listen = 127.0.0.1:9190\n"

static struct cfg
parse(const char *text)
{
	struct cfg c;
	struct cfg_errors e;
	cfg_errors_init(&e);
	int r = cfg_parse_string("new.ini", text, strlen(text), &c, &e);
	cr_assert_eq(r, 0, "%s", e.n ? e.msg[0] : "");
	cfg_errors_free(&e);
	return c;
}

/* Running state built from a config, as the supervisor would hold it. */
struct running {
	struct cfg cfg;
	struct plan_running run[8];
	char ver[8][PLAN_VERSION_LEN];
};

static void
running_from(struct running *r, const char *text)
{
	r->cfg = parse(text);
	for (size_t i = 0; i < r->cfg.n_clusters; i++) {
		cr_assert_eq(plan_cluster_version(&r->cfg.clusters[i], r->ver[i], sizeof r->ver[i]), 0);
		r->run[i].cl = &r->cfg.clusters[i];
		r->run[i].version = r->ver[i];
	}
}

static const struct plan_item *
item(const struct plan *p, const char *name)
{
	for (size_t i = 0; i < p->n; i++)
		if (strcmp(p->items[i].name, name) == 0)
			return &p->items[i];
	cr_assert_fail("no plan item for %s", name);
	return NULL;
}

#define CL_A "[cluster a]\nupstream = 127.0.0.1:9092\nbootstrap = 127.0.0.1:19092\nbroker_ports = 19093-19095\n"
#define CL_B "[cluster b]\nupstream = 127.0.0.1:9192\nbootstrap = 127.0.0.1:29092\nbroker_ports = 29093-29095\n"
#define CL_C "[cluster c]\nupstream = 127.0.0.1:9292\nbootstrap = 127.0.0.1:39092\nbroker_ports = 39093-39093\n"

Test(plan, identical_config_keeps_everything)
{
	struct running r;
	running_from(&r, FERRY_HDR CL_A CL_B);
	struct cfg next = parse(FERRY_HDR CL_A CL_B);
	struct plan p;
	cr_assert_eq(plan_make(r.run, r.cfg.n_clusters, &next, &p), 0);
	cr_expect_eq(p.n, 2);
	cr_expect_eq(p.n_keep, 2);
	cr_expect_eq(p.n_add + p.n_modify + p.n_remove, 0);
	cr_expect_eq(item(&p, "a")->op, PLAN_KEEP);
	cr_expect_str_eq(item(&p, "a")->version, r.ver[0]);
	plan_free(&p);
	cfg_free(&next);
	cfg_free(&r.cfg);
}

Test(plan, comments_and_order_of_keys_do_not_matter)
{
	struct running r;
	running_from(&r, FERRY_HDR CL_A);
	struct cfg next = parse(FERRY_HDR "; a comment\n[cluster a]\nbroker_ports = 19093-19095\n"
	    "bootstrap = 127.0.0.1:19092\n  upstream=127.0.0.1:9092   ; same\nnode_ids = 0-2\n"
	    "idle_timeout = 600s\n");
	struct plan p;
	cr_assert_eq(plan_make(r.run, 1, &next, &p), 0);
	cr_expect_eq(item(&p, "a")->op, PLAN_KEEP, "canonical text decides, not bytes");
	plan_free(&p);
	cfg_free(&next);
	cfg_free(&r.cfg);
}

Test(plan, add_remove_modify)
{
	struct running r;
	running_from(&r, FERRY_HDR CL_A CL_B);
	struct cfg next = parse(FERRY_HDR
	    "[cluster a]\nupstream = 127.0.0.1:9092\nbootstrap = 127.0.0.1:19092\n"
	    "broker_ports = 19093-19095\nmax_connections = 5\n" CL_C);
	struct plan p;
	cr_assert_eq(plan_make(r.run, r.cfg.n_clusters, &next, &p), 0);
	cr_expect_eq(p.n, 3);
	const struct plan_item *a = item(&p, "a"), *b = item(&p, "b"), *c = item(&p, "c");
	cr_expect_eq(a->op, PLAN_MODIFY);
	cr_expect_not(a->listeners_changed, "only a limit changed");
	cr_expect_eq(a->old_index, 0);
	cr_expect_eq(a->new_index, 0);
	cr_expect_str_neq(a->version, r.ver[0]);
	cr_expect_eq(b->op, PLAN_REMOVE);
	cr_expect_eq(b->new_index, -1);
	cr_expect_eq(c->op, PLAN_ADD);
	cr_expect_eq(c->old_index, -1);
	cr_expect_eq(c->new_index, 1);
	cr_expect_eq(p.n_add, 1);
	cr_expect_eq(p.n_modify, 1);
	cr_expect_eq(p.n_remove, 1);
	cr_expect_eq(p.n_keep, 0);
	plan_free(&p);
	cfg_free(&next);
	cfg_free(&r.cfg);
}

Test(plan, port_change_is_a_modify_with_new_listeners)
{
	struct running r;
	running_from(&r, FERRY_HDR CL_A);
	struct cfg next = parse(FERRY_HDR "[cluster a]\nupstream = 127.0.0.1:9092\n"
	    "bootstrap = 127.0.0.1:19192\nbroker_ports = 19093-19095\n");
	struct plan p;
	cr_assert_eq(plan_make(r.run, 1, &next, &p), 0);
	cr_expect_eq(item(&p, "a")->op, PLAN_MODIFY);
	cr_expect(item(&p, "a")->listeners_changed);
	plan_free(&p);
	cfg_free(&next);

	/* more brokers: the broker range changes too */
	next = parse(FERRY_HDR "[cluster a]\nupstream = 127.0.0.1:9092\n"
	    "bootstrap = 127.0.0.1:19092\nbroker_ports = 19093-19096\n");
	cr_assert_eq(plan_make(r.run, 1, &next, &p), 0);
	cr_expect_eq(item(&p, "a")->op, PLAN_MODIFY);
	cr_expect(item(&p, "a")->listeners_changed);
	plan_free(&p);
	cfg_free(&next);
	cfg_free(&r.cfg);
}

Test(plan, removing_everything_and_adding_everything)
{
	struct running r;
	running_from(&r, FERRY_HDR CL_A);
	struct cfg next = parse(FERRY_HDR CL_B CL_C);
	struct plan p;
	cr_assert_eq(plan_make(r.run, 1, &next, &p), 0);
	cr_expect_eq(p.n_remove, 1);
	cr_expect_eq(p.n_add, 2);
	cr_expect_eq(p.items[0].op, PLAN_REMOVE, "running order first");
	plan_free(&p);
	cr_assert_eq(plan_make(NULL, 0, &next, &p), 0);
	cr_expect_eq(p.n_add, 2);
	plan_free(&p);
	cfg_free(&next);
	cfg_free(&r.cfg);
}

Test(plan, restart_only_keys_name_the_key_and_line)
{
	struct cfg run = parse(FERRY_HDR "user = nobody\n" CL_A);
	struct cfg next = parse("[ferry]\ncontrol_socket = /tmp/other.sock\n"
	    "admin_listen = off\nuser = daemon\nlog_format = json\n"
	    "drain_timeout = 5s\nlog_level = debug\n" CL_A);
	struct cfg_errors e;
	cfg_errors_init(&e);
	cr_expect_eq(plan_check_restart_keys(&run, &next, &e), 4);
	cr_assert_eq(e.n, 4);
	cr_expect(strstr(e.msg[0], "new.ini:2: control_socket cannot change") == e.msg[0], "%s", e.msg[0]);
	cr_expect(strstr(e.msg[1], "new.ini:3: admin_listen") == e.msg[1], "%s", e.msg[1]);
	cr_expect(strstr(e.msg[1], "running: 127.0.0.1:9190, new: off") != NULL, "%s", e.msg[1]);
	cr_expect(strstr(e.msg[2], "new.ini:4: user") == e.msg[2], "%s", e.msg[2]);
	cr_expect(strstr(e.msg[3], "new.ini:5: log_format") == e.msg[3], "%s", e.msg[3]);
	cfg_errors_free(&e);
	cfg_free(&next);

	/* live keys: no error */
	next = parse(FERRY_HDR "user = nobody\ndrain_timeout = 1s\ninit_timeout = 2s\n"
	    "log_level = debug\nreload_policy = per-cluster\npersist = true\n" CL_A);
	cfg_errors_init(&e);
	cr_expect_eq(plan_check_restart_keys(&run, &next, &e), 0);
	cfg_errors_free(&e);
	cfg_free(&next);

	/* a key dropped back to its default is reported at the [ferry] line */
	next = parse("[ferry]\ncontrol_socket = /tmp/f.sock\nadmin_listen = 127.0.0.1:9190\n" CL_A);
	cfg_errors_init(&e);
	cr_expect_eq(plan_check_restart_keys(&run, &next, &e), 1);
	cr_expect(strstr(e.msg[0], "new.ini:1: user") == e.msg[0], "%s", e.msg[0]);
	cfg_errors_free(&e);
	cfg_free(&next);
	cfg_free(&run);
}

Test(plan, version_changes_with_any_cluster_key)
{
	struct cfg a = parse(FERRY_HDR CL_A);
	char v1[PLAN_VERSION_LEN], v2[PLAN_VERSION_LEN];
	cr_assert_eq(plan_cluster_version(&a.clusters[0], v1, sizeof v1), 0);
	cr_expect_eq(strncmp(v1, "sha256:", 7), 0);
	cr_expect_eq(strlen(v1), 7 + 64);
	const char *variants[] = {
		"max_frame_bytes = 1MiB\n", "idle_timeout = 1m\n", "node_ids = 5-7\n",
		"advertised_host = proxy\n", "request_timeout = 1s\n",
		"max_inflight_per_connection = 7\n", "max_connections = 1\n",
	};
	for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
		char text[512];
		snprintf(text, sizeof text, FERRY_HDR CL_A "%s", variants[i]);
		struct cfg b = parse(text);
		cr_assert_eq(plan_cluster_version(&b.clusters[0], v2, sizeof v2), 0);
		cr_expect_str_neq(v1, v2, "%s", variants[i]);
		cfg_free(&b);
	}
	cfg_free(&a);
}

/* ---- plan_resolve: who commits -------------------------------------------------- */

/* A cluster section; a wildcard bootstrap gets an advertised_host. */
static void
add_cluster(char *buf, size_t cap, const char *name, const char *host, unsigned boot,
	    unsigned bfirst, unsigned blast, unsigned upstream)
{
	size_t n = strlen(buf);
	bool v6 = strchr(host, ':') != NULL;
	snprintf(buf + n, cap - n, "[cluster %s]\nupstream = 127.0.0.1:%u\nbootstrap = %s%s%s:%u\n"
	    "broker_ports = %u-%u\n%s", name, upstream, v6 ? "[" : "", host, v6 ? "]" : "", boot,
	    bfirst, blast, strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0 ||
	    strcmp(host, "0:0:0:0:0:0:0:0") == 0 ? "advertised_host = 127.0.0.1\n" : "");
}

/* Independent of plan.c: do two hosts collide on one port in bind()? */
static bool
host_wildcard(const char *h)
{
	static const unsigned char zero[16];
	unsigned char a[16];
	if (!h[0])
		return true;
	if (inet_pton(AF_INET, h, a) == 1)
		return memcmp(a, zero, 4) == 0;
	if (inet_pton(AF_INET6, h, a) == 1)
		return memcmp(a, zero, 16) == 0;
	return false;
}

static bool
hosts_clash(const char *a, const char *b)
{
	unsigned char x[16], y[16];
	if (host_wildcard(a) || host_wildcard(b))
		return true;
	if (inet_pton(AF_INET, a, x) == 1 && inet_pton(AF_INET, b, y) == 1)
		return memcmp(x, y, 4) == 0;
	if (inet_pton(AF_INET6, a, x) == 1 && inet_pton(AF_INET6, b, y) == 1)
		return memcmp(x, y, 16) == 0;
	return strcasecmp(a, b) == 0;
}

static bool
port_of(const struct cfg_cluster *c, unsigned port)
{
	return port == c->bootstrap.port || (port >= c->broker_port_first &&
	    port <= c->broker_port_last);
}

/* Do two clusters share a listening address? (0 when they do not, else a
 * port they share.) */
static unsigned
clusters_clash(const struct cfg_cluster *a, const struct cfg_cluster *b)
{
	if (!hosts_clash(a->bootstrap.host, b->bootstrap.host))
		return 0;
	if (port_of(b, a->bootstrap.port))
		return a->bootstrap.port;
	for (unsigned p = a->broker_port_first; p <= a->broker_port_last; p++)
		if (port_of(b, p))
			return p;
	return 0;
}

/* What item i runs after the reload given commit[] (NULL: nothing). */
static const struct cfg_cluster *
final_of(const struct plan *p, const struct plan_running *run, const struct cfg *next,
	 size_t i, bool committed)
{
	const struct plan_item *it = &p->items[i];
	const struct cfg_cluster *old = it->old_index >= 0 ? run[it->old_index].cl : NULL;
	const struct cfg_cluster *new = it->new_index >= 0 ? &next->clusters[it->new_index] : NULL;
	switch (it->op) {
	case PLAN_KEEP: return old;
	case PLAN_ADD: return committed ? new : NULL;
	case PLAN_MODIFY: return committed ? new : old;
	case PLAN_REMOVE: return committed ? NULL : old;
	}
	return NULL;
}

/* The invariants of any outcome: nothing that failed commits,
 * all-or-nothing is all or nothing, and no two clusters of the merged
 * result share an address. */
static void
check_outcome(const struct plan *p, const struct plan_running *run, const struct cfg *next,
	      const bool *ok, const bool *commit, bool per_cluster, const char *ctx)
{
	bool all_ok = true, all = true, none = true;
	for (size_t i = 0; i < p->n; i++) {
		all_ok = all_ok && ok[i];
		all = all && commit[i];
		none = none && !commit[i];
		if (!ok[i])
			cr_expect(!commit[i], "%s: %s failed but commits", ctx, p->items[i].name);
	}
	if (!per_cluster)
		cr_expect(all_ok ? all : none, "%s: all-or-nothing with all_ok=%d commits some",
		    ctx, all_ok);
	for (size_t i = 0; i < p->n; i++) {
		const struct cfg_cluster *a = final_of(p, run, next, i, commit[i]);
		for (size_t j = i + 1; a && j < p->n; j++) {
			const struct cfg_cluster *b = final_of(p, run, next, j, commit[j]);
			unsigned port = b ? clusters_clash(a, b) : 0;
			cr_expect_eq(port, 0, "%s: %s and %s both listen on port %u", ctx,
			    p->items[i].name, p->items[j].name, port);
		}
	}
}

struct scen {
	struct running r;
	struct cfg next;
	struct plan p;
	bool ok[16], commit[16];
};

static void
scen_init(struct scen *sc, const char *run_text, const char *next_text)
{
	memset(sc, 0, sizeof *sc);
	running_from(&sc->r, run_text);
	sc->next = parse(next_text);
	cr_assert_eq(plan_make(sc->r.run, sc->r.cfg.n_clusters, &sc->next, &sc->p), 0);
	cr_assert_leq(sc->p.n, 16);
}

static void
scen_free(struct scen *sc)
{
	plan_free(&sc->p);
	cfg_free(&sc->next);
	cfg_free(&sc->r.cfg);
}

static size_t
idx(const struct scen *sc, const char *name)
{
	for (size_t i = 0; i < sc->p.n; i++)
		if (strcmp(sc->p.items[i].name, name) == 0)
			return i;
	cr_assert_fail("no item %s", name);
	return 0;
}

/* Resolve with the named items failed (NULL-terminated). */
static void
resolve(struct scen *sc, bool per_cluster, ...)
{
	for (size_t i = 0; i < sc->p.n; i++)
		sc->ok[i] = true;
	va_list ap;
	va_start(ap, per_cluster);
	const char *name;
	char ctx[128];
	int n = snprintf(ctx, sizeof ctx, "%s, failed:", per_cluster ? "per-cluster" :
	    "all-or-nothing");
	while ((name = va_arg(ap, const char *))) {
		sc->ok[idx(sc, name)] = false;
		n += snprintf(ctx + n, sizeof ctx - (size_t)n, " %s", name);
	}
	va_end(ap);
	char err[256] = "";
	memset(sc->commit, 0x5a, sizeof sc->commit);
	int r = plan_resolve(&sc->p, sc->r.run, &sc->next, sc->ok, per_cluster, sc->commit, err,
	    sizeof err);
	cr_expect_eq(r, 0, "%s: %s", ctx, err);
	for (size_t i = 0; i < sc->p.n; i++)
		cr_assert(sc->commit[i] == true || sc->commit[i] == false);
	check_outcome(&sc->p, sc->r.run, &sc->next, sc->ok, sc->commit, per_cluster, ctx);
}

static bool
commits(const struct scen *sc, const char *name)
{
	return sc->commit[idx(sc, name)];
}

#define EXPECT_COMMITS(sc, name, want) \
	cr_expect_eq(commits(sc, name), want, "%s should %s", name, (want) ? "commit" : "roll back")

Test(resolve, all_or_nothing_one_failure_commits_nothing)
{
	char run[2048] = FERRY_HDR, next[2048] = FERRY_HDR;
	add_cluster(run, sizeof run, "a", "127.0.0.1", 21000, 21001, 21002, 9001);
	add_cluster(run, sizeof run, "b", "127.0.0.1", 21010, 21011, 21011, 9002);
	add_cluster(run, sizeof run, "c", "127.0.0.1", 21020, 21021, 21021, 9003);
	add_cluster(run, sizeof run, "r", "127.0.0.1", 21030, 21031, 21031, 9004);
	add_cluster(next, sizeof next, "a", "127.0.0.1", 21000, 21001, 21002, 9001); /* keep */
	add_cluster(next, sizeof next, "b", "127.0.0.1", 21040, 21041, 21041, 9002); /* moves */
	add_cluster(next, sizeof next, "c", "127.0.0.1", 21020, 21021, 21021, 9013); /* upstream */
	add_cluster(next, sizeof next, "d", "127.0.0.1", 21050, 21051, 21051, 9005); /* added */
	struct scen sc;
	scen_init(&sc, run, next);
	cr_assert_eq(sc.p.items[idx(&sc, "a")].op, PLAN_KEEP);
	cr_assert_eq(sc.p.items[idx(&sc, "b")].op, PLAN_MODIFY);
	cr_assert_eq(sc.p.items[idx(&sc, "c")].op, PLAN_MODIFY);
	cr_assert_eq(sc.p.items[idx(&sc, "d")].op, PLAN_ADD);
	cr_assert_eq(sc.p.items[idx(&sc, "r")].op, PLAN_REMOVE);
	const char *fail[] = { "b", "c", "d" };
	for (size_t f = 0; f < 3; f++) {
		resolve(&sc, false, fail[f], NULL);
		for (size_t i = 0; i < sc.p.n; i++)
			cr_expect(!sc.commit[i], "%s commits though %s failed", sc.p.items[i].name,
			    fail[f]);
	}
	resolve(&sc, false, NULL);
	for (size_t i = 0; i < sc.p.n; i++)
		cr_expect(sc.commit[i], "%s", sc.p.items[i].name);

	/* per-cluster: the same failures stay with their cluster */
	resolve(&sc, true, "b", NULL);
	EXPECT_COMMITS(&sc, "a", true);
	EXPECT_COMMITS(&sc, "b", false);
	EXPECT_COMMITS(&sc, "c", true);
	EXPECT_COMMITS(&sc, "d", true);
	EXPECT_COMMITS(&sc, "r", true);
	resolve(&sc, true, "c", "d", NULL);
	EXPECT_COMMITS(&sc, "b", true);
	EXPECT_COMMITS(&sc, "c", false);
	EXPECT_COMMITS(&sc, "d", false);
	EXPECT_COMMITS(&sc, "r", true);
	scen_free(&sc);
}

Test(resolve, swap_commits_or_rolls_back_together)
{
	char run[2048] = FERRY_HDR, next[2048] = FERRY_HDR;
	add_cluster(run, sizeof run, "x", "127.0.0.1", 21100, 21101, 21101, 9001);
	add_cluster(run, sizeof run, "y", "127.0.0.1", 21110, 21111, 21111, 9002);
	add_cluster(run, sizeof run, "k", "127.0.0.1", 21120, 21121, 21121, 9003);
	add_cluster(next, sizeof next, "x", "127.0.0.1", 21110, 21111, 21111, 9001);
	add_cluster(next, sizeof next, "y", "127.0.0.1", 21100, 21101, 21101, 9002);
	add_cluster(next, sizeof next, "k", "127.0.0.1", 21120, 21121, 21121, 9003);
	struct scen sc;
	scen_init(&sc, run, next);
	resolve(&sc, true, "y", NULL);
	EXPECT_COMMITS(&sc, "x", false);
	EXPECT_COMMITS(&sc, "y", false);
	EXPECT_COMMITS(&sc, "k", true);
	resolve(&sc, true, "x", NULL);
	EXPECT_COMMITS(&sc, "x", false);
	EXPECT_COMMITS(&sc, "y", false);
	resolve(&sc, true, NULL);
	EXPECT_COMMITS(&sc, "x", true);
	EXPECT_COMMITS(&sc, "y", true);
	resolve(&sc, false, NULL);
	EXPECT_COMMITS(&sc, "x", true);
	EXPECT_COMMITS(&sc, "y", true);
	resolve(&sc, false, "y", NULL);
	EXPECT_COMMITS(&sc, "x", false);
	scen_free(&sc);
}

Test(resolve, rotation_rolls_back_whole_when_one_fails)
{
	/* x -> y's addresses, y -> z's, z -> x's */
	char run[2048] = FERRY_HDR, next[2048] = FERRY_HDR;
	add_cluster(run, sizeof run, "x", "127.0.0.1", 21200, 21201, 21202, 9001);
	add_cluster(run, sizeof run, "y", "127.0.0.1", 21210, 21211, 21212, 9002);
	add_cluster(run, sizeof run, "z", "127.0.0.1", 21220, 21221, 21222, 9003);
	add_cluster(next, sizeof next, "x", "127.0.0.1", 21210, 21211, 21212, 9001);
	add_cluster(next, sizeof next, "y", "127.0.0.1", 21220, 21221, 21222, 9002);
	add_cluster(next, sizeof next, "z", "127.0.0.1", 21200, 21201, 21202, 9003);
	struct scen sc;
	scen_init(&sc, run, next);
	const char *names[] = { "x", "y", "z" };
	for (size_t f = 0; f < 3; f++) {
		resolve(&sc, true, names[f], NULL);
		for (size_t i = 0; i < 3; i++)
			cr_expect(!commits(&sc, names[i]), "%s commits though %s failed", names[i],
			    names[f]);
	}
	resolve(&sc, true, NULL);
	for (size_t i = 0; i < 3; i++)
		EXPECT_COMMITS(&sc, names[i], true);
	scen_free(&sc);
}

Test(resolve, chain_of_moves)
{
	/* x takes y's old addresses, y takes z's, z moves to free ones */
	char run[2048] = FERRY_HDR, next[2048] = FERRY_HDR;
	add_cluster(run, sizeof run, "x", "127.0.0.1", 21300, 21301, 21301, 9001);
	add_cluster(run, sizeof run, "y", "127.0.0.1", 21310, 21311, 21311, 9002);
	add_cluster(run, sizeof run, "z", "127.0.0.1", 21320, 21321, 21321, 9003);
	add_cluster(next, sizeof next, "x", "127.0.0.1", 21310, 21311, 21311, 9001);
	add_cluster(next, sizeof next, "y", "127.0.0.1", 21320, 21321, 21321, 9002);
	add_cluster(next, sizeof next, "z", "127.0.0.1", 21330, 21331, 21331, 9003);
	struct scen sc;
	scen_init(&sc, run, next);
	/* z stays: y cannot take z's addresses, so x cannot take y's */
	resolve(&sc, true, "z", NULL);
	EXPECT_COMMITS(&sc, "x", false);
	EXPECT_COMMITS(&sc, "y", false);
	EXPECT_COMMITS(&sc, "z", false);
	/* x stays where it is, which nobody wants: y and z move */
	resolve(&sc, true, "x", NULL);
	EXPECT_COMMITS(&sc, "x", false);
	EXPECT_COMMITS(&sc, "y", true);
	EXPECT_COMMITS(&sc, "z", true);
	/* y stays: x cannot move onto it; z moves away regardless */
	resolve(&sc, true, "y", NULL);
	EXPECT_COMMITS(&sc, "x", false);
	EXPECT_COMMITS(&sc, "y", false);
	EXPECT_COMMITS(&sc, "z", true);
	resolve(&sc, true, NULL);
	EXPECT_COMMITS(&sc, "x", true);
	EXPECT_COMMITS(&sc, "y", true);
	EXPECT_COMMITS(&sc, "z", true);
	scen_free(&sc);
}

Test(resolve, a_removed_clusters_addresses_can_be_taken)
{
	char run[2048] = FERRY_HDR, next[2048] = FERRY_HDR;
	add_cluster(run, sizeof run, "old", "127.0.0.1", 21400, 21401, 21402, 9001);
	add_cluster(run, sizeof run, "m", "127.0.0.1", 21410, 21411, 21411, 9002);
	add_cluster(run, sizeof run, "gone", "127.0.0.1", 21420, 21421, 21421, 9003);
	/* "new" takes old's addresses, m takes gone's */
	add_cluster(next, sizeof next, "new", "127.0.0.1", 21400, 21401, 21402, 9004);
	add_cluster(next, sizeof next, "m", "127.0.0.1", 21420, 21421, 21421, 9002);
	struct scen sc;
	scen_init(&sc, run, next);
	cr_assert_eq(sc.p.items[idx(&sc, "old")].op, PLAN_REMOVE);
	cr_assert_eq(sc.p.items[idx(&sc, "new")].op, PLAN_ADD);
	resolve(&sc, true, NULL);
	EXPECT_COMMITS(&sc, "old", true);
	EXPECT_COMMITS(&sc, "gone", true);
	EXPECT_COMMITS(&sc, "new", true);
	EXPECT_COMMITS(&sc, "m", true);
	/* removals always commit under per-cluster, whatever else fails */
	resolve(&sc, true, "new", "m", NULL);
	EXPECT_COMMITS(&sc, "old", true);
	EXPECT_COMMITS(&sc, "gone", true);
	EXPECT_COMMITS(&sc, "new", false);
	EXPECT_COMMITS(&sc, "m", false);
	/* ... but not under all-or-nothing */
	resolve(&sc, false, "new", NULL);
	EXPECT_COMMITS(&sc, "old", false);
	EXPECT_COMMITS(&sc, "m", false);
	resolve(&sc, false, NULL);
	EXPECT_COMMITS(&sc, "old", true);
	EXPECT_COMMITS(&sc, "new", true);
	scen_free(&sc);
}

Test(resolve, wildcard_and_specific_address_on_one_port_conflict)
{
	/* w listens on 0.0.0.0:21500 and moves; n is added on 127.0.0.1:21500 */
	char run[2048] = FERRY_HDR, next[2048] = FERRY_HDR;
	add_cluster(run, sizeof run, "w", "0.0.0.0", 21500, 21501, 21501, 9001);
	add_cluster(next, sizeof next, "w", "0.0.0.0", 21510, 21511, 21511, 9001);
	add_cluster(next, sizeof next, "n", "127.0.0.1", 21500, 21501, 21501, 9002);
	struct scen sc;
	scen_init(&sc, run, next);
	resolve(&sc, true, "w", NULL);
	EXPECT_COMMITS(&sc, "n", false);
	resolve(&sc, true, NULL);
	EXPECT_COMMITS(&sc, "w", true);
	EXPECT_COMMITS(&sc, "n", true);
	scen_free(&sc);

	/* the other way round: s on 127.0.0.1 moves, n added on 0.0.0.0 */
	char run2[2048] = FERRY_HDR, next2[2048] = FERRY_HDR;
	add_cluster(run2, sizeof run2, "s", "127.0.0.1", 21520, 21521, 21521, 9001);
	add_cluster(next2, sizeof next2, "s", "127.0.0.1", 21530, 21531, 21531, 9001);
	add_cluster(next2, sizeof next2, "n", "0.0.0.0", 21540, 21520, 21520, 9002);
	scen_init(&sc, run2, next2);
	resolve(&sc, true, "s", NULL);
	EXPECT_COMMITS(&sc, "n", false);  /* its broker port is s's bootstrap */
	resolve(&sc, true, NULL);
	EXPECT_COMMITS(&sc, "n", true);
	scen_free(&sc);

	/* the IPv6 any-address too */
	char run3[2048] = FERRY_HDR, next3[2048] = FERRY_HDR;
	add_cluster(run3, sizeof run3, "s", "127.0.0.1", 21550, 21551, 21551, 9001);
	add_cluster(next3, sizeof next3, "s", "127.0.0.1", 21560, 21561, 21561, 9001);
	add_cluster(next3, sizeof next3, "n", "::", 21550, 21552, 21552, 9002);
	scen_init(&sc, run3, next3);
	resolve(&sc, true, "s", NULL);
	EXPECT_COMMITS(&sc, "n", false);
	scen_free(&sc);
}

Test(resolve, different_specific_hosts_do_not_conflict)
{
	char run[2048] = FERRY_HDR, next[2048] = FERRY_HDR;
	add_cluster(run, sizeof run, "s", "127.0.0.1", 21600, 21601, 21601, 9001);
	add_cluster(next, sizeof next, "s", "127.0.0.1", 21610, 21611, 21611, 9001);
	add_cluster(next, sizeof next, "n", "127.0.0.2", 21600, 21601, 21601, 9002);
	struct scen sc;
	scen_init(&sc, run, next);
	resolve(&sc, true, "s", NULL);
	EXPECT_COMMITS(&sc, "s", false);
	EXPECT_COMMITS(&sc, "n", true);
	scen_free(&sc);
}

Test(resolve, broker_ranges_count_as_addresses)
{
	/* y's new bootstrap lands inside x's old broker range; x moves away */
	char run[2048] = FERRY_HDR, next[2048] = FERRY_HDR;
	add_cluster(run, sizeof run, "x", "127.0.0.1", 21700, 21701, 21704, 9001);
	add_cluster(run, sizeof run, "y", "127.0.0.1", 21710, 21711, 21711, 9002);
	add_cluster(next, sizeof next, "x", "127.0.0.1", 21720, 21721, 21724, 9001);
	add_cluster(next, sizeof next, "y", "127.0.0.1", 21703, 21711, 21711, 9002);
	struct scen sc;
	scen_init(&sc, run, next);
	resolve(&sc, true, "x", NULL);
	EXPECT_COMMITS(&sc, "y", false);
	resolve(&sc, true, "y", NULL);
	EXPECT_COMMITS(&sc, "x", true);
	resolve(&sc, true, NULL);
	EXPECT_COMMITS(&sc, "x", true);
	EXPECT_COMMITS(&sc, "y", true);
	scen_free(&sc);
}

Test(resolve, one_address_spelled_two_ways_is_one_address)
{
	/* a listens on [::1] written out in full and moves (and fails); n is
	 * added on the short spelling of the same address */
	char run[2048] = FERRY_HDR, next[2048] = FERRY_HDR;
	add_cluster(run, sizeof run, "a", "0:0:0:0:0:0:0:1", 21800, 21801, 21801, 9001);
	add_cluster(next, sizeof next, "a", "0:0:0:0:0:0:0:1", 21810, 21811, 21811, 9001);
	add_cluster(next, sizeof next, "n", "::1", 21800, 21801, 21801, 9002);
	struct scen sc;
	scen_init(&sc, run, next);
	resolve(&sc, true, "a", NULL);
	EXPECT_COMMITS(&sc, "n", false);
	scen_free(&sc);

	/* the any-address written out in full is a wildcard */
	char run2[2048] = FERRY_HDR, next2[2048] = FERRY_HDR;
	add_cluster(run2, sizeof run2, "a", "0:0:0:0:0:0:0:0", 21820, 21821, 21821, 9001);
	add_cluster(next2, sizeof next2, "a", "0:0:0:0:0:0:0:0", 21830, 21831, 21831, 9001);
	add_cluster(next2, sizeof next2, "n", "127.0.0.1", 21820, 21822, 21822, 9002);
	scen_init(&sc, run2, next2);
	resolve(&sc, true, "a", NULL);
	EXPECT_COMMITS(&sc, "n", false);
	scen_free(&sc);
}

Test(resolve, merged_result_check_refuses_two_clusters_on_one_address)
{
	/* Inconsistent input no caller should produce (two running clusters
	 * on one address, from two separate files): the final check refuses
	 * it, names both and commits nothing. */
	char t1[1024] = FERRY_HDR, t2[1024] = FERRY_HDR, next[2048] = FERRY_HDR;
	add_cluster(t1, sizeof t1, "a", "127.0.0.1", 21900, 21901, 21901, 9001);
	add_cluster(t2, sizeof t2, "b", "127.0.0.1", 21900, 21902, 21902, 9002);
	add_cluster(next, sizeof next, "a", "127.0.0.1", 21900, 21901, 21901, 9001);
	add_cluster(next, sizeof next, "b", "127.0.0.1", 21910, 21911, 21911, 9002);
	struct running r1, r2;
	running_from(&r1, t1);
	running_from(&r2, t2);
	struct plan_running run[2] = { r1.run[0], r2.run[0] };
	struct cfg nx = parse(next);
	struct plan p;
	cr_assert_eq(plan_make(run, 2, &nx, &p), 0);
	bool ok[2] = { true, false }, commit[2] = { true, true };
	char err[256] = "";
	cr_expect_eq(plan_resolve(&p, run, &nx, ok, true, commit, err, sizeof err), -1);
	cr_expect(!commit[0] && !commit[1]);
	cr_expect(strstr(err, "a and b") && strstr(err, "21900"), "%s", err);
	plan_free(&p);
	cfg_free(&nx);
	cfg_free(&r1.cfg);
	cfg_free(&r2.cfg);
}

/* ---- randomized: small configs, moves among a small pool of ports ---------------- */

static uint64_t rng_state;

static uint32_t
rng(uint32_t n)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (uint32_t)((rng_state * 2685821657736338717ull) >> 33) % n;
}

struct rcl {
	char name[8];
	const char *host;
	unsigned boot, bfirst, blast, upstream;
};

#define POOL_BASE 23000
#define POOL_N 14

static bool
rcl_clash(const struct rcl *a, const struct rcl *b)
{
	if (!hosts_clash(a->host, b->host))
		return false;
	for (unsigned p = a->bfirst; p <= a->blast + 1; p++) {
		unsigned q = p > a->blast ? a->boot : p;
		if (q == b->boot || (q >= b->bfirst && q <= b->blast))
			return true;
	}
	return false;
}

/* Slot mode: every cluster takes one of 7 slots of two ports, so moves
 * land on vacated slots often (swaps, rotations, long chains). */
static bool slot_mode;

static void
rcl_place(struct rcl *c)
{
	static const char *hosts[] = { "127.0.0.1", "127.0.0.1", "127.0.0.1", "127.0.0.2",
				       "0.0.0.0" };
	if (slot_mode) {
		c->host = "127.0.0.1";
		c->boot = POOL_BASE + 2 * rng(POOL_N / 2);
		c->bfirst = c->blast = c->boot + 1;
		return;
	}
	c->host = hosts[rng(5)];
	do {
		c->boot = POOL_BASE + rng(POOL_N);
		c->bfirst = POOL_BASE + rng(POOL_N - 1);
		c->blast = c->bfirst + rng(2);
	} while (c->boot >= c->bfirst && c->boot <= c->blast);
}

/* Place c so it clashes with none of set[0..n); false after many tries. */
static bool
rcl_place_free(struct rcl *c, const struct rcl *set, size_t n)
{
	for (int tries = 0; tries < 200; tries++) {
		rcl_place(c);
		bool clash = false;
		for (size_t i = 0; i < n && !clash; i++)
			clash = rcl_clash(c, &set[i]);
		if (!clash)
			return true;
	}
	return false;
}

static void
rcl_text(char *buf, size_t cap, const struct rcl *set, size_t n)
{
	snprintf(buf, cap, FERRY_HDR);
	for (size_t i = 0; i < n; i++)
		add_cluster(buf, cap, set[i].name, set[i].host, set[i].boot, set[i].bfirst,
		    set[i].blast, set[i].upstream);
}

/* The largest set of items that can commit: every subset of the ok items
 * whose merged result is clash-free is valid, the union of valid sets is
 * valid, so the answer is that union. Brute force, independent of
 * plan_resolve's fixed point. */
static unsigned
best_commit_set(const struct plan *p, const struct plan_running *run, const struct cfg *next,
		const bool *ok)
{
	unsigned n = (unsigned)p->n, okmask = 0, best = 0;
	for (unsigned i = 0; i < n; i++)
		if (ok[i])
			okmask |= 1u << i;
	for (unsigned t = okmask;; t = (t - 1) & okmask) {
		bool valid = true;
		for (unsigned i = 0; i < n && valid; i++) {
			const struct cfg_cluster *a = final_of(p, run, next, i, t & (1u << i));
			for (unsigned j = i + 1; a && j < n && valid; j++) {
				const struct cfg_cluster *b = final_of(p, run, next, j, t & (1u << j));
				valid = !b || !clusters_clash(a, b);
			}
		}
		if (valid)
			best |= t;
		if (t == 0)
			break;
	}
	return best;
}

Test(resolve, randomized_small_configs_keep_the_invariant, .timeout = 60)
{
	rng_state = 0x9e3779b97f4a7c15ull;
	unsigned iterations = 0, blocked = 0, some_fail = 0, moves = 0, taken = 0, deep = 0;
	while (iterations < 2000) {
		slot_mode = iterations % 2 == 1;
		struct rcl cur[5], nxt[7];
		size_t n_cur = 3 + rng(3), n_nxt = 0;
		bool placed = true;
		for (size_t i = 0; i < n_cur && placed; i++) {
			snprintf(cur[i].name, sizeof cur[i].name, "c%zu", i);
			cur[i].upstream = 9000 + (unsigned)i;
			placed = rcl_place_free(&cur[i], cur, i);
		}
		if (!placed)
			continue;
		/* next: keep, move, change another key, or remove; then adds */
		for (size_t i = 0; i < n_cur && placed; i++) {
			uint32_t what = rng(10);
			if (what < 2)
				continue;  /* removed */
			nxt[n_nxt] = cur[i];
			if (what == 2)
				nxt[n_nxt].upstream += 100;
			n_nxt++;
		}
		/* moves: the movers leave their places first, then take new
		 * ones in a random order, so a cluster can take the old place of
		 * one listed after it as well as before it */
		bool mover[7] = { false };
		size_t order[7], n_movers = 0;
		for (size_t i = 0; i < n_nxt; i++)
			if (rng(10) < 6) {
				mover[i] = true;
				order[n_movers++] = i;
			}
		for (size_t i = n_movers; i > 1; i--) {
			size_t j = rng((uint32_t)i), tmp = order[i - 1];
			order[i - 1] = order[j];
			order[j] = tmp;
		}
		for (size_t m = 0; m < n_movers && placed; m++) {
			size_t i = order[m];
			struct rcl others[7];
			size_t k = 0;
			for (size_t j = 0; j < n_nxt; j++)
				if (j != i && !mover[j])
					others[k++] = nxt[j];
			moves++;
			/* most moves try to take another cluster's old addresses
			 * (swaps, rotations, chains), the rest go anywhere free */
			bool took = false;
			for (int tries = 0; tries < 3 && !took && rng(4); tries++) {
				const struct rcl *o = &cur[rng((uint32_t)n_cur)];
				bool clash = strcmp(o->name, nxt[i].name) == 0;
				for (size_t j = 0; j < k && !clash; j++)
					clash = rcl_clash(o, &others[j]);
				if (clash)
					continue;
				nxt[i].host = o->host;
				nxt[i].boot = o->boot;
				nxt[i].bfirst = o->bfirst;
				nxt[i].blast = o->blast;
				took = true;
				taken++;
			}
			if (!took)
				placed = rcl_place_free(&nxt[i], others, k);
			mover[i] = false;  /* placed: the next movers avoid it */
		}
		for (size_t a = rng(3); a > 0 && placed; a--) {
			struct rcl *c = &nxt[n_nxt];
			snprintf(c->name, sizeof c->name, "n%zu", a);
			c->upstream = 9100 + (unsigned)a;
			placed = rcl_place_free(c, nxt, n_nxt);
			n_nxt++;
		}
		if (!placed || n_nxt == 0)
			continue;  /* a file needs one cluster */
		char run_text[4096], next_text[4096];
		rcl_text(run_text, sizeof run_text, cur, n_cur);
		rcl_text(next_text, sizeof next_text, nxt, n_nxt);
		struct scen sc;
		scen_init(&sc, run_text, next_text);
		iterations++;
		for (int policy = 0; policy < 2; policy++) {
			bool per_cluster = policy == 1;
			bool any_fail = false;
			for (size_t i = 0; i < sc.p.n; i++) {
				enum plan_op op = sc.p.items[i].op;
				sc.ok[i] = (op != PLAN_ADD && op != PLAN_MODIFY) || rng(10) < 7;
				any_fail = any_fail || !sc.ok[i];
			}
			char err[256] = "", ctx[160];
			snprintf(ctx, sizeof ctx, "iteration %u %s", iterations,
			    per_cluster ? "per-cluster" : "all-or-nothing");
			int r = plan_resolve(&sc.p, sc.r.run, &sc.next, sc.ok, per_cluster, sc.commit,
			    err, sizeof err);
			cr_expect_eq(r, 0, "%s: %s\nrunning:\n%s\nnext:\n%s", ctx, err, run_text,
			    next_text);
			check_outcome(&sc.p, sc.r.run, &sc.next, sc.ok, sc.commit, per_cluster, ctx);
			some_fail += any_fail;
			if (!per_cluster)
				continue;
			/* per-cluster commits exactly the largest clash-free set */
			unsigned best = best_commit_set(&sc.p, sc.r.run, &sc.next, sc.ok);
			for (size_t i = 0; i < sc.p.n; i++) {
				bool want = (best >> i) & 1u;
				if (sc.p.items[i].op == PLAN_KEEP)
					want = true;
				cr_expect_eq(sc.commit[i], want, "%s: %s (%s) commit=%d, want %d\n"
				    "running:\n%s\nnext:\n%s", ctx, sc.p.items[i].name,
				    plan_op_str(sc.p.items[i].op), sc.commit[i], want, run_text, next_text);
				if (sc.ok[i] && !sc.commit[i])
					blocked++;
			}
			/* held back by an item that was itself only held back:
			 * a chain the fixed point needs more than one pass for */
			for (size_t i = 0; i < sc.p.n; i++) {
				if (!sc.ok[i] || sc.commit[i])
					continue;
				const struct cfg_cluster *mine =
				    &sc.next.clusters[sc.p.items[i].new_index];
				for (size_t j = 0; j < sc.p.n; j++) {
					const struct cfg_cluster *f = final_of(&sc.p, sc.r.run, &sc.next,
					    j, sc.commit[j]);
					if (j != i && sc.ok[j] && !sc.commit[j] && f &&
					    clusters_clash(mine, f)) {
						deep++;
						break;
					}
				}
			}
		}
		scen_free(&sc);
	}
	/* the walk exercised what it is meant to */
	cr_expect_gt(blocked, 100, "only %u items held back by another's failure", blocked);
	cr_expect_gt(some_fail, 1000);
	cr_expect_gt(moves, 2000);
	cr_expect_gt(taken, 1000, "only %u moves onto another cluster's addresses", taken);
	cr_expect_gt(deep, 100, "only %u items held back through a chain", deep);
	cr_log_info("randomized: %u configs, %u moves (%u onto another's addresses), %u held "
	    "back, %u through a chain", iterations, moves, taken, blocked, deep);
}

/* A reload of thousands of clusters: a chain in which every cluster takes
 * over the addresses of the next one. When the last link fails, per-cluster
 * rolls every link back (each one waited for the next); when it prepares,
 * all commit. plan_resolve looks addresses up by port, so this costs the
 * links, not their pairs. */
static char *
chain_text(size_t n, bool moved)
{
	size_t cap = 64 + n * 160, len = 0;
	char *t = malloc(cap);
	cr_assert_not_null(t);
	len += (size_t)snprintf(t, cap, "%s", FERRY_HDR);
	for (size_t i = 0; i < n; i++) {
		unsigned base = 30000 + 2 * (unsigned)(moved ? i + 1 : i);
		len += (size_t)snprintf(t + len, cap - len, "[cluster c%zu]\nupstream = 127.0.0.1:9092\n"
		    "bootstrap = 127.0.0.1:%u\nbroker_ports = %u\n", i, base, base + 1);
	}
	return t;
}

Test(resolve, chain_of_thousands)
{
	const size_t n = 3000;
	char *run_text = chain_text(n, false), *next_text = chain_text(n, true);
	struct cfg rc = parse(run_text), nx = parse(next_text);
	struct plan_running *run = calloc(n, sizeof *run);
	char (*ver)[PLAN_VERSION_LEN] = calloc(n, sizeof *ver);
	cr_assert(run && ver);
	for (size_t i = 0; i < n; i++) {
		cr_assert_eq(plan_cluster_version(&rc.clusters[i], ver[i], sizeof ver[i]), 0);
		run[i].cl = &rc.clusters[i];
		run[i].version = ver[i];
	}
	struct plan p;
	cr_assert_eq(plan_make(run, n, &nx, &p), 0);
	cr_assert_eq(p.n_modify, n);
	bool *ok = calloc(n, sizeof *ok), *commit = calloc(n, sizeof *commit);
	char err[256] = "";
	for (size_t i = 0; i < n; i++)
		ok[i] = true;
	cr_assert_eq(plan_resolve(&p, run, &nx, ok, true, commit, err, sizeof err), 0, "%s", err);
	for (size_t i = 0; i < n; i++)
		cr_assert(commit[i], "c%zu does not commit", i);
	ok[n - 1] = false;  /* the last link (to free ports) fails: nothing can move */
	cr_assert_eq(plan_resolve(&p, run, &nx, ok, true, commit, err, sizeof err), 0, "%s", err);
	for (size_t i = 0; i < n; i++)
		cr_assert(!commit[i], "c%zu commits over a cluster that stays", i);
	ok[n - 1] = true;
	ok[0] = false;      /* the first link fails: the others still move */
	cr_assert_eq(plan_resolve(&p, run, &nx, ok, true, commit, err, sizeof err), 0, "%s", err);
	for (size_t i = 1; i < n; i++)
		cr_assert(commit[i], "c%zu held back by c0", i);
	free(ok);
	free(commit);
	plan_free(&p);
	cfg_free(&nx);
	cfg_free(&rc);
	free(run);
	free(ver);
	free(run_text);
	free(next_text);
}
