/*
 * conn_peer — who a client connection is and since when: its real address
 * (the socket's peer, or what a PROXY protocol header said), what the
 * client says of itself (worker/kafka/clientinfo.h, read by frame.c), its
 * age against connection_max_age, and the row the supervisor lists it by
 * (common/conntab.h) with its client software count.
 *
 * The row is rewritten whole when any of that changes: at accept, at each
 * lifecycle transition, after the PROXY header, when the client's info
 * changed (once or twice per connection: its first request, ApiVersions,
 * SASL). Nothing here is on the per-request path.
 *
 * A password or token is never kept: clientinfo keeps the asserted name
 * only (never a byte of a PLAIN token after its second NUL, never an
 * OAUTHBEARER or GSSAPI token), and that is all a row or a log line holds.
 */
#include "worker/conn_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tls.h"

void
conn_peer_init(struct conn *c)
{
	struct worker *w = c->w;
	socklen_t sl = sizeof c->peer;

	if (getpeername(c->cli.fd, (struct sockaddr *)&c->peer, &sl) == -1)
		memset(&c->peer, 0, sizeof c->peer);
	conntab_fmt_addr((const struct sockaddr *)&c->peer, c->addr, sizeof c->addr);
	c->id = ++w->conn_serial;
	c->born = ev_now(w->loop);
	c->born_wall_ms = (int64_t)clock_wall_ms();
	c->age_rnd = arc4random();
	c->row = conntab_take(&w->ct);
	c->soft = CONNTAB_B_UNKNOWN;
	conntab_soft_add(&w->ct, c->soft);
	conn_peer_publish(c);
}

void
conn_peer_set(struct conn *c, const struct sockaddr *sa)
{
	if (!c->proxied)
		memcpy(c->via, c->addr, sizeof c->via);
	c->proxied = true;
	if (sa->sa_family == AF_INET)
		memcpy(&c->peer, sa, sizeof(struct sockaddr_in));
	else if (sa->sa_family == AF_INET6)
		memcpy(&c->peer, sa, sizeof(struct sockaddr_in6));
	else
		return;
	conntab_fmt_addr(sa, c->addr, sizeof c->addr);
	conn_peer_publish(c);
}

void
conn_peer_adopted(struct conn *c, const struct handover_client *hc)
{
	struct worker *w = c->w;
	ev_tstamp now = ev_now(w->loop);

	if (hc->addr.ss_family != 0)
		conn_peer_set(c, (const struct sockaddr *)&hc->addr);
	c->proxied = hc->proxied;
	if (!c->proxied)
		c->via[0] = '\0';
	c->born_wall_ms = hc->since_ms;
	/* its age goes on from where the old worker left it */
	c->born = now - (ev_tstamp)hc->age_ms / 1000.0;
	c->age_rnd = hc->age_rnd;
	c->fr.ci = hc->ci;
	conn_peer_client_info(c);
}

/* The node id a broker connection serves (listener or SNI name). */
static bool
conn_peer_node(const struct conn *c, int32_t *node_id)
{
	const struct worker *w = c->w;

	if (c->sni_broker) {
		*node_id = c->sni_node_id;
		return true;
	}
	if (c->broker_index >= 0 && (size_t)c->broker_index < w->cl->n_brokers) {
		*node_id = w->cl->node_ids[c->broker_index];
		return true;
	}
	return false;
}

void
conn_peer_publish(struct conn *c)
{
	struct worker *w = c->w;
	const struct ci_info *ci = &c->fr.ci;
	struct conntab_entry e;

	if (c->row < 0)
		return;
	memset(&e, 0, sizeof e);
	e.id = c->id;
	e.since_ms = c->born_wall_ms;
	e.node_id = -1;
	if (conn_peer_node(c, &e.node_id))
		e.flags |= CONNTAB_F_BROKER;
	if (w->tls_server)
		e.flags |= CONNTAB_F_TLS;
	if (c->proxied)
		e.flags |= CONNTAB_F_PROXIED;
	if (ci->client_id_seen)
		e.flags |= CONNTAB_F_CLIENT_ID | (ci->client_id_null ? CONNTAB_F_CLIENT_ID_NULL : 0);
	if (ci->software_seen)
		e.flags |= CONNTAB_F_SOFTWARE | (ci->software_valid ? CONNTAB_F_SOFTWARE_VALID : 0);
	if (ci->principal_seen)
		e.flags |= CONNTAB_F_PRINCIPAL;
	snprintf(e.addr, sizeof e.addr, "%s", c->addr);
	snprintf(e.state, sizeof e.state, "%s", conn_fsm_state_str(c->state));
	snprintf(e.client_id, sizeof e.client_id, "%s", ci->client_id);
	snprintf(e.software_name, sizeof e.software_name, "%s", ci->software_name);
	snprintf(e.software_version, sizeof e.software_version, "%s", ci->software_version);
	if (ci->mech != SASL_MECH_NONE)
		snprintf(e.mechanism, sizeof e.mechanism, "%s", ci->mech_name);
	if (ci->principal_seen)
		snprintf(e.principal, sizeof e.principal, "%s", ci->principal);
	conntab_put(&w->ct, c->row, &e);
}

void
conn_peer_client_info(struct conn *c)
{
	struct worker *w = c->w;
	const struct ci_info *ci = &c->fr.ci;

	c->fr.ci_changed = false;
	c->soft = conntab_soft_move(&w->ct, c->soft, ci->software_seen, ci->software_valid,
	    ci->software_name, ci->software_version);
	conn_peer_publish(c);
	/* one debug line each time it says something new of itself */
	unsigned said = (ci->client_id_seen ? 1u : 0) | (ci->software_seen ? 2u : 0) |
	    (ci->mech != SASL_MECH_NONE ? 4u : 0) | (ci->principal_seen ? 8u : 0);
	if ((said & ~c->said) == 0)
		return;
	c->said |= said;
	if (log_enabled(LOG_DEBUG)) {
		char who[2 * CONNTAB_ADDR_MAX + CONN_PEER_MAX];

		conn_peer_desc(c, who, sizeof who);
		log_debug("client", "%s client_id=\"%s\" software=\"%s/%s\" mechanism=\"%s\" "
		    "principal=\"%s\"", who, ci->client_id_null ? "(null)" : ci->client_id,
		    ci->software_name, ci->software_version, ci->mech_name, ci->principal);
	}
}

void
conn_peer_release(struct conn *c)
{
	struct worker *w = c->w;

	if (c->row == CONN_ROW_GONE)
		return;
	conntab_release(&w->ct, c->row);
	c->row = CONN_ROW_GONE;
	conntab_soft_drop(&w->ct, c->soft);
	c->soft = CONNTAB_B_NONE;
}

void
conn_peer_desc(const struct conn *c, char *buf, size_t len)
{
	int n = snprintf(buf, len, "client=%s", c->addr);

	if (n > 0 && (size_t)n < len && c->proxied)
		n += snprintf(buf + n, len - (size_t)n, " via=%s", c->via);
	/* a client certificate's subject says who it is too */
	SSL *ssl = transport_is_tls(&c->cli) ? transport_tls_ssl(&c->cli) : NULL;
	if (n > 0 && (size_t)n < len && ssl && SSL_get0_peer_certificate(ssl)) {
		char subject[CONN_PEER_MAX];

		transport_peer(&c->cli, subject, sizeof subject);
		snprintf(buf + n, len - (size_t)n, " subject=\"%s\"", subject);
	}
}

/* ---- connection_max_age ---------------------------------------------------- */

void
conn_age_arm(struct conn *c)
{
	const struct cfg_cluster *cl = c->w->cl;

	c->expire_at = 0;
	if (!cl->max_age_ms)
		return;
	/* uniform in [max_age - jitter, max_age], drawn once per connection
	 * (and kept across a handover) */
	uint64_t cut = (cl->max_age_jitter_ms * (uint64_t)c->age_rnd) >> 32;
	c->expire_at = c->born + (ev_tstamp)(cl->max_age_ms - cut) / 1000.0;
	conn_timer_due(c, c->expire_at);
}

void
conn_age_expire(struct conn *c)
{
	if (!conn_event(c, CONN_E_EXPIRE))
		return;
	log_debug("connection expiring", "client=%s age_ms=%.0f", c->addr,
	    (ev_now(c->w->loop) - c->born) * 1000.0);
	conn_step(c, false, false);
}

int
conn_drained(struct conn *c)
{
	struct worker *w = c->w;

	if (c->state == CONN_OPEN_EXPIRING) {
		METRIC_ADD(w->m, connections_expired, 1);
		return conn_end(c, "connection_max_age reached after %.0f ms",
		    (ev_now(w->loop) - c->born) * 1000.0);
	}
	METRIC_ADD(w->m, connections_drained, 1);
	return conn_end(c, "drained");
}
