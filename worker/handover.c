/*
 * handover — pure decisions of a connection leaving its generation; see
 * handover.h.
 */
#include "worker/handover.h"

#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

/* The client part holds clientinfo's values whole. */
_Static_assert(IPC_CONN_CLIENT_ID_MAX == CI_CLIENT_ID_MAX + 1, "client id size");
_Static_assert(IPC_CONN_SOFTWARE_MAX == CI_SOFTWARE_MAX + 1, "software size");
_Static_assert(IPC_CONN_PRINCIPAL_MAX == CI_PRINCIPAL_MAX + 1, "principal size");
_Static_assert(IPC_CONN_MECH_MAX == CI_MECH_MAX + 1, "mechanism size");

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
	r->version = IPC_CONN_RECORD_V1;  /* handover_client_encode makes it 2 */
}

void
handover_client_encode(struct ipc_conn_record *r, struct ipc_conn_client *out,
		       const struct handover_client *hc)
{
	const struct ci_info *ci = &hc->ci;

	memset(out, 0, sizeof *out);
	r->version = IPC_CONN_RECORD_VERSION;
	out->since_ms = hc->since_ms;
	out->age_ms = hc->age_ms;
	out->age_rnd = hc->age_rnd;
	if (hc->addr.ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)&hc->addr;

		out->family = AF_INET;
		out->port = ntohs(a->sin_port);
		memcpy(out->addr, &a->sin_addr, 4);
	} else if (hc->addr.ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&hc->addr;

		out->family = AF_INET6;
		out->port = ntohs(a->sin6_port);
		memcpy(out->addr, &a->sin6_addr, 16);
	}
	out->flags = (hc->proxied ? IPC_CONN_C_PROXIED : 0) |
	    (ci->client_id_seen ? IPC_CONN_C_CLIENT_ID : 0) |
	    (ci->client_id_null ? IPC_CONN_C_CLIENT_ID_NULL : 0) |
	    (ci->client_id_cut ? IPC_CONN_C_CLIENT_ID_CUT : 0) |
	    (ci->software_seen ? IPC_CONN_C_SOFTWARE : 0) |
	    (ci->software_valid ? IPC_CONN_C_SOFTWARE_VALID : 0) |
	    (ci->software_cut ? IPC_CONN_C_SOFTWARE_CUT : 0) |
	    (ci->principal_seen ? IPC_CONN_C_PRINCIPAL : 0) |
	    (ci->principal_cut ? IPC_CONN_C_PRINCIPAL_CUT : 0) |
	    (ci->sasl_first_pending ? IPC_CONN_C_SASL_FIRST : 0);
	out->mech = (uint32_t)ci->mech;
	/* (the sizes match: the static asserts above) */
	memcpy(out->mech_name, ci->mech_name, sizeof out->mech_name);
	memcpy(out->client_id, ci->client_id, sizeof out->client_id);
	memcpy(out->software_name, ci->software_name, sizeof out->software_name);
	memcpy(out->software_version, ci->software_version, sizeof out->software_version);
	memcpy(out->principal, ci->principal, sizeof out->principal);
}

/* A checked client part back into hc. */
static void
handover_client_decode(const struct ipc_conn_client *in, struct handover_client *hc)
{
	struct ci_info *ci = &hc->ci;
	uint32_t f = in->flags;

	memset(hc, 0, sizeof *hc);
	ci_init(ci);
	hc->since_ms = in->since_ms;
	hc->age_ms = in->age_ms;
	hc->age_rnd = in->age_rnd;
	hc->proxied = (f & IPC_CONN_C_PROXIED) != 0;
	if (in->family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&hc->addr;

		a->sin_family = AF_INET;
		a->sin_port = htons(in->port);
		memcpy(&a->sin_addr, in->addr, 4);
	} else if (in->family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&hc->addr;

		a->sin6_family = AF_INET6;
		a->sin6_port = htons(in->port);
		memcpy(&a->sin6_addr, in->addr, 16);
	}
	ci->client_id_seen = (f & IPC_CONN_C_CLIENT_ID) != 0;
	ci->client_id_null = (f & IPC_CONN_C_CLIENT_ID_NULL) != 0;
	ci->client_id_cut = (f & IPC_CONN_C_CLIENT_ID_CUT) != 0;
	ci->software_seen = (f & IPC_CONN_C_SOFTWARE) != 0;
	ci->software_valid = (f & IPC_CONN_C_SOFTWARE_VALID) != 0;
	ci->software_cut = (f & IPC_CONN_C_SOFTWARE_CUT) != 0;
	ci->principal_seen = (f & IPC_CONN_C_PRINCIPAL) != 0;
	ci->principal_cut = (f & IPC_CONN_C_PRINCIPAL_CUT) != 0;
	ci->sasl_first_pending = (f & IPC_CONN_C_SASL_FIRST) != 0;
	ci->mech = (enum sasl_mech)in->mech;
	memcpy(ci->mech_name, in->mech_name, sizeof ci->mech_name);
	memcpy(ci->client_id, in->client_id, sizeof ci->client_id);
	memcpy(ci->software_name, in->software_name, sizeof ci->software_name);
	memcpy(ci->software_version, in->software_version, sizeof ci->software_version);
	memcpy(ci->principal, in->principal, sizeof ci->principal);
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
	if (r->version >= IPC_CONN_RECORD_VERSION) {
		struct ipc_conn_client cc;

		memcpy(&cc, (const uint8_t *)payload + sizeof *r, sizeof cc);
		if (ipc_conn_client_check(&cc, err, errlen) == -1)
			return -1;
		if (cc.mech >= SASL_MECH_COUNT) {
			snprintf(err, errlen, "connection record: SASL mechanism %u", cc.mech);
			return -1;
		}
		handover_client_decode(&cc, &out->client);
		out->has_client = true;
	}
	out->open = (r->flags & IPC_CONN_F_UPSTREAM) != 0;
	out->seen_request = r->requests > 0;
	out->pending = (const uint8_t *)payload + ipc_conn_record_head(r);
	return 0;
}
