/*
 * test_tlsmat — common/tlsmat.c and what the supervisor does with a
 * cluster's TLS files: read and checked with file:line: key: messages
 * (missing file, key of another certificate, bad PEM, empty file), the
 * IPC_TLS_MATERIAL payload (round trip, lengths that do not add up, wrong
 * version), the contexts a worker builds from the bytes, and the plan:
 * file contents change the cluster's version, the dial map and upstream
 * TLS change its upstream key. Certificates are made at test time.
 */
#include <criterion/criterion.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/ipc.h"
#include "common/tlsmat.h"
#include "supervisor/plan.h"
#include "tls_fixtures.h"

static struct fx_cert ca, srv, other;
static char dir[] = "/tmp/ferry-tlsmat-XXXXXX";
static char cert_path[128], key_path[128], other_key_path[128], ca_path[128];

static void
write_file(const char *path, const char *data, size_t len)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	cr_assert_eq(fwrite(data, 1, len, f), len);
	fclose(f);
}

static void
setup(void)
{
	cr_assert_not_null(mkdtemp(dir));
	fx_make(&ca, "ferry test CA", NULL, NULL, 30);
	fx_make(&srv, "kafka.test", &ca, "DNS:kafka.test", 30);
	fx_make(&other, "other", &ca, "DNS:other.test", 30);
	snprintf(cert_path, sizeof cert_path, "%s/server.pem", dir);
	snprintf(key_path, sizeof key_path, "%s/server.key", dir);
	snprintf(other_key_path, sizeof other_key_path, "%s/other.key", dir);
	snprintf(ca_path, sizeof ca_path, "%s/ca.pem", dir);
	write_file(cert_path, srv.cert_pem.data, srv.cert_pem.len);
	write_file(key_path, srv.key_pem.data, srv.key_pem.len);
	write_file(other_key_path, other.key_pem.data, other.key_pem.len);
	write_file(ca_path, ca.cert_pem.data, ca.cert_pem.len);
}

static void
teardown(void)
{
	unlink(cert_path);
	unlink(key_path);
	unlink(other_key_path);
	unlink(ca_path);
	rmdir(dir);
	fx_free(&ca);
	fx_free(&srv);
	fx_free(&other);
}

TestSuite(tlsmat, .init = setup, .fini = teardown, .timeout = 30);

struct parsed {
	struct cfg c;
	struct cfg_errors e;
	int rc;
};

static void
parse(struct parsed *p, const char *fmt, ...)
{
	char text[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	cfg_errors_init(&p->e);
	cr_assert_eq(cfg_parse_string("t.ini", text, strlen(text), &p->c, &p->e), 0, "%s",
	    p->e.n ? p->e.msg[0] : "");
	p->rc = tlsmat_read(&p->c, &p->e);
}

static void
done(struct parsed *p)
{
	cfg_free(&p->c);
	cfg_errors_free(&p->e);
}

#define HEAD "[cluster t]\nupstream = k:9093\nbootstrap = 127.0.0.1:9192\nbroker_ports = 9193\n"

Test(tlsmat, reads_and_checks_files)
{
	struct parsed p;
	parse(&p, HEAD "tls_cert = %s\ntls_key = %s\ntls_client_ca = %s\nupstream_tls = on\n",
	    cert_path, key_path, ca_path);
	cr_assert_eq(p.rc, 0, "%s", p.e.n ? p.e.msg[0] : "");
	const struct cfg_tls_files *f = p.c.clusters[0].files;
	cr_assert_not_null(f);
	cr_assert_eq(f->len[CFG_TLS_F_CERT], srv.cert_pem.len);
	cr_assert_eq(memcmp(f->data[CFG_TLS_F_KEY], srv.key_pem.data, srv.key_pem.len), 0);
	cr_assert_eq(f->len[CFG_TLS_F_UPSTREAM_CA], 0);
	SSL_CTX *s, *c;
	char err[256];
	cr_assert_eq(tlsmat_contexts(&p.c.clusters[0], f, &s, &c, err, sizeof err), 0, "%s", err);
	cr_assert_not_null(s);
	cr_assert_not_null(c);  /* upstream: the system store */
	SSL_CTX_free(s);
	SSL_CTX_free(c);
	done(&p);

	/* no TLS: nothing read */
	parse(&p, HEAD);
	cr_assert_eq(p.rc, 0);
	cr_assert_null(p.c.clusters[0].files);
	done(&p);
}

Test(tlsmat, errors_name_file_line_and_key)
{
	struct parsed p;
	parse(&p, HEAD "tls_cert = %s/missing.pem\ntls_key = %s\n", dir, key_path);
	cr_assert_eq(p.rc, -1);
	char want[512];
	snprintf(want, sizeof want, "t.ini:5: tls_cert: %s/missing.pem: cannot read: No such file "
	    "or directory", dir);
	cr_assert_str_eq(p.e.msg[0], want);
	cr_assert_null(p.c.clusters[0].files);
	done(&p);

	parse(&p, HEAD "tls_cert = %s\ntls_key = %s\n", cert_path, other_key_path);
	cr_assert_eq(p.rc, -1);
	cr_assert_str_eq(p.e.msg[0], "t.ini:6: tls_key: key does not match the certificate of tls_cert");
	done(&p);

	parse(&p, HEAD "upstream_tls = on\nupstream_ca = %s\n", key_path);
	cr_assert_eq(p.rc, -1);
	cr_assert(strncmp(p.e.msg[0], "t.ini:6: upstream_ca: no PEM certificate", 40) == 0, "%s",
	    p.e.msg[0]);
	done(&p);

	char empty[160];
	snprintf(empty, sizeof empty, "%s/empty.pem", dir);
	write_file(empty, "", 0);
	parse(&p, HEAD "tls_cert = %s\ntls_key = %s\n", empty, key_path);
	cr_assert_eq(p.rc, -1);
	snprintf(want, sizeof want, "t.ini:5: tls_cert: %s: empty file", empty);
	cr_assert_str_eq(p.e.msg[0], want);
	done(&p);
	unlink(empty);

	parse(&p, HEAD "tls_cert = %s\ntls_key = %s\ntls_ciphers = NOTHING-KNOWN\n", cert_path,
	    key_path);
	cr_assert_eq(p.rc, -1);
	cr_assert(strncmp(p.e.msg[0], "t.ini:7: tls_ciphers: no cipher of the list is known", 52) == 0,
	    "%s", p.e.msg[0]);
	done(&p);
}

Test(tlsmat, ipc_payload_round_trip_and_checks)
{
	struct parsed p;
	parse(&p, HEAD "tls_cert = %s\ntls_key = %s\n", cert_path, key_path);
	cr_assert_eq(p.rc, 0);
	uint8_t *buf;
	size_t len;
	cr_assert_eq(tlsmat_encode(p.c.clusters[0].files, &buf, &len), 0);
	cr_assert_eq(len, sizeof(struct ipc_tls_material) + srv.cert_pem.len + srv.key_pem.len);

	/* through the envelope: the decoder accepts it */
	static uint8_t dgram[sizeof(struct ipc_hdr) + IPC_MAX_PAYLOAD];
	ssize_t n = ipc_encode(dgram, sizeof dgram, IPC_TLS_MATERIAL, 5, buf, len);
	cr_assert_gt(n, 0);
	struct ipc_msg m;
	char err[160];
	cr_assert_eq(ipc_decode(dgram, (size_t)n, &m, err, sizeof err), 0, "%s", err);
	cr_assert_str_eq(ipc_type_str(IPC_TLS_MATERIAL), "tls-material");

	struct cfg_tls_files f;
	cr_assert_eq(tlsmat_decode(m.payload, m.hdr.len, &f, err, sizeof err), 0, "%s", err);
	cr_assert_eq(f.len[CFG_TLS_F_CERT], srv.cert_pem.len);
	cr_assert_eq(memcmp(f.data[CFG_TLS_F_KEY], srv.key_pem.data, srv.key_pem.len), 0);
	cr_assert_null(f.data[CFG_TLS_F_CLIENT_CA]);
	SSL_CTX *s, *c;
	cr_assert_eq(tlsmat_contexts(&p.c.clusters[0], &f, &s, &c, err, sizeof err), 0, "%s", err);
	cr_assert_null(c);
	SSL_CTX_free(s);

	/* lengths that do not add up, a wrong version, a short header */
	cr_assert_eq(tlsmat_decode(buf, len - 1, &f, err, sizeof err), -1);
	cr_assert(strstr(err, "files of"), "%s", err);
	struct ipc_tls_material h;
	memcpy(&h, buf, sizeof h);
	h.version = 9;
	memcpy(buf, &h, sizeof h);
	cr_assert_eq(tlsmat_decode(buf, len, &f, err, sizeof err), -1);
	cr_assert_str_eq(err, "TLS material: version 9");
	cr_assert_eq(tlsmat_decode(buf, 8, &f, err, sizeof err), -1);
	n = ipc_encode(dgram, sizeof dgram, IPC_TLS_MATERIAL, 5, buf, 8);
	cr_assert_eq(ipc_decode(dgram, (size_t)n, &m, err, sizeof err), -1);
	free(buf);
	done(&p);
}

Test(tlsmat, file_contents_are_part_of_the_version)
{
	struct parsed a, b;
	char va[PLAN_VERSION_LEN], vb[PLAN_VERSION_LEN], ua[PLAN_VERSION_LEN], ub[PLAN_VERSION_LEN];
	parse(&a, HEAD "tls_cert = %s\ntls_key = %s\n", cert_path, key_path);
	cr_assert_eq(a.rc, 0);
	cr_assert_eq(plan_cluster_version(&a.c.clusters[0], va, sizeof va), 0);
	/* the same text, a renewed certificate under the same paths */
	struct fx_cert renewed;
	fx_make(&renewed, "kafka.test", &ca, "DNS:kafka.test", 60);
	write_file(cert_path, renewed.cert_pem.data, renewed.cert_pem.len);
	write_file(key_path, renewed.key_pem.data, renewed.key_pem.len);
	parse(&b, HEAD "tls_cert = %s\ntls_key = %s\n", cert_path, key_path);
	cr_assert_eq(b.rc, 0, "%s", b.e.n ? b.e.msg[0] : "");
	cr_assert_eq(plan_cluster_version(&b.c.clusters[0], vb, sizeof vb), 0);
	cr_assert_str_neq(va, vb);
	/* client-side TLS is not the upstream's business */
	cr_assert_eq(plan_upstream_key(&a.c.clusters[0], ua, sizeof ua), 0);
	cr_assert_eq(plan_upstream_key(&b.c.clusters[0], ub, sizeof ub), 0);
	cr_assert_str_eq(ua, ub);
	done(&a);
	done(&b);
	fx_free(&renewed);

	/* the dial map and upstream TLS are */
	parse(&a, HEAD);
	parse(&b, HEAD "upstream_dial_map = k:9093=127.0.0.1:1\n");
	plan_upstream_key(&a.c.clusters[0], ua, sizeof ua);
	plan_upstream_key(&b.c.clusters[0], ub, sizeof ub);
	cr_assert_str_neq(ua, ub);
	done(&b);
	parse(&b, HEAD "upstream_tls = on\n");
	plan_upstream_key(&b.c.clusters[0], ub, sizeof ub);
	cr_assert_str_neq(ua, ub);
	struct parsed d;
	parse(&d, HEAD "upstream_tls = on\nupstream_tls_verify = off\n");
	plan_upstream_key(&d.c.clusters[0], va, sizeof va);
	cr_assert_str_neq(ub, va);
	done(&d);
	done(&b);
	done(&a);
}

/* upstream_sasl_password_file: read by the supervisor like the TLS files,
 * a secret's mode, one line; it travels in IPC_TLS_MATERIAL; a new
 * password is a modified cluster, not another upstream. */
#define SASL "upstream_sasl_mechanism = SCRAM-SHA-512\nupstream_sasl_username = ferry\n"

static void
write_secret(const char *path, const char *data, mode_t mode)
{
	write_file(path, data, strlen(data));
	cr_assert_eq(chmod(path, mode), 0);
}

Test(tlsmat, sasl_password_file)
{
	struct parsed p;
	char pw[160], want[600];
	snprintf(pw, sizeof pw, "%s/pw", dir);

	write_secret(pw, "s3cret\n", 0600);
	parse(&p, HEAD SASL "upstream_sasl_password_file = %s\n", pw);
	cr_assert_eq(p.rc, 0, "%s", p.e.n ? p.e.msg[0] : "");
	const struct cfg_tls_files *f = p.c.clusters[0].files;
	cr_assert_not_null(f);
	cr_assert_eq(f->len[CFG_TLS_F_UPSTREAM_SASL_PASSWORD], 6);   /* the line end dropped */
	cr_assert_eq(memcmp(f->data[CFG_TLS_F_UPSTREAM_SASL_PASSWORD], "s3cret", 6), 0);
	/* through IPC_TLS_MATERIAL, beside no TLS file at all */
	uint8_t *buf;
	size_t len;
	cr_assert_eq(tlsmat_encode(f, &buf, &len), 0);
	cr_assert_eq(len, sizeof(struct ipc_tls_material) + 6);
	struct cfg_tls_files d;
	char err[256];
	cr_assert_eq(tlsmat_decode(buf, len, &d, err, sizeof err), 0, "%s", err);
	cr_assert_eq(d.len[CFG_TLS_F_UPSTREAM_SASL_PASSWORD], 6);
	cr_assert_eq(memcmp(d.data[CFG_TLS_F_UPSTREAM_SASL_PASSWORD], "s3cret", 6), 0);
	SSL_CTX *s, *c;
	cr_assert_eq(tlsmat_contexts(&p.c.clusters[0], &d, &s, &c, err, sizeof err), 0, "%s", err);
	cr_assert_null(s);
	cr_assert_null(c);
	free(buf);
	done(&p);

	write_secret(pw, "s3cret\r\n", 0640);   /* CRLF; a group that may read it */
	parse(&p, HEAD SASL "upstream_sasl_password_file = %s\n", pw);
	cr_assert_eq(p.rc, 0, "%s", p.e.n ? p.e.msg[0] : "");
	cr_assert_eq(p.c.clusters[0].files->len[CFG_TLS_F_UPSTREAM_SASL_PASSWORD], 6);
	done(&p);

	static const struct { const char *data; mode_t mode; const char *why; } bad[] = {
		{ "s3cret\n", 0644, "mode 0644 lets other users read or change the password; use "
		    "chmod 0600 (or 0640 for a group that may read it)" },
		{ "s3cret\n", 0660, "mode 0660 lets its group change the password" },
		{ "", 0600, "holds no password" },
		{ "\n", 0600, "holds no password" },
		{ "a\nb\n", 0600, "holds more than one line" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		write_secret(pw, bad[i].data, bad[i].mode);
		parse(&p, HEAD SASL "upstream_sasl_password_file = %s\n", pw);
		cr_assert_eq(p.rc, -1, "case %zu accepted", i);
		snprintf(want, sizeof want, "t.ini:7: upstream_sasl_password_file: %s: %s", pw,
		    bad[i].why);
		cr_assert(strncmp(p.e.msg[0], want, strlen(want)) == 0, "case %zu: %s", i,
		    p.e.msg[0]);
		cr_assert_null(strstr(p.e.msg[0], "s3cret"), "the password in a message");
		cr_assert_null(p.c.clusters[0].files);
		done(&p);
	}
	char big[1100];
	memset(big, 'x', 1025);
	big[1025] = 0;
	write_secret(pw, big, 0600);
	parse(&p, HEAD SASL "upstream_sasl_password_file = %s\n", pw);
	cr_assert_eq(p.rc, -1);
	cr_assert(strstr(p.e.msg[0], "longer than 1024 bytes") || strstr(p.e.msg[0], "larger than"),
	    "%s", p.e.msg[0]);
	done(&p);
	parse(&p, HEAD SASL "upstream_sasl_password_file = %s/none\n", dir);
	cr_assert_eq(p.rc, -1);
	snprintf(want, sizeof want, "t.ini:7: upstream_sasl_password_file: %s/none: cannot read: "
	    "No such file or directory", dir);
	cr_assert_str_eq(p.e.msg[0], want);
	done(&p);
	unlink(pw);
}

Test(tlsmat, sasl_password_is_part_of_the_version_not_the_upstream)
{
	struct parsed a, b;
	char pw[160];
	char va[PLAN_VERSION_LEN], vb[PLAN_VERSION_LEN], ua[PLAN_VERSION_LEN], ub[PLAN_VERSION_LEN];
	snprintf(pw, sizeof pw, "%s/pw2", dir);
	write_secret(pw, "one\n", 0600);
	parse(&a, HEAD "upstream_tls = on\n" SASL "upstream_sasl_password_file = %s\n", pw);
	cr_assert_eq(a.rc, 0, "%s", a.e.n ? a.e.msg[0] : "");
	write_secret(pw, "two\n", 0600);
	parse(&b, HEAD "upstream_tls = on\n" SASL "upstream_sasl_password_file = %s\n", pw);
	cr_assert_eq(b.rc, 0, "%s", b.e.n ? b.e.msg[0] : "");
	plan_cluster_version(&a.c.clusters[0], va, sizeof va);
	plan_cluster_version(&b.c.clusters[0], vb, sizeof vb);
	cr_assert_str_neq(va, vb, "a new password is not a modified cluster");
	plan_upstream_key(&a.c.clusters[0], ua, sizeof ua);
	plan_upstream_key(&b.c.clusters[0], ub, sizeof ub);
	cr_assert_str_eq(ua, ub, "a new password is another upstream");
	done(&a);
	done(&b);
	unlink(pw);
}
