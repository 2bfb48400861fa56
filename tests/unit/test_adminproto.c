/*
 * test_adminproto — the typed messages between ferryd and its admin process
 * (supervisor/adminproto.c): the route table, every check the supervisor
 * applies to a request (routes, flags, cluster names, the caller, bodies,
 * the texts of a rejected config, the connections listing's query, the
 * cluster list's query, the upgrade's body flag) and the admin process to an answer, a setup,
 * credentials and what to do with its listening sockets, the session's id
 * order and bound, the caller's log fields, the counters as an upgrade
 * carries them, and the sealed memfd that carries large bodies
 * (common/shmblock.c).
 */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/shmblock.h"
#include "supervisor/adminproto.h"

static char err[256];

static struct adminproto_request
req(enum adminproto_route r)
{
	struct adminproto_request rq;

	memset(&rq, 0, sizeof rq);
	rq.id = 1;
	rq.route = r;
	rq.caller.listener = ADMINPROTO_L_CONTROL;
	rq.caller.auth = ADMINPROTO_AUTH_LOCAL;
	rq.caller.have_cred = 1;
	rq.caller.uid = 1000;
	rq.caller.gid = 1000;
	rq.caller.pid = 42;
	return rq;
}

static int
check(const struct adminproto_request *rq, size_t nfds)
{
	struct adminproto_request_view v;

	err[0] = '\0';
	return adminproto_request_check(rq, sizeof *rq, nfds, &v, err, sizeof err);
}

Test(adminproto, routes)
{
	char path[128];

	cr_expect_eq(adminproto_route(ADMINPROTO_R_RELOAD)->flags & ADMINPROTO_RF_WAITS,
	    ADMINPROTO_RF_WAITS);
	cr_expect_str_eq(adminproto_route(ADMINPROTO_R_DRAIN)->method, "POST");
	cr_expect_null(adminproto_route(ADMINPROTO_R_NONE));
	cr_expect_null(adminproto_route(ADMINPROTO_R_COUNT));
	for (int r = ADMINPROTO_R_HEALTH; r < ADMINPROTO_R_COUNT; r++) {
		cr_expect_not_null(adminproto_route((enum adminproto_route)r), "route %d", r);
		cr_expect_str_neq(adminproto_route_str((enum adminproto_route)r), "unknown");
	}
	/* every POST is logged with its caller */
	for (size_t i = 0; i < adminproto_n_routes; i++)
		cr_expect_eq(strcmp(adminproto_routes[i].method, "POST") == 0,
		    (adminproto_routes[i].flags & ADMINPROTO_RF_MUTATES) != 0, "%s",
		    adminproto_routes[i].pattern);
	adminproto_route_path(ADMINPROTO_R_RESTART, "A", path, sizeof path);
	cr_expect_str_eq(path, "/admin/clusters/A/restart");
	adminproto_route_path(ADMINPROTO_R_METRICS, "", path, sizeof path);
	cr_expect_str_eq(path, "/metrics");
}

Test(adminproto, request_plain)
{
	struct adminproto_request rq = req(ADMINPROTO_R_HEALTH);
	struct adminproto_request_view v;

	cr_assert_eq(adminproto_request_check(&rq, sizeof rq, 0, &v, err, sizeof err), 0, "%s",
	    err);
	cr_expect_eq(v.rq.id, 1);
	cr_expect_eq(v.rq.route, ADMINPROTO_R_HEALTH);
	/* sizes */
	cr_expect_eq(adminproto_request_check(&rq, sizeof rq - 1, 0, &v, err, sizeof err), -1);
	cr_expect_eq(adminproto_request_check(&rq, 0, 0, &v, err, sizeof err), -1);
	uint8_t longer[sizeof rq + 1];
	memcpy(longer, &rq, sizeof rq);
	cr_expect_eq(adminproto_request_check(longer, sizeof longer, 0, &v, err, sizeof err), -1);
	/* a descriptor that no body explains */
	cr_expect_eq(check(&rq, 1), -1);
}

Test(adminproto, request_routes)
{
	struct adminproto_request rq = req(ADMINPROTO_R_NONE);

	cr_expect_eq(check(&rq, 0), -1);
	cr_expect(strstr(err, "unknown route") != NULL, "%s", err);
	rq.route = ADMINPROTO_R_COUNT;
	cr_expect_eq(check(&rq, 0), -1);
	rq.route = 0xffffffffu;
	cr_expect_eq(check(&rq, 0), -1);
	/* the status page is answered by the admin process itself */
	rq.route = ADMINPROTO_R_PAGE;
	cr_expect_eq(check(&rq, 0), -1);
	cr_expect(strstr(err, "own") != NULL, "%s", err);
}

Test(adminproto, request_names)
{
	struct adminproto_request rq = req(ADMINPROTO_R_DRAIN);

	cr_expect_eq(check(&rq, 0), -1);                /* a name is required */
	snprintf(rq.name, sizeof rq.name, "prod-eu.1_a");
	cr_expect_eq(check(&rq, 0), 0, "%s", err);
	snprintf(rq.name, sizeof rq.name, "a/b");
	cr_expect_eq(check(&rq, 0), -1);
	snprintf(rq.name, sizeof rq.name, "a b");
	cr_expect_eq(check(&rq, 0), -1);
	snprintf(rq.name, sizeof rq.name, "..%%2f");
	cr_expect_eq(check(&rq, 0), -1);
	memset(rq.name, 'a', sizeof rq.name);            /* not terminated */
	cr_expect_eq(check(&rq, 0), -1);
	memset(rq.name, 'a', sizeof rq.name - 1);         /* 63 characters: allowed */
	rq.name[sizeof rq.name - 1] = '\0';
	cr_expect_eq(check(&rq, 0), 0, "%s", err);
	/* routes without a name take none, not even bytes after a NUL */
	rq = req(ADMINPROTO_R_CLUSTERS);
	rq.name[5] = 'x';
	cr_expect_eq(check(&rq, 0), -1);
}

Test(adminproto, request_callers)
{
	struct adminproto_request rq = req(ADMINPROTO_R_CLUSTERS);

	rq.caller.auth = ADMINPROTO_AUTH_TOKEN;         /* control socket: local only */
	cr_expect_eq(check(&rq, 0), -1);
	rq = req(ADMINPROTO_R_CLUSTERS);
	snprintf(rq.caller.addr, sizeof rq.caller.addr, "127.0.0.1:1");
	cr_expect_eq(check(&rq, 0), -1);
	rq = req(ADMINPROTO_R_CLUSTERS);
	rq.caller.listener = 7;
	cr_expect_eq(check(&rq, 0), -1);

	memset(&rq.caller, 0, sizeof rq.caller);
	rq.caller.listener = ADMINPROTO_L_HTTP;
	snprintf(rq.caller.addr, sizeof rq.caller.addr, "[::1]:5555");
	for (int a = ADMINPROTO_AUTH_LOCAL; a <= ADMINPROTO_AUTH_WRONG; a++) {
		rq.caller.auth = (uint32_t)a;
		bool ok = a == ADMINPROTO_AUTH_OPEN_PATH || a == ADMINPROTO_AUTH_UNPROTECTED ||
		    a == ADMINPROTO_AUTH_TOKEN || a == ADMINPROTO_AUTH_CERT;
		cr_expect_eq(check(&rq, 0), ok ? 0 : -1, "auth %d: %s", a, err);
	}
	rq.caller.auth = ADMINPROTO_AUTH_CERT;
	snprintf(rq.caller.subject, sizeof rq.caller.subject, "CN=op");
	cr_expect_eq(check(&rq, 0), 0, "%s", err);
	rq.caller.pid = 1;                              /* TCP has no peer credentials */
	cr_expect_eq(check(&rq, 0), -1);
	rq.caller.pid = 0;
	rq.caller.addr[0] = '\0';                       /* ... but an address */
	cr_expect_eq(check(&rq, 0), -1);
	memset(rq.caller.addr, 'x', sizeof rq.caller.addr);
	cr_expect_eq(check(&rq, 0), -1);
}

Test(adminproto, request_bodies)
{
	struct adminproto_request rq = req(ADMINPROTO_R_RELOAD);

	cr_expect_eq(check(&rq, 0), 0, "%s", err);      /* no body: the file on disk */
	rq.flags = ADMINPROTO_REQ_BODY;
	rq.body_len = 100;
	cr_expect_eq(check(&rq, 1), 0, "%s", err);
	cr_expect_eq(check(&rq, 0), -1);                /* the memfd is missing */
	cr_expect_eq(check(&rq, 2), -1);
	rq.body_len = 0;
	cr_expect_eq(check(&rq, 1), -1);
	rq.body_len = CFG_MAX_FILE_BYTES + 1;
	cr_expect_eq(check(&rq, 1), -1);
	rq.body_len = CFG_MAX_FILE_BYTES;
	cr_expect_eq(check(&rq, 1), 0, "%s", err);
	rq.flags = ADMINPROTO_REQ_BODY | ADMINPROTO_REQ_REJECTED;
	cr_expect_eq(check(&rq, 1), -1);
	rq.flags = 0x80;
	cr_expect_eq(check(&rq, 1), -1);
	/* drain takes no body */
	rq = req(ADMINPROTO_R_DRAIN);
	snprintf(rq.name, sizeof rq.name, "a");
	rq.flags = ADMINPROTO_REQ_BODY;
	rq.body_len = 10;
	cr_expect_eq(check(&rq, 1), -1);
	cr_expect(strstr(err, "takes no body") != NULL, "%s", err);
}

static size_t
rejected(uint8_t *buf, const char *const *errs, size_t n, const char *version)
{
	struct adminproto_request rq = req(ADMINPROTO_R_VALIDATE);
	size_t off = sizeof rq;

	rq.flags = ADMINPROTO_REQ_REJECTED;
	rq.n_errors = (uint32_t)n;
	snprintf(rq.version, sizeof rq.version, "%s", version);
	memcpy(buf, &rq, sizeof rq);
	for (size_t i = 0; i < n; i++) {
		memcpy(buf + off, errs[i], strlen(errs[i]) + 1);
		off += strlen(errs[i]) + 1;
	}
	return off;
}

Test(adminproto, request_rejected_config)
{
	static uint8_t buf[sizeof(struct adminproto_request) + 2 * ADMINPROTO_ERROR_MAX + 16];
	static const char v[] = "sha256:0123456789abcdef0123456789abcdef"
	    "0123456789abcdef0123456789abcdef";
	const char *two[] = { "<request>:3: unknown key 'x'", "<request>:9: no [ferry]" };
	struct adminproto_request_view out;
	size_t n = rejected(buf, two, 2, v);

	cr_assert_eq(adminproto_request_check(buf, n, 0, &out, err, sizeof err), 0, "%s", err);
	cr_expect_str_eq(out.errors[0], two[0]);
	cr_expect_str_eq(out.errors[1], two[1]);
	cr_expect_str_eq(out.rq.version, v);
	/* texts and their count must agree exactly */
	cr_expect_eq(adminproto_request_check(buf, n - 1, 0, &out, err, sizeof err), -1);
	buf[n] = 'x';
	cr_expect_eq(adminproto_request_check(buf, n + 1, 0, &out, err, sizeof err), -1);
	n = rejected(buf, two, 0, v);
	cr_expect_eq(adminproto_request_check(buf, n, 0, &out, err, sizeof err), -1);
	/* a version is "sha256:" and 64 hex digits */
	n = rejected(buf, two, 1, "sha256:xyz");
	cr_expect_eq(adminproto_request_check(buf, n, 0, &out, err, sizeof err), -1);
	n = rejected(buf, two, 1, "md5:0123456789abcdef0123456789abcdef0123456789abcdef0123"
	    "456789abcdef");
	cr_expect_eq(adminproto_request_check(buf, n, 0, &out, err, sizeof err), -1);
	/* one text longer than ADMINPROTO_ERROR_MAX */
	char big[ADMINPROTO_ERROR_MAX + 1];
	const char *one[] = { big };
	memset(big, 'e', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	n = rejected(buf, one, 1, v);
	cr_expect_eq(adminproto_request_check(buf, n, 0, &out, err, sizeof err), -1);
	/* a drain cannot be "rejected" */
	struct adminproto_request rq = req(ADMINPROTO_R_DRAIN);
	snprintf(rq.name, sizeof rq.name, "a");
	rq.flags = ADMINPROTO_REQ_REJECTED;
	cr_expect_eq(check(&rq, 0), -1);
}

Test(adminproto, session)
{
	struct adminproto_session s = { 0 };

	cr_expect_eq(adminproto_session_accept(&s, 1, err, sizeof err), 0);
	cr_expect_eq(adminproto_session_accept(&s, 1, err, sizeof err), -1);   /* reused */
	cr_expect(strstr(err, "reused") != NULL, "%s", err);
	cr_expect_eq(adminproto_session_accept(&s, 5, err, sizeof err), 0);    /* gaps are fine */
	cr_expect_eq(adminproto_session_accept(&s, 3, err, sizeof err), -1);   /* backwards */
	adminproto_session_done(&s);
	adminproto_session_done(&s);
	cr_expect_eq(s.outstanding, 0);
	adminproto_session_done(&s);
	cr_expect_eq(s.outstanding, 0);
	for (uint64_t id = 10; id < 10 + ADMINPROTO_MAX_INFLIGHT; id++)
		cr_expect_eq(adminproto_session_accept(&s, id, err, sizeof err), 0);
	cr_expect_eq(adminproto_session_accept(&s, 1000, err, sizeof err), -1);
	cr_expect(strstr(err, "outstanding") != NULL, "%s", err);
	adminproto_session_done(&s);
	cr_expect_eq(adminproto_session_accept(&s, 1001, err, sizeof err), 0);
}

Test(adminproto, answers)
{
	struct {
		struct adminproto_answer h;
		char body[8];
	} m;
	struct adminproto_answer a;

	memset(&m, 0, sizeof m);
	m.h.id = 9;
	m.h.status = 200;
	m.h.ctype = ADMINPROTO_CT_JSON;
	m.h.body_len = 3;
	memcpy(m.body, "{}\n", 3);
	cr_assert_eq(adminproto_answer_check(&m, sizeof m.h + 3, 0, &a, err, sizeof err), 0, "%s",
	    err);
	cr_expect_eq(a.id, 9);
	cr_expect_eq(adminproto_answer_check(&m, sizeof m.h + 4, 0, &a, err, sizeof err), -1);
	cr_expect_eq(adminproto_answer_check(&m, sizeof m.h + 3, 1, &a, err, sizeof err), -1);
	m.h.status = 99;
	cr_expect_eq(adminproto_answer_check(&m, sizeof m.h + 3, 0, &a, err, sizeof err), -1);
	m.h.status = 600;
	cr_expect_eq(adminproto_answer_check(&m, sizeof m.h + 3, 0, &a, err, sizeof err), -1);
	m.h.status = 503;
	m.h.ctype = ADMINPROTO_CT_COUNT;
	cr_expect_eq(adminproto_answer_check(&m, sizeof m.h + 3, 0, &a, err, sizeof err), -1);
	m.h.ctype = ADMINPROTO_CT_PROMETHEUS;
	m.h.flags = ADMINPROTO_ANS_MEMFD;
	m.h.body_len = 5 * 1024 * 1024;
	cr_expect_eq(adminproto_answer_check(&m, sizeof m.h, 1, &a, err, sizeof err), 0, "%s", err);
	cr_expect_eq(adminproto_answer_check(&m, sizeof m.h, 0, &a, err, sizeof err), -1);
	m.h.body_len = 0;
	cr_expect_eq(adminproto_answer_check(&m, sizeof m.h, 1, &a, err, sizeof err), -1);
	m.h.body_len = ADMINPROTO_BODY_MAX + 1u;
	cr_expect_eq(adminproto_answer_check(&m, sizeof m.h, 1, &a, err, sizeof err), -1);
	m.h.flags = 0x10;
	cr_expect_eq(adminproto_answer_check(&m, sizeof m.h, 1, &a, err, sizeof err), -1);
	cr_expect_str_eq(adminproto_ctype_str(ADMINPROTO_CT_JSON), "application/json");
}

Test(adminproto, setup_and_creds)
{
	struct adminproto_setup su = { .version = ADMINPROTO_VERSION, .log_level = 1 }, out;
	struct adminproto_creds_view v;
	static uint8_t buf[sizeof(struct adminproto_creds) + 32];
	struct adminproto_creds c;

	cr_expect_eq(adminproto_setup_check(&su, sizeof su, 2, &out, err, sizeof err), 0, "%s", err);
	cr_expect_eq(adminproto_setup_check(&su, sizeof su, 3, &out, err, sizeof err), -1);
	su.flags = ADMINPROTO_SETUP_HTTP;
	cr_expect_eq(adminproto_setup_check(&su, sizeof su, 3, &out, err, sizeof err), 0, "%s", err);
	/* sandbox = on travels as a flag; an unknown flag is refused */
	su.flags = ADMINPROTO_SETUP_HTTP | ADMINPROTO_SETUP_SANDBOX;
	cr_expect_eq(adminproto_setup_check(&su, sizeof su, 3, &out, err, sizeof err), 0, "%s", err);
	cr_expect_eq(out.flags & ADMINPROTO_SETUP_SANDBOX, ADMINPROTO_SETUP_SANDBOX);
	su.flags = ADMINPROTO_SETUP_SANDBOX | 0x4;
	cr_expect_eq(adminproto_setup_check(&su, sizeof su, 2, &out, err, sizeof err), -1);
	su.flags = ADMINPROTO_SETUP_HTTP;
	su.version = ADMINPROTO_VERSION + 1;
	cr_expect_eq(adminproto_setup_check(&su, sizeof su, 3, &out, err, sizeof err), -1);
	cr_expect(strstr(err, "different builds") != NULL, "%s", err);

	memset(&c, 0, sizeof c);
	c.version = ADMINPROTO_VERSION;
	c.flags = ADMINPROTO_CREDS_TLS | ADMINPROTO_CREDS_CLIENT_CERTS;
	c.cert_len = 10;
	c.key_len = 12;
	c.ca_len = 10;
	snprintf(c.open_paths, sizeof c.open_paths, "/metrics");
	memcpy(buf, &c, sizeof c);
	memset(buf + sizeof c, 'C', 10);
	memset(buf + sizeof c + 10, 'K', 12);
	memset(buf + sizeof c + 22, 'A', 10);
	cr_assert_eq(adminproto_creds_check(buf, sizeof c + 32, &v, err, sizeof err), 0, "%s", err);
	cr_expect_eq(v.cert[0], 'C');
	cr_expect_eq(v.key[0], 'K');
	cr_expect_eq(v.ca[9], 'A');
	cr_expect_eq(adminproto_creds_check(buf, sizeof c + 31, &v, err, sizeof err), -1);
	/* a client CA without HTTPS, HTTPS without a key, a digest without a token */
	c.flags = ADMINPROTO_CREDS_CLIENT_CERTS;
	memcpy(buf, &c, sizeof c);
	cr_expect_eq(adminproto_creds_check(buf, sizeof c + 32, &v, err, sizeof err), -1);
	c.flags = ADMINPROTO_CREDS_TLS;
	c.key_len = 0;
	c.ca_len = 0;
	memcpy(buf, &c, sizeof c);
	cr_expect_eq(adminproto_creds_check(buf, sizeof c + 10, &v, err, sizeof err), -1);
	memset(&c, 0, sizeof c);
	c.version = ADMINPROTO_VERSION;
	c.token_digest[3] = 1;
	memcpy(buf, &c, sizeof c);
	cr_expect_eq(adminproto_creds_check(buf, sizeof c, &v, err, sizeof err), -1);
	c.flags = ADMINPROTO_CREDS_TOKEN;
	memcpy(buf, &c, sizeof c);
	cr_expect_eq(adminproto_creds_check(buf, sizeof c, &v, err, sizeof err), 0, "%s", err);
	memset(((struct adminproto_creds *)buf)->open_paths, '/', CFG_OPEN_PATHS_MAX);
	cr_expect_eq(adminproto_creds_check(buf, sizeof c, &v, err, sizeof err), -1);
}

Test(adminproto, caller_fields)
{
	struct adminproto_caller c;
	char buf[512];

	memset(&c, 0, sizeof c);
	c.listener = ADMINPROTO_L_CONTROL;
	c.have_cred = 1;
	c.uid = 1001;
	c.gid = 1002;
	c.pid = 4242;
	adminproto_caller_fields(&c, buf, sizeof buf);
	cr_expect_str_eq(buf, "uid=1001 gid=1002 pid=4242");
	c.have_cred = 0;
	adminproto_caller_fields(&c, buf, sizeof buf);
	cr_expect_str_eq(buf, "uid=? pid=?");
	memset(&c, 0, sizeof c);
	c.listener = ADMINPROTO_L_HTTP;
	snprintf(c.addr, sizeof c.addr, "127.0.0.1:5555");
	adminproto_caller_fields(&c, buf, sizeof buf);
	cr_expect_str_eq(buf, "peer=127.0.0.1:5555");
	snprintf(c.subject, sizeof c.subject, "CN=op\"x\\y");
	adminproto_caller_fields(&c, buf, sizeof buf);
	cr_expect_str_eq(buf, "peer=127.0.0.1:5555 subject=\"CN=op?x?y\"");
}

Test(adminproto, error_json)
{
	size_t len;
	char *j = adminproto_error_json("no cluster named 'a'", "x", &len);

	cr_assert_not_null(j);
	cr_expect_str_eq(j, "{\"error\":\"no cluster named 'a'\"}\n");
	cr_expect_eq(len, strlen(j));
	free(j);
	j = adminproto_error_json("bad \xff byte", "Not Found", &len);
	cr_assert_not_null(j);
	cr_expect_str_eq(j, "{\"error\":\"Not Found\"}\n");
	free(j);
}

Test(adminproto, sealed_bytes)
{
	static const char text[] = "[ferry]\nlog_level = info\n";
	char back[sizeof text - 1];
	int fd = shmblock_seal_bytes("t", text, sizeof text - 1);

	cr_assert_neq(fd, -1);
	cr_expect_eq(shmblock_read_bytes(fd, back, sizeof back), 0);
	cr_expect_eq(memcmp(back, text, sizeof back), 0);
	/* sealed: no writing, growing or shrinking */
	cr_expect_eq(write(fd, "x", 1), -1);
	cr_expect_eq(ftruncate(fd, 1), -1);
	/* a size other than announced is refused */
	cr_expect_eq(shmblock_read_bytes(fd, back, sizeof back - 1), -1);
	close(fd);
	/* an unsealed memfd, a pipe */
	fd = memfd_create("u", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	cr_assert_eq(write(fd, "abc", 3), 3);
	cr_expect_eq(shmblock_read_bytes(fd, back, 3), -1);
	close(fd);
	int p[2];
	cr_assert_eq(pipe(p), 0);
	cr_expect_eq(shmblock_read_bytes(p[0], back, 3), -1);
	close(p[0]);
	close(p[1]);
}

Test(adminproto, request_connections_query)
{
	struct adminproto_request rq = req(ADMINPROTO_R_CONNECTIONS);

	snprintf(rq.name, sizeof rq.name, "A");
	/* a listing always carries its query: limit 0 is none */
	cr_expect_eq(check(&rq, 0), -1);
	cr_expect(strstr(err, "query: limit 0") != NULL, "%s", err);
	rq.query.limit = ADMINPROTO_CONN_LIMIT_DEFAULT;
	cr_assert_eq(check(&rq, 0), 0, "%s", err);
	rq.query.limit = ADMINPROTO_CONN_LIMIT_MAX + 1;
	cr_expect_eq(check(&rq, 0), -1);
	rq.query.limit = 1;
	rq.query.offset = ADMINPROTO_CONN_OFFSET_MAX + 1;
	cr_expect_eq(check(&rq, 0), -1);
	rq.query.offset = ADMINPROTO_CONN_OFFSET_MAX;
	cr_expect_eq(check(&rq, 0), 0, "%s", err);
	/* filters: a flag and a terminated text; no text without its flag */
	rq.query.by_client_id = 1;
	snprintf(rq.query.client_id, sizeof rq.query.client_id, "rdkafka");
	cr_expect_eq(check(&rq, 0), 0, "%s", err);
	rq.query.by_client_id = 2;
	cr_expect_eq(check(&rq, 0), -1);
	rq.query.by_client_id = 0;
	cr_expect_eq(check(&rq, 0), -1);
	cr_expect(strstr(err, "without its filter") != NULL, "%s", err);
	rq.query.by_client_id = 1;
	memset(rq.query.principal, 'x', sizeof rq.query.principal);
	rq.query.by_principal = 1;
	cr_expect_eq(check(&rq, 0), -1);
	cr_expect(strstr(err, "malformed filter") != NULL, "%s", err);
	/* any other route: the query is all zero */
	struct adminproto_request h = req(ADMINPROTO_R_CLUSTERS);

	h.query.offset = 1;
	cr_expect_eq(check(&h, 0), -1);
	cr_expect(strstr(err, "takes no query") != NULL, "%s", err);
}

Test(adminproto, request_cluster_list_query)
{
	struct adminproto_request rq = req(ADMINPROTO_R_CLUSTERS);

	/* no parameter: all zero */
	cr_assert_eq(check(&rq, 0), 0, "%s", err);
	rq.list.sort = ADMINPROTO_SORT_NAME;
	cr_expect_eq(check(&rq, 0), -1);
	cr_expect(strstr(err, "without given") != NULL, "%s", err);
	rq.list.given = 1;
	cr_expect_eq(check(&rq, 0), 0, "%s", err);
	rq.list.given = 2;
	cr_expect_eq(check(&rq, 0), -1);
	rq.list.given = 1;
	/* bounds: states, sort, limit, offset, pad */
	rq.list.states = ADMINPROTO_LIST_STATES_ALL;
	cr_expect_eq(check(&rq, 0), 0, "%s", err);
	rq.list.states = ADMINPROTO_LIST_STATES_ALL + 1;
	cr_expect_eq(check(&rq, 0), -1);
	rq.list.states = 1u << ADMINPROTO_LIST_UNRESPONSIVE;
	rq.list.sort = ADMINPROTO_SORT_COUNT;
	cr_expect_eq(check(&rq, 0), -1);
	rq.list.sort = ADMINPROTO_SORT_SINCE;
	rq.list.limit = ADMINPROTO_LIST_LIMIT_MAX;
	rq.list.offset = ADMINPROTO_LIST_OFFSET_MAX;
	cr_expect_eq(check(&rq, 0), 0, "%s", err);
	rq.list.limit = ADMINPROTO_LIST_LIMIT_MAX + 1;
	cr_expect_eq(check(&rq, 0), -1);
	rq.list.limit = 0;
	rq.list.offset = ADMINPROTO_LIST_OFFSET_MAX + 1;
	cr_expect_eq(check(&rq, 0), -1);
	rq.list.offset = 0;
	rq.list.pad = 1;
	cr_expect_eq(check(&rq, 0), -1);
	rq.list.pad = 0;
	/* the globs: terminated, nothing after the NUL, no empty pattern */
	snprintf(rq.list.names, sizeof rq.list.names, "team-*,ops-[ab]");
	cr_expect_eq(check(&rq, 0), 0, "%s", err);
	rq.list.names[sizeof rq.list.names - 1] = 'x';
	cr_expect_eq(check(&rq, 0), -1);
	cr_expect(strstr(err, "bytes after the names") != NULL, "%s", err);
	memset(rq.list.names, 'a', sizeof rq.list.names);
	cr_expect_eq(check(&rq, 0), -1);
	cr_expect(strstr(err, "unterminated names") != NULL, "%s", err);
	static const char *const empty[] = { ",a", "a,", "a,,b", "," };
	for (size_t i = 0; i < sizeof empty / sizeof empty[0]; i++) {
		memset(rq.list.names, 0, sizeof rq.list.names);
		snprintf(rq.list.names, sizeof rq.list.names, "%s", empty[i]);
		cr_expect_eq(check(&rq, 0), -1, "%s", empty[i]);
		cr_expect(strstr(err, "empty name pattern") != NULL, "%s: %s", empty[i], err);
	}
	/* any other route: the list query is all zero */
	struct adminproto_request h = req(ADMINPROTO_R_HEALTH);

	h.list.limit = 5;
	cr_expect_eq(check(&h, 0), -1);
	cr_expect(strstr(err, "takes no list query") != NULL, "%s", err);
	/* the names the admin process and ferryd share */
	cr_expect_str_eq(adminproto_list_state_str(LC_FAILED), "failed");
	cr_expect_str_eq(adminproto_list_state_str(ADMINPROTO_LIST_UNRESPONSIVE), "unresponsive");
	cr_expect_str_eq(adminproto_list_sort_str(ADMINPROTO_SORT_CONNECTIONS), "connections");
}

Test(adminproto, request_had_body)
{
	/* POST /admin/upgrade sent a body: a flag, never the bytes */
	struct adminproto_request rq = req(ADMINPROTO_R_UPGRADE);

	rq.flags = ADMINPROTO_REQ_HAD_BODY;
	cr_expect_eq(check(&rq, 0), 0, "%s", err);
	cr_expect_eq(check(&rq, 1), -1);
	rq.flags = ADMINPROTO_REQ_HAD_BODY | ADMINPROTO_REQ_BODY;
	rq.body_len = 10;
	cr_expect_eq(check(&rq, 1), -1);
	/* a route that takes its body passes it instead */
	struct adminproto_request v = req(ADMINPROTO_R_VALIDATE);

	v.flags = ADMINPROTO_REQ_HAD_BODY;
	cr_expect_eq(check(&v, 0), -1);
	cr_expect(strstr(err, "passes its body") != NULL, "%s", err);
}

Test(adminproto, listen)
{
	struct adminproto_listen l = { .state = ADMINPROTO_LISTEN_PAUSE }, out;

	cr_expect_eq(adminproto_listen_check(&l, sizeof l, &out, err, sizeof err), 0, "%s", err);
	cr_expect_eq(out.state, ADMINPROTO_LISTEN_PAUSE);
	l.state = ADMINPROTO_LISTEN_CLOSE;
	cr_expect_eq(adminproto_listen_check(&l, sizeof l, &out, err, sizeof err), 0, "%s", err);
	l.state = ADMINPROTO_LISTEN_CLOSE + 1;
	cr_expect_eq(adminproto_listen_check(&l, sizeof l, &out, err, sizeof err), -1);
	l.state = ADMINPROTO_LISTEN_ACCEPT;
	l.pad = 1;
	cr_expect_eq(adminproto_listen_check(&l, sizeof l, &out, err, sizeof err), -1);
	l.pad = 0;
	cr_expect_eq(adminproto_listen_check(&l, sizeof l - 1, &out, err, sizeof err), -1);
}

Test(adminproto, counters_carried_in_order)
{
	struct adminproto_counters k = { .magic = ADMINPROTO_COUNTERS_MAGIC };
	uint64_t v[4];
	char text[2048];

	atomic_store(&k.refused[0], 1);
	atomic_store(&k.refused[1], 2);
	atomic_store(&k.refused[2], 3);
	atomic_store(&k.tls_failures, 4);
	adminproto_counters_read(&k, v);
	cr_expect(v[0] == 1 && v[1] == 2 && v[2] == 3 && v[3] == 4);
	v[2] += 10;     /* as an upgrade adds what it carried */
	cr_assert_gt(adminproto_metrics_text(v, text, sizeof text), 0);
	cr_expect(strstr(text, "ferry_admin_requests_refused_total{reason=\"wrong-token\"} 13\n")
	    != NULL, "%s", text);
	cr_expect(strstr(text, "ferry_admin_tls_handshake_failures_total 4\n") != NULL, "%s", text);
	cr_expect_eq(adminproto_metrics_text(v, text, 16), -1);
}
