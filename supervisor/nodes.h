/*
 * nodes — the supervisor's map of each cluster's learned upstream brokers
 * (struct sup_nodes in supervisor.h), so brokers stay known across worker
 * generations.
 *
 * Workers report the node addresses they learn (IPC_NODE_LEARNED, from the
 * Metadata responses that pass through them and their own fetches) once
 * they accept; the supervisor keeps one map per cluster and sends it to
 * every worker it starts (IPC_NODES, right after CONFIG): after a crash
 * restart, a reload or a `workers = N` sibling replacement, a client that
 * connects straight to a broker port is forwarded at once, even when the
 * worker's own metadata fetch could not succeed (an upstream that requires
 * SASL). The map belongs to one upstream: a reload that changes the
 * upstream (plan_upstream_key) carries nothing over, and reports of the
 * older upstream never overwrite those of the newer. Removing the cluster
 * frees it.
 *
 * Bounds: entries only for node ids of the cluster's current configuration
 * (one per broker port); the rest of a report is ignored.
 *
 * Pure model code: no I/O; the I/O layer encodes the map into its spawn
 * messages with sup_nodes_payload().
 */
#ifndef FERRY_SUPERVISOR_NODES_H
#define FERRY_SUPERVISOR_NODES_H

#include <stddef.h>
#include <stdint.h>

#include "supervisor/supervisor.h"

/* A worker reported learned nodes: payload is an IPC_NODE_LEARNED node map
 * already checked by ipc_decode. Entries for node ids without a broker
 * port in the cluster's configuration are ignored. */
void sup_on_node_learned(struct sup *s, struct sup_proc *p, const void *payload, size_t len);

/* Apply one learned node of generation g to c's map (the engine's step,
 * exposed for tests). */
void sup_nodes_learn(struct sup_cluster *c, const struct sup_gen *g,
		     const struct nodemap_entry *e);

/* Encode the part of c's map that worker g (configuration cl) may use,
 * starting at entry *from, into buf (an IPC_NODES payload): its length,
 * *from advanced past what was written; 0 when nothing (more) is to be
 * sent — g's upstream is not the map's, or the map is done. */
size_t sup_nodes_payload(const struct sup_cluster *c, const struct sup_gen *g,
			 const struct cfg_cluster *cl, size_t *from, uint8_t *buf, size_t cap);

void sup_nodes_free(struct sup_nodes *m);

#endif
