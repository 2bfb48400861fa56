/*
 * plan — reload diff and plan; see plan.h.
 */
#include "supervisor/plan.h"

#include <arpa/inet.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/units.h"

const char *
plan_op_str(enum plan_op op)
{
	switch (op) {
	case PLAN_KEEP: return "keep";
	case PLAN_ADD: return "add";
	case PLAN_MODIFY: return "modify";
	case PLAN_REMOVE: return "remove";
	}
	return "unknown";
}

/* Files [first, last) of cl: each as its key, its length and its bytes. */
static void
plan_hash_files(crypto_hash_sha256_state *st, const struct cfg_cluster *cl, int first, int last)
{
	for (int i = first; cl->files && i < last; i++) {
		const char *key = cfg_tls_file_key((enum cfg_tls_file)i);
		uint64_t n = cl->files->len[i];
		crypto_hash_sha256_update(st, (const unsigned char *)key, strlen(key) + 1);
		crypto_hash_sha256_update(st, (const unsigned char *)&n, sizeof n);
		if (n)
			crypto_hash_sha256_update(st, (const unsigned char *)cl->files->data[i], n);
	}
}

int
plan_cluster_version(const struct cfg_cluster *cl, char *out, size_t outlen)
{
	char *text = cfg_cluster_canonical(cl);
	if (!text)
		return -1;
	/* The contents of every referenced file (TLS material) after the
	 * canonical text: a renewed certificate is a modified cluster. */
	unsigned char h[crypto_hash_sha256_BYTES];
	crypto_hash_sha256_state st;
	crypto_hash_sha256_init(&st);
	crypto_hash_sha256_update(&st, (const unsigned char *)text, strlen(text));
	free(text);
	plan_hash_files(&st, cl, 0, CFG_TLS_FILES);
	crypto_hash_sha256_final(&st, h);
	char hex[2 * crypto_hash_sha256_BYTES + 1];
	sodium_bin2hex(hex, sizeof hex, h, sizeof h);
	snprintf(out, outlen, "sha256:%s", hex);
	return 0;
}

int
plan_upstream_key(const struct cfg_cluster *cl, char *out, size_t outlen)
{
	crypto_hash_sha256_state st;
	crypto_hash_sha256_init(&st);
	for (size_t i = 0; i < cl->n_upstream; i++) {
		char a[CFG_HOST_MAX + 16];
		units_fmt_addr(&cl->upstream[i], a, sizeof a);
		crypto_hash_sha256_update(&st, (const unsigned char *)a, strlen(a) + 1);
	}
	/* How the brokers are reached and spoken to: the dial map and the
	 * upstream TLS settings and files. A change means the connections of
	 * the old configuration are not ones the new one would make. ferry's
	 * own SASL credentials are not part of it: clients authenticate
	 * themselves, and the brokers learned stay the same brokers. */
	for (size_t i = 0; i < cl->n_dial_map; i++) {
		char a[2 * CFG_HOST_MAX + 40], f[CFG_HOST_MAX + 16], t[CFG_HOST_MAX + 16];
		units_fmt_addr(&cl->dial_map[i].from, f, sizeof f);
		units_fmt_addr(&cl->dial_map[i].to, t, sizeof t);
		snprintf(a, sizeof a, "dial %s=%s", f, t);
		crypto_hash_sha256_update(&st, (const unsigned char *)a, strlen(a) + 1);
	}
	if (cl->upstream_tls) {
		char a[3 * CFG_PATH_MAX + 64];
		snprintf(a, sizeof a, "tls verify=%d ca=%s cert=%s key=%s", cl->upstream_tls_verify,
		    cl->upstream_ca, cl->upstream_cert, cl->upstream_key);
		crypto_hash_sha256_update(&st, (const unsigned char *)a, strlen(a) + 1);
		plan_hash_files(&st, cl, CFG_TLS_F_UPSTREAM_CA, CFG_TLS_F_UPSTREAM_KEY + 1);
	}
	unsigned char h[crypto_hash_sha256_BYTES];
	crypto_hash_sha256_final(&st, h);
	char hex[2 * crypto_hash_sha256_BYTES + 1];
	sodium_bin2hex(hex, sizeof hex, h, sizeof h);
	snprintf(out, outlen, "sha256:%s", hex);
	return 0;
}

static bool
plan_addr_eq(const struct cfg_addr *a, const struct cfg_addr *b)
{
	return a->port == b->port && strcmp(a->host, b->host) == 0;
}

bool
plan_same_listeners(const struct cfg_cluster *a, const struct cfg_cluster *b)
{
	return plan_addr_eq(&a->bootstrap, &b->bootstrap) &&
	       a->gateway == b->gateway &&   /* per-broker ports or one SNI port */
	       a->broker_port_first == b->broker_port_first &&
	       a->broker_port_last == b->broker_port_last;
}

static void
plan_restart_key(const struct cfg *next, struct cfg_errors *errs, const char *key,
		 const char *was, const char *now)
{
	int line = cfg_ferry_key_line(next, key);
	if (line == 0)
		line = next->ferry_line;
	if (line > 0)
		cfg_errors_add(errs, "%s:%d: %s cannot change without restarting ferryd "
		    "(running: %s, new: %s)", next->path, line, key, was, now);
	else
		cfg_errors_add(errs, "%s: %s cannot change without restarting ferryd "
		    "(running: %s, new: %s; it is set by default when [ferry] omits it)",
		    next->path, key, was, now);
}

size_t
plan_check_restart_keys(const struct cfg *running, const struct cfg *next,
			struct cfg_errors *errs)
{
	size_t n0 = errs->n;
	if (strcmp(running->control_socket, next->control_socket) != 0)
		plan_restart_key(next, errs, "control_socket", running->control_socket,
		    next->control_socket);
	if (running->admin_enabled != next->admin_enabled ||
	    (running->admin_enabled && !plan_addr_eq(&running->admin_listen, &next->admin_listen))) {
		char a[CFG_HOST_MAX + 16] = "off", b[CFG_HOST_MAX + 16] = "off";
		if (running->admin_enabled)
			units_fmt_addr(&running->admin_listen, a, sizeof a);
		if (next->admin_enabled)
			units_fmt_addr(&next->admin_listen, b, sizeof b);
		plan_restart_key(next, errs, "admin_listen", a, b);
	}
	if (strcmp(running->user, next->user) != 0)
		plan_restart_key(next, errs, "user", running->user, next->user);
	/* how the control socket is created: only at start */
	if (running->control_socket_mode != next->control_socket_mode) {
		char a[8], b[8];
		snprintf(a, sizeof a, "%04o", running->control_socket_mode);
		snprintf(b, sizeof b, "%04o", next->control_socket_mode);
		plan_restart_key(next, errs, "control_socket_mode", a, b);
	}
	if (strcmp(running->control_socket_group, next->control_socket_group) != 0)
		plan_restart_key(next, errs, "control_socket_group",
		    running->control_socket_group[0] ? running->control_socket_group : "(none)",
		    next->control_socket_group[0] ? next->control_socket_group : "(none)");
	if (running->log_format != next->log_format)
		plan_restart_key(next, errs, "log_format",
		    running->log_format == CFG_LOG_JSON ? "json" : "logfmt",
		    next->log_format == CFG_LOG_JSON ? "json" : "logfmt");
	return errs->n - n0;
}

/* Clusters of next sorted by name (byname: indices into next->clusters),
 * for matching running clusters by name without comparing every pair. */
static int
plan_name_cmp(const void *x, const void *y, void *arg)
{
	const struct cfg *next = arg;
	const size_t *a = x, *b = y;
	return strcmp(next->clusters[*a].name, next->clusters[*b].name);
}

/* The index of the cluster of next named name, or -1. */
static int
plan_name_find(const struct cfg *next, const size_t *byname, const char *name)
{
	size_t lo = 0, hi = next->n_clusters;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(name, next->clusters[byname[mid]].name);
		if (c == 0)
			return (int)byname[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return -1;
}

int
plan_make(const struct plan_running *run, size_t n_run, const struct cfg *next,
	  struct plan *out)
{
	memset(out, 0, sizeof *out);
	out->items = calloc(n_run + next->n_clusters + 1, sizeof *out->items);
	if (!out->items)
		return -1;
	bool *matched = calloc(next->n_clusters + 1, sizeof *matched);
	size_t *byname = calloc(next->n_clusters + 1, sizeof *byname);
	if (!matched || !byname) {
		free(matched);
		free(byname);
		free(out->items);
		out->items = NULL;
		return -1;
	}
	for (size_t j = 0; j < next->n_clusters; j++)
		byname[j] = j;
	qsort_r(byname, next->n_clusters, sizeof *byname, plan_name_cmp, (void *)next);
	for (size_t i = 0; i < n_run; i++) {
		struct plan_item *it = &out->items[out->n++];
		snprintf(it->name, sizeof it->name, "%s", run[i].cl->name);
		it->old_index = (int)i;
		it->new_index = plan_name_find(next, byname, run[i].cl->name);
		if (it->new_index >= 0)
			matched[it->new_index] = true;
		if (it->new_index < 0) {
			it->op = PLAN_REMOVE;
			out->n_remove++;
			continue;
		}
		const struct cfg_cluster *ncl = &next->clusters[it->new_index];
		if (plan_cluster_version(ncl, it->version, sizeof it->version) == -1)
			goto oom;
		if (strcmp(it->version, run[i].version) == 0) {
			it->op = PLAN_KEEP;
			out->n_keep++;
		} else {
			it->op = PLAN_MODIFY;
			it->listeners_changed = !plan_same_listeners(run[i].cl, ncl);
			out->n_modify++;
		}
	}
	for (size_t j = 0; j < next->n_clusters; j++) {
		if (matched[j])
			continue;
		struct plan_item *it = &out->items[out->n++];
		snprintf(it->name, sizeof it->name, "%s", next->clusters[j].name);
		it->op = PLAN_ADD;
		it->old_index = -1;
		it->new_index = (int)j;
		if (plan_cluster_version(&next->clusters[j], it->version, sizeof it->version) == -1)
			goto oom;
		out->n_add++;
	}
	free(matched);
	free(byname);
	return 0;
oom:
	free(matched);
	free(byname);
	plan_free(out);
	return -1;
}

void
plan_free(struct plan *p)
{
	free(p->items);
	memset(p, 0, sizeof *p);
}

/* ---- resolving a reload: who commits -------------------------------------------- */

/* A listening host, classified once: the any-address of either family
 * (however it is written: "0.0.0.0", "::", "0:0:0:0:0:0:0:0"; empty means
 * any too), an IPv4 or IPv6 literal in binary form, or a name. */
struct plan_host {
	enum { PLAN_H_ANY, PLAN_H_V4, PLAN_H_V6, PLAN_H_NAME } kind;
	unsigned char bin[16];
	const char *name;
};

static void
plan_host_classify(const char *h, struct plan_host *out)
{
	static const unsigned char zero[16];
	memset(out, 0, sizeof *out);
	out->name = h;
	if (h[0] == 0) {
		out->kind = PLAN_H_ANY;
	} else if (inet_pton(AF_INET, h, out->bin) == 1) {
		out->kind = memcmp(out->bin, zero, 4) == 0 ? PLAN_H_ANY : PLAN_H_V4;
	} else if (inet_pton(AF_INET6, h, out->bin) == 1) {
		out->kind = memcmp(out->bin, zero, 16) == 0 ? PLAN_H_ANY : PLAN_H_V6;
	} else {
		out->kind = PLAN_H_NAME;
	}
}

/* Would two hosts collide on one port in bind()? The same rule as the
 * config validator: a wildcard collides with everything, literal
 * addresses compare in binary form ("::1" is "0:0:0:0:0:0:0:1"), names
 * without regard to case. */
static bool
plan_hosts_collide(const struct plan_host *a, const struct plan_host *b)
{
	if (a->kind == PLAN_H_ANY || b->kind == PLAN_H_ANY)
		return true;
	if (a->kind != b->kind)
		return strcasecmp(a->name, b->name) == 0;
	if (a->kind == PLAN_H_V4)
		return memcmp(a->bin, b->bin, 4) == 0;
	if (a->kind == PLAN_H_V6)
		return memcmp(a->bin, b->bin, 16) == 0;
	return strcasecmp(a->name, b->name) == 0;
}

/* Which configuration of an item runs after the reload, given commit[]:
 * the running one, the new one, or none (a removal that commits, an
 * addition that does not). */
enum plan_side { PLAN_SIDE_NONE = 0, PLAN_SIDE_OLD, PLAN_SIDE_NEW };

static enum plan_side
plan_final_side(const struct plan_item *it, bool committed)
{
	switch (it->op) {
	case PLAN_KEEP:
		return PLAN_SIDE_OLD;
	case PLAN_ADD:
		return committed ? PLAN_SIDE_NEW : PLAN_SIDE_NONE;
	case PLAN_MODIFY:
		return committed ? PLAN_SIDE_NEW : PLAN_SIDE_OLD;
	case PLAN_REMOVE:
		return committed ? PLAN_SIDE_NONE : PLAN_SIDE_OLD;
	}
	return PLAN_SIDE_NONE;
}

/* One listening address of one side of one item: the index plan_resolve
 * looks addresses up in (sorted by port), so that its checks cost the
 * clusters on a port, not every pair of clusters. */
struct plan_addr {
	uint16_t port;
	uint8_t side;                 /* enum plan_side */
	uint32_t item;
	uint32_t k;                   /* 0 bootstrap, then the broker ports */
	const struct plan_host *host; /* the side's host (one per side) */
};

struct plan_index {
	struct plan_host *hosts;      /* [2 * item + side - 1] */
	struct plan_addr *a;
	size_t n;
};

static const struct cfg_cluster *
plan_side_cl(const struct plan *p, const struct plan_running *run, const struct cfg *next,
	     size_t i, enum plan_side side)
{
	const struct plan_item *it = &p->items[i];
	if (side == PLAN_SIDE_OLD && it->old_index >= 0)
		return run[it->old_index].cl;
	if (side == PLAN_SIDE_NEW && it->new_index >= 0 && it->op != PLAN_KEEP &&
	    it->op != PLAN_REMOVE)
		return &next->clusters[it->new_index];
	return NULL;
}

/* Every address of cl, one after another: index 0 bootstrap, then brokers
 * (one per broker port; none with gateway = sni). */
static size_t
plan_n_addrs(const struct cfg_cluster *cl)
{
	return 1 + cl->n_brokers;
}

static uint16_t
plan_port_at(const struct cfg_cluster *cl, size_t k)
{
	return k == 0 ? cl->bootstrap.port : (uint16_t)(cl->broker_port_first + (k - 1));
}

static int
plan_addr_cmp(const void *x, const void *y)
{
	const struct plan_addr *a = x, *b = y;
	if (a->port != b->port)
		return a->port < b->port ? -1 : 1;
	if (a->item != b->item)
		return a->item < b->item ? -1 : 1;
	if (a->side != b->side)
		return a->side < b->side ? -1 : 1;
	return a->k < b->k ? -1 : a->k > b->k;
}

static int
plan_index_build(struct plan_index *ix, const struct plan *p, const struct plan_running *run,
		 const struct cfg *next)
{
	size_t n = 0;
	memset(ix, 0, sizeof *ix);
	for (size_t i = 0; i < p->n; i++)
		for (int side = PLAN_SIDE_OLD; side <= PLAN_SIDE_NEW; side++) {
			const struct cfg_cluster *cl = plan_side_cl(p, run, next, i, side);
			if (cl)
				n += plan_n_addrs(cl);
		}
	ix->hosts = calloc(2 * p->n + 1, sizeof *ix->hosts);
	ix->a = calloc(n + 1, sizeof *ix->a);
	if (!ix->hosts || !ix->a) {
		free(ix->hosts);
		free(ix->a);
		return -1;
	}
	for (size_t i = 0; i < p->n; i++)
		for (int side = PLAN_SIDE_OLD; side <= PLAN_SIDE_NEW; side++) {
			const struct cfg_cluster *cl = plan_side_cl(p, run, next, i, side);
			if (!cl)
				continue;
			struct plan_host *h = &ix->hosts[2 * i + (size_t)side - 1];
			plan_host_classify(cl->bootstrap.host, h);
			for (size_t k = 0; k < plan_n_addrs(cl); k++)
				ix->a[ix->n++] = (struct plan_addr){ plan_port_at(cl, k), (uint8_t)side,
					(uint32_t)i, (uint32_t)k, h };
		}
	qsort(ix->a, ix->n, sizeof *ix->a, plan_addr_cmp);
	return 0;
}

static void
plan_index_free(struct plan_index *ix)
{
	free(ix->hosts);
	free(ix->a);
}

/* The first entry of ix on port (or ix->n). */
static size_t
plan_index_first(const struct plan_index *ix, uint16_t port)
{
	size_t lo = 0, hi = ix->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (ix->a[mid].port < port)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The item other than `self` whose final configuration (given commit[])
 * listens on host:port, the lowest such item above `above` (or any when
 * above is SIZE_MAX); SIZE_MAX when none. */
static size_t
plan_index_owner(const struct plan_index *ix, const struct plan *p, const bool *commit,
		 size_t self, size_t above, const struct plan_host *host, uint16_t port)
{
	size_t best = SIZE_MAX;
	for (size_t e = plan_index_first(ix, port); e < ix->n && ix->a[e].port == port; e++) {
		const struct plan_addr *a = &ix->a[e];
		if (a->item == self || (above != SIZE_MAX && a->item <= above) || a->item >= best)
			continue;
		if (plan_final_side(&p->items[a->item], commit[a->item]) != a->side)
			continue;
		if (plan_hosts_collide(host, a->host))
			best = a->item;
	}
	return best;
}

int
plan_resolve(const struct plan *p, const struct plan_running *run, const struct cfg *next,
	     const bool *ok, bool per_cluster, bool *commit, char *err, size_t errlen)
{
	bool all_ok = true;
	for (size_t i = 0; i < p->n; i++)
		all_ok = all_ok && ok[i];
	for (size_t i = 0; i < p->n; i++)
		commit[i] = ok[i] && (per_cluster || all_ok);
	if (!per_cluster && !all_ok)
		return 0;
	struct plan_index ix;
	if (plan_index_build(&ix, p, run, next) == -1) {
		snprintf(err, errlen, "out of memory");
		for (size_t m = 0; m < p->n; m++)
			commit[m] = false;
		return -1;
	}
	/* An item that would take an address another cluster keeps (because
	 * that one does not commit) cannot commit either. A worklist: every
	 * item that could commit is checked once, and again only when an item
	 * whose running addresses share a port with its new ones stops
	 * committing (chains of moves unwind one link at a time, each link at
	 * the cost of its ports). */
	size_t *work = calloc(p->n + 1, sizeof *work), nw = 0;
	bool *queued = calloc(p->n + 1, sizeof *queued);
	if (!work || !queued) {
		free(work);
		free(queued);
		plan_index_free(&ix);
		snprintf(err, errlen, "out of memory");
		for (size_t m = 0; m < p->n; m++)
			commit[m] = false;
		return -1;
	}
	for (size_t i = p->n; i-- > 0;)
		if (commit[i] && (p->items[i].op == PLAN_ADD || p->items[i].op == PLAN_MODIFY)) {
			work[nw++] = i;
			queued[i] = true;
		}
	while (nw) {
		size_t i = work[--nw];
		queued[i] = false;
		if (!commit[i])
			continue;
		const struct cfg_cluster *mine = &next->clusters[p->items[i].new_index];
		const struct plan_host *h = &ix.hosts[2 * i + PLAN_SIDE_NEW - 1];
		for (size_t k = 0; k < plan_n_addrs(mine) && commit[i]; k++)
			if (plan_index_owner(&ix, p, commit, i, SIZE_MAX, h,
			    plan_port_at(mine, k)) != SIZE_MAX)
				commit[i] = false;
		if (commit[i])
			continue;
		/* i keeps its running addresses: who wanted one of them? */
		const struct cfg_cluster *old = plan_side_cl(p, run, next, i, PLAN_SIDE_OLD);
		for (size_t k = 0; old && k < plan_n_addrs(old); k++) {
			uint16_t port = plan_port_at(old, k);
			for (size_t e = plan_index_first(&ix, port); e < ix.n && ix.a[e].port == port;
			    e++) {
				size_t j = ix.a[e].item;
				if (ix.a[e].side == PLAN_SIDE_NEW && j != i && commit[j] && !queued[j]) {
					work[nw++] = j;
					queued[j] = true;
				}
			}
		}
	}
	free(work);
	free(queued);
	/* The merged result must never have two clusters on one address: the
	 * first pair (i, then the lowest j above it) that shares one is named. */
	for (size_t i = 0; i < p->n; i++) {
		enum plan_side side = plan_final_side(&p->items[i], commit[i]);
		const struct cfg_cluster *a = plan_side_cl(p, run, next, i, side);
		if (!a)
			continue;
		const struct plan_host *h = &ix.hosts[2 * i + (size_t)side - 1];
		size_t j = SIZE_MAX, at = 0;
		for (size_t k = 0; k < plan_n_addrs(a); k++) {
			size_t o = plan_index_owner(&ix, p, commit, i, i, h, plan_port_at(a, k));
			if (o < j) {
				j = o;
				at = k;
			}
		}
		if (j == SIZE_MAX)
			continue;
		snprintf(err, errlen, "clusters %s and %s would both listen on %s:%u",
		    p->items[i].name, p->items[j].name, a->bootstrap.host,
		    (unsigned)plan_port_at(a, at));
		for (size_t m = 0; m < p->n; m++)
			commit[m] = false;
		plan_index_free(&ix);
		return -1;
	}
	plan_index_free(&ix);
	return 0;
}
