/*
 * handover — pure decisions of a connection leaving its generation; see
 * handover.h.
 */
#include "worker/handover.h"

#include <stdio.h>
#include <string.h>

const char *
handover_exit_str(enum handover_exit e)
{
	switch (e) {
	case HANDOVER_EXIT_NONE: return "none";
	case HANDOVER_EXIT_DRAIN: return "drain";
	case HANDOVER_EXIT_HANDOVER: return "handover";
	case HANDOVER_EXIT_SPREAD: return "spread";
	}
	return "unknown";
}

const char *
handover_step_str(enum handover_step s)
{
	switch (s) {
	case HANDOVER_WAIT: return "wait";
	case HANDOVER_NOW: return "now";
	case HANDOVER_DRAIN: return "drain";
	}
	return "unknown";
}

enum handover_step
handover_decide(const struct handover_view *v)
{
	/* A boundary first: every response owed delivered, both write
	 * buffers flushed, no rewrite in progress, no request frame half
	 * read (the data path finishes it and forwards it). */
	if (v->owes || v->frame_partial)
		return HANDOVER_WAIT;
	/* What cannot continue elsewhere: a half-closed client (its FIN is
	 * consumed here; the drain path serves what it sent and closes), an
	 * upstream that closed, bytes the upstream sent unasked (the data path
	 * closes such a connection), a TLS session, pending bytes that do not
	 * fit the record. */
	if (v->cli_eof || v->up_eof || !v->movable || v->pending > IPC_CONN_PENDING_MAX)
		return HANDOVER_DRAIN;
	if (v->upstream_open && v->resp_unparsed)
		return HANDOVER_DRAIN;
	/* Open both ways, or not connected upstream yet (the new worker
	 * connects as a fresh connection would; everything read so far is
	 * unparsed and travels as pending bytes). */
	return HANDOVER_NOW;
}

uint64_t
handover_spread_window(uint64_t spread_ms, uint64_t deadline_ms)
{
	uint64_t cap = deadline_ms - deadline_ms / 4;
	return spread_ms < cap ? spread_ms : cap;
}

uint64_t
handover_spread_offset(uint64_t window_ms, uint32_t rnd)
{
	return (window_ms * (uint64_t)rnd) >> 32;
}

void
handover_record_init(struct ipc_conn_record *r, uint64_t id, int broker_index,
		     size_t upstream_try, bool has_upstream, uint64_t requests, size_t pending,
		     uint32_t sasl)
{
	memset(r, 0, sizeof *r);
	r->id = id;
	r->broker_index = broker_index;
	r->flags = has_upstream ? IPC_CONN_F_UPSTREAM : 0;
	r->upstream_try = (int32_t)upstream_try;
	r->sasl = sasl;  /* sasl_encode(): opaque here */
	r->requests = requests;
	r->pending_len = (uint32_t)pending;
	r->version = IPC_CONN_RECORD_VERSION;
}

int
handover_adopt_plan(const void *payload, size_t len, size_t nfds, size_t n_brokers,
		    size_t n_upstream, uint64_t n_conns, uint64_t max_conns,
		    struct handover_adopt *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof *out);
	if (ipc_conn_record_check(payload, len, nfds, &out->rec, err, errlen) == -1)
		return -1;
	const struct ipc_conn_record *r = &out->rec;
	if (r->broker_index >= 0 && (size_t)r->broker_index >= n_brokers) {
		snprintf(err, errlen, "connection record: broker index %d, the cluster has %zu",
		    r->broker_index, n_brokers);
		return -1;
	}
	if (r->broker_index < 0 && (size_t)r->upstream_try >= n_upstream) {
		snprintf(err, errlen, "connection record: upstream %d, the cluster has %zu",
		    r->upstream_try, n_upstream);
		return -1;
	}
	if (n_conns >= max_conns) {
		snprintf(err, errlen, "max_connections (%llu) reached",
		    (unsigned long long)max_conns);
		return -1;
	}
	if (sasl_decode(r->sasl, &out->sasl, err, errlen) == -1)
		return -1;
	out->open = (r->flags & IPC_CONN_F_UPSTREAM) != 0;
	out->seen_request = r->requests > 0;
	out->pending = (const uint8_t *)payload + sizeof *r;
	return 0;
}
