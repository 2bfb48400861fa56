/*
 * test_config — unit tests for common/config.c: a complete file with every
 * key, defaults, the worker's cluster-only text, each class of error with
 * its exact "file:line: message", several errors reported together, the
 * port-conflict rules and the canonical text round trip.
 */
#include <criterion/criterion.h>
#include <malloc.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"

struct res {
	int rc;
	struct cfg c;
	struct cfg_errors e;
};

static void
parse(struct res *r, const char *text)
{
	memset(r, 0x5a, sizeof *r);
	cfg_errors_init(&r->e);
	r->rc = cfg_parse_string("t.ini", text, strlen(text), &r->c, &r->e);
}

static void
done(struct res *r)
{
	cfg_free(&r->c);
	cfg_errors_free(&r->e);
}

/* All error messages, each followed by '\n'. */
static char *
joined(const struct cfg_errors *e)
{
	size_t len = 1, i;
	char *s;

	for (i = 0; i < e->n; i++)
		len += strlen(e->msg[i]) + 1;
	s = calloc(1, len);
	cr_assert_not_null(s);
	for (i = 0; i < e->n; i++) {
		strcat(s, e->msg[i]);
		strcat(s, "\n");
	}
	return s;
}

static int
is_zero(const void *p, size_t n)
{
	const unsigned char *b = p;
	size_t i;

	for (i = 0; i < n; i++)
		if (b[i] != 0)
			return 0;
	return 1;
}

/* Parses text, which must fail with exactly the errors in `want`
 * ("t.ini:LINE: message\n" each, in order), and leave the cfg zeroed. */
static void
expect_errors(const char *text, const char *want)
{
	struct res r;
	char *got;

	parse(&r, text);
	got = joined(&r.e);
	cr_assert_eq(r.rc, -1, "parse succeeded; errors:\n%s", got);
	cr_assert_str_eq(got, want);
	cr_assert(is_zero(&r.c, sizeof r.c), "cfg not zeroed on failure");
	free(got);
	done(&r);
}

static void
expect_ok(struct res *r, const char *text)
{
	char *got;

	parse(r, text);
	got = joined(&r->e);
	cr_assert_eq(r->rc, 0, "parse failed:\n%s", got);
	cr_assert_eq(r->e.n, 0);
	free(got);
}

#define CLUSTER_A \
	"[cluster a]\n" \
	"upstream = 127.0.0.1:9092\n" \
	"bootstrap = 127.0.0.1:9192\n" \
	"broker_ports = 9193-9195\n"

static const char full_text[] =
	"; ferry test configuration\n"				/* 1 */
	"[ferry]\n"						/* 2 */
	"control_socket = /tmp/ferry-test.sock\n"		/* 3 */
	"admin_listen   = 127.0.0.1:9300   ; tcp admin\n"	/* 4 */
	"user           = nobody\n"				/* 5 */
	"startup_policy = best-effort\n"			/* 6 */
	"reload_policy  = per-cluster\n"			/* 7 */
	"drain_timeout  = 45s\n"				/* 8 */
	"init_timeout   = 500ms\n"				/* 9 */
	"log_level      = debug\n"				/* 10 */
	"log_format     = json\n"				/* 11 */
	"\n"							/* 12 */
	"[cluster demo]\n"					/* 13 */
	"upstream        = 127.0.0.1:9092, kafka-2.example:9093 ,[::1]:9094\n"
	"bootstrap       = 0.0.0.0:9192\n"			/* 15 */
	"advertised_host = proxy.example\n"			/* 16 */
	"broker_ports    = 9193-9195\n"				/* 17 */
	"node_ids        = 1-2,7\n"				/* 18 */
	"max_connections = 500\n"				/* 19 */
	"max_frame_bytes = 16MiB\n"				/* 20 */
	"idle_timeout    = 0\n"					/* 21 */
	"\n"							/* 22 */
	"  [cluster second.one_2]   ; indented header\n"	/* 23 */
	"  upstream = 10.0.0.1:9092\n"				/* 24 */
	"  bootstrap = 127.0.0.2:9292 ; inline comment\n"	/* 25 */
	"  broker_ports = 9293\n"				/* 26 */
	"# hash comment\n";					/* 27 */

Test(config, full_file_every_key)
{
	struct res r;
	const struct cfg_cluster *d, *s;

	expect_ok(&r, full_text);
	cr_assert_str_eq(r.c.path, "t.ini");
	cr_assert_str_eq(r.c.control_socket, "/tmp/ferry-test.sock");
	cr_assert(r.c.admin_enabled);
	cr_assert_str_eq(r.c.admin_listen.host, "127.0.0.1");
	cr_assert_eq(r.c.admin_listen.port, 9300);
	cr_assert_str_eq(r.c.user, "nobody");
	cr_assert_eq(r.c.startup_policy, CFG_STARTUP_BEST_EFFORT);
	cr_assert_eq(r.c.reload_policy, CFG_RELOAD_PER_CLUSTER);
	cr_assert_eq(r.c.drain_timeout_ms, 45000);
	cr_assert_eq(r.c.init_timeout_ms, 500);
	cr_assert_eq(r.c.log_level, LOG_DEBUG);
	cr_assert_eq(r.c.log_format, CFG_LOG_JSON);
	cr_assert_eq(r.c.n_clusters, 2);

	d = &r.c.clusters[0];
	cr_assert_str_eq(d->name, "demo");
	cr_assert_eq(d->line, 13);
	cr_assert_eq(d->n_upstream, 3);
	cr_assert_str_eq(d->upstream[0].host, "127.0.0.1");
	cr_assert_eq(d->upstream[0].port, 9092);
	cr_assert_str_eq(d->upstream[1].host, "kafka-2.example");
	cr_assert_eq(d->upstream[1].port, 9093);
	cr_assert_str_eq(d->upstream[2].host, "::1");
	cr_assert_eq(d->upstream[2].port, 9094);
	cr_assert_str_eq(d->bootstrap.host, "0.0.0.0");
	cr_assert_eq(d->bootstrap.port, 9192);
	cr_assert_str_eq(d->advertised_host, "proxy.example");
	cr_assert_eq(d->broker_port_first, 9193);
	cr_assert_eq(d->broker_port_last, 9195);
	cr_assert_eq(d->n_brokers, 3);
	cr_assert_eq(d->node_ids[0], 1);
	cr_assert_eq(d->node_ids[1], 2);
	cr_assert_eq(d->node_ids[2], 7);
	cr_assert_eq(d->max_connections, 500);
	cr_assert_eq(d->max_frame_bytes, 16ULL << 20);
	cr_assert_eq(d->idle_timeout_ms, 0);
	cr_assert_eq(cfg_node_index(d, 7), 2);
	cr_assert_eq(cfg_node_index(d, 1), 0);
	cr_assert_eq(cfg_node_index(d, 0), -1);

	s = &r.c.clusters[1];
	cr_assert_str_eq(s->name, "second.one_2");
	cr_assert_eq(s->line, 23);
	cr_assert_eq(s->n_upstream, 1);
	cr_assert_str_eq(s->upstream[0].host, "10.0.0.1");
	cr_assert_str_eq(s->bootstrap.host, "127.0.0.2");
	cr_assert_eq(s->bootstrap.port, 9292);
	cr_assert_str_eq(s->advertised_host, "127.0.0.2");
	cr_assert_eq(s->broker_port_first, 9293);
	cr_assert_eq(s->broker_port_last, 9293);
	cr_assert_eq(s->n_brokers, 1);
	cr_assert_eq(s->node_ids[0], 0);
	cr_assert_eq(s->max_connections, 0, "auto");
	cr_assert_eq(s->max_frame_bytes, 100ULL << 20);
	cr_assert_eq(s->idle_timeout_ms, 600000);

	cr_assert_eq(cfg_find_cluster(&r.c, "demo"), d);
	cr_assert_eq(cfg_find_cluster(&r.c, "second.one_2"), s);
	cr_assert_null(cfg_find_cluster(&r.c, "nope"));
	done(&r);
}

Test(config, defaults)
{
	struct res r;
	const struct cfg_cluster *a;

	expect_ok(&r, "[ferry]\n" CLUSTER_A);
	cr_assert_str_eq(r.c.control_socket, FERRY_DEFAULT_SOCKET);
	cr_assert(r.c.admin_enabled);
	cr_assert_str_eq(r.c.admin_listen.host, "127.0.0.1");
	cr_assert_eq(r.c.admin_listen.port, 9190);
	cr_assert_str_eq(r.c.user, "ferry");
	cr_assert_eq(r.c.startup_policy, CFG_STARTUP_FAIL_FAST);
	cr_assert_eq(r.c.reload_policy, CFG_RELOAD_ALL_OR_NOTHING);
	cr_assert_eq(r.c.drain_timeout_ms, 30000);
	cr_assert_eq(r.c.init_timeout_ms, 10000);
	cr_assert_eq(r.c.log_level, LOG_INFO);
	cr_assert_eq(r.c.log_format, CFG_LOG_LOGFMT);
	cr_assert_eq(r.c.metrics_latency, CFG_LATENCY_API);
	a = &r.c.clusters[0];
	cr_assert_str_eq(a->advertised_host, "127.0.0.1");
	cr_assert_eq(a->n_brokers, 3);
	cr_assert_eq(a->node_ids[0], 0);
	cr_assert_eq(a->node_ids[1], 1);
	cr_assert_eq(a->node_ids[2], 2);
	cr_assert_eq(a->max_connections, 0, "auto");
	cr_assert_eq(a->max_frame_bytes, 100ULL << 20);
	cr_assert_eq(a->idle_timeout_ms, 600000);
	done(&r);
}

Test(config, admin_off_and_log_levels)
{
	static const char *const lv[] = { "debug", "info", "warn", "error" };
	char text[512];
	struct res r;
	int i;

	expect_ok(&r, "[ferry]\nadmin_listen = off\n" CLUSTER_A);
	cr_assert_not(r.c.admin_enabled);
	done(&r);
	for (i = 0; i < 4; i++) {
		snprintf(text, sizeof text, "[ferry]\nlog_level = %s\n"
		    CLUSTER_A, lv[i]);
		expect_ok(&r, text);
		cr_assert_eq(r.c.log_level, i);
		done(&r);
	}
	cr_assert_eq(LOG_WARN, 2);
}

Test(config, worker_cluster_only_text)
{
	struct res r;

	/* Port 9190 is the default admin port: not a conflict here, the
	 * worker's text has no [ferry] section. */
	expect_ok(&r, "[cluster w]\n"
	    "upstream = k:9092\n"
	    "bootstrap = 127.0.0.1:9190\n"
	    "broker_ports = 9191-9192\n");
	cr_assert_str_eq(r.c.control_socket, FERRY_DEFAULT_SOCKET);
	cr_assert_str_eq(r.c.user, "ferry");
	cr_assert_eq(r.c.n_clusters, 1);
	cr_assert_str_eq(r.c.clusters[0].name, "w");
	cr_assert_eq(r.c.clusters[0].n_brokers, 2);
	/* the supervisor keeps such a parse per cluster: one cluster's room */
	cr_assert_lt(malloc_usable_size(r.c.clusters), 2 * sizeof r.c.clusters[0]);
	done(&r);
}

Test(config, crlf_bom_and_no_final_newline)
{
	struct res r;

	expect_ok(&r, "\xef\xbb\xbf[ferry]\r\nuser = bob\r\n"
	    "[cluster a]\r\nupstream = h:1\r\nbootstrap = 127.0.0.1:2\r\n"
	    "broker_ports = 3");
	cr_assert_str_eq(r.c.user, "bob");
	cr_assert_eq(r.c.clusters[0].broker_port_first, 3);
	done(&r);
}

Test(config, colon_separator_and_whitespace)
{
	struct res r;

	expect_ok(&r, "[ferry]\n\tuser:   alice   \n" CLUSTER_A
	    "max_connections=\t77\t; c\n");
	cr_assert_str_eq(r.c.user, "alice");
	cr_assert_eq(r.c.clusters[0].max_connections, 77);
	done(&r);
}

Test(config_errors, unknown_section)
{
	expect_errors("[ferry]\n[bogus]\nx = 1\n" CLUSTER_A,
	    "t.ini:2: unknown section [bogus]\n");
	expect_errors(CLUSTER_A "[Ferry]\n",
	    "t.ini:5: unknown section [Ferry]\n");
	expect_errors(CLUSTER_A "[clusters b]\n",
	    "t.ini:5: unknown section [clusters b]\n");
}

Test(config_errors, unknown_key)
{
	expect_errors("[ferry]\nlisten = 1\n" CLUSTER_A "Upstream = x:1\n",
	    "t.ini:2: unknown key 'listen' in [ferry]\n"
	    "t.ini:7: unknown key 'Upstream' in [cluster a]\n");
}

Test(config_errors, key_outside_section)
{
	expect_errors("user = x\n" CLUSTER_A,
	    "t.ini:1: key 'user' outside of any section\n");
}

Test(config_errors, duplicate_key)
{
	expect_errors("[ferry]\nuser = a\n\nuser = b\n" CLUSTER_A
	    "bootstrap = 127.0.0.1:9999\n",
	    "t.ini:4: duplicate key 'user' in [ferry] (first at line 2)\n"
	    "t.ini:9: duplicate key 'bootstrap' in [cluster a] (first at line 7)\n");
}

Test(config_errors, duplicate_sections)
{
	expect_errors(CLUSTER_A "\n[cluster a]\nupstream = h:1\n",
	    "t.ini:6: duplicate cluster 'a' (first defined at line 1)\n");
	expect_errors("[ferry]\n" CLUSTER_A "[ferry]\nuser = x\n",
	    "t.ini:6: duplicate section [ferry] (first at line 1)\n");
}

Test(config_errors, bad_cluster_names)
{
	char text[256];

	expect_errors(CLUSTER_A "[cluster]\n",
	    "t.ini:5: missing cluster name: [cluster NAME]\n");
	expect_errors(CLUSTER_A "[cluster a b]\n",
	    "t.ini:5: invalid cluster name 'a b' (1-63 characters of "
	    "A-Z a-z 0-9 . _ -)\n");
	snprintf(text, sizeof text, CLUSTER_A "[cluster %.64s]\n",
	    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
	expect_errors(text, "t.ini:5: invalid cluster name 'xxxxxxxxxxxxxxxxxxxx"
	    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' (1-63 characters of "
	    "A-Z a-z 0-9 . _ -)\n");
}

Test(config, longest_cluster_name)
{
	struct res r;
	const char *name =
	    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";
	char text[512];

	cr_assert_eq(strlen(name), 63);
	snprintf(text, sizeof text, "[cluster %s]\nupstream = h:1\n"
	    "bootstrap = 127.0.0.1:2\nbroker_ports = 3\n", name);
	expect_ok(&r, text);
	cr_assert_str_eq(r.c.clusters[0].name, name);
	done(&r);
}

Test(config_errors, bad_duration)
{
	expect_errors("[ferry]\ndrain_timeout = 30\ninit_timeout = 0\n"
	    CLUSTER_A "idle_timeout = 5 m\n",
	    "t.ini:2: drain_timeout: invalid duration '30': missing unit "
	    "(ms, s, m or h)\n"
	    "t.ini:3: init_timeout: must be greater than 0\n"
	    "t.ini:8: idle_timeout: invalid duration '5 m' (units: ms, s, m, h)\n");
}

Test(config_errors, bad_size)
{
	expect_errors(CLUSTER_A "max_frame_bytes = 10XB\n",
	    "t.ini:5: max_frame_bytes: invalid size '10XB' (use B, KiB, MiB "
	    "or GiB)\n");
	expect_errors(CLUSTER_A "max_frame_bytes = 10MB\n",
	    "t.ini:5: max_frame_bytes: invalid size '10MB' (use KiB/MiB/GiB, "
	    "powers of 1024)\n");
	expect_errors(CLUSTER_A "max_frame_bytes = 1023\n",
	    "t.ini:5: max_frame_bytes: 1023 out of range (1KiB-1GiB)\n");
	expect_errors(CLUSTER_A "max_frame_bytes = 1025MiB\n",
	    "t.ini:5: max_frame_bytes: 1025MiB out of range (1KiB-1GiB)\n");
}

Test(config, size_and_connection_bounds)
{
	struct res r;

	expect_ok(&r, CLUSTER_A "max_connections = auto\n");
	cr_assert_eq(r.c.clusters[0].max_connections, 0);
	char *canon = cfg_cluster_canonical(&r.c.clusters[0]);
	cr_assert_not_null(strstr(canon, "\nmax_connections = auto\n"), "%s", canon);
	free(canon);
	done(&r);
	expect_ok(&r, CLUSTER_A "max_frame_bytes = 1KiB\nmax_connections = 1\n");
	cr_assert_eq(r.c.clusters[0].max_frame_bytes, 1024);
	cr_assert_eq(r.c.clusters[0].max_connections, 1);
	done(&r);
	expect_ok(&r, CLUSTER_A "max_frame_bytes = 1GiB\n"
	    "max_connections = 1000000\n");
	cr_assert_eq(r.c.clusters[0].max_frame_bytes, 1ULL << 30);
	cr_assert_eq(r.c.clusters[0].max_connections, 1000000);
	done(&r);
	expect_errors(CLUSTER_A "max_connections = 0\n",
	    "t.ini:5: max_connections: 0 out of range (1-1000000)\n");
	expect_errors(CLUSTER_A "max_connections = 1000001\n",
	    "t.ini:5: max_connections: 1000001 out of range (1-1000000)\n");
}

Test(config_errors, bad_address)
{
	expect_errors("[ferry]\nadmin_listen = localhost\n"
	    "[cluster a]\n"
	    "upstream = h:1,,h:2\n"
	    "bootstrap = ::1:9192\n"
	    "broker_ports = 9193\n",
	    "t.ini:2: admin_listen: invalid address 'localhost' (expected "
	    "host:port)\n"
	    "t.ini:4: upstream: empty address\n"
	    "t.ini:5: bootstrap: invalid address '::1:9192' (write IPv6 "
	    "addresses as [addr]:port)\n");
	expect_errors("[cluster a]\n"
	    "upstream = h:1, h:70000\n"
	    "bootstrap = 127.0.0.1:9192\n"
	    "broker_ports = 9193\n",
	    "t.ini:2: upstream: invalid address 'h:70000': port must be "
	    "1-65535\n");
}

Test(config_errors, bad_port_range)
{
	expect_errors("[cluster a]\nupstream = h:1\nbootstrap = 127.0.0.1:9192\n"
	    "broker_ports = 9195-9193\n",
	    "t.ini:4: broker_ports: invalid port range '9195-9193' (first port "
	    "greater than last)\n");
	expect_errors("[cluster a]\nupstream = h:1\nbootstrap = 127.0.0.1:9192\n"
	    "broker_ports = 9190-9200\n",
	    "t.ini:4: broker_ports: range 9190-9200 contains the bootstrap "
	    "port 9192\n");
}

Test(config_errors, node_ids)
{
	expect_errors(CLUSTER_A "node_ids = 1,2\n",
	    "t.ini:5: node_ids: 2 ids for 3 broker ports (9193-9195)\n");
	expect_errors(CLUSTER_A "node_ids = 1,2,2\n",
	    "t.ini:5: node_ids: duplicate id 2 in '1,2,2'\n");
}

Test(config_errors, missing_required_keys)
{
	expect_errors("[ferry]\n\n[cluster a]\nmax_connections = 5\n",
	    "t.ini:3: missing required key 'upstream' in [cluster a]\n"
	    "t.ini:3: missing required key 'bootstrap' in [cluster a]\n"
	    "t.ini:3: missing required key 'broker_ports' in [cluster a]\n");
}

Test(config_errors, no_cluster)
{
	expect_errors("[ferry]\nuser = x\n",
	    "t.ini:1: no [cluster NAME] section: at least one cluster is "
	    "required\n");
	expect_errors("",
	    "t.ini:1: no [cluster NAME] section: at least one cluster is "
	    "required\n");
}

Test(config_errors, wildcard_needs_advertised_host)
{
	expect_errors("[cluster a]\nupstream = h:1\nbootstrap = 0.0.0.0:9192\n"
	    "broker_ports = 9193\n",
	    "t.ini:3: advertised_host is required when bootstrap listens on a "
	    "wildcard address\n");
	expect_errors("[cluster a]\nupstream = h:1\nbootstrap = [::]:9192\n"
	    "broker_ports = 9193\n",
	    "t.ini:3: advertised_host is required when bootstrap listens on a "
	    "wildcard address\n");
	expect_errors("[cluster a]\nupstream = h:1\nbootstrap = [::]:9192\n"
	    "broker_ports = 9193\nadvertised_host = 0.0.0.0\n",
	    "t.ini:5: advertised_host: '0.0.0.0' is a wildcard address; "
	    "clients need a reachable host\n");
}

Test(config, advertised_host_ipv6)
{
	struct res r;

	expect_ok(&r, "[cluster a]\nupstream = h:1\nbootstrap = [::]:9192\n"
	    "broker_ports = 9193\nadvertised_host = [fd00::1]\n");
	cr_assert_str_eq(r.c.clusters[0].advertised_host, "fd00::1");
	done(&r);
	expect_ok(&r, "[cluster a]\nupstream = h:1\nbootstrap = [::1]:9192\n"
	    "broker_ports = 9193\n");
	cr_assert_str_eq(r.c.clusters[0].advertised_host, "::1");
	done(&r);
}

Test(config_errors, port_overlap_between_clusters)
{
	expect_errors(CLUSTER_A
	    "[cluster b]\n"				/* 5 */
	    "upstream = h:1\n"
	    "bootstrap = 0.0.0.0:9195\n"		/* 7 */
	    "advertised_host = x\n"
	    "broker_ports = 9100-9192\n",		/* 9 */
	    "t.ini:7: bootstrap of [cluster b]: port 9195 already used by "
	    "broker_ports of [cluster a] (line 4)\n"
	    "t.ini:9: broker_ports of [cluster b]: port 9192 already used by "
	    "bootstrap of [cluster a] (line 3)\n");
}

Test(config, same_port_different_hosts_is_fine)
{
	struct res r;

	expect_ok(&r, CLUSTER_A
	    "[cluster b]\nupstream = h:1\nbootstrap = 127.0.0.2:9192\n"
	    "broker_ports = 9193-9195\n");
	cr_assert_eq(r.c.n_clusters, 2);
	done(&r);
}

Test(config_errors, port_overlap_same_literal_address)
{
	/* "::1" and "0:0::1" are the same address */
	expect_errors("[cluster a]\nupstream = h:1\nbootstrap = [::1]:9000\n"
	    "broker_ports = 9001\n"
	    "[cluster b]\nupstream = h:1\nbootstrap = [0:0::1]:9000\n"
	    "broker_ports = 9002\n",
	    "t.ini:7: bootstrap of [cluster b]: port 9000 already used by "
	    "bootstrap of [cluster a] (line 3)\n");
}

Test(config_errors, port_overlap_localhost_is_127_0_0_1)
{
	/* "localhost" is stored as 127.0.0.1, so it collides with it */
	expect_errors("[cluster a]\nupstream = h:1\nbootstrap = localhost:9000\n"
	    "broker_ports = 9001\n"
	    "[cluster b]\nupstream = h:1\nbootstrap = 127.0.0.1:9002\n"
	    "broker_ports = 9000\n",
	    "t.ini:8: broker_ports of [cluster b]: port 9000 already used by "
	    "bootstrap of [cluster a] (line 3)\n");
}

/* Listening addresses are numeric (binding never needs DNS): IP literals,
 * wildcards and "localhost", normalised in the model and canonical text. */
Test(config, listen_addresses_accepted)
{
	static const struct {
		const char *bootstrap, *host, *advertised;
	} ok[] = {
		{ "127.0.0.1:9192", "127.0.0.1", "127.0.0.1" },
		{ "10.1.2.3:9192", "10.1.2.3", "10.1.2.3" },
		{ "localhost:9192", "127.0.0.1", "127.0.0.1" },
		{ "LocalHost:9192", "127.0.0.1", "127.0.0.1" },
		{ "[::1]:9192", "::1", "::1" },
		{ "[0:0::1]:9192", "::1", "::1" },
		{ "[FD00:0::A]:9192", "fd00::a", "fd00::a" },
		{ "[::ffff:127.0.0.1]:9192", "::ffff:127.0.0.1", "::ffff:127.0.0.1" },
	};
	char text[512], want[64];
	struct res r;
	size_t i;

	for (i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		snprintf(text, sizeof text, "[cluster a]\nupstream = kafka.example:9092\n"
		    "bootstrap = %s\nbroker_ports = 9193\n", ok[i].bootstrap);
		expect_ok(&r, text);
		cr_expect_str_eq(r.c.clusters[0].bootstrap.host, ok[i].host, "%s",
		    ok[i].bootstrap);
		cr_expect_eq(r.c.clusters[0].bootstrap.port, 9192);
		cr_expect_str_eq(r.c.clusters[0].advertised_host, ok[i].advertised,
		    "%s", ok[i].bootstrap);
		char *canon = cfg_cluster_canonical(&r.c.clusters[0]);
		cr_assert_not_null(canon);
		snprintf(want, sizeof want, strchr(ok[i].host, ':') ?
		    "\nbootstrap = [%s]:9192\n" : "\nbootstrap = %s:9192\n", ok[i].host);
		cr_expect(strstr(canon, want) != NULL, "%s:\n%s", ok[i].bootstrap, canon);
		free(canon);
		done(&r);
	}

	/* wildcards, with a named advertised_host (that one stays a name) */
	expect_ok(&r, "[cluster a]\nupstream = h:1\nbootstrap = 0.0.0.0:9192\n"
	    "advertised_host = proxy.example.com\nbroker_ports = 9193\n"
	    "[cluster b]\nupstream = h:1\nbootstrap = [::]:9292\n"
	    "advertised_host = localhost\nbroker_ports = 9293\n");
	cr_expect_str_eq(r.c.clusters[0].bootstrap.host, "0.0.0.0");
	cr_expect_str_eq(r.c.clusters[0].advertised_host, "proxy.example.com");
	cr_expect_str_eq(r.c.clusters[1].bootstrap.host, "::");
	cr_expect_str_eq(r.c.clusters[1].advertised_host, "localhost");
	done(&r);

	/* admin_listen likewise */
	expect_ok(&r, "[ferry]\nadmin_listen = localhost:9300\n" CLUSTER_A);
	cr_expect_str_eq(r.c.admin_listen.host, "127.0.0.1");
	cr_expect_eq(r.c.admin_listen.port, 9300);
	done(&r);
	expect_ok(&r, "[ferry]\nadmin_listen = [0::1]:9300\n" CLUSTER_A);
	cr_expect_str_eq(r.c.admin_listen.host, "::1");
	done(&r);
	expect_ok(&r, "[ferry]\nadmin_listen = [::]:9300\nadmin_insecure = on\n" CLUSTER_A);
	cr_expect_str_eq(r.c.admin_listen.host, "::");
	done(&r);
}

Test(config_errors, listen_host_names_refused)
{
	expect_errors("[ferry]\n"
	    "admin_listen = admin.example.com:9190\n"		/* 2 */
	    "[cluster a]\n"
	    "upstream = kafka-1.example.com:9092\n"		/* names are fine here */
	    "bootstrap = proxy.local:9192\n"			/* 5 */
	    "advertised_host = proxy.local\n"
	    "broker_ports = 9193\n"
	    "[cluster b]\n"
	    "upstream = h:1\n"
	    "bootstrap = no-such-host.invalid:9292\n"		/* 10 */
	    "broker_ports = 9293\n"
	    "[cluster c]\n"
	    "upstream = h:1\n"
	    "bootstrap = 127.1:9392\n"				/* 14: inet_aton only */
	    "broker_ports = 9393\n"
	    "[cluster d]\n"
	    "upstream = h:1\n"
	    "bootstrap = 10.0.0.256:9492\n"			/* 18 */
	    "broker_ports = 9493\n",
	    "t.ini:2: admin_listen: admin.example.com is not an IP address "
	    "(listeners bind to addresses: IP literals, localhost or a name in /etc/hosts; DNS names are resolved only for upstream)\n"
	    "t.ini:5: bootstrap: proxy.local is not an IP address (listeners "
	    "bind to addresses: IP literals, localhost or a name in /etc/hosts; DNS names are resolved only for upstream)\n"
	    "t.ini:10: bootstrap: no-such-host.invalid is not an IP address "
	    "(listeners bind to addresses: IP literals, localhost or a name in /etc/hosts; DNS names are resolved only for upstream)\n"
	    "t.ini:14: bootstrap: 127.1 is not an IP address (listeners bind "
	    "to addresses: IP literals, localhost or a name in /etc/hosts; DNS names are resolved only for upstream)\n"
	    "t.ini:18: bootstrap: 10.0.0.256 is not an IP address (listeners "
	    "bind to addresses: IP literals, localhost or a name in /etc/hosts; DNS names are resolved only for upstream)\n");
}

Test(config_errors, port_overlap_with_admin)
{
	expect_errors("[ferry]\nadmin_listen = 0.0.0.0:9194\nadmin_insecure = on\n" CLUSTER_A,
	    "t.ini:7: broker_ports of [cluster a]: port 9194 already used by "
	    "admin_listen (line 2)\n");
	expect_errors("[ferry]\n[cluster a]\nupstream = h:1\n"
	    "bootstrap = 127.0.0.1:9190\nbroker_ports = 9191\n",
	    "t.ini:4: bootstrap of [cluster a]: port 9190 already used by "
	    "admin_listen (default 127.0.0.1:9190)\n");
}

Test(config, admin_off_frees_its_port)
{
	struct res r;

	expect_ok(&r, "[ferry]\nadmin_listen = off\n[cluster a]\n"
	    "upstream = h:1\nbootstrap = 127.0.0.1:9190\nbroker_ports = 9191\n");
	done(&r);
}

Test(config_errors, line_too_long)
{
	char text[1024], val[256], want[512];
	struct res r;

	/* "user = " is 7 characters: 192 more make a 199-character line. */
	memset(val, 'u', 192);
	val[192] = '\0';
	snprintf(text, sizeof text, "[ferry]\nuser = %s\n" CLUSTER_A, val);
	parse(&r, text);
	cr_assert_eq(r.rc, -1);
	cr_assert_eq(r.e.n, 1);
	snprintf(want, sizeof want, "t.ini:2: user: invalid user name '%s'",
	    val);
	cr_assert_str_eq(r.e.msg[0], want);
	done(&r);

	memset(val, 'u', 193);
	val[193] = '\0';
	snprintf(text, sizeof text, "[ferry]\nuser = %s\n" CLUSTER_A, val);
	expect_errors(text, "t.ini:2: line too long (max 199 characters)\n");

	/* a long comment is still a long line; line numbers continue */
	memset(val, ';', 200);
	val[200] = '\0';
	snprintf(text, sizeof text, "[ferry]\n%s\nuser = -x\n" CLUSTER_A, val);
	expect_errors(text, "t.ini:2: line too long (max 199 characters)\n"
	    "t.ini:3: user: invalid user name '-x'\n");
}

Test(config, longest_line_accepted)
{
	char text[1024], val[256];
	struct res r;

	/* 199 characters: "control_socket = /" + 181 x */
	memset(val, 'x', 181);
	val[181] = '\0';
	snprintf(text, sizeof text, "[ferry]\ncontrol_socket = /%s\n"
	    CLUSTER_A, val);
	cr_assert_eq(strlen(strchr(text, '\n') + 1), 199 + 1 + strlen(CLUSTER_A));
	parse(&r, text);
	cr_assert_eq(r.rc, -1);
	cr_assert_eq(r.e.n, 1);
	cr_assert_str_eq(r.e.msg[0],
	    "t.ini:2: control_socket: path too long (182 bytes, max 107)");
	done(&r);
}

Test(config_errors, syntax_errors)
{
	expect_errors("[ferry\n" CLUSTER_A "just some words\n= 5\n"
	    "[cluster b] trailing\nuser = x\n",
	    "t.ini:1: syntax error: missing ']'\n"
	    "t.ini:6: syntax error: expected 'key = value'\n"
	    "t.ini:7: syntax error: expected 'key = value'\n"
	    "t.ini:8: syntax error: text after ']'\n");
}

Test(config_errors, continuation_line_is_not_a_value)
{
	/* inih would glue an indented line to the previous value */
	expect_errors(CLUSTER_A "max_connections = 5\n   6\n",
	    "t.ini:6: syntax error: expected 'key = value'\n");
}

Test(config_errors, ferry_values)
{
	expect_errors("[ferry]\n"
	    "control_socket = run/ferry.sock\n"
	    "startup_policy = fast\n"
	    "reload_policy = all\n"
	    "log_level = verbose\n"
	    "log_format = text\n"
	    "user = \n"
	    "metrics_latency = per-api\n"
	    CLUSTER_A,
	    "t.ini:2: control_socket: 'run/ferry.sock' is not an absolute path\n"
	    "t.ini:3: startup_policy: invalid value 'fast' (use fail-fast or "
	    "best-effort)\n"
	    "t.ini:4: reload_policy: invalid value 'all' (use all-or-nothing "
	    "or per-cluster)\n"
	    "t.ini:5: log_level: invalid value 'verbose' (use debug, info, "
	    "warn or error)\n"
	    "t.ini:6: log_format: invalid value 'text' (use logfmt or json)\n"
	    "t.ini:7: user: invalid user name ''\n"
	    "t.ini:8: metrics_latency: invalid value 'per-api' (use off, cluster or api)\n");
}

Test(config, metrics_latency)
{
	static const struct { const char *v; enum cfg_metrics_latency want; } cases[] = {
		{ "api", CFG_LATENCY_API }, { "cluster", CFG_LATENCY_CLUSTER },
		{ "off", CFG_LATENCY_OFF },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char text[1024];
		struct res r;
		snprintf(text, sizeof text, "[ferry]\nmetrics_latency = %s\n" CLUSTER_A, cases[i].v);
		expect_ok(&r, text);
		cr_assert_eq(r.c.metrics_latency, cases[i].want, "%s", cases[i].v);
		cr_assert_str_eq(cfg_metrics_latency_str(r.c.metrics_latency), cases[i].v);
		cr_assert_eq(cfg_ferry_key_line(&r.c, "metrics_latency"), 2);
		done(&r);
	}
}

Test(config_errors, many_errors_at_once)
{
	expect_errors("[ferry]\n"				/* 1 */
	    "drain_timeout = 1x\n"				/* 2 */
	    "bogus = 1\n"					/* 3 */
	    "[cluster a]\n"					/* 4 */
	    "upstream = h:1\n"					/* 5 */
	    "bootstrap = 0.0.0.0:9192\n"			/* 6 */
	    "broker_ports = 9193-9194\n"			/* 7 */
	    "node_ids = 1\n"					/* 8 */
	    "max_frame_bytes = 1PiB\n"				/* 9 */
	    "[cluster a]\n"					/* 10 */
	    "[cluster c]\n"					/* 11 */
	    "upstream = h:1\n"					/* 12 */
	    "bootstrap = 127.0.0.1:9194\n"			/* 13 */
	    "broker_ports = 9195\n"				/* 14 */
	    "[other]\n",					/* 15 */
	    "t.ini:2: drain_timeout: invalid duration '1x' (units: ms, s, m, h)\n"
	    "t.ini:3: unknown key 'bogus' in [ferry]\n"
	    "t.ini:9: max_frame_bytes: invalid size '1PiB' (use B, KiB, MiB "
	    "or GiB)\n"
	    "t.ini:10: duplicate cluster 'a' (first defined at line 4)\n"
	    "t.ini:15: unknown section [other]\n"
	    "t.ini:6: advertised_host is required when bootstrap listens on "
	    "a wildcard address\n"
	    "t.ini:8: node_ids: 1 ids for 2 broker ports (9193-9194)\n"
	    "t.ini:13: bootstrap of [cluster c]: port 9194 already used by "
	    "broker_ports of [cluster a] (line 7)\n");
}

Test(config_errors, errors_append_to_existing_list)
{
	struct cfg_errors e;
	struct cfg c;
	const char *text = "[ferry]\nbogus = 1\n" CLUSTER_A;

	cfg_errors_init(&e);
	cfg_errors_add(&e, "earlier %d", 1);
	cr_assert_eq(cfg_parse_string("x.ini", text, strlen(text), &c, &e), -1);
	cr_assert_eq(e.n, 2);
	cr_assert_str_eq(e.msg[0], "earlier 1");
	cr_assert_str_eq(e.msg[1], "x.ini:2: unknown key 'bogus' in [ferry]");
	/* a success does not depend on the list being empty */
	cr_assert_eq(cfg_parse_string("x.ini", CLUSTER_A, strlen(CLUSTER_A), &c,
	    &e), 0);
	cr_assert_eq(e.n, 2);
	cfg_free(&c);
	cfg_errors_free(&e);
	cr_assert_eq(e.n, 0);
	cr_assert_null(e.msg);
}

Test(config, not_nul_terminated_input)
{
	char buf[sizeof CLUSTER_A + 16];
	struct cfg c;
	struct cfg_errors e;
	size_t n = strlen(CLUSTER_A);

	memcpy(buf, CLUSTER_A, n);
	memcpy(buf + n, "garbage garbage", 16);
	cfg_errors_init(&e);
	cr_assert_eq(cfg_parse_string("x.ini", buf, n, &c, &e), 0);
	cr_assert_eq(c.clusters[0].broker_port_last, 9195);
	cfg_free(&c);
	cfg_errors_free(&e);
}

Test(config_errors, nul_byte)
{
	static const char text[] = "[cluster a]\nupstream = h:1\0x\n"
	    "bootstrap = 127.0.0.1:9192\nbroker_ports = 9193-9195\n";
	struct cfg c;
	struct cfg_errors e;

	cfg_errors_init(&e);
	cr_assert_eq(cfg_parse_string("x.ini", text, sizeof text - 1, &c, &e), -1);
	cr_assert_eq(e.n, 2);
	cr_assert_str_eq(e.msg[0], "x.ini:2: NUL byte in line");
	cr_assert_str_eq(e.msg[1],
	    "x.ini:1: missing required key 'upstream' in [cluster a]");
	cfg_errors_free(&e);
}

static void
cluster_eq(const struct cfg_cluster *a, const struct cfg_cluster *b)
{
	size_t i;

	cr_assert_str_eq(a->name, b->name);
	cr_assert_eq(a->n_upstream, b->n_upstream);
	for (i = 0; i < a->n_upstream; i++) {
		cr_assert_str_eq(a->upstream[i].host, b->upstream[i].host);
		cr_assert_eq(a->upstream[i].port, b->upstream[i].port);
	}
	cr_assert_str_eq(a->bootstrap.host, b->bootstrap.host);
	cr_assert_eq(a->bootstrap.port, b->bootstrap.port);
	cr_assert_str_eq(a->advertised_host, b->advertised_host);
	cr_assert_eq(a->broker_port_first, b->broker_port_first);
	cr_assert_eq(a->broker_port_last, b->broker_port_last);
	cr_assert_eq(a->n_brokers, b->n_brokers);
	for (i = 0; i < a->n_brokers; i++)
		cr_assert_eq(a->node_ids[i], b->node_ids[i]);
	cr_assert_eq(a->max_connections, b->max_connections);
	cr_assert_eq(a->max_frame_bytes, b->max_frame_bytes);
	cr_assert_eq(a->idle_timeout_ms, b->idle_timeout_ms);
	cr_assert_eq(a->workers, b->workers);
}

Test(config_canonical, exact_text)
{
	struct res r;
	char *s;

	expect_ok(&r, full_text);
	s = cfg_cluster_canonical(&r.c.clusters[0]);
	cr_assert_str_eq(s,
	    "[cluster demo]\n"
	    "upstream = 127.0.0.1:9092,kafka-2.example:9093,[::1]:9094\n"
	    "bootstrap = 0.0.0.0:9192\n"
	    "advertised_host = proxy.example\n"
	    "broker_ports = 9193-9195\n"
	    "node_ids = 1,2,7\n"
	    "max_connections = 500\n"
	    "max_frame_bytes = 16MiB\n"
	    "idle_timeout = 0\n"
	    "request_timeout = 30s\n"
	    "max_inflight_per_connection = 1024\n"
	    "handover = on\n"
	    "splice = on\n"
	    "workers = 1\n"
	    "sasl_max_frame_bytes = 512KiB\n"
	    "upstream_tls = off\n"
	    "proxy_protocol = off\n"
	    "connection_max_age = 0\n"
	    "gateway = ports\n");
	free(s);
	s = cfg_cluster_canonical(&r.c.clusters[1]);
	cr_assert_str_eq(s,
	    "[cluster second.one_2]\n"
	    "upstream = 10.0.0.1:9092\n"
	    "bootstrap = 127.0.0.2:9292\n"
	    "advertised_host = 127.0.0.2\n"
	    "broker_ports = 9293\n"
	    "node_ids = 0\n"
	    "max_connections = auto\n"
	    "max_frame_bytes = 100MiB\n"
	    "idle_timeout = 10m\n"
	    "request_timeout = 30s\n"
	    "max_inflight_per_connection = 1024\n"
	    "handover = on\n"
	    "splice = on\n"
	    "workers = 1\n"
	    "sasl_max_frame_bytes = 512KiB\n"
	    "upstream_tls = off\n"
	    "proxy_protocol = off\n"
	    "connection_max_age = 0\n"
	    "gateway = ports\n");
	free(s);
	done(&r);
}

/* sasl_max_frame_bytes, the frame limit before SASL authentication:
 * validated, canonical */
Test(config_sasl, sasl_max_frame_bytes)
{
	struct res r;
	char *s;

	expect_errors(CLUSTER_A "sasl_max_frame_bytes = 1023\n",
	    "t.ini:5: sasl_max_frame_bytes: 1023 out of range (1KiB-1GiB)\n");
	expect_errors(CLUSTER_A "sasl_max_frame_bytes = 2GiB\n",
	    "t.ini:5: sasl_max_frame_bytes: 2GiB out of range (1KiB-1GiB)\n");
	expect_errors(CLUSTER_A "sasl_max_frame_bytes = lots\n",
	    "t.ini:5: sasl_max_frame_bytes: invalid size 'lots' (use B, KiB, MiB "
	    "or GiB)\n");
	expect_ok(&r, CLUSTER_A);
	cr_assert_eq(r.c.clusters[0].sasl_max_frame_bytes, 512 << 10, "default 512KiB");
	done(&r);
	expect_ok(&r, CLUSTER_A "sasl_max_frame_bytes = 64KiB\n");
	cr_assert_eq(r.c.clusters[0].sasl_max_frame_bytes, 64 << 10);
	s = cfg_cluster_canonical(&r.c.clusters[0]);
	cr_assert(strstr(s, "\nsasl_max_frame_bytes = 64KiB\n"), "%s", s);
	struct cfg c2;
	struct cfg_errors e;
	cfg_errors_init(&e);
	cr_assert_eq(cfg_parse_string("c", s, strlen(s), &c2, &e), 0);
	cr_assert_eq(c2.clusters[0].sasl_max_frame_bytes, 64 << 10);
	cfg_free(&c2);
	cfg_errors_free(&e);
	free(s);
	done(&r);
}

Test(config_canonical, round_trip)
{
	static const char *const texts[] = {
		full_text,
		"[cluster big]\nupstream = [fd00::2]:9092\n"
		"bootstrap = [::]:10000\nadvertised_host = fd00::1\n"
		"broker_ports = 10001-10200\n"
		"node_ids = 0-99,200-297,1000,1002\n"
		"max_frame_bytes = 1536\nidle_timeout = 1500ms\n",
		"[cluster x]\nupstream = a:1,b:2\nbootstrap = 127.0.0.1:5\n"
		"broker_ports = 6-7\nnode_ids = 5,4\nidle_timeout = 90s\n",
	};
	size_t t, i;

	for (t = 0; t < sizeof texts / sizeof texts[0]; t++) {
		struct res r, r2;
		char *s, *s2;

		expect_ok(&r, texts[t]);
		for (i = 0; i < r.c.n_clusters; i++) {
			s = cfg_cluster_canonical(&r.c.clusters[i]);
			expect_ok(&r2, s);
			cr_assert_eq(r2.c.n_clusters, 1);
			cluster_eq(&r.c.clusters[i], &r2.c.clusters[0]);
			/* canonical of the canonical is a fixed point */
			s2 = cfg_cluster_canonical(&r2.c.clusters[0]);
			cr_assert_str_eq(s, s2);
			free(s);
			free(s2);
			done(&r2);
		}
		done(&r);
	}
}

Test(config_canonical, node_id_runs)
{
	struct res r;
	char *s;

	expect_ok(&r, "[cluster big]\nupstream = h:1\n"
	    "bootstrap = 127.0.0.1:10000\nbroker_ports = 10001-10200\n"
	    "node_ids = 0-99,200-297,1000,1002\n");
	s = cfg_cluster_canonical(&r.c.clusters[0]);
	cr_assert(strstr(s, "\nnode_ids = 0-99,200-297,1000,1002\n"), "%s", s);
	free(s);
	done(&r);
}

Test(config_file, read_file_and_errors)
{
	char path[] = "/tmp/ferry-test-config-XXXXXX";
	struct cfg_errors e;
	struct cfg c;
	FILE *f;
	int fd;

	fd = mkstemp(path);
	cr_assert_neq(fd, -1);
	f = fdopen(fd, "w");
	cr_assert_not_null(f);
	fputs("[ferry]\nuser = filed\n" CLUSTER_A, f);
	fclose(f);

	cfg_errors_init(&e);
	cr_assert_eq(cfg_parse_file(path, &c, &e), 0);
	cr_assert_str_eq(c.user, "filed");
	cr_assert_str_eq(c.path, path);
	cfg_free(&c);

	f = fopen(path, "w");
	fputs("[ferry]\nuser = ?\n" CLUSTER_A, f);
	fclose(f);
	cr_assert_eq(cfg_parse_file(path, &c, &e), -1);
	cr_assert_eq(e.n, 1);
	cr_assert(strncmp(e.msg[0], path, strlen(path)) == 0);
	cr_assert_str_eq(e.msg[0] + strlen(path), ":2: user: invalid user name '?'");
	unlink(path);
	cfg_errors_free(&e);

	cr_assert_eq(cfg_parse_file(path, &c, &e), -1);
	cr_assert_eq(e.n, 1);
	cr_assert(strstr(e.msg[0], ": cannot read: No such file or directory"));
	cr_assert(is_zero(&c, sizeof c));
	cfg_errors_free(&e);
}

Test(config, policy_strings)
{
	cr_assert_str_eq(cfg_policy_startup_str(CFG_STARTUP_FAIL_FAST), "fail-fast");
	cr_assert_str_eq(cfg_policy_startup_str(CFG_STARTUP_BEST_EFFORT), "best-effort");
	cr_assert_str_eq(cfg_policy_reload_str(CFG_RELOAD_ALL_OR_NOTHING),
	    "all-or-nothing");
	cr_assert_str_eq(cfg_policy_reload_str(CFG_RELOAD_PER_CLUSTER), "per-cluster");
}

Test(config, reload_and_limit_keys)
{
	const char *text =
	    "[ferry]\n"
	    "persist = true\n"
	    "crash_loop_limit = 3\n"
	    "crash_loop_window = 2m\n"
	    "[cluster a]\n"
	    "upstream = 127.0.0.1:9092\n"
	    "bootstrap = 127.0.0.1:19092\n"
	    "broker_ports = 19093-19094\n"
	    "request_timeout = 5s\n"
	    "max_inflight_per_connection = 64\n";
	struct cfg c;
	struct cfg_errors e;
	cfg_errors_init(&e);
	cr_assert_eq(cfg_parse_string("t.ini", text, strlen(text), &c, &e), 0,
	    "%s", e.n ? e.msg[0] : "");
	cr_expect(c.persist);
	cr_expect_eq(c.crash_loop_limit, 3);
	cr_expect_eq(c.crash_loop_window_ms, 120000);
	cr_expect_eq(c.clusters[0].request_timeout_ms, 5000);
	cr_expect_eq(c.clusters[0].max_inflight, 64);
	/* canonical text carries the cluster keys through to the worker */
	char *canon = cfg_cluster_canonical(&c.clusters[0]);
	struct cfg c2;
	cr_assert_eq(cfg_parse_string("c", canon, strlen(canon), &c2, &e), 0);
	cr_expect_eq(c2.clusters[0].request_timeout_ms, 5000);
	cr_expect_eq(c2.clusters[0].max_inflight, 64);
	cr_expect_not(c2.persist);
	cr_expect_eq(c2.crash_loop_limit, 5, "default");
	cr_expect_eq(c2.clusters[0].max_inflight, 64);
	free(canon);
	cfg_free(&c2);
	cfg_free(&c);

	const char *bad =
	    "[ferry]\n"
	    "persist = maybe\n"
	    "crash_loop_limit = 0\n"
	    "[cluster a]\n"
	    "upstream = 127.0.0.1:9092\n"
	    "bootstrap = 127.0.0.1:19092\n"
	    "broker_ports = 19093-19094\n"
	    "request_timeout = 0\n"
	    "max_inflight_per_connection = 0\n";
	cr_assert_eq(cfg_parse_string("t.ini", bad, strlen(bad), &c, &e), -1);
	cr_expect_eq(e.n, 4);
	cr_expect(e.n > 0 && strncmp(e.msg[0], "t.ini:2: ", 9) == 0, "%s", e.n ? e.msg[0] : "");
	cr_expect(e.n > 3 && strncmp(e.msg[3], "t.ini:9: ", 9) == 0, "%s", e.n > 3 ? e.msg[3] : "");
	cfg_errors_free(&e);
}

/* Found by fuzz_config: normalising lengthened a line past inih's limit, so
 * a config that validated could never be sent to its worker. (It was found
 * with a long bootstrap host name defaulting advertised_host; bootstrap is
 * an IP literal now, but " = " still lengthens "advertised_host=HOST".) */
Test(config, canonical_line_too_long_is_reported_at_its_key)
{
	char host[184];
	memset(host, 'b', 183);
	host[183] = 0;	/* "advertised_host=" + 183 = 199 characters, the limit */
	char text[512];
	snprintf(text, sizeof text, "[cluster a]\nupstream = h:1\nbootstrap = 127.0.0.1:1\n"
	    "broker_ports = 2\nadvertised_host=%s\n", host);
	struct cfg c;
	struct cfg_errors e;
	cfg_errors_init(&e);
	cr_assert_eq(cfg_parse_string("t.ini", text, strlen(text), &c, &e), -1);
	cr_assert_eq(e.n, 1, "%zu errors", e.n);
	cr_expect_str_eq(e.msg[0], "t.ini:5: advertised_host: value too long: its "
	    "normalised line is 201 characters, more than 199");
	cfg_errors_free(&e);

	/* two characters shorter it fits, and its canonical text parses again */
	host[181] = 0;
	snprintf(text, sizeof text, "[cluster a]\nupstream = h:1\nbootstrap = 127.0.0.1:1\n"
	    "broker_ports = 2\nadvertised_host=%s\n", host);
	cfg_errors_init(&e);
	cr_assert_eq(cfg_parse_string("t.ini", text, strlen(text), &c, &e), 0,
	    "%s", e.n ? e.msg[0] : "");
	char *canon = cfg_cluster_canonical(&c.clusters[0]);
	cr_assert_not_null(canon);
	struct cfg c2;
	cr_expect_eq(cfg_parse_string("c", canon, strlen(canon), &c2, &e), 0,
	    "%s", e.n ? e.msg[0] : "");
	free(canon);
	cfg_free(&c2);
	cfg_free(&c);
	cfg_errors_free(&e);
}

/* Found by reading cfgp_fmt_ids under the fuzzer: INT32_MAX followed by
 * another id overflowed a signed comparison. */
Test(config, canonical_node_ids_with_int32_max)
{
	const char *text = "[cluster a]\nupstream = h:1\nbootstrap = 127.0.0.1:1\n"
	    "broker_ports = 2-3\nnode_ids = 2147483647,0\n";
	struct cfg c;
	struct cfg_errors e;
	cfg_errors_init(&e);
	cr_assert_eq(cfg_parse_string("t.ini", text, strlen(text), &c, &e), 0,
	    "%s", e.n ? e.msg[0] : "");
	char *canon = cfg_cluster_canonical(&c.clusters[0]);
	cr_expect(strstr(canon, "node_ids = 2147483647,0\n") != NULL, "%s", canon);
	free(canon);
	cfg_free(&c);
	cfg_errors_free(&e);
}

Test(config, workers_key)
{
	struct res r;
	static const char base[] = "[cluster a]\nupstream = 127.0.0.1:9092\nbootstrap = 127.0.0.1:9192\n"
	    "broker_ports = 9193-9195\n";
	char text[512];

	snprintf(text, sizeof text, "%sworkers = 3\n", base);
	expect_ok(&r, text);
	cr_assert_eq(r.c.clusters[0].workers, 3);
	char *s = cfg_cluster_canonical(&r.c.clusters[0]);
	cr_assert_not_null(strstr(s, "\nworkers = 3\n"));
	free(s);
	done(&r);
	snprintf(text, sizeof text, "%sworkers = auto\n", base);
	expect_ok(&r, text);
	cr_assert_eq(r.c.clusters[0].workers, 0);
	s = cfg_cluster_canonical(&r.c.clusters[0]);
	cr_assert_not_null(strstr(s, "\nworkers = auto\n"));
	free(s);
	done(&r);
	snprintf(text, sizeof text, "%sworkers = 0\n", base);
	parse(&r, text);
	cr_assert_eq(r.rc, -1);
	cr_assert_eq(r.e.n, 1);
	cr_assert_not_null(strstr(r.e.msg[0], "t.ini:5: "), "%s", r.e.msg[0]);
	done(&r);
	snprintf(text, sizeof text, "%sworkers = 65\n", base);
	parse(&r, text);
	cr_assert_eq(r.rc, -1);
	cr_assert_not_null(strstr(r.e.msg[0], "t.ini:5: "), "%s", r.e.msg[0]);
	done(&r);
}

/* ---- TLS keys ---- */

#define TLS_BASE \
	"[cluster t]\n" \
	"upstream = k1.example:9093\n" \
	"bootstrap = 127.0.0.1:9192\n" \
	"broker_ports = 9193-9195\n"

Test(config_tls, every_key_and_canonical)
{
	struct res r, r2;
	char *s, *s2;

	expect_ok(&r, TLS_BASE                                  /* 1-4 */
	    "tls_cert = /etc/ferry/server.pem\n"                /* 5 */
	    "tls_key = /etc/ferry/server.key\n"                 /* 6 */
	    "tls_min_version = 1.3\n"
	    "tls_ciphers = ECDHE+AESGCM:!aNULL\n"
	    "tls_ciphersuites = TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384\n"
	    "tls_client_ca = /etc/ferry/clients.pem\n"          /* 10 */
	    "upstream_tls = on\n"
	    "upstream_ca = /etc/ferry/kafka-ca.pem\n"
	    "upstream_cert = /etc/ferry/ferry.pem\n"
	    "upstream_key = /etc/ferry/ferry.key\n"
	    "upstream_tls_verify = off\n"
	    "upstream_dial_map = k1.example:9093=127.0.0.1:19093, [::1]:1=10.0.0.1:2\n");
	const struct cfg_cluster *cl = &r.c.clusters[0];
	cr_assert(cl->tls);
	cr_assert_str_eq(cl->tls_cert, "/etc/ferry/server.pem");
	cr_assert_eq(cl->tls_min_version, CFG_TLS_1_3);
	/* a client CA without tls_client_auth: client certificates required */
	cr_assert_eq(cl->tls_client_auth, CFG_TLS_AUTH_REQUIRED);
	cr_assert(cl->upstream_tls);
	cr_assert_not(cl->upstream_tls_verify);
	cr_assert_eq(cl->n_dial_map, 2);
	cr_assert_str_eq(cl->dial_map[1].from.host, "::1");
	cr_assert_eq(cl->dial_map[1].to.port, 2);
	const struct cfg_addr *to = cfg_dial_lookup(cl, "K1.example", 9093);
	cr_assert_not_null(to);
	cr_assert_str_eq(to->host, "127.0.0.1");
	cr_assert_eq(to->port, 19093);
	cr_assert_null(cfg_dial_lookup(cl, "k1.example", 9094));
	cr_assert_eq(cfg_cluster_key_line(cl, "tls_cert"), 5);
	cr_assert_eq(cfg_cluster_key_line(cl, "tls_client_ca"), 10);
	cr_assert_eq(cfg_cluster_key_line(cl, "tls_client_auth"), 0);
	cr_assert_eq(cfg_cluster_key_line(cl, "nope"), 0);

	s = cfg_cluster_canonical(cl);
	cr_assert(strstr(s,
	    "workers = 1\n"
	    "sasl_max_frame_bytes = 512KiB\n"
	    "tls_cert = /etc/ferry/server.pem\n"
	    "tls_key = /etc/ferry/server.key\n"
	    "tls_min_version = 1.3\n"
	    "tls_ciphers = ECDHE+AESGCM:!aNULL\n"
	    "tls_ciphersuites = TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384\n"
	    "tls_client_ca = /etc/ferry/clients.pem\n"
	    "tls_client_auth = required\n"
	    "upstream_tls = on\n"
	    "upstream_ca = /etc/ferry/kafka-ca.pem\n"
	    "upstream_cert = /etc/ferry/ferry.pem\n"
	    "upstream_key = /etc/ferry/ferry.key\n"
	    "upstream_tls_verify = off\n"
	    "upstream_dial_map = k1.example:9093=127.0.0.1:19093,[::1]:1=10.0.0.1:2\n"), "%s", s);
	expect_ok(&r2, s);
	s2 = cfg_cluster_canonical(&r2.c.clusters[0]);
	cr_assert_str_eq(s, s2);
	free(s);
	free(s2);
	done(&r2);
	done(&r);
}

Test(config_tls, defaults)
{
	struct res r;

	expect_ok(&r, TLS_BASE "tls_cert = /a\ntls_key = /b\nupstream_tls = on\n");
	const struct cfg_cluster *cl = &r.c.clusters[0];
	cr_assert(cl->tls);
	cr_assert_eq(cl->tls_min_version, CFG_TLS_1_2);
	cr_assert_eq(cl->tls_client_auth, CFG_TLS_AUTH_NONE);
	cr_assert(cl->upstream_tls_verify);
	cr_assert_str_eq(cl->upstream_ca, "");
	char *s = cfg_cluster_canonical(cl);
	cr_assert(strstr(s, "tls_min_version = 1.2\ntls_client_auth = none\n"
	    "upstream_tls = on\nupstream_tls_verify = on\n"), "%s", s);
	free(s);
	done(&r);
	expect_ok(&r, TLS_BASE);
	cr_assert_not(r.c.clusters[0].tls);
	cr_assert_not(r.c.clusters[0].upstream_tls);
	done(&r);
}

Test(config_tls, errors)
{
	expect_errors(TLS_BASE "tls_cert = /a\n",
	    "t.ini:5: tls_cert: tls_key is required with it\n");
	expect_errors(TLS_BASE "tls_key = /a\n",
	    "t.ini:5: tls_key: tls_cert is required with it\n");
	expect_errors(TLS_BASE "tls_cert = rel/cert.pem\ntls_key = /k\n",
	    "t.ini:5: tls_cert: 'rel/cert.pem' is not an absolute path\n");
	expect_errors(TLS_BASE "tls_cert = /a\ntls_key = /b\ntls_min_version = 1.0\n",
	    "t.ini:7: tls_min_version: TLS 1.0 is not supported: it is deprecated "
	    "(RFC 8996); use 1.2 or 1.3\n");
	expect_errors(TLS_BASE "tls_cert = /a\ntls_key = /b\ntls_min_version = 1.4\n",
	    "t.ini:7: tls_min_version: invalid value '1.4' (use 1.2 or 1.3)\n");
	expect_errors(TLS_BASE "tls_min_version = 1.3\n",
	    "t.ini:5: tls_min_version: needs tls_cert and tls_key (client-facing TLS is off)\n");
	expect_errors(TLS_BASE "tls_cert = /a\ntls_key = /b\ntls_client_auth = required\n",
	    "t.ini:7: tls_client_auth: required needs tls_client_ca (the CA that signs "
	    "client certificates)\n");
	expect_errors(TLS_BASE "tls_cert = /a\ntls_key = /b\ntls_client_auth = maybe\n",
	    "t.ini:7: tls_client_auth: invalid value 'maybe' (use none, requested or required)\n");
	expect_errors(TLS_BASE "tls_cert = /a\ntls_key = /b\ntls_client_ca = /c\n"
	    "tls_client_auth = none\n",
	    "t.ini:7: tls_client_ca: set, but tls_client_auth = none asks no client certificate\n");
	expect_errors(TLS_BASE "tls_cert = /a\ntls_key = /b\ntls_ciphers = A B\n",
	    "t.ini:7: tls_ciphers: invalid character ' ' in cipher list\n");
	expect_errors(TLS_BASE "upstream_ca = /ca\n",
	    "t.ini:5: upstream_ca: needs upstream_tls = on\n");
	expect_errors(TLS_BASE "upstream_tls = on\nupstream_cert = /c\n",
	    "t.ini:6: upstream_cert: upstream_key is required with it\n");
	expect_errors(TLS_BASE "upstream_tls = maybe\n",
	    "t.ini:5: upstream_tls: invalid value 'maybe' (use on or off)\n");
	expect_errors(TLS_BASE "upstream_dial_map = a:1\n",
	    "t.ini:5: upstream_dial_map: 'a:1' is not FROM_HOST:PORT=TO_HOST:PORT\n");
	expect_errors(TLS_BASE "upstream_dial_map = a:1=b:2,A:1=c:3\n",
	    "t.ini:5: upstream_dial_map: A:1 is mapped twice\n");
}

/* [ferry] tls_ticket_rotation: default 1h, a duration from 1s to 7d */
Test(config_ferry, tls_ticket_rotation)
{
	struct res r;

	expect_ok(&r, CLUSTER_A);
	cr_assert_eq(r.c.tls_ticket_rotation_ms, 3600 * 1000);
	done(&r);
	expect_ok(&r, "[ferry]\ntls_ticket_rotation = 30m\n" CLUSTER_A);
	cr_assert_eq(r.c.tls_ticket_rotation_ms, 30 * 60 * 1000);
	cr_assert_eq(cfg_ferry_key_line(&r.c, "tls_ticket_rotation"), 2);
	done(&r);
	expect_errors("[ferry]\ntls_ticket_rotation = 500ms\n" CLUSTER_A,
	    "t.ini:2: tls_ticket_rotation: '500ms' out of range (1s-168h)\n");
	expect_errors("[ferry]\ntls_ticket_rotation = 169h\n" CLUSTER_A,
	    "t.ini:2: tls_ticket_rotation: '169h' out of range (1s-168h)\n");
}

/* ---- ferry's own upstream SASL (upstream_sasl_*) ---- */

Test(config_sasl, upstream_sasl_keys_and_canonical)
{
	struct res r, r2;
	expect_ok(&r, CLUSTER_A
	    "upstream_sasl_mechanism = SCRAM-SHA-512\n"      /* 5 */
	    "upstream_sasl_username = ferry-probe\n"
	    "upstream_sasl_password_file = /etc/ferry/kafka.password\n");
	const struct cfg_cluster *cl = &r.c.clusters[0];
	cr_assert_eq(cl->upstream_sasl_mechanism, CFG_SASL_SCRAM_SHA_512);
	cr_assert_str_eq(cl->upstream_sasl_username, "ferry-probe");
	cr_assert_str_eq(cl->upstream_sasl_password_file, "/etc/ferry/kafka.password");
	cr_assert_eq(cfg_cluster_key_line(cl, "upstream_sasl_password_file"), 7);
	char *s = cfg_cluster_canonical(cl);
	cr_assert(strstr(s, "\nupstream_sasl_mechanism = SCRAM-SHA-512\n"
	    "upstream_sasl_username = ferry-probe\n"
	    "upstream_sasl_password_file = /etc/ferry/kafka.password\n"), "%s", s);
	expect_ok(&r2, s);
	char *s2 = cfg_cluster_canonical(&r2.c.clusters[0]);
	cr_assert_str_eq(s, s2);
	free(s);
	free(s2);
	done(&r2);
	done(&r);
	for (int m = CFG_SASL_PLAIN; m <= CFG_SASL_SCRAM_SHA_512; m++) {
		char text[512];
		snprintf(text, sizeof text, CLUSTER_A "upstream_sasl_mechanism = %s\n"
		    "upstream_sasl_username = u\nupstream_sasl_password_file = /p\n",
		    cfg_sasl_mech_str((enum cfg_sasl_mech)m));
		expect_ok(&r, text);
		cr_assert_eq(r.c.clusters[0].upstream_sasl_mechanism, (enum cfg_sasl_mech)m);
		done(&r);
	}
	/* unset: nothing in the canonical text */
	expect_ok(&r, CLUSTER_A);
	cr_assert_eq(r.c.clusters[0].upstream_sasl_mechanism, CFG_SASL_NONE);
	s = cfg_cluster_canonical(&r.c.clusters[0]);
	cr_assert_null(strstr(s, "upstream_sasl"), "%s", s);
	free(s);
	done(&r);
	cr_assert_str_eq(cfg_sasl_mech_str(CFG_SASL_NONE), "none");
}

Test(config_sasl, upstream_sasl_errors)
{
	expect_errors(CLUSTER_A "upstream_sasl_mechanism = scram-sha-512\n"
	    "upstream_sasl_username = u\nupstream_sasl_password_file = /p\n",
	    "t.ini:5: upstream_sasl_mechanism: unknown mechanism 'scram-sha-512' (use PLAIN, "
	    "SCRAM-SHA-256 or SCRAM-SHA-512, upper case as Kafka spells them)\n");
	expect_errors(CLUSTER_A "upstream_sasl_mechanism = GSSAPI\n"
	    "upstream_sasl_username = u\nupstream_sasl_password_file = /p\n",
	    "t.ini:5: upstream_sasl_mechanism: GSSAPI: ferry authenticates its own requests with "
	    "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (clients' GSSAPI passes through ferry "
	    "whatever this key says)\n");
	expect_errors(CLUSTER_A "upstream_sasl_mechanism = PLAIN\n",
	    "t.ini:5: upstream_sasl_mechanism: upstream_sasl_username is required with it\n"
	    "t.ini:5: upstream_sasl_mechanism: upstream_sasl_password_file is required with it\n");
	expect_errors(CLUSTER_A "upstream_sasl_username = u\n",
	    "t.ini:5: upstream_sasl_username: needs upstream_sasl_mechanism (PLAIN, "
	    "SCRAM-SHA-256 or SCRAM-SHA-512)\n");
	expect_errors(CLUSTER_A "upstream_sasl_mechanism = PLAIN\nupstream_sasl_username = u\n",
	    "t.ini:5: upstream_sasl_mechanism: upstream_sasl_password_file is required with it\n");
	expect_errors(CLUSTER_A "upstream_sasl_mechanism = PLAIN\nupstream_sasl_username = u\n"
	    "upstream_sasl_password_file = relative/pw\n",
	    "t.ini:7: upstream_sasl_password_file: 'relative/pw' is not an absolute path\n");
	/* (a longer name than CFG_SASL_USER_MAX cannot fit a config line) */
	expect_errors(CLUSTER_A "upstream_sasl_mechanism = PLAIN\nupstream_sasl_username = a\tb\n"
	    "upstream_sasl_password_file = /p\n",
	    "t.ini:6: upstream_sasl_username: control character in the user name\n");
}

Test(config, max_connections_auto_follows_the_descriptor_limit)
{
	/* two descriptors per connection, 64 + brokers kept for the worker */
	cr_assert_eq(cfg_max_connections_auto(20000, 3), (20000 - 67) / 2);
	cr_assert_eq(cfg_max_connections_auto(1u << 20, 3), CFG_MAX_CONNECTIONS_AUTO);
	cr_assert_eq(cfg_max_connections_auto(0, 3), CFG_MAX_CONNECTIONS_AUTO, "no limit known");
	cr_assert_eq(cfg_max_connections_auto(64, 3), 1, "never 0: that would refuse everyone");
}
