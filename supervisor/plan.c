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

int
plan_make(const struct plan_running *run, size_t n_run, const struct cfg *next,
	  struct plan *out)
{
	memset(out, 0, sizeof *out);
	out->items = calloc(n_run + next->n_clusters + 1, sizeof *out->items);
	if (!out->items)
		return -1;
	bool *matched = calloc(next->n_clusters + 1, sizeof *matched);
	if (!matched) {
		free(out->items);
		out->items = NULL;
		return -1;
	}
	for (size_t i = 0; i < n_run; i++) {
		struct plan_item *it = &out->items[out->n++];
		snprintf(it->name, sizeof it->name, "%s", run[i].cl->name);
		it->old_index = (int)i;
		it->new_index = -1;
		for (size_t j = 0; j < next->n_clusters; j++) {
			if (strcmp(next->clusters[j].name, run[i].cl->name) == 0) {
				it->new_index = (int)j;
				matched[j] = true;
				break;
			}
		}
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
	return 0;
oom:
	free(matched);
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

/* The any-address of either family, however it is written ("0.0.0.0",
 * "::", "0:0:0:0:0:0:0:0"); empty means any too. */
static bool
plan_wildcard(const char *h)
{
	static const unsigned char zero[16];
	unsigned char a[16];
	if (h[0] == 0)
		return true;
	if (inet_pton(AF_INET, h, a) == 1)
		return memcmp(a, zero, 4) == 0;
	if (inet_pton(AF_INET6, h, a) == 1)
		return memcmp(a, zero, 16) == 0;
	return false;
}

/* Would two hosts collide on one port in bind()? The same rule as the
 * config validator: a wildcard collides with everything, literal
 * addresses compare in binary form ("::1" is "0:0:0:0:0:0:0:1"), names
 * without regard to case. */
static bool
plan_hosts_collide(const char *a, const char *b)
{
	unsigned char x[16], y[16];
	if (plan_wildcard(a) || plan_wildcard(b))
		return true;
	if (inet_pton(AF_INET, a, x) == 1 && inet_pton(AF_INET, b, y) == 1)
		return memcmp(x, y, 4) == 0;
	if (inet_pton(AF_INET6, a, x) == 1 && inet_pton(AF_INET6, b, y) == 1)
		return memcmp(x, y, 16) == 0;
	return strcasecmp(a, b) == 0;
}

/* Does cluster cl listen on host:port? */
static bool
plan_listens_on(const struct cfg_cluster *cl, const struct cfg_addr *a)
{
	if (!plan_hosts_collide(cl->bootstrap.host, a->host))
		return false;
	if (cl->bootstrap.port == a->port)
		return true;
	/* gateway = sni: the bootstrap port only (n_brokers 0) */
	return cl->n_brokers > 0 && a->port >= cl->broker_port_first && a->port <= cl->broker_port_last;
}

/* Every address of cl, one after another: index 0 bootstrap, then brokers
 * (one per broker port; none with gateway = sni). */
static size_t
plan_n_addrs(const struct cfg_cluster *cl)
{
	return 1 + cl->n_brokers;
}

static struct cfg_addr
plan_addr_at(const struct cfg_cluster *cl, size_t k)
{
	struct cfg_addr a = cl->bootstrap;
	if (k > 0)
		a.port = (uint16_t)(cl->broker_port_first + (k - 1));
	return a;
}

/* The configuration item i runs after the reload, given commit[]; NULL when
 * it runs none (a removal that commits, an addition that does not). */
static const struct cfg_cluster *
plan_final(const struct plan *p, const struct plan_running *run, const struct cfg *next,
	   size_t i, const bool *commit)
{
	const struct plan_item *it = &p->items[i];
	switch (it->op) {
	case PLAN_KEEP:
		return run[it->old_index].cl;
	case PLAN_ADD:
		return commit[i] ? &next->clusters[it->new_index] : NULL;
	case PLAN_MODIFY:
		return commit[i] ? &next->clusters[it->new_index] : run[it->old_index].cl;
	case PLAN_REMOVE:
		return commit[i] ? NULL : run[it->old_index].cl;
	}
	return NULL;
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
	/* An item that would take an address another cluster keeps (because
	 * that one does not commit) cannot commit either; repeat until
	 * nothing changes (chains of moves). */
	bool changed = true;
	while (changed) {
		changed = false;
		for (size_t i = 0; i < p->n; i++) {
			if (!commit[i] || (p->items[i].op != PLAN_ADD && p->items[i].op != PLAN_MODIFY))
				continue;
			const struct cfg_cluster *mine = &next->clusters[p->items[i].new_index];
			for (size_t j = 0; j < p->n && commit[i]; j++) {
				if (j == i)
					continue;
				const struct cfg_cluster *theirs = plan_final(p, run, next, j, commit);
				if (!theirs)
					continue;
				for (size_t k = 0; k < plan_n_addrs(mine); k++) {
					struct cfg_addr a = plan_addr_at(mine, k);
					if (plan_listens_on(theirs, &a)) {
						commit[i] = false;
						changed = true;
						break;
					}
				}
			}
		}
	}
	/* The merged result must never have two clusters on one address. */
	for (size_t i = 0; i < p->n; i++) {
		const struct cfg_cluster *a = plan_final(p, run, next, i, commit);
		if (!a)
			continue;
		for (size_t j = i + 1; j < p->n; j++) {
			const struct cfg_cluster *b = plan_final(p, run, next, j, commit);
			if (!b)
				continue;
			for (size_t k = 0; k < plan_n_addrs(a); k++) {
				struct cfg_addr x = plan_addr_at(a, k);
				if (plan_listens_on(b, &x)) {
					snprintf(err, errlen, "clusters %s and %s would both listen on "
					    "%s:%u", p->items[i].name, p->items[j].name, x.host,
					    (unsigned)x.port);
					for (size_t m = 0; m < p->n; m++)
						commit[m] = false;
					return -1;
				}
			}
		}
	}
	return 0;
}
