/*
 * test_sni — unit tests for common/sni.c: broker names from the pattern,
 * pattern and host-name validation, and the classification of ClientHello
 * server names (case, trailing dot, digits only, overflow, leading zeros,
 * text before and after the node id, a missing name), and the config keys
 * of the gateway (gateway, sni_bootstrap_host, sni_broker_pattern).
 */
#include <criterion/criterion.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/config.h"
#include "common/sni.h"

#define BOOT "bootstrap.kafka.example.com"
#define PAT "broker-$(nodeId).kafka.example.com"

static enum sni_match
cls(const char *boot, const char *pat, const char *name, int32_t *id)
{
	*id = -77;
	return sni_classify(boot, pat, name, name ? strlen(name) : 0, id);
}

static void
is_broker(const char *name, int32_t want)
{
	int32_t id;
	cr_assert_eq(cls(BOOT, PAT, name, &id), SNI_BROKER, "'%s' not a broker", name);
	cr_assert_eq(id, want, "'%s': node id %d, want %d", name, id, want);
}

static void
is_unknown(const char *boot, const char *pat, const char *name)
{
	int32_t id;
	cr_assert_eq(cls(boot, pat, name, &id), SNI_UNKNOWN, "'%s' accepted", name ? name : "(null)");
	cr_assert_eq(id, -77, "node id written for '%s'", name ? name : "(null)");
}

Test(sni, format)
{
	char out[300];
	cr_assert_eq(sni_format(PAT, 3, out, sizeof out), (int)strlen("broker-3.kafka.example.com"));
	cr_assert_str_eq(out, "broker-3.kafka.example.com");
	cr_assert_eq(sni_format(PAT, INT32_MAX, out, sizeof out), 35);
	cr_assert_str_eq(out, "broker-2147483647.kafka.example.com");
	cr_assert_gt(sni_format("$(nodeId)", 0, out, sizeof out), 0);
	cr_assert_str_eq(out, "0");
	cr_assert_gt(sni_format("kafka-$(nodeId)", 12, out, sizeof out), 0);
	cr_assert_str_eq(out, "kafka-12");
	cr_assert_eq(sni_format(PAT, -1, out, sizeof out), -1, "negative id formatted");
	cr_assert_eq(sni_format("no-placeholder", 1, out, sizeof out), -1);
	cr_assert_eq(sni_format(PAT, 3, out, 10), -1, "truncation not reported");
	cr_assert_eq(sni_format(PAT, 3, out, strlen("broker-3.kafka.example.com")), -1,
	    "no room for the NUL");
}

Test(sni, host_check)
{
	char err[200];
	cr_assert_eq(sni_host_check("a.example.com", 13, err, sizeof err), 0);
	cr_assert_eq(sni_host_check("A-1.b2", 6, err, sizeof err), 0);
	cr_assert_eq(sni_host_check("", 0, err, sizeof err), -1);
	cr_assert_eq(sni_host_check("a..b", 4, err, sizeof err), -1);
	cr_assert(strstr(err, "empty label"), "%s", err);
	cr_assert_eq(sni_host_check("a.b.", 4, err, sizeof err), -1);
	cr_assert_eq(sni_host_check("-a.b", 4, err, sizeof err), -1);
	cr_assert_eq(sni_host_check("a-.b", 4, err, sizeof err), -1);
	cr_assert_eq(sni_host_check("a_b.c", 5, err, sizeof err), -1);
	cr_assert(strstr(err, "'_'"), "%s", err);
	cr_assert_eq(sni_host_check("a b", 3, err, sizeof err), -1);
	cr_assert_eq(sni_host_check("10.0.0.1", 8, err, sizeof err), 0, "digits are labels too");

	char l63[64], l64[65];
	memset(l63, 'a', 63);
	l63[63] = 0;
	memset(l64, 'a', 64);
	l64[64] = 0;
	cr_assert_eq(sni_host_check(l63, 63, err, sizeof err), 0);
	cr_assert_eq(sni_host_check(l64, 64, err, sizeof err), -1);
	cr_assert(strstr(err, "63"), "%s", err);

	char big[260];
	for (int i = 0; i < 254; i++)
		big[i] = i % 2 ? '.' : 'a';
	big[253] = 'a';
	big[254] = 0;
	cr_assert_eq(sni_host_check(big, 253, err, sizeof err), 0);
	cr_assert_eq(sni_host_check(big, 254, err, sizeof err), -1, "254 characters accepted");
}

Test(sni, pattern_check)
{
	char err[300];
	cr_assert_eq(sni_pattern_check(PAT, err, sizeof err), 0, "%s", err);
	cr_assert_eq(sni_pattern_check("$(nodeId).kafka.example.com", err, sizeof err), 0);
	cr_assert_eq(sni_pattern_check("kafka.example.com-$(nodeId)", err, sizeof err), 0);
	cr_assert_eq(sni_pattern_check("b$(nodeId)x", err, sizeof err), 0);

	cr_assert_eq(sni_pattern_check("broker.kafka.example.com", err, sizeof err), -1);
	cr_assert(strstr(err, "$(nodeId)"), "%s", err);
	cr_assert_eq(sni_pattern_check("b-$(nodeId)-$(nodeId).x", err, sizeof err), -1);
	cr_assert(strstr(err, "more than once"), "%s", err);
	cr_assert_eq(sni_pattern_check("$(nodeid).x", err, sizeof err), -1, "placeholder is "
	    "case-sensitive");
	cr_assert_eq(sni_pattern_check("-$(nodeId).x", err, sizeof err), -1);
	cr_assert_eq(sni_pattern_check("b_$(nodeId).x", err, sizeof err), -1);
	cr_assert_eq(sni_pattern_check("b.$(nodeId)..x", err, sizeof err), -1);
	cr_assert_eq(sni_pattern_check("b$(nodeId).x.", err, sizeof err), -1);
	cr_assert_eq(sni_pattern_check("$(nodeId)", err, sizeof err), 0);

	/* a label of 54 characters + 10 digits is 64: refused for the longest id */
	char pat[128];
	memset(pat, 'a', 54);
	strcpy(pat + 54, "$(nodeId).x");
	cr_assert_eq(sni_pattern_check(pat, err, sizeof err), -1);
	cr_assert(strstr(err, "2147483647"), "%s", err);
	pat[0] = '.';
	memmove(pat, pat + 1, strlen(pat));   /* 53 + 10 = 63: fine */
	cr_assert_eq(sni_pattern_check(pat, err, sizeof err), 0, "%s", err);
}

Test(sni, classify_bootstrap)
{
	int32_t id;
	cr_assert_eq(cls(BOOT, PAT, BOOT, &id), SNI_BOOTSTRAP);
	cr_assert_eq(cls(BOOT, PAT, "BootStrap.Kafka.EXAMPLE.com", &id), SNI_BOOTSTRAP);
	cr_assert_eq(cls(BOOT, PAT, BOOT ".", &id), SNI_BOOTSTRAP);
	is_unknown(BOOT, PAT, BOOT "..");
	is_unknown(BOOT, PAT, "bootstrap.kafka.example.co");
	is_unknown(BOOT, PAT, "xbootstrap.kafka.example.com");
	is_unknown(BOOT, PAT, ".");
	is_unknown(BOOT, PAT, "");
	is_unknown(BOOT, PAT, NULL);
}

Test(sni, classify_broker)
{
	is_broker("broker-0.kafka.example.com", 0);
	is_broker("broker-1.kafka.example.com", 1);
	is_broker("BROKER-42.Kafka.Example.Com", 42);
	is_broker("broker-7.kafka.example.com.", 7);
	is_broker("broker-2147483647.kafka.example.com", INT32_MAX);

	is_unknown(BOOT, PAT, "broker-2147483648.kafka.example.com");      /* overflow */
	is_unknown(BOOT, PAT, "broker-99999999999999999999.kafka.example.com");
	is_unknown(BOOT, PAT, "broker-.kafka.example.com");                 /* no digits */
	is_unknown(BOOT, PAT, "broker--1.kafka.example.com");               /* sign */
	is_unknown(BOOT, PAT, "broker-+1.kafka.example.com");
	is_unknown(BOOT, PAT, "broker-1a.kafka.example.com");
	is_unknown(BOOT, PAT, "broker- 1.kafka.example.com");
	is_unknown(BOOT, PAT, "broker-01.kafka.example.com");               /* leading zero */
	is_unknown(BOOT, PAT, "broker-00.kafka.example.com");
	is_unknown(BOOT, PAT, "broker-1.kafka.example.org");
	is_unknown(BOOT, PAT, "broker-1.kafka.example.com..");
	is_unknown(BOOT, PAT, "xbroker-1.kafka.example.com");
	is_unknown(BOOT, PAT, "broker-1.kafka.example.comx");
	is_unknown(BOOT, PAT, "broker-1");
	is_unknown(BOOT, PAT, "kafka.example.com");
	is_unknown(BOOT, PAT, "nope.example.com");
}

Test(sni, classify_embedded_nul)
{
	int32_t id = -77;
	static const char name[] = "broker-1.kafka.example.com\0x";
	cr_assert_eq(sni_classify(BOOT, PAT, name, sizeof name - 1, &id), SNI_UNKNOWN);
	static const char boot[] = BOOT "\0";
	cr_assert_eq(sni_classify(BOOT, PAT, boot, sizeof boot - 1, &id), SNI_UNKNOWN);
	/* not NUL-terminated: only len bytes are read */
	char buf[64];
	memcpy(buf, "broker-12.kafka.example.comZZZZ", 31);
	cr_assert_eq(sni_classify(BOOT, PAT, buf, 27, &id), SNI_BROKER);
	cr_assert_eq(id, 12);
}

Test(sni, classify_pattern_shapes)
{
	int32_t id;
	/* the id alone as the first label */
	cr_assert_eq(cls("boot.k.example", "$(nodeId).k.example", "5.k.example", &id), SNI_BROKER);
	cr_assert_eq(id, 5);
	is_unknown("boot.k.example", "$(nodeId).k.example", ".k.example");
	is_unknown("boot.k.example", "$(nodeId).k.example", "x5.k.example");
	/* the id at the very end */
	cr_assert_eq(cls("boot", "kafka-$(nodeId)", "kafka-19", &id), SNI_BROKER);
	cr_assert_eq(id, 19);
	cr_assert_eq(cls("boot", "kafka-$(nodeId)", "KAFKA-19.", &id), SNI_BROKER);
	is_unknown("boot", "kafka-$(nodeId)", "kafka-19.x");
	/* text on both sides in the same label */
	cr_assert_eq(cls("boot", "b$(nodeId)x.example", "b3x.example", &id), SNI_BROKER);
	cr_assert_eq(id, 3);
	is_unknown("boot", "b$(nodeId)x.example", "bx.example");
	/* the prefix and suffix must not overlap */
	is_unknown("boot", "ab$(nodeId)ba", "aba");
	/* pattern is the placeholder only */
	cr_assert_eq(cls("boot", "$(nodeId)", "0", &id), SNI_BROKER);
	cr_assert_eq(id, 0);
	cr_assert_eq(cls("boot", "$(nodeId)", "boot", &id), SNI_BOOTSTRAP);
}

Test(sni, match_str)
{
	cr_assert_str_eq(sni_match_str(SNI_BOOTSTRAP), "bootstrap");
	cr_assert_str_eq(sni_match_str(SNI_BROKER), "broker");
	cr_assert_str_eq(sni_match_str(SNI_UNKNOWN), "unknown");
	cr_assert_str_eq(sni_match_str((enum sni_match)99), "unknown");
}

/* ---- config: gateway = sni ---- */

/* Client TLS, which gateway = sni requires. */
#define SNI_TLS "tls_cert = /etc/ferry/tls/cert.pem\ntls_key = /etc/ferry/tls/key.pem\n"

#define SNI_CLUSTER \
	"[cluster s]\n" \
	"upstream = 127.0.0.1:9092\n" \
	"bootstrap = 0.0.0.0:9443\n" \
	"gateway = sni\n" \
	"sni_bootstrap_host = kafka.example.com\n" \
	"sni_broker_pattern = broker-$(nodeId).kafka.example.com\n" SNI_TLS

/* Parse text; returns the errors joined by '\n' (caller frees) and the rc. */
static char *
cfg_try(const char *text, struct cfg *c, int *rc)
{
	struct cfg_errors e;
	size_t len = 1;
	cfg_errors_init(&e);
	*rc = cfg_parse_string("t.ini", text, strlen(text), c, &e);
	for (size_t i = 0; i < e.n; i++)
		len += strlen(e.msg[i]) + 1;
	char *s = calloc(1, len);
	cr_assert_not_null(s);
	for (size_t i = 0; i < e.n; i++) {
		strcat(s, e.msg[i]);
		strcat(s, "\n");
	}
	cfg_errors_free(&e);
	return s;
}

static void
cfg_bad(const char *text, const char *want)
{
	struct cfg c;
	int rc;
	char *got = cfg_try(text, &c, &rc);
	cr_assert_eq(rc, -1, "accepted:\n%s", text);
	cr_assert(strstr(got, want) != NULL, "want '%s' in:\n%s", want, got);
	free(got);
}

Test(sni_config, model_and_canonical)
{
	struct cfg c, c2;
	int rc;
	char *got = cfg_try(SNI_CLUSTER, &c, &rc);
	cr_assert_eq(rc, 0, "%s", got);
	free(got);
	const struct cfg_cluster *cl = &c.clusters[0];
	cr_assert_eq(cl->gateway, CFG_GATEWAY_SNI);
	cr_assert_str_eq(cl->sni_bootstrap_host, "kafka.example.com");
	cr_assert_str_eq(cl->sni_broker_pattern, "broker-$(nodeId).kafka.example.com");
	cr_assert_eq(cl->n_brokers, 0);
	cr_assert_null(cl->node_ids);
	cr_assert_eq(cl->broker_port_first, 0);
	cr_assert_eq(cl->broker_port_last, 0);
	cr_assert_eq(cfg_node_index(cl, 0), -1);
	cr_assert_str_eq(cfg_gateway_str(cl->gateway), "sni");
	cr_assert_str_eq(cfg_gateway_str(CFG_GATEWAY_PORTS), "ports");
	cr_assert_str_eq(cfg_gateway_str((enum cfg_gateway)7), "unknown");

	char *canon = cfg_cluster_canonical(cl);
	cr_assert_not_null(canon);
	cr_assert_null(strstr(canon, "broker_ports"), "%s", canon);
	cr_assert_null(strstr(canon, "node_ids"), "%s", canon);
	cr_assert_null(strstr(canon, "advertised_host"), "%s", canon);
	cr_assert_not_null(strstr(canon, "\ngateway = sni\n"), "%s", canon);
	cr_assert_not_null(strstr(canon, "\nsni_bootstrap_host = kafka.example.com\n"), "%s", canon);
	cr_assert_not_null(strstr(canon,
	    "\nsni_broker_pattern = broker-$(nodeId).kafka.example.com\n"), "%s", canon);
	got = cfg_try(canon, &c2, &rc);
	cr_assert_eq(rc, 0, "canonical text refused: %s\n%s", got, canon);
	free(got);
	char *canon2 = cfg_cluster_canonical(&c2.clusters[0]);
	cr_assert_str_eq(canon, canon2, "canonical text is not a fixed point");
	free(canon2);
	free(canon);
	cfg_free(&c2);
	cfg_free(&c);
}

Test(sni_config, ports_is_the_default)
{
	struct cfg c;
	int rc;
	char *got = cfg_try("[cluster p]\nupstream = 127.0.0.1:9092\n"
	    "bootstrap = 127.0.0.1:9192\nbroker_ports = 9193-9194\n", &c, &rc);
	cr_assert_eq(rc, 0, "%s", got);
	free(got);
	cr_assert_eq(c.clusters[0].gateway, CFG_GATEWAY_PORTS);
	cr_assert_eq(c.clusters[0].n_brokers, 2);
	char *canon = cfg_cluster_canonical(&c.clusters[0]);
	cr_assert_not_null(strstr(canon, "\ngateway = ports\n"), "%s", canon);
	cr_assert_null(strstr(canon, "sni_"), "%s", canon);
	free(canon);
	cfg_free(&c);
	got = cfg_try("[cluster p]\nupstream = 127.0.0.1:9092\n"
	    "bootstrap = 127.0.0.1:9192\nbroker_ports = 9193-9194\ngateway = ports\n", &c, &rc);
	cr_assert_eq(rc, 0, "%s", got);
	free(got);
	cfg_free(&c);
}

Test(sni_config, errors_name_their_line)
{
	cfg_bad("[cluster s]\nupstream = 127.0.0.1:9092\nbootstrap = 127.0.0.1:9443\n"
	    "gateway = tunnel\n", "t.ini:4: gateway: invalid value 'tunnel' (use ports or sni)");
	/* sni keys without the gateway */
	cfg_bad("[cluster p]\nupstream = 127.0.0.1:9092\nbootstrap = 127.0.0.1:9192\n"
	    "broker_ports = 9193\nsni_bootstrap_host = k.example\n",
	    "t.ini:5: sni_bootstrap_host: only used with gateway = sni");
	cfg_bad("[cluster p]\nupstream = 127.0.0.1:9092\nbootstrap = 127.0.0.1:9192\n"
	    "broker_ports = 9193\nsni_broker_pattern = b$(nodeId).k\n",
	    "t.ini:5: sni_broker_pattern: only used with gateway = sni");
	/* the gateway without its keys */
	cfg_bad("[cluster s]\nupstream = 127.0.0.1:9092\nbootstrap = 127.0.0.1:9443\n"
	    "gateway = sni\n" SNI_TLS,
	    "t.ini:4: gateway = sni needs sni_bootstrap_host in [cluster s]\n"
	    "t.ini:4: gateway = sni needs sni_broker_pattern in [cluster s]\n");
	/* the server name is in the TLS ClientHello: no TLS, no gateway */
	cfg_bad("[cluster s]\nupstream = 127.0.0.1:9092\nbootstrap = 127.0.0.1:9443\n"
	    "gateway = sni\nsni_bootstrap_host = kafka.example.com\n"
	    "sni_broker_pattern = broker-$(nodeId).kafka.example.com\n",
	    "t.ini:4: gateway = sni needs client TLS (tls_cert and tls_key): the broker is "
	    "chosen by the server name of the TLS ClientHello\n");
	/* port-per-broker keys refused with sni */
	cfg_bad(SNI_CLUSTER "broker_ports = 9444-9446\n",
	    ": broker_ports: not used with gateway = sni (every broker is reached on the "
	    "bootstrap port by its server name, sni_broker_pattern); remove it");
	cfg_bad(SNI_CLUSTER "node_ids = 1-3\n", ": node_ids: not used with gateway = sni");
	cfg_bad(SNI_CLUSTER "advertised_host = proxy.example\n",
	    ": advertised_host: not used with gateway = sni");
	/* the values */
	cfg_bad("[cluster s]\nupstream = 127.0.0.1:9092\nbootstrap = 127.0.0.1:9443\n"
	    "gateway = sni\nsni_bootstrap_host = kafka_boot.example\n"
	    "sni_broker_pattern = broker-$(nodeId).kafka.example.com\n" SNI_TLS,
	    "t.ini:5: sni_bootstrap_host: 'kafka_boot.example': invalid character '_'");
	cfg_bad("[cluster s]\nupstream = 127.0.0.1:9092\nbootstrap = 127.0.0.1:9443\n"
	    "gateway = sni\nsni_bootstrap_host = kafka.example.com\n"
	    "sni_broker_pattern = broker.kafka.example.com\n" SNI_TLS,
	    "t.ini:6: sni_broker_pattern: 'broker.kafka.example.com' has no $(nodeId)");
	cfg_bad("[cluster s]\nupstream = 127.0.0.1:9092\nbootstrap = 127.0.0.1:9443\n"
	    "gateway = sni\nsni_bootstrap_host = kafka.example.com\n"
	    "sni_broker_pattern = b$(nodeId)-$(nodeId).example.com\n" SNI_TLS,
	    "t.ini:6: sni_broker_pattern: 'b$(nodeId)-$(nodeId).example.com' has $(nodeId) "
	    "more than once");
	cfg_bad("[cluster s]\nupstream = 127.0.0.1:9092\nbootstrap = 127.0.0.1:9443\n"
	    "gateway = sni\nsni_bootstrap_host = kafka.example.com\n"
	    "sni_broker_pattern = b_$(nodeId).example.com\n" SNI_TLS,
	    "t.ini:6: sni_broker_pattern: 'b_$(nodeId).example.com' is not a host name");
	/* a bootstrap name the pattern could produce */
	cfg_bad("[cluster s]\nupstream = 127.0.0.1:9092\nbootstrap = 127.0.0.1:9443\n"
	    "gateway = sni\nsni_bootstrap_host = broker-0.kafka.example.com\n"
	    "sni_broker_pattern = broker-$(nodeId).kafka.example.com\n" SNI_TLS,
	    "t.ini:5: sni_bootstrap_host: 'broker-0.kafka.example.com' is also the name of "
	    "broker 0");
	cfg_bad("[cluster s]\nupstream = 127.0.0.1:9092\nbootstrap = 127.0.0.1:9443\n"
	    "gateway = sni\nsni_bootstrap_host = BROKER-7.Kafka.example.com\n"
	    "sni_broker_pattern = broker-$(nodeId).kafka.example.com\n" SNI_TLS,
	    "is also the name of broker 7");
}

Test(sni_config, one_listener_so_no_port_conflict_with_a_neighbour)
{
	struct cfg c;
	int rc;
	/* cluster p's broker ports start right after s's bootstrap port */
	char *got = cfg_try(SNI_CLUSTER "[cluster p]\nupstream = 127.0.0.1:9092\n"
	    "bootstrap = 127.0.0.1:9440\nbroker_ports = 9441-9442\n", &c, &rc);
	cr_assert_eq(rc, 0, "%s", got);
	free(got);
	cfg_free(&c);
	cfg_bad(SNI_CLUSTER "[cluster p]\nupstream = 127.0.0.1:9092\n"
	    "bootstrap = 127.0.0.1:9440\nbroker_ports = 9441-9443\n",
	    "port 9443 already used by bootstrap of [cluster s]");
}

/* ---- the server_name extension of a ClientHello ---- */

static int
ext_name(const void *ext, size_t len, char *out, size_t outlen)
{
	const char *n = NULL;
	size_t nl = 0;
	if (sni_ext_host_name(ext, len, &n, &nl) != 0)
		return -1;
	snprintf(out, outlen, "%.*s", (int)nl, n);
	return (int)nl;
}

Test(sni_ext, host_name)
{
	char out[300];
	/* list of 9 bytes: type 0, length 6, "kafka." */
	static const unsigned char one[] = { 0, 9, 0, 0, 6, 'k', 'a', 'f', 'k', 'a', '.' };
	cr_assert_eq(ext_name(one, sizeof one, out, sizeof out), 6);
	cr_assert_str_eq(out, "kafka.");
	/* another name type first, then host_name */
	static const unsigned char two[] = { 0, 9, 7, 0, 1, 'x', 0, 0, 2, 'a', 'b' };
	cr_assert_eq(ext_name(two, sizeof two, out, sizeof out), 2);
	cr_assert_str_eq(out, "ab");
	/* the name's bytes as sent (classify refuses a NUL inside) */
	static const unsigned char nul[] = { 0, 6, 0, 0, 3, 'a', 0, 'b' };
	cr_assert_eq(ext_name(nul, sizeof nul, out, sizeof out), 3);
}

Test(sni_ext, malformed)
{
	char out[64];
	static const unsigned char empty_list[] = { 0, 0 };
	static const unsigned char short_len[] = { 0, 9, 0, 0, 6, 'k', 'a' };
	static const unsigned char list_too_long[] = { 0, 10, 0, 0, 6, 'k', 'a', 'f', 'k', 'a', '.' };
	static const unsigned char entry_too_long[] = { 0, 4, 0, 0, 2, 'k' };
	static const unsigned char empty_name[] = { 0, 3, 0, 0, 0 };
	static const unsigned char two_names[] = { 0, 8, 0, 0, 1, 'a', 0, 0, 1, 'b' };
	static const unsigned char no_host[] = { 0, 4, 7, 0, 1, 'x' };
	static const unsigned char truncated_entry[] = { 0, 2, 0, 0 };
	cr_assert_eq(ext_name(NULL, 0, out, sizeof out), -1);
	cr_assert_eq(ext_name(empty_list, 1, out, sizeof out), -1);
	cr_assert_eq(ext_name(empty_list, sizeof empty_list, out, sizeof out), -1);
	cr_assert_eq(ext_name(short_len, sizeof short_len, out, sizeof out), -1);
	cr_assert_eq(ext_name(list_too_long, sizeof list_too_long, out, sizeof out), -1);
	cr_assert_eq(ext_name(entry_too_long, sizeof entry_too_long, out, sizeof out), -1);
	cr_assert_eq(ext_name(empty_name, sizeof empty_name, out, sizeof out), -1);
	cr_assert_eq(ext_name(two_names, sizeof two_names, out, sizeof out), -1);
	cr_assert_eq(ext_name(no_host, sizeof no_host, out, sizeof out), -1);
	cr_assert_eq(ext_name(truncated_entry, sizeof truncated_entry, out, sizeof out), -1);
	/* every strict prefix of a good one is refused */
	static const unsigned char good[] = { 0, 9, 0, 0, 6, 'k', 'a', 'f', 'k', 'a', '.' };
	for (size_t n = 0; n < sizeof good; n++)
		cr_assert_eq(ext_name(good, n, out, sizeof out), -1, "prefix %zu", n);
}
