/*
 * Unit tests for supervisor/plan: the reload diff and plan as a pure
 * function of (running clusters, new config), without processes.
 */
#include <criterion/criterion.h>
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
