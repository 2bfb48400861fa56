/*
 * Unit tests for common/nodemap (the learned-brokers map on the wire: round
 * trip, batches, every malformed form refused, ipc_decode refusing a bad
 * map) and supervisor/nodes (the per-cluster map kept across generations:
 * bounded by the configuration's node ids, never carried to another
 * upstream, older upstream's reports never overwriting the newer map).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "common/ipc.h"
#include "common/nodemap.h"
#include "supervisor/nodes.h"

static struct nodemap_entry
ent(int32_t id, const char *host, int32_t port)
{
	struct nodemap_entry e = { .node_id = id, .port = port };
	snprintf(e.host, sizeof e.host, "%s", host);
	return e;
}

Test(nodemap, round_trip)
{
	uint8_t buf[1024];
	struct nodemap_writer w;
	nodemap_writer_init(&w, buf, sizeof buf, NODEMAP_F_REACHABLE);
	struct nodemap_entry in[3] = { ent(1, "b1.example", 9092), ent(-7, "::1", 65535),
				       ent(2147483647, "10.0.0.1", 1) };
	for (int i = 0; i < 3; i++)
		cr_assert(nodemap_writer_add(&w, &in[i]));
	size_t len = nodemap_writer_finish(&w);
	cr_assert_eq(len, sizeof(struct nodemap_hdr) + 3 * 7 + 10 + 3 + 8);
	char err[128];
	cr_assert_eq(nodemap_check(buf, len, 3, err, sizeof err), 0, "%s", err);
	cr_assert_eq(nodemap_check(buf, len, 2, err, sizeof err), -1, "more than max");
	struct nodemap_reader r;
	cr_assert_eq(nodemap_reader_init(&r, buf, len, 3, err, sizeof err), 0);
	cr_assert_eq(r.flags, NODEMAP_F_REACHABLE);
	struct nodemap_entry e;
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(nodemap_reader_next(&r, &e, err, sizeof err), 1, "%s", err);
		cr_assert_eq(e.node_id, in[i].node_id);
		cr_assert_eq(e.port, in[i].port);
		cr_assert_str_eq(e.host, in[i].host);
	}
	cr_assert_eq(nodemap_reader_next(&r, &e, err, sizeof err), 0);
}

Test(nodemap, writer_refuses_bad_entries_and_stops_when_full)
{
	uint8_t buf[64];
	struct nodemap_writer w;
	nodemap_writer_init(&w, buf, sizeof buf, 0);
	struct nodemap_entry bad[] = { ent(1, "", 9092), ent(1, "h", 0), ent(1, "h", 65536),
				       ent(1, "a\tb", 1) };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_assert_not(nodemap_writer_add(&w, &bad[i]), "entry %zu", i);
	struct nodemap_entry e = ent(1, "0123456789012345678", 1); /* 7 + 19 = 26 bytes */
	cr_assert(nodemap_writer_add(&w, &e));
	cr_assert(nodemap_writer_add(&w, &e));
	cr_assert_not(nodemap_writer_add(&w, &e), "64 bytes hold 8 + 2 * 26");
	cr_assert_eq(nodemap_writer_finish(&w), 60);
}

Test(nodemap, malformed_maps_refused)
{
	uint8_t buf[256];
	struct nodemap_writer w;
	nodemap_writer_init(&w, buf, sizeof buf, 0);
	struct nodemap_entry e = ent(3, "broker", 9092);
	cr_assert(nodemap_writer_add(&w, &e));
	size_t len = nodemap_writer_finish(&w);
	char err[128];
	uint8_t m[256];

	cr_assert_eq(nodemap_check(buf, 7, 10, err, sizeof err), -1, "short header");
	cr_assert_eq(nodemap_check(buf, len - 1, 10, err, sizeof err), -1, "truncated host");
	memcpy(m, buf, len);
	m[len] = 'x';
	cr_assert_eq(nodemap_check(m, len + 1, 10, err, sizeof err), -1, "trailing byte");
	cr_assert(strstr(err, "after the last"), "%s", err);
	memcpy(m, buf, len);
	m[4] = 0x80;  /* flags */
	cr_assert_eq(nodemap_check(m, len, 10, err, sizeof err), -1, "unknown flags");
	memcpy(m, buf, len);
	memset(m + 12, 0, 2);  /* port 0 */
	cr_assert_eq(nodemap_check(m, len, 10, err, sizeof err), -1, "port 0");
	memcpy(m, buf, len);
	m[14] = 0;  /* host length 0 */
	cr_assert_eq(nodemap_check(m, len - 6, 10, err, sizeof err), -1, "empty host");
	memcpy(m, buf, len);
	m[17] = 0;  /* NUL inside the host */
	cr_assert_eq(nodemap_check(m, len, 10, err, sizeof err), -1, "NUL in host");
	memcpy(m, buf, len);
	uint32_t big = 1000000;
	memcpy(m, &big, 4);
	cr_assert_eq(nodemap_check(m, len, NODEMAP_MAX_COUNT, err, sizeof err), -1, "count");
	big = 2;
	memcpy(m, &big, 4);
	cr_assert_eq(nodemap_check(m, len, 10, err, sizeof err), -1, "count beyond the bytes");
}

Test(nodemap, ipc_decode_checks_the_map)
{
	uint8_t pl[64], dg[128];
	struct nodemap_writer w;
	nodemap_writer_init(&w, pl, sizeof pl, 0);
	struct nodemap_entry e = ent(1, "b", 1);
	cr_assert(nodemap_writer_add(&w, &e));
	size_t len = nodemap_writer_finish(&w);
	struct ipc_msg msg;
	char err[128];
	enum ipc_type types[] = { IPC_NODES, IPC_NODE_LEARNED };
	for (int t = 0; t < 2; t++) {
		ssize_t n = ipc_encode(dg, sizeof dg, types[t], 1, pl, len);
		cr_assert_eq(ipc_decode(dg, (size_t)n, &msg, err, sizeof err), 0, "%s", err);
		n = ipc_encode(dg, sizeof dg, types[t], 1, pl, len - 1);
		cr_assert_eq(ipc_decode(dg, (size_t)n, &msg, err, sizeof err), -1, "truncated");
		n = ipc_encode(dg, sizeof dg, types[t], 1, pl, 4);
		cr_assert_eq(ipc_decode(dg, (size_t)n, &msg, err, sizeof err), -1, "no header");
	}
	cr_assert_str_eq(ipc_type_str(IPC_NODES), "nodes");
	cr_assert_str_eq(ipc_type_str(IPC_NODE_LEARNED), "node-learned");
	cr_assert_str_eq(ipc_type_str(IPC_TICKET_KEYS), "ticket-keys");
}

/* ---- supervisor/nodes ---- */

static int32_t fx_ids[3] = { 1, 2, 3 };

static void
fx_setup(struct sup_cluster *c, struct sup_ccfg *cc, struct cfg_cluster *cl)
{
	memset(c, 0, sizeof *c);
	memset(cc, 0, sizeof *cc);
	memset(cl, 0, sizeof *cl);
	cl->node_ids = fx_ids;
	cl->n_brokers = 3;
	cc->cl = cl;
	c->ccfg = cc;
	snprintf(c->name, sizeof c->name, "K");
}

static struct sup_gen
fx_gen(uint64_t generation, const char *key)
{
	struct sup_gen g;
	memset(&g, 0, sizeof g);
	g.generation = generation;
	snprintf(g.upstream_key, sizeof g.upstream_key, "%s", key);
	return g;
}

/* Decode c's IPC_NODES payload for g into out; returns the count. */
static size_t
fx_payload(struct sup_cluster *c, struct sup_gen *g, struct nodemap_entry *out, size_t max,
	   uint32_t *flags)
{
	uint8_t buf[4096];
	size_t from = 0, n = 0;
	size_t len;
	char err[128];
	while ((len = sup_nodes_payload(c, g, c->ccfg->cl, &from, buf, sizeof buf)) > 0) {
		struct nodemap_reader r;
		cr_assert_eq(nodemap_reader_init(&r, buf, len, 3, err, sizeof err), 0, "%s", err);
		*flags = r.flags;
		while (n < max && nodemap_reader_next(&r, &out[n], err, sizeof err) == 1)
			n++;
	}
	return n;
}

Test(nodes, kept_bounded_and_tied_to_the_upstream)
{
	struct sup_cluster c;
	struct sup_ccfg cc;
	struct cfg_cluster cl;
	fx_setup(&c, &cc, &cl);
	struct sup_gen g1 = fx_gen(1, "sha256:A"), g2 = fx_gen(2, "sha256:A"),
		       g3 = fx_gen(3, "sha256:B");
	struct nodemap_entry out[8];
	uint32_t flags = 99;

	cr_assert_eq(fx_payload(&c, &g2, out, 8, &flags), 0, "empty map: nothing sent");
	struct nodemap_entry e1 = ent(1, "b1", 9001), e2 = ent(2, "b2", 9002),
			     e9 = ent(9, "b9", 9009);
	sup_nodes_learn(&c, &g1, &e1);
	sup_nodes_learn(&c, &g1, &e2);
	sup_nodes_learn(&c, &g1, &e9);  /* no broker port: ignored */
	sup_nodes_learn(&c, &g1, &e1);  /* again: no duplicate */
	cr_assert_eq(c.nodes.n, 2);
	c.upstream = SUP_UPSTREAM_REACHABLE;
	cr_assert_eq(fx_payload(&c, &g2, out, 8, &flags), 2, "same upstream: handed over");
	cr_assert_eq(flags, NODEMAP_F_REACHABLE);
	cr_assert_str_eq(out[0].host, "b1");
	c.upstream = SUP_UPSTREAM_UNREACHABLE;
	cr_assert_eq(fx_payload(&c, &g2, out, 8, &flags), 2);
	cr_assert_eq(flags, 0, "not reachable: the new worker probes");

	/* a move replaces the entry */
	struct nodemap_entry m1 = ent(1, "b1-new", 9101);
	sup_nodes_learn(&c, &g2, &m1);
	cr_assert_eq(c.nodes.n, 2);
	cr_assert_str_eq(c.nodes.v[0].host, "b1-new");

	/* another upstream: nothing carried over */
	cr_assert_eq(fx_payload(&c, &g3, out, 8, &flags), 0, "other upstream gets nothing");
	struct nodemap_entry n3 = ent(3, "new3", 9303);
	sup_nodes_learn(&c, &g3, &n3);
	cr_assert_eq(c.nodes.n, 1, "a new map for the new upstream");
	cr_assert_str_eq(c.nodes.upstream_key, "sha256:B");
	/* the old upstream's draining generation cannot overwrite it */
	sup_nodes_learn(&c, &g2, &e2);
	cr_assert_eq(c.nodes.n, 1);
	cr_assert_str_eq(c.nodes.upstream_key, "sha256:B");
	cr_assert_eq(fx_payload(&c, &g2, out, 8, &flags), 0, "old upstream gets nothing");
	cr_assert_eq(fx_payload(&c, &g3, out, 8, &flags), 1);

	/* a reload drops node 3 from the configuration: pruned, never more
	 * entries than broker ports */
	struct sup_gen g4 = fx_gen(4, "sha256:B");
	sup_nodes_learn(&c, &g4, &e1);
	sup_nodes_learn(&c, &g4, &e2);
	cr_assert_eq(c.nodes.n, 3);
	static int32_t two[2] = { 1, 2 };
	cl.node_ids = two;
	cl.n_brokers = 2;
	cr_assert_eq(fx_payload(&c, &g4, out, 8, &flags), 2, "only the configured ids sent");
	struct nodemap_entry m2 = ent(2, "b2-moved", 9202);
	sup_nodes_learn(&c, &g4, &m2);
	cr_assert_leq(c.nodes.n, 3);
	sup_nodes_free(&c.nodes);
	cr_assert_eq(c.nodes.n, 0);
}

Test(nodes, large_maps_travel_in_several_messages)
{
	struct sup_cluster c;
	struct sup_ccfg cc;
	struct cfg_cluster cl;
	fx_setup(&c, &cc, &cl);
	static int32_t ids[50];
	for (int i = 0; i < 50; i++)
		ids[i] = 100 + i;
	cl.node_ids = ids;
	cl.n_brokers = 50;
	struct sup_gen g = fx_gen(1, "k");
	char host[200];
	memset(host, 'h', sizeof host - 1);
	host[sizeof host - 1] = 0;
	for (int i = 0; i < 50; i++) {
		struct nodemap_entry e = ent(100 + i, host, 1000 + i);
		sup_nodes_learn(&c, &g, &e);
	}
	cr_assert_eq(c.nodes.n, 50);
	uint8_t buf[2048];  /* ~9 entries of 206 bytes per message */
	size_t from = 0, len, msgs = 0, total = 0;
	char err[128];
	while ((len = sup_nodes_payload(&c, &g, &cl, &from, buf, sizeof buf)) > 0) {
		struct nodemap_reader r;
		cr_assert_eq(nodemap_reader_init(&r, buf, len, 50, err, sizeof err), 0, "%s", err);
		cr_assert_eq(nodemap_check(buf, len, 50, err, sizeof err), 0, "%s", err);
		total += r.count;
		msgs++;
	}
	cr_assert_eq(total, 50);
	cr_assert_geq(msgs, 5);
	sup_nodes_free(&c.nodes);
}
