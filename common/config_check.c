/*
 * config_check — the cross-checks that run once the whole file was read:
 * keys that only make sense together (TLS, the SNI gateway, the admin
 * listener's credentials), required keys and defaults that depend on other
 * keys, node ids against broker ports, listening port conflicts between
 * clusters and the admin listener, and that each cluster's canonical text
 * parses back to the same cluster. Every problem is reported with the line
 * of the key it concerns. See config.h and config_priv.h.
 */
#include "common/config.h"
#include "common/config_priv.h"

#include <arpa/inet.h>
#include <ini.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/sni.h"
#include "common/units.h"

bool
cfg_addr_is_loopback(const char *host)
{
	unsigned char b[16];
	static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	static const unsigned char one[16] = { [15] = 1 };

	if (inet_pton(AF_INET, host, b) == 1)
		return b[0] == 127;
	if (inet_pton(AF_INET6, host, b) == 1)
		return memcmp(b, one, 16) == 0 ||
		    (memcmp(b, mapped, 12) == 0 && b[12] == 127);
	return false;
}

/* Cross-checks of the admin keys, after the whole file was read. */
static void
cfgp_check_admin(struct cfgp *p)
{
	struct cfg *c = p->cfg;
	int cert = p->fline[FK_ADMIN_TLS_CERT], key = p->fline[FK_ADMIN_TLS_KEY];
	int ca = p->fline[FK_ADMIN_TLS_CLIENT_CA];
	char addr[CFG_HOST_MAX + 16];

	if (cert && !key)
		cfgp_err(p, cert, "admin_tls_cert needs admin_tls_key (the certificate's "
		    "private key)");
	if (key && !cert)
		cfgp_err(p, key, "admin_tls_key needs admin_tls_cert");
	if (ca && !cert)
		cfgp_err(p, ca, "admin_tls_client_ca needs admin_tls_cert and admin_tls_key "
		    "(client certificates are checked in the TLS handshake)");
	if (!c->admin_enabled || c->admin_insecure || cfg_addr_is_loopback(c->admin_listen.host) ||
	    c->admin_token_file[0] != '\0' || c->admin_tls_client_ca[0] != '\0')
		return;
	units_fmt_addr(&c->admin_listen, addr, sizeof addr);
	cfgp_err(p, p->fline[FK_ADMIN_LISTEN] ? p->fline[FK_ADMIN_LISTEN] : p->ferry_line,
	    "admin_listen %s is not a loopback address and the admin API has no "
	    "credentials: anyone who can reach it could reload and drain clusters; set "
	    "admin_token_file or admin_tls_client_ca, or admin_insecure = on to allow it", addr);
}

/* Two listeners on the same port collide if their hosts are equal or
 * either one is a wildcard. Literal addresses compare in binary form. */
static int
cfgp_hosts_conflict(const char *a, const char *b)
{
	unsigned char x[16], y[16];

	if (cfgp_host_wildcard(a) || cfgp_host_wildcard(b))
		return 1;
	if (inet_pton(AF_INET, a, x) == 1 && inet_pton(AF_INET, b, y) == 1)
		return memcmp(x, y, 4) == 0;
	if (inet_pton(AF_INET6, a, x) == 1 && inet_pton(AF_INET6, b, y) == 1)
		return memcmp(x, y, 16) == 0;
	return strcasecmp(a, b) == 0;
}

/* TLS keys that only make sense together. */
static void
cfgp_finish_tls(struct cfgp *p, struct cfg_cluster *cl, const struct cfgp_meta *m)
{
	static const enum cfgp_ckey server_only[] = {
		CK_TLS_MIN_VERSION, CK_TLS_CIPHERS, CK_TLS_CIPHERSUITES,
		CK_TLS_CLIENT_CA, CK_TLS_CLIENT_AUTH,
	};
	static const enum cfgp_ckey upstream_only[] = {
		CK_UPSTREAM_CA, CK_UPSTREAM_CERT, CK_UPSTREAM_KEY, CK_UPSTREAM_TLS_VERIFY,
	};
	size_t i;

	if (m->ok[CK_TLS_CERT] && !m->line[CK_TLS_KEY])
		cfgp_err(p, m->line[CK_TLS_CERT], "tls_cert: tls_key is required with it");
	if (m->ok[CK_TLS_KEY] && !m->line[CK_TLS_CERT])
		cfgp_err(p, m->line[CK_TLS_KEY], "tls_key: tls_cert is required with it");
	cl->tls = cl->tls_cert[0] != '\0' && cl->tls_key[0] != '\0';
	if (!m->line[CK_TLS_CERT])
		for (i = 0; i < sizeof server_only / sizeof server_only[0]; i++)
			if (m->line[server_only[i]])
				cfgp_err(p, m->line[server_only[i]], "%s: needs tls_cert and "
				    "tls_key (client-facing TLS is off)",
				    cfgp_ckeys[server_only[i]].name);
	if (m->line[CK_TLS_CLIENT_AUTH] && m->ok[CK_TLS_CLIENT_AUTH] &&
	    cl->tls_client_auth != CFG_TLS_AUTH_NONE && !m->line[CK_TLS_CLIENT_CA])
		cfgp_err(p, m->line[CK_TLS_CLIENT_AUTH], "tls_client_auth: %s needs "
		    "tls_client_ca (the CA that signs client certificates)",
		    cfg_tls_client_auth_str(cl->tls_client_auth));
	if (m->ok[CK_TLS_CLIENT_CA] && !m->line[CK_TLS_CLIENT_AUTH])
		cl->tls_client_auth = CFG_TLS_AUTH_REQUIRED;
	if (m->ok[CK_TLS_CLIENT_CA] && m->ok[CK_TLS_CLIENT_AUTH] &&
	    cl->tls_client_auth == CFG_TLS_AUTH_NONE)
		cfgp_err(p, m->line[CK_TLS_CLIENT_CA], "tls_client_ca: set, but "
		    "tls_client_auth = none asks no client certificate");

	if (!cl->upstream_tls)
		for (i = 0; i < sizeof upstream_only / sizeof upstream_only[0]; i++)
			if (m->line[upstream_only[i]])
				cfgp_err(p, m->line[upstream_only[i]], "%s: needs "
				    "upstream_tls = on", cfgp_ckeys[upstream_only[i]].name);
	if (m->ok[CK_UPSTREAM_CERT] && !m->line[CK_UPSTREAM_KEY])
		cfgp_err(p, m->line[CK_UPSTREAM_CERT], "upstream_cert: upstream_key is "
		    "required with it");
	if (m->ok[CK_UPSTREAM_KEY] && !m->line[CK_UPSTREAM_CERT])
		cfgp_err(p, m->line[CK_UPSTREAM_KEY], "upstream_key: upstream_cert is "
		    "required with it");
}

/* ferry's own SASL: the mechanism, the user name and the password file
 * come together. */
static void
cfgp_finish_sasl(struct cfgp *p, struct cfg_cluster *cl, const struct cfgp_meta *m)
{
	static const enum cfgp_ckey with[] = {
		CK_UPSTREAM_SASL_USERNAME, CK_UPSTREAM_SASL_PASSWORD_FILE,
	};

	for (size_t i = 0; i < sizeof with / sizeof with[0]; i++) {
		if (m->line[CK_UPSTREAM_SASL_MECHANISM] && !m->line[with[i]])
			cfgp_err(p, m->line[CK_UPSTREAM_SASL_MECHANISM], "upstream_sasl_mechanism: "
			    "%s is required with it", cfgp_ckeys[with[i]].name);
		if (m->line[with[i]] && !m->line[CK_UPSTREAM_SASL_MECHANISM])
			cfgp_err(p, m->line[with[i]], "%s: needs upstream_sasl_mechanism (PLAIN, "
			    "SCRAM-SHA-256 or SCRAM-SHA-512)", cfgp_ckeys[with[i]].name);
	}
	if (!m->line[CK_UPSTREAM_SASL_MECHANISM]) {
		cl->upstream_sasl_username[0] = '\0';
		cl->upstream_sasl_password_file[0] = '\0';
	}
}

/*
 * The client edge behind a load balancer: a PROXY protocol header is only
 * believed from the networks named (there is no default: trusting every
 * source would let any client claim any address), and the max-age jitter
 * needs an age it can be taken from.
 */
static void
cfgp_finish_edge(struct cfgp *p, struct cfg_cluster *cl, const struct cfgp_meta *m)
{
	if (m->ok[CK_PROXY_PROTOCOL] && cl->proxy_protocol != CFG_PROXY_OFF &&
	    !m->line[CK_PROXY_PROTOCOL_FROM])
		cfgp_err(p, m->line[CK_PROXY_PROTOCOL], "proxy_protocol = %s needs "
		    "proxy_protocol_from (the networks of the load balancers that send "
		    "the header; 0.0.0.0/0, ::/0 trusts every source)",
		    cfg_proxy_protocol_str(cl->proxy_protocol));
	if (m->ok[CK_PROXY_PROTOCOL_FROM] && cl->proxy_protocol == CFG_PROXY_OFF &&
	    (m->ok[CK_PROXY_PROTOCOL] || !m->line[CK_PROXY_PROTOCOL]))
		cfgp_err(p, m->line[CK_PROXY_PROTOCOL_FROM], "proxy_protocol_from: only "
		    "used with proxy_protocol = optional or required");
	if (m->line[CK_MAX_AGE_JITTER] && m->ok[CK_MAX_AGE_JITTER]) {
		if (cl->max_age_ms == 0 && (m->ok[CK_MAX_AGE] || !m->line[CK_MAX_AGE]))
			cfgp_err(p, m->line[CK_MAX_AGE_JITTER], "connection_max_age_jitter: "
			    "needs connection_max_age (connections have no age limit)");
		else if (cl->max_age_jitter_ms > cl->max_age_ms && m->ok[CK_MAX_AGE])
			cfgp_err(p, m->line[CK_MAX_AGE_JITTER], "connection_max_age_jitter: "
			    "larger than connection_max_age (ages are drawn in "
			    "[max_age - jitter, max_age])");
	} else if (!m->line[CK_MAX_AGE_JITTER]) {
		cl->max_age_jitter_ms = cl->max_age_ms / 10;
	}
	if (cl->max_age_ms == 0)
		cl->max_age_jitter_ms = 0;
}

/*
 * The gateway keys, after the common checks. Returns true when the
 * cluster is in SNI mode (then fully checked here: it needs client TLS and
 * has no broker ports, node ids or advertised host, which are refused
 * rather than silently ignored), false for a port-per-broker cluster, where
 * the sni_* keys are refused.
 */
static bool
cfgp_finish_sni(struct cfgp *p, size_t idx)
{
	struct cfg_cluster *cl = &p->cfg->clusters[idx];
	const struct cfgp_meta *m = &p->meta[idx];
	static const enum cfgp_ckey sni_only[] = { CK_SNI_BOOTSTRAP_HOST, CK_SNI_BROKER_PATTERN };
	static const enum cfgp_ckey ports_only[] = {
		CK_BROKER_PORTS, CK_NODE_IDS, CK_ADVERTISED_HOST,
	};
	size_t i;

	if (!m->ok[CK_GATEWAY] || cl->gateway != CFG_GATEWAY_SNI) {
		for (i = 0; i < sizeof sni_only / sizeof sni_only[0]; i++)
			if (m->line[sni_only[i]] != 0)
				cfgp_err(p, m->line[sni_only[i]], "%s: only used with "
				    "gateway = sni", cfgp_ckeys[sni_only[i]].name);
		/* a bad gateway value was reported; the rest is checked as ports */
		return false;
	}
	for (i = 0; i < sizeof sni_only / sizeof sni_only[0]; i++)
		if (m->line[sni_only[i]] == 0)
			cfgp_err(p, m->line[CK_GATEWAY], "gateway = sni needs %s in "
			    "[cluster %s]", cfgp_ckeys[sni_only[i]].name, cl->name);
	if (m->line[CK_TLS_CERT] == 0)
		cfgp_err(p, m->line[CK_GATEWAY], "gateway = sni needs client TLS "
		    "(tls_cert and tls_key): the broker is chosen by the server name "
		    "of the TLS ClientHello");
	for (i = 0; i < sizeof ports_only / sizeof ports_only[0]; i++)
		if (m->line[ports_only[i]] != 0)
			cfgp_err(p, m->line[ports_only[i]], "%s: not used with gateway = "
			    "sni (every broker is reached on the bootstrap port by its "
			    "server name, sni_broker_pattern); remove it",
			    cfgp_ckeys[ports_only[i]].name);
	if (m->ok[CK_SNI_BOOTSTRAP_HOST] && m->ok[CK_SNI_BROKER_PATTERN]) {
		int32_t id;

		if (sni_classify("", cl->sni_broker_pattern, cl->sni_bootstrap_host,
		    strlen(cl->sni_bootstrap_host), &id) == SNI_BROKER)
			cfgp_err(p, m->line[CK_SNI_BOOTSTRAP_HOST], "sni_bootstrap_host: "
			    "'%s' is also the name of broker %ld by sni_broker_pattern "
			    "'%s'; choose a name the pattern cannot produce",
			    cl->sni_bootstrap_host, (long)id, cl->sni_broker_pattern);
	}
	/* the model of an SNI cluster: no broker listeners */
	cl->broker_port_first = cl->broker_port_last = 0;
	free(cl->node_ids);
	cl->node_ids = NULL;
	cl->n_brokers = 0;
	cl->advertised_host[0] = '\0';
	return true;
}

/* Required keys, defaults that depend on other keys, node ids. */
static void
cfgp_finish_cluster(struct cfgp *p, size_t idx)
{
	struct cfg_cluster *cl = &p->cfg->clusters[idx];
	const struct cfgp_meta *m = &p->meta[idx];
	static const enum cfgp_ckey required[] = {
		CK_UPSTREAM, CK_BOOTSTRAP, CK_BROKER_PORTS,
	};
	size_t i, nports;
	/* gateway = sni: one listener, no broker_ports, no advertised_host */
	bool sni = m->ok[CK_GATEWAY] && cl->gateway == CFG_GATEWAY_SNI;

	for (i = 0; i < sizeof required / sizeof required[0]; i++)
		if (m->line[required[i]] == 0 && !(sni && required[i] == CK_BROKER_PORTS))
			cfgp_err(p, cl->line, "missing required key '%s' in "
			    "[cluster %s]", cfgp_ckeys[required[i]].name,
			    cl->name);

	if (!sni && m->line[CK_ADVERTISED_HOST] == 0 && m->ok[CK_BOOTSTRAP]) {
		if (cfgp_host_wildcard(cl->bootstrap.host))
			cfgp_err(p, m->line[CK_BOOTSTRAP], "advertised_host "
			    "is required when bootstrap listens on a wildcard "
			    "address");
		else
			memcpy(cl->advertised_host, cl->bootstrap.host,
			    sizeof cl->advertised_host);
	}

	cfgp_finish_tls(p, cl, m);
	cfgp_finish_sasl(p, cl, m);
	cfgp_finish_edge(p, cl, m);
	for (i = 0; i < CK_COUNT; i++)
		cl->key_lines[i] = m->line[i];

	if (cfgp_finish_sni(p, idx))
		return;
	if (!m->ok[CK_BROKER_PORTS])
		return;
	nports = (size_t)cl->broker_port_last - cl->broker_port_first + 1;
	if (m->ok[CK_BOOTSTRAP] &&
	    cl->bootstrap.port >= cl->broker_port_first &&
	    cl->bootstrap.port <= cl->broker_port_last)
		cfgp_err(p, m->line[CK_BROKER_PORTS], "broker_ports: range "
		    "%u-%u contains the bootstrap port %u",
		    (unsigned)cl->broker_port_first,
		    (unsigned)cl->broker_port_last, (unsigned)cl->bootstrap.port);
	if (m->line[CK_NODE_IDS] != 0) {
		if (m->ok[CK_NODE_IDS] && cl->n_brokers != nports)
			cfgp_err(p, m->line[CK_NODE_IDS], "node_ids: %zu ids "
			    "for %zu broker ports (%u-%u)", cl->n_brokers,
			    nports, (unsigned)cl->broker_port_first,
			    (unsigned)cl->broker_port_last);
		return;
	}
	if ((cl->node_ids = calloc(nports, sizeof *cl->node_ids)) == NULL) {
		cfgp_err(p, cl->line, CFG_ERR_OOM);
		return;
	}
	for (i = 0; i < nports; i++)
		cl->node_ids[i] = (int32_t)i;
	cl->n_brokers = nports;
}

static void
cfgp_listener_desc(const struct cfgp *p, const struct cfgp_listener *l,
    char *buf, size_t len)
{
	char addr[CFG_HOST_MAX + 16];

	if (l->owner != SIZE_MAX) {
		snprintf(buf, len, "%s of [cluster %s]", l->key,
		    p->cfg->clusters[l->owner].name);
	} else if (l->line != 0) {
		snprintf(buf, len, "admin_listen");
	} else {
		units_fmt_addr(&p->cfg->admin_listen, addr, sizeof addr);
		snprintf(buf, len, "admin_listen (default %s)", addr);
	}
}

static int
cfgp_listener_cmp(const void *x, const void *y, void *arg)
{
	const struct cfgp_listener *l = arg;
	const size_t *a = x, *b = y;

	if (l[*a].first != l[*b].first)
		return l[*a].first < l[*b].first ? -1 : 1;
	return *a < *b ? -1 : *a > *b;
}

/* Two listeners on one address: i listed before j. */
struct cfgp_clash {
	size_t i, j;
};

/* clashes in the order the pairwise check reported them: by the later
 * listener, then the earlier */
static int
cfgp_clash_cmp(const void *x, const void *y)
{
	const struct cfgp_clash *a = x, *b = y;

	if (a->j != b->j)
		return a->j < b->j ? -1 : 1;
	return a->i < b->i ? -1 : a->i > b->i;
}

/* Every listening port must be unique across the file. Ports inside one
 * cluster are checked by cfgp_finish_cluster. The admin listener is only
 * considered when the text has a [ferry] section: a worker parses the
 * canonical text of its cluster alone, where admin_listen is a default
 * that may not reflect the real file. */
static void
cfgp_check_ports(struct cfgp *p)
{
	struct cfg *c = p->cfg;
	struct cfgp_listener *l;
	char da[CFGP_ERRLEN], db[CFGP_ERRLEN];
	size_t n = 0, i, j;

	if ((l = calloc(1 + 2 * c->n_clusters, sizeof *l)) == NULL) {
		cfgp_err(p, 1, CFG_ERR_OOM);
		return;
	}
	if (p->ferry_line != 0 && c->admin_enabled &&
	    (p->fline[FK_ADMIN_LISTEN] == 0 || p->fok[FK_ADMIN_LISTEN]))
		l[n++] = (struct cfgp_listener){ c->admin_listen.host,
		    c->admin_listen.port, c->admin_listen.port, SIZE_MAX,
		    "admin_listen", p->fline[FK_ADMIN_LISTEN] };
	for (i = 0; i < c->n_clusters; i++) {
		const struct cfg_cluster *cl = &c->clusters[i];
		const struct cfgp_meta *m = &p->meta[i];

		if (!m->ok[CK_BOOTSTRAP])
			continue;
		l[n++] = (struct cfgp_listener){ cl->bootstrap.host,
		    cl->bootstrap.port, cl->bootstrap.port, i, "bootstrap",
		    m->line[CK_BOOTSTRAP] };
		if (m->ok[CK_BROKER_PORTS] && cl->gateway == CFG_GATEWAY_PORTS)
			l[n++] = (struct cfgp_listener){ cl->bootstrap.host,
			    cl->broker_port_first, cl->broker_port_last, i,
			    "broker_ports", m->line[CK_BROKER_PORTS] };
	}
	/* Only listeners whose port ranges overlap can clash: sorted by their
	 * first port, each is compared with those that start within its range
	 * (a file of thousands of clusters on distinct ports costs a sort, not
	 * every pair). The clashes are reported in file order. */
	size_t *ord = calloc(n + 1, sizeof *ord), npairs = 0, cap = 0;
	struct cfgp_clash *pairs = NULL;
	if (ord == NULL) {
		cfgp_err(p, 1, CFG_ERR_OOM);
		free(l);
		return;
	}
	for (i = 0; i < n; i++)
		ord[i] = i;
	qsort_r(ord, n, sizeof *ord, cfgp_listener_cmp, l);
	for (size_t a = 0; a < n; a++) {
		for (size_t b = a + 1; b < n && l[ord[b]].first <= l[ord[a]].last; b++) {
			i = ord[a] < ord[b] ? ord[a] : ord[b];
			j = ord[a] < ord[b] ? ord[b] : ord[a];
			if (l[i].owner == l[j].owner || !cfgp_hosts_conflict(l[i].host, l[j].host))
				continue;
			if (npairs == cap) {
				size_t ncap = cap ? 2 * cap : 8;
				struct cfgp_clash *np = realloc(pairs, ncap * sizeof *np);
				if (np == NULL) {
					cfgp_err(p, 1, CFG_ERR_OOM);
					goto out;
				}
				pairs = np;
				cap = ncap;
			}
			pairs[npairs++] = (struct cfgp_clash){ i, j };
		}
	}
	if (npairs > 1)
		qsort(pairs, npairs, sizeof *pairs, cfgp_clash_cmp);
	for (size_t k = 0; k < npairs; k++) {
		uint16_t lo;

		i = pairs[k].i;
		j = pairs[k].j;
		lo = l[i].first > l[j].first ? l[i].first : l[j].first;
		cfgp_listener_desc(p, &l[j], da, sizeof da);
		cfgp_listener_desc(p, &l[i], db, sizeof db);
		if (l[i].line != 0)
			cfgp_err(p, l[j].line, "%s: port %u already "
			    "used by %s (line %d)", da, (unsigned)lo,
			    db, l[i].line);
		else
			cfgp_err(p, l[j].line, "%s: port %u already "
			    "used by %s", da, (unsigned)lo, db);
	}
out:
	free(pairs);
	free(ord);
	free(l);
}

/*
 * The supervisor sends each worker its cluster's canonical text, which the
 * worker parses with this same parser, so every canonical line must fit the
 * line limit too. Normalising can lengthen a line (" = " around the value,
 * advertised_host defaulted from the bootstrap host), so check it here and
 * report the key whose value is too long, rather than accept a config that
 * can never start.
 */
static void
cfgp_check_canonical(struct cfgp *p, size_t ci)
{
	const struct cfg_cluster *cl = &p->cfg->clusters[ci];
	const struct cfgp_meta *m = &p->meta[ci];
	char *text = cfg_cluster_canonical(cl), *line, *save = NULL;

	if (text == NULL) {
		cfgp_err(p, cl->line, CFG_ERR_OOM);
		return;
	}
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		size_t n = strlen(line), k, klen = strcspn(line, " =");
		int at = cl->line;

		if (n < INI_MAX_LINE)
			continue;
		for (k = 0; k < CK_COUNT; k++)
			if (strlen(cfgp_ckeys[k].name) == klen &&
			    strncmp(cfgp_ckeys[k].name, line, klen) == 0)
				break;
		if (k < CK_COUNT && m->line[k] != 0)
			at = m->line[k];
		else if (k == CK_ADVERTISED_HOST && m->line[CK_BOOTSTRAP] != 0)
			at = m->line[CK_BOOTSTRAP];  /* defaulted from it */
		cfgp_err(p, at, "%.*s: value too long: its normalised line is %zu characters, "
		    "more than %d", (int)klen, line, n, INI_MAX_LINE - 1);
	}
	free(text);
}

void
cfgp_finish(struct cfgp *p)
{
	size_t i, n0 = p->nerr;

	for (i = 0; i < p->cfg->n_clusters; i++)
		cfgp_finish_cluster(p, i);
	cfgp_check_ports(p);
	cfgp_check_admin(p);
	if (p->n_cluster_headers == 0)
		cfgp_err(p, 1, "no [cluster NAME] section: at least one "
		    "cluster is required");
	/* Only a complete cluster has a canonical form. */
	if (p->nerr == n0)
		for (i = 0; i < p->cfg->n_clusters; i++)
			cfgp_check_canonical(p, i);
}
