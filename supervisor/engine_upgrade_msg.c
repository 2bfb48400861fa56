/*
 * engine_upgrade_msg — the upgrade channel's messages in the engine
 * (docs/design.md §11): each one turned into an event of the machines
 * (engine_upgrade.c), the predecessor's counters taken over, and the
 * connections relayed between the two supervisors — an old worker's
 * CONN_OUT goes to the successor as UPG_CONN, the successor gives it to its
 * least loaded worker (CONN_IN) and the outcome travels back the same way
 * (UPG_CONN_DONE, CONN_DONE). Part of the engine (engine_priv.h); pure.
 */
#include "supervisor/engine_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include <jansson.h>

#include "common/log.h"
#include "supervisor/staterec.h"
#include "supervisor/upgrade.h"
#include "supervisor/upgproto.h"

/* ---- messages --------------------------------------------------------------------- */

/* Predecessor: HELLO. */
static void
upg_on_hello(struct sup *s, struct sup_upgrade *u, const struct ipc_msg *msg)
{
	struct upg_hello h;
	char err[400];
	memset(&h, 0, sizeof h);
	memcpy(&h, msg->payload, msg->hdr.len < sizeof h ? msg->hdr.len : sizeof h);
	h.version[sizeof h.version - 1] = 0;
	h.build_id[sizeof h.build_id - 1] = 0;
	h.reason[sizeof h.reason - 1] = 0;
	if (msg->hdr.len == sizeof h) {
		snprintf(u->peer_version, sizeof u->peer_version, "%s", h.version);
		snprintf(u->peer_build, sizeof u->peer_build, "%s", h.build_id);
	}
	if (upg_hello_check(&h, msg->hdr.len, STATEREC_MIN, STATEREC_MAX, err, sizeof err) == -1) {
		sup_post_upgrade(s, UPG_OE_REFUSED, err);
		return;
	}
	u->record = h.record;
	u->conn_min = h.conn_min;
	u->conn_max = h.conn_max;
	log_info("upgrade: the new ferryd accepts", "to_version=%s to_build=%s record=%u "
	    "conn_records=%u..%u", u->peer_version, u->peer_build, h.record, h.conn_min,
	    h.conn_max);
	sup_post_upgrade(s, UPG_OE_HELLO, "");
}

/* A JSON {"errors":[...]} of the other side, into u's errors. */
static void
upg_take_errors(struct sup_upgrade *u, const struct ipc_msg *msg, const char *prefix)
{
	json_t *j = json_loadb((const char *)msg->payload, msg->hdr.len, 0, NULL), *v;
	size_t i;
	json_array_foreach(json_object_get(j, "errors"), i, v)
		if (json_is_string(v))
			upgrade_error(u, "%s%s", prefix, json_string_value(v));
	if (!u->errors)
		upgrade_error(u, "%s(no reason given)", prefix);
	json_decref(j);
}

static void
upg_on_counters(struct sup *s, const struct ipc_msg *msg)
{
	char name[CFG_NAME_MAX], err[160];
	struct metrics m;
	if (staterec_counters_msg_read((const char *)msg->payload, msg->hdr.len, name, sizeof name,
	    &m, err, sizeof err) == -1) {
		log_warn("upgrade: counters of the old ferryd not understood", "error=\"%s\"", err);
		return;
	}
	struct sup_cluster *c = sup_find_cluster(s, name);
	if (!c)
		return;  /* a cluster this configuration does not have */
	if (!c->carried && !(c->carried = metrics_totals_new())) {
		log_warn("upgrade: counters of the old ferryd not kept: out of memory", "cluster=%s",
		    c->name);
		return;
	}
	memcpy(c->carried, &m, sizeof m);
	c->carried_gauges = true;
}

/* Successor: a connection of the predecessor's old worker. */
static void
upg_on_conn(struct sup *s, struct ipc_msg *msg)
{
	struct upg_conn h;
	memcpy(&h, msg->payload, sizeof h);
	h.cluster[sizeof h.cluster - 1] = 0;
	const uint8_t *rec = msg->payload + sizeof h;
	size_t len = msg->hdr.len - sizeof h, nfds = msg->nfds;
	struct ipc_conn_record r;
	char err[160];
	struct sup_cluster *c = sup_find_cluster(s, h.cluster);
	struct sup_proc *to = NULL;
	if (ipc_conn_record_check(rec, len, nfds, &r, err, sizeof err) == -1)
		log_warn("upgrade: connection record not adopted", "cluster=%s error=\"%s\"",
		    h.cluster, err);
	else if (c && c->st == FSM_C_ACTIVE && (c->ccfg && c->ccfg->cl->handover))
		to = sup_handover_target(c, NULL);
	bool sent = false;
	if (to && sup_relay_room(s) == 0) {
		uint8_t buf[IPC_CONN_RECORD_MAX];
		memcpy(buf, rec, len);
		struct ipc_conn_record *out = (struct ipc_conn_record *)buf;
		out->id = ++s->next_relay;
		if (s->ops->send_fds(s, to, IPC_CONN_IN, buf, len, msg->fds, nfds) == 0) {
			s->relays[s->n_relays++] = (struct sup_relay){
				.id = out->id, .from = NULL, .to = to, .from_id = h.id,
				.deadline_ms = s->now_ms + SUP_RELAY_TIMEOUT_MS,
			};
			sent = true;
		} else {
			sup_post_proc(s, to, FSM_GE_QUEUE_FULL, "control channel full");
		}
		/* the pending bytes may hold a client's SASL token */
		sodium_memzero(buf, len);
	}
	ipc_close_fds(msg);  /* our copies: the worker has its own, or nobody */
	if (!sent)
		upgrade_relay_answer(s, h.id, IPC_ADOPT_NO);
}

void
upgrade_relay_answer(struct sup *s, uint64_t peer_id, uint32_t adopted)
{
	if (!s->upgrade || !s->upgrade->peer_open)
		return;
	struct ipc_conn_ack ack = { .id = peer_id, .adopted = adopted };
	upgrade_ops(s)->send(s, UPG_CONN_DONE, &ack, sizeof ack);
}

void
sup_on_upgrade_msg(struct sup *s, struct ipc_msg *msg)
{
	struct sup_upgrade *u = s->upgrade;
	uint32_t t = msg->hdr.type;
	if (!u) {
		ipc_close_fds(msg);
		return;
	}
	if (!u->successor) {
		switch (t) {
		case UPG_HELLO:
			if (u->st == UPG_O_SPAWNING)
				upg_on_hello(s, u, msg);
			break;
		case UPG_VALID:
			sup_post_upgrade(s, UPG_OE_VALID, "");
			break;
		case UPG_INVALID:
			upg_take_errors(u, msg, "");
			sup_post_upgrade(s, UPG_OE_REFUSED, "");
			break;
		case UPG_PREPARED:
			sup_post_upgrade(s, UPG_OE_PREPARED, "");
			break;
		case UPG_PREPARE_FAILED:
			upg_take_errors(u, msg, "new ferryd: ");
			sup_post_upgrade(s, UPG_OE_FAILED, "");
			break;
		case UPG_COMMITTED:
			sup_post_upgrade(s, UPG_OE_COMMITTED, "");
			break;
		case UPG_CONN_DONE: {
			struct ipc_conn_ack ack;
			memcpy(&ack, msg->payload, sizeof ack);
			for (size_t i = 0; i < s->n_relays; i++) {
				struct sup_relay *r = &s->relays[i];
				if (r->to || r->id != ack.id)
					continue;
				sup_relay_done(s, r->from, r->from_id, ack.adopted);
				s->relays[i] = s->relays[--s->n_relays];
				break;
			}
			break;
		}
		case UPG_STOP:
			sup_post_upgrade(s, UPG_OE_HURRY, "the new ferryd is stopping");
			break;
		default: {
			char why[96];
			snprintf(why, sizeof why, "the new ferryd sent an unexpected %s",
			    upg_type_str(t));
			sup_post_upgrade(s, UPG_OE_FAILED, why);
			break;
		}
		}
	} else {
		switch (t) {
		case UPG_COUNTERS:
			if (upg_in_step((enum upg_istate)u->st, UPG_IE_COUNTERS).allowed)
				upg_on_counters(s, msg);
			break;
		case UPG_COMMIT: {
			json_t *j = json_loadb((const char *)msg->payload, msg->hdr.len, 0, NULL);
			if (json_is_true(json_object_get(j, "hupPending")))
				s->hup_pending = true;
			const char *src = json_string_value(json_object_get(j, "source"));
			if (src)
				snprintf(u->source, sizeof u->source, "%s", src);
			json_t *at = json_object_get(j, "startedAt");
			if (json_is_integer(at) && json_integer_value(at) > 0)
				u->started_wall = (uint64_t)json_integer_value(at);
			json_decref(j);
			sup_post_upgrade(s, UPG_IE_COMMIT, "");
			break;
		}
		case UPG_MAIN:
			sup_post_upgrade(s, UPG_IE_MAIN, "");
			break;
		case UPG_CONN:
			if (u->st == UPG_I_COMMITTED || u->st == UPG_I_TAIL) {
				upg_on_conn(s, msg);
			} else {
				struct upg_conn h;
				memcpy(&h, msg->payload, sizeof h);
				ipc_close_fds(msg);
				upgrade_relay_answer(s, h.id, IPC_ADOPT_NO);
			}
			break;
		case UPG_BYE: {
			json_t *j = json_loadb((const char *)msg->payload, msg->hdr.len, 0, NULL);
			json_t *h = json_object_get(j, "handedOver"), *c = json_object_get(j, "closed");
			json_t *f = json_object_get(j, "forced");
			if (json_is_integer(h) && json_is_integer(c) && json_is_integer(f)) {
				u->tail_valid = true;
				u->handed_over = (uint64_t)json_integer_value(h);
				u->drained = (uint64_t)json_integer_value(c);
				u->forced = (uint64_t)json_integer_value(f);
			}
			json_decref(j);
			sup_post_upgrade(s, UPG_IE_BYE, "");
			break;
		}
		default: {
			char why[96];
			snprintf(why, sizeof why, "the old ferryd sent an unexpected %s",
			    upg_type_str(t));
			sup_post_upgrade(s, UPG_IE_PEER_GONE, why);
			break;
		}
		}
	}
	ipc_close_fds(msg);
	sup_dispatch(s);
}

void
sup_on_upgrade_gone(struct sup *s, const char *why)
{
	struct sup_upgrade *u = s->upgrade;
	if (!u)
		return;
	if (u->successor)
		sup_post_upgrade(s, UPG_IE_PEER_GONE, why);
	else if (upg_ostate_precommit((enum upg_ostate)u->st))
		sup_post_upgrade(s, UPG_OE_FAILED, why);
	else
		sup_post_upgrade(s, UPG_OE_PEER_GONE, why);
	sup_dispatch(s);
}

bool
upgrade_relay_out(struct sup *s, struct sup_proc *p, const struct ipc_conn_record *rec,
		  const void *payload, size_t len, const int *fds, size_t nfds)
{
	struct sup_upgrade *u = s->upgrade;
	if (!u || u->successor || u->st != UPG_O_HANDING_OVER)
		return false;
	bool sent = false;
	if (u->peer_open && p->gen->handover_keep) {
		uint8_t *buf = sup_relay_room(s) == 0 ? malloc(sizeof(struct upg_conn) + len) : NULL;
		if (buf) {
			struct upg_conn h = { .id = ++s->next_relay };
			snprintf(h.cluster, sizeof h.cluster, "%s", p->gen->cluster->name);
			memcpy(buf, &h, sizeof h);
			memcpy(buf + sizeof h, payload, len);
			if (upgrade_ops(s)->send_conn(s, buf, sizeof h + len, fds, nfds) == 0) {
				s->relays[s->n_relays++] = (struct sup_relay){
					.id = h.id, .from = p, .to = NULL, .from_id = rec->id,
					.deadline_ms = s->now_ms + SUP_UPGRADE_RELAY_MS,
				};
				sent = true;
			}
			/* the pending bytes may hold a client's SASL token */
			sodium_memzero(buf, sizeof h + len);
			free(buf);
		}
	}
	for (size_t i = 0; i < nfds; i++)
		s->ops->close(s, fds[i]);
	if (!sent)
		sup_relay_done(s, p, rec->id, IPC_ADOPT_NO);
	sup_dispatch(s);
	return true;
}
