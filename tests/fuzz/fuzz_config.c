/*
 * fuzz_config — libFuzzer harness for the INI configuration parser
 * (common/config.c, common/units.c): cfg_parse_string over the raw input.
 *
 * Oracles (besides ASan/UBSan and leak checking):
 *   - success reports no error, failure at least one, each of the form
 *     "fuzz.ini:LINE: message" with LINE inside the text, and leaves *out
 *     zeroed;
 *   - a parsed cluster is consistent: upstream list, port range and node
 *     ids (one per port, unique, non-negative, cfg_node_index finds each),
 *     bootstrap port outside the broker range, values inside their ranges;
 *   - canonical round trip: cfg_cluster_canonical(cluster) parses again,
 *     alone, to an equal cluster, and its own canonical text is the same
 *     (what the supervisor sends each worker over IPC must be accepted).
 */
#include <stdbool.h>
#include <string.h>

#include "common/config.h"
#include "tests/fuzz/fuzz_common.h"

#define PATH "fuzz.ini"

static void
dump_errors(const struct cfg_errors *e)
{
	size_t i;

	for (i = 0; i < e->n && i < 10; i++)
		fprintf(stderr, "  error: %s\n", e->msg[i]);
}

static void
check_errors(const struct cfg_errors *e, size_t nlines)
{
	size_t i, pl = strlen(PATH);

	for (i = 0; i < e->n; i++) {
		const char *m = e->msg[i];
		char *end;
		long line;

		FUZZ_CHECK(m != NULL && strncmp(m, PATH ":", pl + 1) == 0, "error without file: %s", m);
		line = strtol(m + pl + 1, &end, 10);
		FUZZ_CHECK(end != m + pl + 1 && end[0] == ':' && end[1] == ' ',
		    "error without line: %s", m);
		FUZZ_CHECK(line >= 1 && (size_t)line <= nlines, "error line %ld of %zu: %s", line,
		    nlines, m);
	}
}

static void
check_cluster(const struct cfg *c, const struct cfg_cluster *cl)
{
	size_t j, nports;

	FUZZ_CHECK(cl->name[0] != '\0' && strlen(cl->name) < CFG_NAME_MAX, "name");
	FUZZ_CHECK(cfg_find_cluster(c, cl->name) == cl, "cfg_find_cluster(%s)", cl->name);
	FUZZ_CHECK(cl->n_upstream >= 1 && cl->upstream != NULL, "no upstream");
	for (j = 0; j < cl->n_upstream; j++)
		FUZZ_CHECK(cl->upstream[j].host[0] != '\0' && cl->upstream[j].port != 0,
		    "upstream %zu", j);
	FUZZ_CHECK(cl->bootstrap.host[0] != '\0' && cl->bootstrap.port != 0, "bootstrap");
	if (cl->gateway == CFG_GATEWAY_SNI) {
		/* gateway = sni: one listener; names checked by the parser */
		FUZZ_CHECK(cl->n_brokers == 0 && cl->node_ids == NULL && cl->broker_port_first == 0 &&
		    cl->broker_port_last == 0 && cl->advertised_host[0] == '\0', "sni with broker ports");
		FUZZ_CHECK(cl->sni_bootstrap_host[0] != '\0' &&
		    strstr(cl->sni_broker_pattern, "$(nodeId)") != NULL, "sni names");
		goto limits;
	}
	FUZZ_CHECK(cl->gateway == CFG_GATEWAY_PORTS, "gateway %d", (int)cl->gateway);
	FUZZ_CHECK(cl->advertised_host[0] != '\0', "empty advertised_host in [cluster %s]", cl->name);
	FUZZ_CHECK(cl->broker_port_first >= 1 && cl->broker_port_first <= cl->broker_port_last,
	    "port range %u-%u", cl->broker_port_first, cl->broker_port_last);
	FUZZ_CHECK(cl->bootstrap.port < cl->broker_port_first ||
	    cl->bootstrap.port > cl->broker_port_last, "bootstrap port inside broker range");
	nports = (size_t)cl->broker_port_last - cl->broker_port_first + 1;
	FUZZ_CHECK(cl->n_brokers == nports && cl->node_ids != NULL, "%zu node ids for %zu ports",
	    cl->n_brokers, nports);
	for (j = 0; j < cl->n_brokers; j++) {
		FUZZ_CHECK(cl->node_ids[j] >= 0, "negative node id");
		FUZZ_CHECK(cfg_node_index(cl, cl->node_ids[j]) == (int)j, "node id %d not unique",
		    cl->node_ids[j]);
		if (j > 64)
			break;	/* the index scan is quadratic */
	}
limits:
	/* 0: auto (the default), made a number by the supervisor */
	FUZZ_CHECK(cl->max_connections <= 1000000, "max_connections");
	FUZZ_CHECK(cl->max_frame_bytes >= 1024 && cl->max_frame_bytes <= (1ULL << 30), "max_frame_bytes");
	FUZZ_CHECK(cl->request_timeout_ms > 0, "request_timeout");
	FUZZ_CHECK(cl->max_inflight >= 1 && cl->max_inflight <= 65536, "max_inflight");
	FUZZ_CHECK(cl->sasl_max_frame_bytes >= 1024 && cl->sasl_max_frame_bytes <= (1ULL << 30),
	    "sasl_max_frame_bytes");
}

static bool
same_cluster(const struct cfg_cluster *a, const struct cfg_cluster *b, const char **what)
{
	size_t i;

#define DIFF(w) do { *what = (w); return false; } while (0)
	if (strcmp(a->name, b->name) != 0)
		DIFF("name");
	if (a->n_upstream != b->n_upstream)
		DIFF("number of upstream servers");
	for (i = 0; i < a->n_upstream; i++)
		if (strcmp(a->upstream[i].host, b->upstream[i].host) != 0 ||
		    a->upstream[i].port != b->upstream[i].port)
			DIFF("upstream");
	if (strcmp(a->bootstrap.host, b->bootstrap.host) != 0 || a->bootstrap.port != b->bootstrap.port)
		DIFF("bootstrap");
	if (strcmp(a->advertised_host, b->advertised_host) != 0)
		DIFF("advertised_host");
	if (a->broker_port_first != b->broker_port_first || a->broker_port_last != b->broker_port_last)
		DIFF("broker_ports");
	if (a->n_brokers != b->n_brokers ||
	    (a->n_brokers && memcmp(a->node_ids, b->node_ids, a->n_brokers * sizeof *a->node_ids) != 0))
		DIFF("node_ids");
	if (a->gateway != b->gateway)
		DIFF("gateway");
	if (strcmp(a->sni_bootstrap_host, b->sni_bootstrap_host) != 0)
		DIFF("sni_bootstrap_host");
	if (strcmp(a->sni_broker_pattern, b->sni_broker_pattern) != 0)
		DIFF("sni_broker_pattern");
	if (a->max_connections != b->max_connections)
		DIFF("max_connections");
	if (a->max_frame_bytes != b->max_frame_bytes)
		DIFF("max_frame_bytes");
	if (a->idle_timeout_ms != b->idle_timeout_ms)
		DIFF("idle_timeout");
	if (a->request_timeout_ms != b->request_timeout_ms)
		DIFF("request_timeout");
	if (a->max_inflight != b->max_inflight)
		DIFF("max_inflight_per_connection");
	if (a->sasl_max_frame_bytes != b->sasl_max_frame_bytes)
		DIFF("sasl_max_frame_bytes");
#undef DIFF
	return true;
}

static void
check_canonical(const struct cfg_cluster *cl)
{
	struct cfg c2;
	struct cfg_errors e2;
	const char *what = "";
	char *text = cfg_cluster_canonical(cl), *text2;
	int rc;

	FUZZ_CHECK(text != NULL, "canonical text is NULL");
	cfg_errors_init(&e2);
	rc = cfg_parse_string(PATH, text, strlen(text), &c2, &e2);
	if (rc != 0) {
		fprintf(stderr, "FUZZ DETAIL: the canonical text does not parse:\n");
		dump_errors(&e2);
		fprintf(stderr, "canonical text:\n%s\n", text);
	}
	FUZZ_CHECK(rc == 0, "canonical text of [cluster %s] does not parse", cl->name);
	FUZZ_CHECK(c2.n_clusters == 1, "canonical text gives %zu clusters", c2.n_clusters);
	if (!same_cluster(cl, &c2.clusters[0], &what))
		fprintf(stderr, "FUZZ DETAIL: canonical text:\n%s\n", text);
	FUZZ_CHECK(same_cluster(cl, &c2.clusters[0], &what),
	    "canonical text of [cluster %s] parses to a different %s", cl->name, what);
	text2 = cfg_cluster_canonical(&c2.clusters[0]);
	FUZZ_CHECK(strcmp(text, text2) == 0, "canonical text is not a fixed point:\n%s\n--\n%s",
	    text, text2);
	free(text2);
	free(text);
	cfg_free(&c2);
	cfg_errors_free(&e2);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cfg c;
	struct cfg_errors e;
	char *text = (char *)fuzz_dup(data, size);
	size_t i, nlines = 1;
	int rc;

	for (i = 0; i < size; i++)
		nlines += data[i] == '\n';
	cfg_errors_init(&e);
	memset(&c, 0xa5, sizeof c);
	rc = cfg_parse_string(PATH, text, size, &c, &e);
	FUZZ_CHECK(rc == 0 || rc == -1, "rc %d", rc);
	check_errors(&e, nlines);
	if (rc != 0) {
		FUZZ_CHECK(e.n >= 1, "failure without an error message");
		FUZZ_CHECK(c.n_clusters == 0 && c.clusters == NULL && c.path == NULL,
		    "output not zeroed on failure");
	} else {
		FUZZ_CHECK(e.n == 0, "success with %zu errors", e.n);
		FUZZ_CHECK(c.n_clusters >= 1 && c.path != NULL && strcmp(c.path, PATH) == 0,
		    "success without clusters");
		FUZZ_CHECK(c.control_socket[0] == '/', "control_socket");
		FUZZ_CHECK(c.drain_timeout_ms > 0 && c.init_timeout_ms > 0 &&
		    c.crash_loop_window_ms > 0, "timeouts");
		FUZZ_CHECK(c.crash_loop_limit >= 1 && c.crash_loop_limit <= 1000, "crash_loop_limit");
		FUZZ_CHECK(strcmp(cfg_policy_startup_str(c.startup_policy), "unknown") != 0 &&
		    strcmp(cfg_policy_reload_str(c.reload_policy), "unknown") != 0, "policies");
		for (i = 0; i < c.n_clusters; i++)
			check_cluster(&c, &c.clusters[i]);
		for (i = 0; i < c.n_clusters; i++)
			check_canonical(&c.clusters[i]);
	}
	cfg_free(&c);
	cfg_errors_free(&e);
	free(text);
	return 0;
}
