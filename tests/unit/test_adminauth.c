/*
 * test_adminauth — the admin API's access control: the [ferry] keys of
 * common/config.c that configure it (values, defaults, cross-checks with
 * their file:line messages, the non-loopback refusal) and the decision the
 * admin process takes (supervisor/adminauth.c: bearer header, open paths,
 * the decision table, the refusal counters, credentials from a message).
 * Reading the credentials' files is test_admincreds.c's.
 */
#include <criterion/criterion.h>

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "tests/unit/ferry_section.h"
#include "supervisor/adminauth.h"

static void
expect_error(const char *ferry, const char *msg)
{
	struct res r;

	parse(&r, ferry);
	cr_expect_eq(r.rc, -1, "accepted: %s", ferry);
	cr_expect_geq(r.e.n, 1);
	bool found = false;
	for (size_t i = 0; i < r.e.n; i++)
		if (strstr(r.e.msg[i], msg) != NULL)
			found = true;
	cr_expect(found, "wanted '%s' for %s, got '%s'", msg, ferry, r.e.n ? r.e.msg[0] : "");
	done(&r);
}

static void
setup(void)
{
	cr_assert_neq(sodium_init(), -1);
}

TestSuite(adminauth, .init = setup);

Test(adminauth, config_defaults)
{
	struct res r;

	parse(&r, "");
	cr_assert_eq(r.rc, 0);
	cr_expect_eq(r.c.control_socket_mode, 0600);
	cr_expect_str_empty(r.c.control_socket_group);
	cr_expect_str_empty(r.c.admin_token_file);
	cr_expect_str_eq(r.c.admin_open_paths, "/admin/health,/admin/ready,/metrics");
	cr_expect_str_empty(r.c.admin_tls_cert);
	cr_expect_str_empty(r.c.admin_tls_key);
	cr_expect_str_empty(r.c.admin_tls_client_ca);
	cr_expect_not(r.c.admin_insecure);
	done(&r);
}

Test(adminauth, config_every_key)
{
	struct res r;

	parse(&r, "control_socket_mode = 0660\ncontrol_socket_group = ferryadm\n"
	    "admin_token_file = /etc/ferry/token\n"
	    "admin_open_paths = /admin/health , /metrics\n"
	    "admin_tls_cert = /etc/ferry/admin.crt\nadmin_tls_key = /etc/ferry/admin.key\n"
	    "admin_tls_client_ca = /etc/ferry/ca.crt\nadmin_insecure = on\n");
	cr_assert_eq(r.rc, 0, "%s", r.e.n ? r.e.msg[0] : "");
	cr_expect_eq(r.c.control_socket_mode, 0660);
	cr_expect_str_eq(r.c.control_socket_group, "ferryadm");
	cr_expect_str_eq(r.c.admin_token_file, "/etc/ferry/token");
	cr_expect_str_eq(r.c.admin_open_paths, "/admin/health,/metrics");
	cr_expect_str_eq(r.c.admin_tls_cert, "/etc/ferry/admin.crt");
	cr_expect_str_eq(r.c.admin_tls_key, "/etc/ferry/admin.key");
	cr_expect_str_eq(r.c.admin_tls_client_ca, "/etc/ferry/ca.crt");
	cr_expect(r.c.admin_insecure);
	cr_expect_eq(cfg_ferry_key_line(&r.c, "admin_insecure"), 9);
	done(&r);

	parse(&r, "control_socket_mode = 640\ncontrol_socket_group = 1234\n"
	    "admin_open_paths = none\n");
	cr_assert_eq(r.rc, 0);
	cr_expect_eq(r.c.control_socket_mode, 0640);
	cr_expect_str_eq(r.c.control_socket_group, "1234");
	cr_expect_str_empty(r.c.admin_open_paths);
	done(&r);
	parse(&r, "admin_open_paths =\n");
	cr_assert_eq(r.rc, 0);
	cr_expect_str_empty(r.c.admin_open_paths);
	done(&r);
}

Test(adminauth, config_errors)
{
	expect_error("control_socket_mode = 0666\n",
	    "t.ini:2: control_socket_mode: 0666 lets every local user control ferryd");
	expect_error("control_socket_mode = 0604\n", "lets every local user");
	expect_error("control_socket_mode = 0400\n", "leaves out the owner's read and write");
	expect_error("control_socket_mode = 0x1ff\n", "is not an octal permission mode");
	expect_error("control_socket_mode = 01660\n", "is not an octal permission mode");
	expect_error("control_socket_mode = 99\n", "is not an octal permission mode");
	expect_error("control_socket_mode =\n", "is not an octal permission mode");
	expect_error("control_socket_group = a b\n", "control_socket_group: invalid group 'a b'");
	expect_error("control_socket_group = -x\n", "invalid group");
	expect_error("admin_token_file = token\n", "admin_token_file: 'token' is not an absolute path");
	expect_error("admin_tls_cert = x.pem\nadmin_tls_key = /k\n", "admin_tls_cert: 'x.pem' is not an "
	    "absolute path");
	expect_error("admin_open_paths = /a,metrics\n",
	    "admin_open_paths: entry 2: 'metrics' is not a path");
	expect_error("admin_open_paths = /a,,/b\n", "entry 2: '' is not a path");
	expect_error("admin_open_paths = /a?x=1\n", "not allowed in a path");
	expect_error("admin_insecure = maybe\n", "admin_insecure: invalid value 'maybe'");
	expect_error("admin_tls_cert = /c\n", "t.ini:2: admin_tls_cert needs admin_tls_key");
	expect_error("admin_tls_key = /k\n", "t.ini:2: admin_tls_key needs admin_tls_cert");
	expect_error("admin_tls_client_ca = /ca\n", "t.ini:2: admin_tls_client_ca needs admin_tls_cert");

	char many[2048] = "admin_open_paths = ";
	for (int i = 0; i < 33; i++)
		strcat(many, i ? ",/p" : "/p");
	strcat(many, "\n");
	expect_error(many, "at most 32 paths");
}

Test(adminauth, non_loopback_admin_listen_needs_credentials)
{
	struct res r;

	expect_error("admin_listen = 0.0.0.0:9190\n", "t.ini:2: admin_listen 0.0.0.0:9190 is not a "
	    "loopback address and the admin API has no credentials");
	expect_error("admin_listen = [::]:9190\n", "is not a loopback address");
	parse(&r, "admin_listen = 0.0.0.0:9190\nadmin_insecure = on\n");
	cr_expect_eq(r.rc, 0);
	done(&r);
	parse(&r, "admin_listen = 0.0.0.0:9190\nadmin_token_file = /t\n");
	cr_expect_eq(r.rc, 0);
	done(&r);
	parse(&r, "admin_listen = 0.0.0.0:9190\nadmin_tls_cert = /c\nadmin_tls_key = /k\n"
	    "admin_tls_client_ca = /ca\n");
	cr_expect_eq(r.rc, 0);
	done(&r);
	/* TLS alone is not a credential */
	expect_error("admin_listen = 0.0.0.0:9190\nadmin_tls_cert = /c\nadmin_tls_key = /k\n",
	    "no credentials");
	parse(&r, "admin_listen = 127.0.0.2:9190\n");
	cr_expect_eq(r.rc, 0);
	done(&r);
	parse(&r, "admin_listen = [::1]:9190\n");
	cr_expect_eq(r.rc, 0);
	done(&r);
	parse(&r, "admin_listen = off\n");
	cr_expect_eq(r.rc, 0);
	done(&r);
}

Test(adminauth, loopback)
{
	cr_expect(cfg_addr_is_loopback("127.0.0.1"));
	cr_expect(cfg_addr_is_loopback("127.255.0.9"));
	cr_expect(cfg_addr_is_loopback("::1"));
	cr_expect(cfg_addr_is_loopback("::ffff:127.0.0.1"));
	cr_expect_not(cfg_addr_is_loopback("0.0.0.0"));
	cr_expect_not(cfg_addr_is_loopback("::"));
	cr_expect_not(cfg_addr_is_loopback("10.0.0.1"));
	cr_expect_not(cfg_addr_is_loopback("128.0.0.1"));
	cr_expect_not(cfg_addr_is_loopback("::ffff:10.0.0.1"));
	cr_expect_not(cfg_addr_is_loopback("::2"));
	cr_expect_not(cfg_addr_is_loopback("localhost"));  /* stored as 127.0.0.1 */
}

Test(adminauth, bearer_header)
{
	const char *t;
	size_t n;

	cr_assert_eq(adminauth_bearer("Bearer abc", &t, &n), 0);
	cr_expect_eq(n, 3);
	cr_expect_eq(strncmp(t, "abc", 3), 0);
	cr_assert_eq(adminauth_bearer("bearer \t abc \t", &t, &n), 0);
	cr_expect_eq(n, 3);
	cr_expect_eq(adminauth_bearer("Bearer", &t, &n), -1);
	cr_expect_eq(adminauth_bearer("Bearer ", &t, &n), -1);
	cr_expect_eq(adminauth_bearer("Bearerabc", &t, &n), -1);
	cr_expect_eq(adminauth_bearer("Basic dXNlcjpwYXNz", &t, &n), -1);
	cr_expect_eq(adminauth_bearer("Bearer a b", &t, &n), -1);
	cr_expect_eq(adminauth_bearer(NULL, &t, &n), -1);
}

Test(adminauth, open_paths)
{
	const char *l = "/admin/health,/admin/ready,/metrics";

	cr_expect(adminauth_path_open(l, "/admin/health"));
	cr_expect(adminauth_path_open(l, "/admin/ready"));
	cr_expect(adminauth_path_open(l, "/metrics"));
	cr_expect_not(adminauth_path_open(l, "/admin/healt"));
	cr_expect_not(adminauth_path_open(l, "/admin/health/"));
	cr_expect_not(adminauth_path_open(l, "/admin"));
	cr_expect_not(adminauth_path_open(l, "/metrics,"));
	cr_expect_not(adminauth_path_open(l, ""));
	cr_expect_not(adminauth_path_open("", "/metrics"));
	cr_expect(adminauth_path_open("/x", "/x"));
}

static void
auth_with_token(struct adminauth *a, const char *tok, bool certs)
{
	memset(a, 0, sizeof *a);
	snprintf(a->open_paths, sizeof a->open_paths, "%s", CFG_DEFAULT_OPEN_PATHS);
	if (tok != NULL) {
		a->token_set = true;
		crypto_hash_sha256(a->token_digest, (const unsigned char *)tok, strlen(tok));
	}
	a->client_certs = certs;
}

Test(adminauth, decision_table)
{
	struct adminauth a;
	const char *tok = "s3cret-s3cret-s3cret";

	auth_with_token(&a, tok, false);
	cr_expect_eq(adminauth_check(&a, true, "/admin/clusters", NULL, false), ADMINPROTO_AUTH_LOCAL);
	cr_expect_eq(adminauth_check(&a, false, "/admin/health", NULL, false), ADMINPROTO_AUTH_OPEN_PATH);
	cr_expect_eq(adminauth_check(&a, false, "/metrics", "Bearer nope", false),
	    ADMINPROTO_AUTH_OPEN_PATH);
	cr_expect_eq(adminauth_check(&a, false, "/admin/clusters", NULL, false), ADMINPROTO_AUTH_MISSING);
	cr_expect_eq(adminauth_check(&a, false, "/admin/clusters", "Bearer s3cret-s3cret-s3cret",
	    false), ADMINPROTO_AUTH_TOKEN);
	cr_expect_eq(adminauth_check(&a, false, "/admin/clusters", "Bearer s3cret-s3cret-s3creT",
	    false), ADMINPROTO_AUTH_WRONG);
	cr_expect_eq(adminauth_check(&a, false, "/admin/clusters", "Bearer s3cret-s3cret-s3cret-",
	    false), ADMINPROTO_AUTH_WRONG);
	cr_expect_eq(adminauth_check(&a, false, "/admin/clusters", "Basic eA==", false),
	    ADMINPROTO_AUTH_MALFORMED);
	/* a client certificate counts only when client certificates are configured */
	cr_expect_eq(adminauth_check(&a, false, "/admin/clusters", NULL, true), ADMINPROTO_AUTH_MISSING);

	auth_with_token(&a, NULL, true);
	cr_expect_eq(adminauth_check(&a, false, "/admin/clusters", NULL, true), ADMINPROTO_AUTH_CERT);
	cr_expect_eq(adminauth_check(&a, false, "/admin/clusters", NULL, false), ADMINPROTO_AUTH_MISSING);
	cr_expect_eq(adminauth_check(&a, false, "/admin/clusters", "Bearer whatever-token",
	    false), ADMINPROTO_AUTH_WRONG);
	cr_expect(strstr(adminauth_refusal_msg(&a, ADMINPROTO_AUTH_MISSING), "client certificate") != NULL);

	auth_with_token(&a, tok, true);
	cr_expect_eq(adminauth_check(&a, false, "/admin/clusters", NULL, true), ADMINPROTO_AUTH_CERT);
	cr_expect_eq(adminauth_check(&a, false, "/admin/clusters", "Bearer s3cret-s3cret-s3cret",
	    false), ADMINPROTO_AUTH_TOKEN);

	auth_with_token(&a, NULL, false);
	cr_expect_eq(adminauth_check(&a, false, "/admin/clusters", NULL, false),
	    ADMINPROTO_AUTH_UNPROTECTED);

	for (int r = ADMINPROTO_AUTH_LOCAL; r <= ADMINPROTO_AUTH_WRONG; r++) {
		cr_expect_eq(adminproto_auth_allowed((enum adminproto_auth)r), r <= ADMINPROTO_AUTH_CERT);
		cr_expect_str_neq(adminproto_auth_str((enum adminproto_auth)r), "unknown");
	}
	cr_expect(strstr(adminauth_challenge(ADMINPROTO_AUTH_WRONG), "error=\"invalid_token\"") != NULL);
	cr_expect_str_eq(adminauth_challenge(ADMINPROTO_AUTH_MISSING),
	    "WWW-Authenticate: Bearer realm=\"ferry\"\r\n");
}

Test(adminauth, refusal_counters_text)
{
	struct adminproto_counters k;
	char buf[1024], small[64];

	memset(&k, 0, sizeof k);
	adminauth_count(&k, ADMINPROTO_AUTH_MISSING);
	adminauth_count(&k, ADMINPROTO_AUTH_MISSING);
	adminauth_count(&k, ADMINPROTO_AUTH_WRONG);
	adminauth_count(&k, ADMINPROTO_AUTH_TOKEN);      /* allowed: not counted */
	adminauth_count(&k, ADMINPROTO_AUTH_LOCAL);
	atomic_store(&k.tls_failures, 7);
	uint64_t v[4];
	adminproto_counters_read(&k, v);
	cr_assert_gt(adminproto_metrics_text(v, buf, sizeof buf), 0);
	cr_expect(strstr(buf, "ferry_admin_requests_refused_total{reason=\"missing\"} 2\n") != NULL,
	    "%s", buf);
	cr_expect(strstr(buf, "ferry_admin_requests_refused_total{reason=\"malformed\"} 0\n") != NULL);
	cr_expect(strstr(buf, "ferry_admin_requests_refused_total{reason=\"wrong-token\"} 1\n") != NULL);
	cr_expect(strstr(buf, "# TYPE ferry_admin_tls_handshake_failures_total counter\n"
	    "ferry_admin_tls_handshake_failures_total 7\n") != NULL);
	cr_expect_eq(adminproto_metrics_text(v, small, sizeof small), -1);
}

/* credentials as IPC_ADMIN_CREDS carries them: the token's digest, the
 * open paths, no TLS (the HTTPS context from PEM bytes is
 * test_tlsctx.c's) */
Test(adminauth, from_creds_message)
{
	struct adminproto_creds_view v;
	struct adminauth a;
	char err[256];
	const char *tok = "s3cret-s3cret-s3cret";

	memset(&v, 0, sizeof v);
	v.c.version = ADMINPROTO_VERSION;
	v.c.flags = ADMINPROTO_CREDS_TOKEN;
	crypto_hash_sha256(v.c.token_digest, (const unsigned char *)tok, strlen(tok));
	snprintf(v.c.open_paths, sizeof v.c.open_paths, "/metrics");
	cr_assert_eq(adminauth_from_creds(&a, &v, err, sizeof err), 0, "%s", err);
	cr_expect(a.token_set);
	cr_expect_not(a.client_certs);
	cr_expect_null(a.tls_ctx);
	cr_expect_eq(adminauth_check(&a, false, "/metrics", NULL, false), ADMINPROTO_AUTH_OPEN_PATH);
	cr_expect_eq(adminauth_check(&a, false, "/admin/health", NULL, false),
	    ADMINPROTO_AUTH_MISSING);
	cr_expect_eq(adminauth_check(&a, false, "/admin/health", "Bearer s3cret-s3cret-s3cret",
	    false), ADMINPROTO_AUTH_TOKEN);
	adminauth_clear(&a);
	cr_expect_not(a.token_set);

	/* garbage where a certificate should be: refused, nothing kept */
	v.c.flags = ADMINPROTO_CREDS_TLS;
	v.cert = v.key = "not a PEM";
	v.c.cert_len = v.c.key_len = 9;
	cr_expect_eq(adminauth_from_creds(&a, &v, err, sizeof err), -1);
	cr_expect_null(a.tls_ctx);
}
