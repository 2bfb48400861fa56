/*
 * connlist — the connections of a cluster and its client software counts,
 * from its workers' connection tables; see connlist.h.
 */
#include "supervisor/connlist.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "common/log.h"
#include "supervisor/promfam.h"
#include "supervisor/supervisor.h"

bool
connlist_match(const struct adminproto_conn_query *q, const struct conntab_entry *e)
{
	if (q->by_client_id && (!(e->flags & CONNTAB_F_CLIENT_ID) ||
	    (e->flags & CONNTAB_F_CLIENT_ID_NULL) || strcmp(e->client_id, q->client_id) != 0))
		return false;
	if (q->by_principal && (!(e->flags & CONNTAB_F_PRINCIPAL) ||
	    strcmp(e->principal, q->principal) != 0))
		return false;
	return true;
}

/* ---- rows ----------------------------------------------------------------- */

static json_t *
str_or_null(bool present, const char *s)
{
	return present ? json_string(s) : json_null();
}

json_t *
connlist_row_json(const struct conntab_entry *e, pid_t pid, unsigned worker,
		  uint64_t generation, uint64_t now_wall_ms)
{
	char since[40];
	uint64_t start = e->since_ms > 0 ? (uint64_t)e->since_ms : 0;
	bool client_id = (e->flags & CONNTAB_F_CLIENT_ID) && !(e->flags & CONNTAB_F_CLIENT_ID_NULL);
	bool software = (e->flags & CONNTAB_F_SOFTWARE) != 0;

	clock_fmt_rfc3339(start, since, sizeof since);
	return json_pack("{s:s, s:b, s:s, s:o, s:b, s:s, s:o, s:o, s:o, s:o, s:o, s:s, s:I, "
	    "s:I, s:I, s:I, s:I}",
	    "address", e->addr,
	    "proxied", (e->flags & CONNTAB_F_PROXIED) != 0,
	    "listener", (e->flags & CONNTAB_F_BROKER) ? "broker" : "bootstrap",
	    "nodeId", (e->flags & CONNTAB_F_BROKER) ? json_integer(e->node_id) : json_null(),
	    "tls", (e->flags & CONNTAB_F_TLS) != 0,
	    "state", e->state,
	    "clientId", str_or_null(client_id, e->client_id),
	    "clientSoftwareName", str_or_null(software, e->software_name),
	    "clientSoftwareVersion", str_or_null(software, e->software_version),
	    "saslMechanism", str_or_null(e->mechanism[0] != '\0', e->mechanism),
	    "principal", str_or_null((e->flags & CONNTAB_F_PRINCIPAL) != 0, e->principal),
	    "since", since,
	    "ageSeconds", (json_int_t)(now_wall_ms > start ? (now_wall_ms - start) / 1000 : 0),
	    "pid", (json_int_t)pid,
	    "worker", (json_int_t)worker,
	    "generation", (json_int_t)generation,
	    "id", (json_int_t)e->id);
}

/* What the sort needs of a matching row; the row is read again for its
 * page. */
struct connlist_key {
	int64_t since_ms;
	pid_t pid;
	uint64_t id;
	const struct sup_proc *p;
	uint32_t row;
};

static int
key_cmp(const void *a, const void *b)
{
	const struct connlist_key *x = a, *y = b;

	if (x->since_ms != y->since_ms)
		return x->since_ms < y->since_ms ? -1 : 1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* Every live worker process of c with a connection table, any generation
 * (a draining one still has its connections). */
#define FOR_EACH_LIVE_TABLE(c, g, k, p) \
	for (const struct sup_gen *g = (c)->gens; g != NULL; g = g->next) \
		for (size_t k = 0; k < g->n_procs; k++) \
			for (const struct sup_proc *p = &g->procs[k]; p != NULL; p = NULL) \
				if (p->alive && p->conns != NULL)

json_t *
connlist_json(const struct sup_cluster *c, const struct adminproto_conn_query *q,
	      uint64_t now_wall_ms)
{
	struct connlist_key *keys = NULL;
	size_t n = 0, cap = 0;
	uint64_t unlisted = 0;
	struct conntab_entry e;
	json_t *rows = json_array(), *out = NULL;

	if (rows == NULL)
		return NULL;
	FOR_EACH_LIVE_TABLE(c, g, k, p) {
		uint32_t hwm = conntab_hwm(p->conns, p->conns_rows);

		unlisted += atomic_load_explicit(&p->conns->unlisted, memory_order_relaxed);
		for (uint32_t i = 0; i < hwm; i++) {
			if (!conntab_read(p->conns, p->conns_rows, i, &e) || !connlist_match(q, &e))
				continue;
			if (n == cap) {
				size_t ncap = cap ? cap * 2 : 256;
				struct connlist_key *nk = realloc(keys, ncap * sizeof *nk);

				if (nk == NULL)
					goto fail;
				keys = nk;
				cap = ncap;
			}
			keys[n++] = (struct connlist_key){ e.since_ms, p->pid, e.id, p, i };
		}
	}
	if (n > 1)
		qsort(keys, n, sizeof *keys, key_cmp);
	for (size_t i = q->offset; i < n && i < (size_t)q->offset + q->limit; i++) {
		const struct connlist_key *key = &keys[i];
		json_t *row;

		/* (a connection that closed since, or whose row was reused, is
		 * left out of this page) */
		if (!conntab_read(key->p->conns, key->p->conns_rows, key->row, &e) ||
		    e.id != key->id)
			continue;
		row = connlist_row_json(&e, key->pid, key->p->index, key->p->gen->generation,
		    now_wall_ms);
		if (row == NULL || json_array_append_new(rows, row) == -1)
			goto fail;
	}
	out = json_pack("{s:s, s:I, s:I, s:I, s:o, s:I, s:O}",
	    "cluster", c->name,
	    "total", (json_int_t)n,
	    "offset", (json_int_t)q->offset,
	    "limit", (json_int_t)q->limit,
	    "nextOffset", (size_t)q->offset + q->limit < n ?
	    json_integer((json_int_t)q->offset + q->limit) : json_null(),
	    "unlisted", (json_int_t)unlisted,
	    "connections", rows);
fail:
	free(keys);
	json_decref(rows);
	return out;
}

/* ---- client software counts ------------------------------------------------- */

struct connlist_soft {
	char name[CONNTAB_SOFTWARE_MAX], version[CONNTAB_SOFTWARE_MAX];
	uint64_t count;
};

static int
soft_cmp(const void *a, const void *b)
{
	const struct connlist_soft *x = a, *y = b;
	int r;

	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	if ((r = strcmp(x->name, y->name)) != 0)
		return r;
	return strcmp(x->version, y->version);
}

static void
soft_line(FILE *f, const struct sup_cluster *c, const char *name, const char *version,
	  uint64_t n)
{
	fputs("ferry_client_connections{cluster=\"", f);
	promfam_label(f, c->name);
	fputs("\",software=\"", f);
	promfam_label(f, name);
	fputs("\",version=\"", f);
	promfam_label(f, version);
	fprintf(f, "\"} %llu\n", (unsigned long long)n);
}

/* One cluster: its workers' slots merged by (name, version), the largest
 * CONNLIST_SOFTWARE_SERIES kept, the rest counted as other. */
static void
soft_cluster(FILE *f, const struct sup_cluster *c)
{
	struct connlist_soft *v = NULL;
	size_t n = 0, cap = 0;
	uint64_t other = 0, unknown = 0, invalid = 0;

	FOR_EACH_LIVE_TABLE(c, g, k, p) {
		const struct conntab *t = p->conns;

		other += atomic_load_explicit(&t->soft_other, memory_order_relaxed);
		unknown += atomic_load_explicit(&t->soft_unknown, memory_order_relaxed);
		invalid += atomic_load_explicit(&t->soft_invalid, memory_order_relaxed);
		/* no open connection: no slot counts any (and a read of the slots
		 * would allocate the block's second page for an idle worker) */
		if (!atomic_load_explicit(&t->used, memory_order_relaxed) &&
		    !atomic_load_explicit(&t->unlisted, memory_order_relaxed))
			continue;
		for (unsigned s = 0; s < CONNTAB_SOFTWARE; s++) {
			struct connlist_soft one;
			size_t j;

			if (!conntab_soft_read(t, s, one.name, one.version, &one.count))
				continue;
			for (j = 0; j < n; j++)
				if (strcmp(v[j].name, one.name) == 0 &&
				    strcmp(v[j].version, one.version) == 0)
					break;
			if (j < n) {
				v[j].count += one.count;
				continue;
			}
			if (n == cap) {
				size_t ncap = cap ? cap * 2 : 32;
				struct connlist_soft *nv = realloc(v, ncap * sizeof *nv);

				if (nv == NULL) {
					other += one.count;
					continue;
				}
				v = nv;
				cap = ncap;
			}
			v[n++] = one;
		}
	}
	if (n > 1)
		qsort(v, n, sizeof *v, soft_cmp);
	for (size_t i = 0; i < n; i++) {
		if (i < CONNLIST_SOFTWARE_SERIES)
			soft_line(f, c, v[i].name, v[i].version, v[i].count);
		else
			other += v[i].count;
	}
	/* (a valid pair always has a version: these never collide with one) */
	soft_line(f, c, "other", "", other);
	soft_line(f, c, "unknown", "", unknown);
	soft_line(f, c, "invalid", "", invalid);
	free(v);
}

void
connlist_metrics(FILE *f, struct sup *s)
{
	fputs("# HELP ferry_client_connections Open client connections by client software "
	    "(ApiVersions v3+ name and version; the 32 largest per cluster, the rest as "
	    "other; unknown: none sent; invalid: not Kafka's format)\n"
	    "# TYPE ferry_client_connections gauge\n", f);
	for (size_t i = 0; i < s->n_clusters; i++)
		soft_cluster(f, s->clusters[i]);
}
