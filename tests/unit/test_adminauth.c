/*
 * test_adminauth — the admin API's access control: the [ferry] keys of
 * common/config.c that configure it (values, defaults, cross-checks with
 * their file:line messages, the non-loopback refusal) and the pure parts
 * of supervisor/adminauth.c (token file contents and mode, bearer header,
 * open paths, the decision table). Token files are written to a temporary
 * directory for adminauth_load.
 */
#include <criterion/criterion.h>

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/config.h"
#include "supervisor/adminauth.h"
#include "supervisor/plan.h"

#define CL "[cluster a]\nupstream = 127.0.0.1:9092\nbootstrap = 127.0.0.1:19092\n" \
	"broker_ports = 19093-19094\n"

struct res {
	int rc;
	struct cfg c;
	struct cfg_errors e;
};

static void
parse(struct res *r, const char *ferry)
{
	char text[4096];

	snprintf(text, sizeof text, "[ferry]\n%s" CL, ferry);
	memset(r, 0, sizeof *r);
	cfg_errors_init(&r->e);
	r->rc = cfg_parse_string("t.ini", text, strlen(text), &r->c, &r->e);
}

static void
done(struct res *r)
{
	cfg_free(&r->c);
	cfg_errors_free(&r->e);
}

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

Test(adminauth, token_parse)
{
	unsigned char d[ADMINAUTH_DIGEST_LEN], want[ADMINAUTH_DIGEST_LEN];
	char err[256];
	const char *tok = "0123456789abcdef0123";

	crypto_hash_sha256(want, (const unsigned char *)tok, strlen(tok));
	cr_assert_eq(adminauth_token_parse(tok, strlen(tok), d, err, sizeof err), 0, "%s", err);
	cr_expect_eq(memcmp(d, want, sizeof d), 0);
	cr_assert_eq(adminauth_token_parse("0123456789abcdef0123\n", 21, d, err, sizeof err), 0);
	cr_expect_eq(memcmp(d, want, sizeof d), 0);
	cr_assert_eq(adminauth_token_parse("0123456789abcdef0123\r\n", 22, d, err, sizeof err), 0);
	cr_expect_eq(memcmp(d, want, sizeof d), 0);

	cr_expect_eq(adminauth_token_parse("", 0, d, err, sizeof err), -1);
	cr_expect_str_eq(err, "the token file is empty");
	cr_expect_eq(adminauth_token_parse("\n", 1, d, err, sizeof err), -1);
	cr_expect_str_eq(err, "the token file is empty");
	cr_expect_eq(adminauth_token_parse("short\n", 6, d, err, sizeof err), -1);
	cr_expect(strstr(err, "5 characters long (16 to 1024") != NULL, "%s", err);
	cr_expect_eq(adminauth_token_parse("0123456789abcdef0123\n\n", 22, d, err, sizeof err), -1);
	cr_expect(strstr(err, "second line") != NULL, "%s", err);
	cr_expect_eq(adminauth_token_parse("0123456789 abcdef0123", 21, d, err, sizeof err), -1);
	cr_expect(strstr(err, "byte 11") != NULL, "%s", err);
	cr_expect_eq(adminauth_token_parse("0123456789abcdef\xc3\xa9", 18, d, err, sizeof err), -1);
	char big[ADMINAUTH_TOKEN_MAX + 2];
	memset(big, 'x', sizeof big);
	cr_expect_eq(adminauth_token_parse(big, ADMINAUTH_TOKEN_MAX, d, err, sizeof err), 0);
	cr_expect_eq(adminauth_token_parse(big, ADMINAUTH_TOKEN_MAX + 1, d, err, sizeof err), -1);
}

Test(adminauth, token_mode)
{
	char err[256];

	cr_expect_eq(adminauth_token_mode_ok(S_IFREG | 0600, err, sizeof err), 0);
	cr_expect_eq(adminauth_token_mode_ok(S_IFREG | 0400, err, sizeof err), 0);
	cr_expect_eq(adminauth_token_mode_ok(S_IFREG | 0640, err, sizeof err), 0);
	cr_expect_eq(adminauth_token_mode_ok(S_IFREG | 0644, err, sizeof err), -1);
	cr_expect(strstr(err, "mode 0644 lets other users read or change the token") != NULL, "%s", err);
	cr_expect_eq(adminauth_token_mode_ok(S_IFREG | 0660, err, sizeof err), -1);
	cr_expect(strstr(err, "its group change") != NULL, "%s", err);
	cr_expect_eq(adminauth_token_mode_ok(S_IFREG | 0602, err, sizeof err), -1);
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
	cr_expect_eq(adminauth_check(&a, true, "/admin/clusters", NULL, false), ADMINAUTH_LOCAL);
	cr_expect_eq(adminauth_check(&a, false, "/admin/health", NULL, false), ADMINAUTH_OPEN_PATH);
	cr_expect_eq(adminauth_check(&a, false, "/metrics", "Bearer nope", false),
	    ADMINAUTH_OPEN_PATH);
	cr_expect_eq(adminauth_check(&a, false, "/admin/clusters", NULL, false), ADMINAUTH_MISSING);
	cr_expect_eq(adminauth_check(&a, false, "/admin/clusters", "Bearer s3cret-s3cret-s3cret",
	    false), ADMINAUTH_TOKEN);
	cr_expect_eq(adminauth_check(&a, false, "/admin/clusters", "Bearer s3cret-s3cret-s3creT",
	    false), ADMINAUTH_WRONG);
	cr_expect_eq(adminauth_check(&a, false, "/admin/clusters", "Bearer s3cret-s3cret-s3cret-",
	    false), ADMINAUTH_WRONG);
	cr_expect_eq(adminauth_check(&a, false, "/admin/clusters", "Basic eA==", false),
	    ADMINAUTH_MALFORMED);
	/* a client certificate counts only when client certificates are configured */
	cr_expect_eq(adminauth_check(&a, false, "/admin/clusters", NULL, true), ADMINAUTH_MISSING);

	auth_with_token(&a, NULL, true);
	cr_expect_eq(adminauth_check(&a, false, "/admin/clusters", NULL, true), ADMINAUTH_CERT);
	cr_expect_eq(adminauth_check(&a, false, "/admin/clusters", NULL, false), ADMINAUTH_MISSING);
	cr_expect_eq(adminauth_check(&a, false, "/admin/clusters", "Bearer whatever-token",
	    false), ADMINAUTH_WRONG);
	cr_expect(strstr(adminauth_refusal_msg(&a, ADMINAUTH_MISSING), "client certificate") != NULL);

	auth_with_token(&a, tok, true);
	cr_expect_eq(adminauth_check(&a, false, "/admin/clusters", NULL, true), ADMINAUTH_CERT);
	cr_expect_eq(adminauth_check(&a, false, "/admin/clusters", "Bearer s3cret-s3cret-s3cret",
	    false), ADMINAUTH_TOKEN);

	auth_with_token(&a, NULL, false);
	cr_expect_eq(adminauth_check(&a, false, "/admin/clusters", NULL, false),
	    ADMINAUTH_UNPROTECTED);

	for (int r = ADMINAUTH_LOCAL; r <= ADMINAUTH_WRONG; r++) {
		cr_expect_eq(adminauth_allowed((enum adminauth_result)r), r <= ADMINAUTH_CERT);
		cr_expect_str_neq(adminauth_result_str((enum adminauth_result)r), "unknown");
	}
	cr_expect(strstr(adminauth_challenge(ADMINAUTH_WRONG), "error=\"invalid_token\"") != NULL);
	cr_expect_str_eq(adminauth_challenge(ADMINAUTH_MISSING),
	    "WWW-Authenticate: Bearer realm=\"ferry\"\r\n");
}

static char *
write_token(const char *content, mode_t mode)
{
	char *path = strdup("/tmp/ferry-adminauth-XXXXXX");
	int fd = mkstemp(path);

	cr_assert_neq(fd, -1);
	cr_assert_eq(write(fd, content, strlen(content)), (ssize_t)strlen(content));
	cr_assert_eq(fchmod(fd, mode), 0);
	close(fd);
	return path;
}

Test(adminauth, load_token_file)
{
	struct res r;
	struct adminauth a;
	char ferry[1200], err[1024];
	const char *key;
	char *ok = write_token("abcdefghijklmnopqrstuvwxyz\n", 0600);
	char *loose = write_token("abcdefghijklmnopqrstuvwxyz\n", 0644);
	char *empty = write_token("", 0600);

	snprintf(ferry, sizeof ferry, "admin_token_file = %s\n", ok);
	parse(&r, ferry);
	cr_assert_eq(r.rc, 0);
	cr_assert_eq(adminauth_load(&a, &r.c, &key, err, sizeof err), 0, "%s", err);
	cr_expect(a.token_set);
	cr_expect_not(a.client_certs);
	cr_expect_eq(adminauth_check(&a, false, "/admin/config/reload",
	    "Bearer abcdefghijklmnopqrstuvwxyz", false), ADMINAUTH_TOKEN);
	adminauth_clear(&a);
	cr_expect_not(a.token_set);
	done(&r);

	snprintf(ferry, sizeof ferry, "admin_token_file = %s\n", loose);
	parse(&r, ferry);
	cr_expect_eq(adminauth_load(&a, &r.c, &key, err, sizeof err), -1);
	cr_expect(strstr(err, "mode 0644 lets other users read") != NULL, "%s", err);
	cr_expect(strstr(err, loose) == err, "%s", err);
	done(&r);

	snprintf(ferry, sizeof ferry, "admin_token_file = %s\n", empty);
	parse(&r, ferry);
	cr_expect_eq(adminauth_load(&a, &r.c, &key, err, sizeof err), -1);
	cr_expect(strstr(err, "the token file is empty") != NULL, "%s", err);
	done(&r);

	parse(&r, "admin_token_file = /nonexistent/ferry-token\n");
	cr_expect_eq(adminauth_load(&a, &r.c, &key, err, sizeof err), -1);
	cr_expect(strstr(err, "/nonexistent/ferry-token: cannot read") != NULL, "%s", err);
	done(&r);

	parse(&r, "admin_token_file = /tmp\n");
	cr_expect_eq(adminauth_load(&a, &r.c, &key, err, sizeof err), -1);
	cr_expect(strstr(err, "is a directory") != NULL, "%s", err);
	done(&r);

	unlink(ok);
	unlink(loose);
	unlink(empty);
	free(ok);
	free(loose);
	free(empty);
}

/* control_socket_mode/_group apply at start only; the other admin keys
 * reload (the token file is re-read by the admin layer). */
Test(adminauth, restart_only_keys)
{
	struct res run, next;
	struct cfg_errors e;

	parse(&run, "");
	parse(&next, "control_socket_mode = 0660\ncontrol_socket_group = adm\n");
	cr_assert_eq(run.rc, 0);
	cr_assert_eq(next.rc, 0);
	cfg_errors_init(&e);
	cr_expect_eq(plan_check_restart_keys(&run.c, &next.c, &e), 2);
	cr_assert_eq(e.n, 2);
	cr_expect(strstr(e.msg[0], "t.ini:2: control_socket_mode cannot change without restarting "
	    "ferryd (running: 0600, new: 0660)") == e.msg[0], "%s", e.msg[0]);
	cr_expect(strstr(e.msg[1], "t.ini:3: control_socket_group cannot change") == e.msg[1],
	    "%s", e.msg[1]);
	cfg_errors_free(&e);
	done(&next);

	parse(&next, "admin_token_file = /t\nadmin_open_paths = none\nadmin_tls_cert = /c\n"
	    "admin_tls_key = /k\nadmin_tls_client_ca = /ca\nadmin_insecure = on\n");
	cr_assert_eq(next.rc, 0);
	cfg_errors_init(&e);
	cr_expect_eq(plan_check_restart_keys(&run.c, &next.c, &e), 0);
	cfg_errors_free(&e);
	done(&next);
	done(&run);
}

Test(adminauth, socket_group_and_peer_fields)
{
	gid_t gid;
	char err[256], buf[512];
	struct adminauth_peer p;

	cr_expect_eq(adminauth_socket_gid("", &gid, err, sizeof err), 0);
	cr_expect_eq(gid, (gid_t)-1);
	cr_expect_eq(adminauth_socket_gid("1234", &gid, err, sizeof err), 0);
	cr_expect_eq(gid, 1234);
	cr_expect_eq(adminauth_socket_gid("root", &gid, err, sizeof err), 0);
	cr_expect_eq(gid, 0);
	cr_expect_eq(adminauth_socket_gid("no-such-group-ferry", &gid, err, sizeof err), -1);
	cr_expect_str_eq(err, "control_socket_group 'no-such-group-ferry': no such group");

	memset(&p, 0, sizeof p);
	p.local = true;
	p.have_cred = true;
	p.cred.uid = 1001;
	p.cred.gid = 1002;
	p.cred.pid = 4242;
	adminauth_peer_fields(&p, buf, sizeof buf);
	cr_expect_str_eq(buf, "uid=1001 gid=1002 pid=4242");
	memset(&p, 0, sizeof p);
	snprintf(p.addr, sizeof p.addr, "127.0.0.1:5555");
	adminauth_peer_fields(&p, buf, sizeof buf);
	cr_expect_str_eq(buf, "peer=127.0.0.1:5555");
	snprintf(p.subject, sizeof p.subject, "CN=op\"x\\y");
	adminauth_peer_fields(&p, buf, sizeof buf);
	cr_expect_str_eq(buf, "peer=127.0.0.1:5555 subject=\"CN=op?x?y\"");
}

Test(adminauth, refusal_counters_text)
{
	struct adminauth_counters k;
	char buf[1024], small[64];

	memset(&k, 0, sizeof k);
	adminauth_count(&k, ADMINAUTH_MISSING);
	adminauth_count(&k, ADMINAUTH_MISSING);
	adminauth_count(&k, ADMINAUTH_WRONG);
	adminauth_count(&k, ADMINAUTH_TOKEN);      /* allowed: not counted */
	adminauth_count(&k, ADMINAUTH_LOCAL);
	k.tls_failures = 7;
	cr_assert_gt(adminauth_metrics_text(&k, buf, sizeof buf), 0);
	cr_expect(strstr(buf, "ferry_admin_requests_refused_total{reason=\"missing\"} 2\n") != NULL,
	    "%s", buf);
	cr_expect(strstr(buf, "ferry_admin_requests_refused_total{reason=\"malformed\"} 0\n") != NULL);
	cr_expect(strstr(buf, "ferry_admin_requests_refused_total{reason=\"wrong-token\"} 1\n") != NULL);
	cr_expect(strstr(buf, "# TYPE ferry_admin_tls_handshake_failures_total counter\n"
	    "ferry_admin_tls_handshake_failures_total 7\n") != NULL);
	cr_expect_eq(adminauth_metrics_text(&k, small, sizeof small), -1);
}
