/*
 * nodes — learned upstream brokers kept across generations; see nodes.h.
 */
#include "supervisor/nodes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/genshm.h"
#include "common/log.h"

void
sup_nodes_free(struct sup_nodes *m)
{
	free(m->v);
	memset(m, 0, sizeof *m);
}

/* A node id this cluster serves: one with a broker port, or with gateway =
 * sni any id (brokers are told apart by name), up to GENSHM_NODES of them
 * (the worker's table). */
static bool
sup_nodes_ours(const struct cfg_cluster *cl, int32_t node_id)
{
	if (cl->gateway == CFG_GATEWAY_SNI)
		return node_id >= 0;
	return cfg_node_index(cl, node_id) >= 0;
}

static size_t
sup_nodes_max(const struct cfg_cluster *cl)
{
	return cl->gateway == CFG_GATEWAY_SNI ? GENSHM_NODES : cl->n_brokers;
}

/* Drop entries whose node id has no broker port in cl (a reload took it
 * away): the map never holds more than cl's broker ports. */
static void
sup_nodes_prune(struct sup_nodes *m, const struct cfg_cluster *cl)
{
	size_t k = 0;
	for (size_t i = 0; i < m->n; i++)
		if (sup_nodes_ours(cl, m->v[i].node_id))
			m->v[k++] = m->v[i];
	m->n = k;
}

void
sup_nodes_learn(struct sup_cluster *c, const struct sup_gen *g, const struct nodemap_entry *e)
{
	const struct cfg_cluster *cl = c->ccfg ? c->ccfg->cl : NULL;
	struct sup_nodes *m = &c->nodes;
	if (!cl || !sup_nodes_ours(cl, e->node_id))
		return;
	if (strcmp(m->upstream_key, g->upstream_key) != 0) {
		/* another upstream: the older one's news never replace the
		 * newer one's map */
		if (m->upstream_key[0] && g->generation < m->generation)
			return;
		if (m->n)
			log_info("learned brokers forgotten: upstream changed", "cluster=%s "
			    "gen=%llu brokers=%zu", c->name, (unsigned long long)g->generation, m->n);
		m->n = 0;
		snprintf(m->upstream_key, sizeof m->upstream_key, "%s", g->upstream_key);
	}
	if (g->generation > m->generation)
		m->generation = g->generation;
	for (size_t i = 0; i < m->n; i++) {
		struct nodemap_entry *x = &m->v[i];
		if (x->node_id != e->node_id)
			continue;
		if (x->port == e->port && strcmp(x->host, e->host) == 0)
			return;
		log_info("upstream broker moved", "cluster=%s node_id=%d upstream=%s:%d was=%s:%d",
		    c->name, e->node_id, e->host, e->port, x->host, x->port);
		*x = *e;
		return;
	}
	if (m->n >= sup_nodes_max(cl))
		sup_nodes_prune(m, cl);
	if (m->n >= sup_nodes_max(cl))
		return;  /* (cannot happen: e's node id is one of cl's, not in the map) */
	if (m->n == m->cap) {
		size_t cap = m->cap ? 2 * m->cap : 8;
		if (cap > sup_nodes_max(cl))
			cap = sup_nodes_max(cl);
		struct nodemap_entry *v = realloc(m->v, cap * sizeof *v);
		if (!v)
			return;  /* a later fetch learns it again */
		m->v = v;
		m->cap = cap;
	}
	m->v[m->n++] = *e;
	log_debug("upstream broker kept for the next generations", "cluster=%s node_id=%d "
	    "upstream=%s:%d", c->name, e->node_id, e->host, e->port);
}

void
sup_on_node_learned(struct sup *s, struct sup_proc *p, const void *payload, size_t len)
{
	(void)s;
	struct nodemap_reader r;
	struct nodemap_entry e;
	char err[128];
	struct sup_cluster *c = p->gen->cluster;
	if (nodemap_reader_init(&r, payload, len, NODEMAP_MAX_COUNT, err, sizeof err) == -1)
		return;  /* (ipc_decode checked it already) */
	/* A worker has no more nodes to tell than broker ports: the work one
	 * message can cost the supervisor's loop is bounded by the cluster's
	 * size, whatever a worker sends. */
	size_t max = c->ccfg && c->ccfg->cl ? sup_nodes_max(c->ccfg->cl) : 0;
	for (size_t i = 0; i < max && nodemap_reader_next(&r, &e, err, sizeof err) == 1; i++)
		sup_nodes_learn(c, p->gen, &e);
}

size_t
sup_nodes_payload(const struct sup_cluster *c, const struct sup_gen *g,
		  const struct cfg_cluster *cl, size_t *from, uint8_t *buf, size_t cap)
{
	const struct sup_nodes *m = &c->nodes;
	if (!m->n || strcmp(m->upstream_key, g->upstream_key) != 0 ||
	    cap < sizeof(struct nodemap_hdr))
		return 0;
	struct nodemap_writer w;
	nodemap_writer_init(&w, buf, cap,
	    c->upstream == SUP_UPSTREAM_REACHABLE ? NODEMAP_F_REACHABLE : 0);
	while (*from < m->n) {
		const struct nodemap_entry *e = &m->v[*from];
		if (!sup_nodes_ours(cl, e->node_id)) {
			(*from)++;
			continue;
		}
		if (!nodemap_writer_add(&w, e)) {
			if (w.count)
				break;   /* full: the rest in the next message */
			(*from)++;   /* (cannot happen: entries were checked) */
			continue;
		}
		(*from)++;
	}
	if (!w.count)
		return 0;
	return nodemap_writer_finish(&w);
}
