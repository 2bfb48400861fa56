/*
 * fuzz_staterec — libFuzzer harness for the upgrade's state record reader
 * (supervisor/staterec.c): staterec_decode of a document of version 1, and
 * the counters-by-name reader of UPG_COUNTERS messages.
 *
 * Input: the bytes of a record (JSON or not).
 *
 * Oracles (besides ASan/UBSan and leak checking): a record that decodes
 * has every bound the successor relies on — at most CRASH_MAX_LIMIT crash
 * times, learned brokers within their allocation with a host and a port,
 * at most 16 unknown nodes, fds and clusters as many as their arrays, the
 * config text's length its string's, a known cluster state; a record that
 * does not decode says why, prefixed "state record" and naming nothing but
 * text; decoding the same bytes again gives the same answer.
 */
#include <string.h>

#include "supervisor/staterec.h"
#include "tests/fuzz/fuzz_common.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct staterec r, r2;
	char err[256] = "", err2[256] = "";
	int rc = staterec_decode((const char *)data, size, 1, &r, err, sizeof err);
	int rc2 = staterec_decode((const char *)data, size, 1, &r2, err2, sizeof err2);

	FUZZ_CHECK(rc == rc2, "decoding twice gave %d then %d", rc, rc2);
	if (rc == -1) {
		FUZZ_CHECK(strncmp(err, "state record", 12) == 0, "error '%s'", err);
		FUZZ_CHECK(strcmp(err, err2) == 0, "two errors: '%s', '%s'", err, err2);
		return 0;
	}
	FUZZ_CHECK(r.record == 1, "version %u", r.record);
	FUZZ_CHECK(r.config_text && strlen(r.config_text) <= r.config_len,
	    "config text of %zu bytes", r.config_len);
	FUZZ_CHECK(r.n_fds == 0 || r.fds, "%zu fds without an array", r.n_fds);
	FUZZ_CHECK(r.n_clusters == 0 || r.clusters, "%zu clusters without an array", r.n_clusters);
	FUZZ_CHECK(r.n_clusters == r2.n_clusters && r.n_fds == r2.n_fds, "not the same twice");
	for (size_t i = 0; i < r.n_clusters; i++) {
		const struct staterec_cluster *c = &r.clusters[i];
		FUZZ_CHECK(c->st <= FSM_C_PARKED, "cluster state %d", (int)c->st);
		FUZZ_CHECK(c->n_crash <= CRASH_MAX_LIMIT, "%u crash times", c->n_crash);
		FUZZ_CHECK(c->n_unknown <= STATEREC_UNKNOWN_NODES, "%zu unknown nodes", c->n_unknown);
		FUZZ_CHECK(c->nodes.n <= c->nodes.cap, "%zu nodes in %zu", c->nodes.n, c->nodes.cap);
		for (size_t k = 0; k < c->nodes.n; k++)
			FUZZ_CHECK(c->nodes.v[k].host[0] && c->nodes.v[k].port > 0 &&
			    c->nodes.v[k].port <= 65535, "node %zu", k);
		FUZZ_CHECK(memchr(c->name, 0, sizeof c->name), "name not terminated");
	}
	staterec_free(&r);
	staterec_free(&r2);

	/* the same bytes as an UPG_COUNTERS message */
	char name[64];
	struct metrics m;
	rc = staterec_counters_msg_read((const char *)data, size, name, sizeof name, &m, err,
	    sizeof err);
	FUZZ_CHECK(rc == 0 || err[0], "a refusal without a reason");
	if (rc == 0)
		FUZZ_CHECK(memchr(name, 0, sizeof name), "cluster name not terminated");
	return 0;
}
