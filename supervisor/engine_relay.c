/*
 * engine_relay — live handover in the engine: a connection an old worker
 * hands over (IPC_CONN_OUT) is relayed to the least loaded worker of the
 * cluster's newest accepting generation (IPC_CONN_IN), and its adoption or
 * refusal (IPC_CONN_TAKEN) answered to the old worker (IPC_CONN_DONE);
 * a relay not answered within SUP_RELAY_TIMEOUT_MS, or whose process
 * exits, ends with its outcome unknown (IPC_ADOPT_UNKNOWN: the old worker
 * closes its copies only). During an upgrade one side of a relay is the
 * other supervisor (engine_upgrade.c): the predecessor relays its old
 * workers' connections to the successor, which relays them to its own.
 * Part of the engine (engine_priv.h); pure like engine.c.
 */
#include "supervisor/engine_priv.h"

#include <stdint.h>
#include <stdlib.h>
#include <sodium.h>
#include <string.h>

#include "common/log.h"

/* ---- live handover: relaying connections between generations ------------------------ */

void
sup_relay_done(struct sup *s, struct sup_proc *from, uint64_t from_id, uint32_t adopted)
{
	if (!from) {
		upgrade_relay_answer(s, from_id, adopted);
		return;
	}
	if (!from->alive)
		return;
	struct ipc_conn_ack ack = { .id = from_id, .adopted = adopted };
	if (s->ops->send(s, from, IPC_CONN_DONE, &ack, sizeof ack) == -1)
		sup_post_proc(s, from, FSM_GE_QUEUE_FULL, "control channel full");
}

int
sup_relay_room(struct sup *s)
{
	if (s->n_relays < s->cap_relays)
		return 0;
	size_t cap = s->cap_relays ? s->cap_relays * 2 : 64;
	struct sup_relay *r = realloc(s->relays, cap * sizeof *r);
	if (!r)
		return -1;
	s->relays = r;
	s->cap_relays = cap;
	return 0;
}

static void
sup_relay_del(struct sup *s, size_t i)
{
	s->relays[i] = s->relays[--s->n_relays];
}

struct sup_proc *
sup_handover_target(struct sup_cluster *c, const struct sup_gen *not)
{
	for (struct sup_gen *g = c->gens; g; g = g->next) {
		if (g == not || g->st != FSM_G_ACCEPTING || g->owner != SUP_OWNER_CLUSTER)
			continue;
		struct sup_proc *best = NULL;
		uint64_t least = UINT64_MAX;
		for (size_t i = 0; i < g->n_procs; i++) {
			struct sup_proc *p = &g->procs[i];
			if (!p->alive || !p->ready || p->late)
				continue;
			uint64_t n = p->metrics ? METRIC_GET(p->metrics, connections_active) : 0;
			if (n < least) {
				least = n;
				best = p;
			}
		}
		return best;
	}
	return NULL;
}

void
sup_on_conn_out(struct sup *s, struct sup_proc *p, const void *payload, size_t len,
		const int *fds, size_t nfds)
{
	struct sup_gen *g = p->gen;
	struct ipc_conn_record rec;
	char err[160];
	if (ipc_conn_record_check(payload, len, nfds, &rec, err, sizeof err) == -1) {
		for (size_t i = 0; i < nfds; i++)
			s->ops->close(s, fds[i]);
		sup_on_malformed(s, p, err);
		return;
	}
	/* an upgrade's predecessor: to the successor instead */
	if (upgrade_relay_out(s, p, &rec, payload, len, fds, nfds))
		return;
	struct sup_proc *to = g->st == FSM_G_DRAINING && g->handover_keep ?
	    sup_handover_target(g->cluster, g) : NULL;
	bool sent = false;
	if (to) {
		if (sup_relay_room(s) == 0) {
			uint8_t buf[IPC_CONN_RECORD_MAX];
			memcpy(buf, payload, len);
			struct ipc_conn_record *out = (struct ipc_conn_record *)buf;
			out->id = ++s->next_relay;
			int sent_rc = s->ops->send_fds(s, to, IPC_CONN_IN, buf, len, fds, nfds);
			/* the pending bytes may hold a client's SASL token */
			sodium_memzero(buf + sizeof rec, len - sizeof rec);
			if (sent_rc == 0) {
				s->relays[s->n_relays++] = (struct sup_relay){
					.id = out->id, .from = p, .to = to, .from_id = rec.id,
					.deadline_ms = s->now_ms + SUP_RELAY_TIMEOUT_MS,
				};
				sent = true;
			} else {
				sup_post_proc(s, to, FSM_GE_QUEUE_FULL, "control channel full");
			}
		}
	}
	/* Our copies go now: the new worker holds its own (or nobody). */
	for (size_t i = 0; i < nfds; i++)
		s->ops->close(s, fds[i]);
	if (!sent)
		sup_relay_done(s, p, rec.id, IPC_ADOPT_NO);
	sup_dispatch(s);
}

void
sup_on_conn_taken(struct sup *s, struct sup_proc *p, const struct ipc_conn_ack *ack)
{
	for (size_t i = 0; i < s->n_relays; i++) {
		struct sup_relay *r = &s->relays[i];
		if (r->id != ack->id || r->to != p)
			continue;
		sup_relay_done(s, r->from, r->from_id, ack->adopted == IPC_ADOPT_YES ?
		    IPC_ADOPT_YES : IPC_ADOPT_NO);
		sup_relay_del(s, i);
		break;
	}
	/* an answer for a relay that timed out: the old worker has closed it */
	sup_dispatch(s);
}

/* A process exited: relays it was part of end now. The new worker may
 * have adopted the connection before it died (then it is closed with it)
 * or not: either way the old one must not shut it down, only close. */
void
sup_relays_proc_gone(struct sup *s, struct sup_proc *p)
{
	for (size_t i = 0; i < s->n_relays;) {
		struct sup_relay *r = &s->relays[i];
		if (r->to == p) {
			sup_relay_done(s, r->from, r->from_id, IPC_ADOPT_UNKNOWN);
			sup_relay_del(s, i);
		} else if (r->from == p) {
			sup_relay_del(s, i);  /* the new worker has it, or nobody */
		} else {
			i++;
		}
	}
}

void
sup_relays_tick(struct sup *s)
{
	for (size_t i = 0; i < s->n_relays;) {
		struct sup_relay *r = &s->relays[i];
		if (s->now_ms < r->deadline_ms) {
			i++;
			continue;
		}
		/* The new worker may still adopt it: the old one only closes its
		 * copies (IPC_ADOPT_UNKNOWN), never shuts it down under them. */
		const char *cluster = r->from ? r->from->gen->cluster->name :
		    r->to ? r->to->gen->cluster->name : "?";
		log_warn("handed-over connection: no answer in time; the old worker lets go of it",
		    "cluster=%s relay=%s", cluster, r->to ? "worker" : "new ferryd");
		sup_relay_done(s, r->from, r->from_id, IPC_ADOPT_UNKNOWN);
		sup_relay_del(s, i);
	}
}
