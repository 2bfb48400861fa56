/*
 * test_sni_nodes — worker_node_slot (worker/context.c): with gateway = sni
 * the worker's broker table is addressed by node id (id modulo the table,
 * linear probing), so any node id the upstream names gets a slot, bounded
 * by the table: colliding ids, a full table, negative ids, lookups that
 * must not take a slot; with gateway = ports it is the index in node_ids.
 */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "worker/context.h"

static struct worker w;
static struct cfg_cluster cl;

static void
sni_table(size_t n)
{
	memset(&w, 0, sizeof w);
	memset(&cl, 0, sizeof cl);
	cl.gateway = CFG_GATEWAY_SNI;
	w.cl = &cl;
	w.n_nodes = n;
	w.nodes = calloc(n, sizeof *w.nodes);
	cr_assert_not_null(w.nodes);
}

Test(sni_nodes, any_id_gets_a_slot_bounded)
{
	sni_table(4);
	cr_assert_eq(worker_node_slot(&w, 1, false), -1, "lookup took a slot");
	cr_assert_eq(worker_node_slot(&w, 1, true), 1);
	cr_assert_eq(worker_node_slot(&w, 1, true), 1, "same id, same slot");
	cr_assert_eq(worker_node_slot(&w, 1, false), 1);
	cr_assert_eq(worker_node_slot(&w, 5, true), 2, "collision probes on");
	cr_assert_eq(worker_node_slot(&w, 2147483647, true), 3);  /* 2^31-1 mod 4 = 3 */
	cr_assert_eq(worker_node_slot(&w, 8, true), 0);
	cr_assert_eq(worker_node_slot(&w, 9, true), -1, "full table");
	cr_assert_eq(worker_node_slot(&w, 9, false), -1);
	cr_assert_eq(worker_node_slot(&w, 5, false), 2);
	cr_assert_eq(worker_node_slot(&w, 8, false), 0);
	cr_assert_eq(worker_node_slot(&w, -1, true), -1, "negative id");
	for (int i = 0; i < 4; i++)
		cr_assert(w.nodes[i].used);
	cr_assert_eq(w.nodes[2].node_id, 5);
	free(w.nodes);
}

Test(sni_nodes, empty_table)
{
	sni_table(1);
	w.n_nodes = 0;
	cr_assert_eq(worker_node_slot(&w, 0, true), -1);
	free(w.nodes);
}

Test(sni_nodes, ports_mode_is_the_node_ids_index)
{
	int32_t ids[3] = { 7, 3, 1000 };
	memset(&w, 0, sizeof w);
	memset(&cl, 0, sizeof cl);
	cl.gateway = CFG_GATEWAY_PORTS;
	cl.node_ids = ids;
	cl.n_brokers = 3;
	w.cl = &cl;
	cr_assert_eq(worker_node_slot(&w, 3, true), 1);
	cr_assert_eq(worker_node_slot(&w, 1000, false), 2);
	cr_assert_eq(worker_node_slot(&w, 4, true), -1, "no slot outside node_ids");
}
