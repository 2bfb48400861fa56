/*
 * Unit tests for supervisor/certs: the 14-day warning rule and
 * the days left (negative once expired), and the status/metrics rendering
 * of a TLS cluster (tls.notAfter, ferry_tls_cert_not_after_seconds) and of a
 * plaintext one (neither).
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "supervisor/certs.h"
#include "supervisor/promfam.h"
#include "supervisor/status.h"

Test(certs, warning_rule)
{
	int64_t now = 1800000000, days;
	cr_assert_not(certs_check(now + 30 * 86400, now, &days));
	cr_assert_eq(days, 30);
	cr_assert_not(certs_check(now + 14 * 86400, now, &days), "14 days: not under 14");
	cr_assert(certs_check(now + 14 * 86400 - 1, now, &days));
	cr_assert_eq(days, 13);
	cr_assert(certs_check(now + 10, now, &days));
	cr_assert_eq(days, 0);
	cr_assert(certs_check(now - 10, now, &days), "expired");
	cr_assert_eq(days, -1);
	cr_assert(certs_check(now - 86400 * 3, now, &days));
	cr_assert_eq(days, -3);
}

Test(certs, status_and_metric)
{
	static struct sup s;
	static struct sup_cluster a, b;
	static struct sup_cluster *list[2] = { &a, &b };
	memset(&s, 0, sizeof s);
	static struct sup_ccfg acc, bcc;
	static struct cfg_cluster acl, bcl;
	snprintf(a.name, sizeof a.name, "tlsone");
	acl.tls = true;
	acc.cl = &acl;
	acc.tls_not_after = 1893456000;  /* 2030-01-01T00:00:00Z */
	snprintf(acc.tls_subject, sizeof acc.tls_subject, "CN=ferry.test");
	a.ccfg = &acc;
	snprintf(b.name, sizeof b.name, "plain");
	bcc.cl = &bcl;
	b.ccfg = &bcc;
	s.clusters = list;
	s.n_clusters = 2;

	json_t *ja = status_cluster_json(&a), *jb = status_cluster_json(&b);
	const char *na = json_string_value(json_object_get(json_object_get(ja, "tls"),
	    "notAfter"));
	cr_assert_not_null(na);
	cr_assert_eq(strncmp(na, "2030-01-01T00:00:00", 19), 0, "%s", na);
	cr_assert_eq(na[strlen(na) - 1], 'Z', "%s", na);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(ja, "tls"), "subject")),
	    "CN=ferry.test");
	cr_assert_null(json_object_get(jb, "tls"), "no tls object for a plaintext cluster");
	json_decref(ja);
	json_decref(jb);

	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	promfam_write(f, &s);
	fclose(f);
	cr_assert_not_null(strstr(text, "# TYPE ferry_tls_cert_not_after_seconds gauge\n"));
	cr_assert_not_null(strstr(text,
	    "ferry_tls_cert_not_after_seconds{cluster=\"tlsone\"} 1893456000\n"), "%s", text);
	cr_assert_null(strstr(text, "ferry_tls_cert_not_after_seconds{cluster=\"plain\"}"));
	free(text);
}
