/*
 * context — struct worker and the services every part of the worker uses;
 * see context.h.
 */
#include "worker/context.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/nodemap.h"

static void worker_nodes_report_cb(struct ev_loop *loop, ev_timer *t, int revents);

void
worker_context_init(struct worker *w, void (*orphan)(struct worker *w, const char *why),
		    void (*metadata_ready)(struct worker *w))
{
	w->orphan = orphan;
	w->metadata_ready = metadata_ready;
	ev_timer_init(&w->nodes_report, worker_nodes_report_cb, 0., 0.);
	w->nodes_report.data = w;
}

void
worker_metadata_ready(struct worker *w)
{
	if (w->metadata_ready)
		w->metadata_ready(w);
}

/* ---- buffer pool ------------------------------------------------------------ */

void *
worker_buf_get(struct worker *w)
{
	if (w->n_pool)
		return w->pool[--w->n_pool];
	return malloc(WORKER_BUF_SIZE);
}

void
worker_buf_put(struct worker *w, void *buf)
{
	if (w->n_pool < WORKER_BUF_POOL)
		w->pool[w->n_pool++] = buf;
	else
		free(buf);
}

/* ---- the channel to the supervisor ------------------------------------------ */

int
worker_ipc_send_fds(struct worker *w, enum ipc_type type, const void *payload, size_t len,
		    const int *fds, size_t nfds)
{
	if (w->ipc_fd < 0) {
		errno = EPIPE;
		return -1;
	}
	if (ipcq_send(&w->ipc_q, w->ipc_fd, type, w->generation, payload, len, fds, nfds) == -1)
		return -1;
	if (ipcq_pending(&w->ipc_q) && w->loop)
		ev_io_start(w->loop, &w->ipc_wio);
	return 0;
}

void
worker_ipc_send(struct worker *w, enum ipc_type type, const void *payload, size_t len)
{
	if (w->ipc_fd < 0)
		return;
	if (worker_ipc_send_fds(w, type, payload, len, NULL, 0) == -1) {
		char why[96];
		snprintf(why, sizeof why, "cannot send %s: %s", ipc_type_str(type),
		    errno == ENOBUFS ? "the supervisor does not read its control channel" :
		    strerror(errno));
		if (w->orphan)
			w->orphan(w, why);
	}
}

/* ---- connections ---------------------------------------------------------------- */

void
worker_conns_changed(struct worker *w)
{
	if (w->gen)
		atomic_store_explicit(&w->gen->workers[w->index].connections, w->n_conns,
		    memory_order_relaxed);
}

void
worker_conn_closed(struct worker *w)
{
	if (w->draining && w->n_conns == 0)
		ev_break(w->loop, EVBREAK_ALL);
}

/* ---- the upstream brokers, and what the supervisor is told of them ---------------- */

int
worker_node_slot(struct worker *w, int32_t node_id, bool add)
{
	if (w->cl->gateway != CFG_GATEWAY_SNI)
		return cfg_node_index(w->cl, node_id);
	if (node_id < 0 || w->n_nodes == 0)
		return -1;
	/* node ids are mostly small and dense: slot = id modulo the table,
	 * the same in every worker of the generation (the shared block is
	 * indexed by slot too) */
	for (size_t k = 0, i = (size_t)node_id % w->n_nodes; k < w->n_nodes;
	     k++, i = (i + 1) % w->n_nodes) {
		struct worker_node *n = &w->nodes[i];
		if (n->used && n->node_id == node_id)
			return (int)i;
		if (!n->used) {
			if (!add)
				return -1;
			n->used = true;
			n->node_id = node_id;
			return (int)i;
		}
	}
	return -1;
}

void
worker_unknown_node(struct worker *w, int32_t node_id, const char *host, size_t host_len,
		    int32_t port)
{
	struct ipc_unknown_node u = { .node_id = node_id, .port = port };
	snprintf(u.host, sizeof u.host, "%.*s", (int)host_len, host);
	for (size_t i = 0; i < w->n_unknown; i++)
		if (w->unknown[i].node_id == node_id && w->unknown[i].port == port &&
		    strcmp(w->unknown[i].host, u.host) == 0)
			return;
	if (w->n_unknown == WORKER_UNKNOWN_NODES)
		return;  /* enough to tell the operator what is wrong */
	w->unknown[w->n_unknown++] = u;
	if (w->cl->gateway == CFG_GATEWAY_SNI)
		log_warn("upstream broker has no server name", "node_id=%d upstream=%s:%d "
		    "hint=\"more than %d distinct node ids (or a negative one); clients cannot "
		    "reach it\"", node_id, u.host, port, WORKER_SNI_NODES);
	else
		log_warn("upstream broker has no broker port", "node_id=%d upstream=%s:%d "
		    "hint=\"add it to node_ids and broker_ports; clients cannot reach it\"",
		    node_id, u.host, port);
	worker_ipc_send(w, IPC_UNKNOWN_NODE, &u, sizeof u);
}

/* Tell the supervisor every node learned here since the last report, in as
 * few IPC_NODE_LEARNED messages as they fit in. */
static void
worker_nodes_report_cb(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)loop;
	(void)revents;
	struct worker *w = t->data;
	size_t n = 0;
	for (size_t i = 0; i < w->n_nodes; i++)
		n += w->nodes[i].report;
	if (!n || w->ipc_fd < 0)
		return;
	size_t cap = sizeof(struct nodemap_hdr) + n * (7 + CFG_HOST_MAX);
	if (cap > IPC_MAX_PAYLOAD)
		cap = IPC_MAX_PAYLOAD;
	uint8_t *buf = malloc(cap);
	if (!buf)
		return;  /* kept: the next learned node tries again */
	size_t i = 0;
	while (i < w->n_nodes && w->ipc_fd >= 0) {
		struct nodemap_writer wr;
		nodemap_writer_init(&wr, buf, cap, 0);
		for (; i < w->n_nodes; i++) {
			struct worker_node *wn = &w->nodes[i];
			if (!wn->report)
				continue;
			struct nodemap_entry e = { .node_id = wn->node_id, .port = wn->port };
			snprintf(e.host, sizeof e.host, "%s", wn->host);
			if (!nodemap_writer_add(&wr, &e))
				break;  /* full: the next message */
			wn->report = false;
		}
		if (!wr.count)
			break;
		size_t len = nodemap_writer_finish(&wr);
		log_debug("reporting learned brokers", "brokers=%u", wr.count);
		worker_ipc_send(w, IPC_NODE_LEARNED, buf, len);
	}
	free(buf);
}

void
worker_node_learned(struct worker *w, size_t n)
{
	if (n >= w->n_nodes)
		return;
	w->nodes[n].report = true;
	if (w->nodes_reporting && w->loop && !ev_is_active(&w->nodes_report)) {
		ev_timer_set(&w->nodes_report, 0., 0.);
		ev_timer_start(w->loop, &w->nodes_report);
	}
}

/* IPC_NODES at start: what earlier generations learned. -1: malformed. */
int
worker_nodes_inherit(struct worker *w, const struct ipc_msg *msg, char *err, size_t errlen)
{
	struct nodemap_reader r;
	struct nodemap_entry e;
	if (nodemap_reader_init(&r, msg->payload, msg->hdr.len, (uint32_t)w->n_nodes, err,
	    errlen) == -1)
		return -1;
	int rc;
	while ((rc = nodemap_reader_next(&r, &e, err, errlen)) == 1) {
		int idx = worker_node_slot(w, e.node_id, true);
		if (idx < 0)
			continue;  /* not ours, or the SNI table is full */
		struct worker_node *n = &w->nodes[idx];
		if (!n->known)
			w->nodes_inherited++;
		snprintf(n->host, sizeof n->host, "%s", e.host);
		n->port = e.port;
		n->known = true;
		n->report = false;
		log_debug("upstream broker known from an earlier generation", "node_id=%d "
		    "upstream=%s:%d", e.node_id, n->host, n->port);
	}
	if (rc == -1)
		return -1;
	if (r.flags & NODEMAP_F_REACHABLE)
		w->nodes_reachable = true;
	return 0;
}
