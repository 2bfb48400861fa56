/*
 * test_admincreds — the admin API's credentials as the supervisor reads
 * them (supervisor/admincreds.c): the token file's contents and mode, the
 * files of a config, the restart-only keys, control_socket_group, and the
 * IPC_ADMIN_CREDS message they become.
 */
#include <criterion/criterion.h>

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/config.h"
#include "tests/unit/ferry_section.h"
#include "supervisor/admincreds.h"
#include "supervisor/plan.h"

static void
setup(void)
{
	cr_assert_neq(sodium_init(), -1);
}

TestSuite(admincreds, .init = setup);

Test(admincreds, token_parse)
{
	unsigned char d[ADMINPROTO_DIGEST_LEN], want[ADMINPROTO_DIGEST_LEN];
	char err[256];
	const char *tok = "0123456789abcdef0123";

	crypto_hash_sha256(want, (const unsigned char *)tok, strlen(tok));
	cr_assert_eq(admincreds_token_parse(tok, strlen(tok), d, err, sizeof err), 0, "%s", err);
	cr_expect_eq(memcmp(d, want, sizeof d), 0);
	cr_assert_eq(admincreds_token_parse("0123456789abcdef0123\n", 21, d, err, sizeof err), 0);
	cr_expect_eq(memcmp(d, want, sizeof d), 0);
	cr_assert_eq(admincreds_token_parse("0123456789abcdef0123\r\n", 22, d, err, sizeof err), 0);
	cr_expect_eq(memcmp(d, want, sizeof d), 0);

	cr_expect_eq(admincreds_token_parse("", 0, d, err, sizeof err), -1);
	cr_expect_str_eq(err, "the token file is empty");
	cr_expect_eq(admincreds_token_parse("\n", 1, d, err, sizeof err), -1);
	cr_expect_str_eq(err, "the token file is empty");
	cr_expect_eq(admincreds_token_parse("short\n", 6, d, err, sizeof err), -1);
	cr_expect(strstr(err, "5 characters long (16 to 1024") != NULL, "%s", err);
	cr_expect_eq(admincreds_token_parse("0123456789abcdef0123\n\n", 22, d, err, sizeof err), -1);
	cr_expect(strstr(err, "second line") != NULL, "%s", err);
	cr_expect_eq(admincreds_token_parse("0123456789 abcdef0123", 21, d, err, sizeof err), -1);
	cr_expect(strstr(err, "byte 11") != NULL, "%s", err);
	cr_expect_eq(admincreds_token_parse("0123456789abcdef\xc3\xa9", 18, d, err, sizeof err), -1);
	char big[ADMINCREDS_TOKEN_MAX + 2];
	memset(big, 'x', sizeof big);
	cr_expect_eq(admincreds_token_parse(big, ADMINCREDS_TOKEN_MAX, d, err, sizeof err), 0);
	cr_expect_eq(admincreds_token_parse(big, ADMINCREDS_TOKEN_MAX + 1, d, err, sizeof err), -1);
}

Test(admincreds, token_mode)
{
	char err[256];

	cr_expect_eq(admincreds_token_mode_ok(S_IFREG | 0600, err, sizeof err), 0);
	cr_expect_eq(admincreds_token_mode_ok(S_IFREG | 0400, err, sizeof err), 0);
	cr_expect_eq(admincreds_token_mode_ok(S_IFREG | 0640, err, sizeof err), 0);
	cr_expect_eq(admincreds_token_mode_ok(S_IFREG | 0644, err, sizeof err), -1);
	cr_expect(strstr(err, "mode 0644 lets other users read or change the token") != NULL, "%s", err);
	cr_expect_eq(admincreds_token_mode_ok(S_IFREG | 0660, err, sizeof err), -1);
	cr_expect(strstr(err, "its group change") != NULL, "%s", err);
	cr_expect_eq(admincreds_token_mode_ok(S_IFREG | 0602, err, sizeof err), -1);
}

Test(admincreds, restart_only_keys)
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

Test(admincreds, load_token_file)
{
	struct res r;
	struct admincreds a;
	char ferry[1200], err[1024];
	const char *key;
	char *ok = write_token("abcdefghijklmnopqrstuvwxyz\n", 0600);
	char *loose = write_token("abcdefghijklmnopqrstuvwxyz\n", 0644);
	char *empty = write_token("", 0600);

	snprintf(ferry, sizeof ferry, "admin_token_file = %s\n", ok);
	parse(&r, ferry);
	cr_assert_eq(r.rc, 0);
	cr_assert_eq(admincreds_load(&a, &r.c, &key, err, sizeof err), 0, "%s", err);
	cr_expect(a.token_set);
	cr_expect_not(a.client_certs);
	unsigned char want[ADMINPROTO_DIGEST_LEN];
	crypto_hash_sha256(want, (const unsigned char *)"abcdefghijklmnopqrstuvwxyz", 26);
	cr_expect_eq(memcmp(a.token_digest, want, sizeof want), 0);
	cr_expect_not(a.tls);
	uint8_t *msg;
	size_t len;
	struct adminproto_creds_view v;
	cr_assert_eq(admincreds_encode(&a, &msg, &len), 0);
	cr_assert_eq(adminproto_creds_check(msg, len, &v, err, sizeof err), 0, "%s", err);
	cr_expect_eq(v.c.flags, ADMINPROTO_CREDS_TOKEN);
	cr_expect_eq(memcmp(v.c.token_digest, want, sizeof want), 0);
	cr_expect_str_eq(v.c.open_paths, CFG_DEFAULT_OPEN_PATHS);
	free(msg);
	admincreds_clear(&a);
	cr_expect_not(a.token_set);
	done(&r);

	snprintf(ferry, sizeof ferry, "admin_token_file = %s\n", loose);
	parse(&r, ferry);
	cr_expect_eq(admincreds_load(&a, &r.c, &key, err, sizeof err), -1);
	cr_expect(strstr(err, "mode 0644 lets other users read") != NULL, "%s", err);
	cr_expect(strstr(err, loose) == err, "%s", err);
	done(&r);

	snprintf(ferry, sizeof ferry, "admin_token_file = %s\n", empty);
	parse(&r, ferry);
	cr_expect_eq(admincreds_load(&a, &r.c, &key, err, sizeof err), -1);
	cr_expect(strstr(err, "the token file is empty") != NULL, "%s", err);
	done(&r);

	parse(&r, "admin_token_file = /nonexistent/ferry-token\n");
	cr_expect_eq(admincreds_load(&a, &r.c, &key, err, sizeof err), -1);
	cr_expect(strstr(err, "/nonexistent/ferry-token: cannot read") != NULL, "%s", err);
	done(&r);

	parse(&r, "admin_token_file = /tmp\n");
	cr_expect_eq(admincreds_load(&a, &r.c, &key, err, sizeof err), -1);
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

Test(admincreds, socket_group)
{
	gid_t gid;
	char err[256];

	cr_expect_eq(admincreds_socket_gid("", &gid, err, sizeof err), 0);
	cr_expect_eq(gid, (gid_t)-1);
	cr_expect_eq(admincreds_socket_gid("1234", &gid, err, sizeof err), 0);
	cr_expect_eq(gid, 1234);
	cr_expect_eq(admincreds_socket_gid("root", &gid, err, sizeof err), 0);
	cr_expect_eq(gid, 0);
	cr_expect_eq(admincreds_socket_gid("no-such-group-ferry", &gid, err, sizeof err), -1);
	cr_expect_str_eq(err, "control_socket_group 'no-such-group-ferry': no such group");
}
