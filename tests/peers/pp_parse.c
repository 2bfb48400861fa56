/*
 * pp_parse — runs worker/proxyproto.c's parser over bytes given on stdin
 * and prints one line, for tests/integration/test_proxyproto_haproxy.py to
 * check headers that haproxy produced (or Python built) against the parser
 * ferry uses:
 *
 *   status=ok version=2 command=PROXY family=TCP4 src=127.0.0.1:40000
 *       dst=127.0.0.1:9092 len=28 tlvs=3
 *   status=need-more
 *   status=malformed reason=v2_too_large
 *
 * src/dst: "ADDR:PORT" ("[ADDR]:PORT" for IPv6), "unix:PATH" (bytes up to
 * the first NUL; "unix:@NAME" for an abstract name), "-" when there is no
 * address. At most 65536 + 16 bytes are read. Exit status 0.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include "worker/proxyproto.h"

static void
fmt_addr(const struct sockaddr_storage *ss, char *out, size_t len)
{
	char ip[INET6_ADDRSTRLEN];

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)ss;
		inet_ntop(AF_INET, &s->sin_addr, ip, sizeof ip);
		snprintf(out, len, "%s:%u", ip, ntohs(s->sin_port));
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)ss;
		inet_ntop(AF_INET6, &s->sin6_addr, ip, sizeof ip);
		snprintf(out, len, "[%s]:%u", ip, ntohs(s->sin6_port));
	} else if (ss->ss_family == AF_UNIX) {
		const struct sockaddr_un *s = (const struct sockaddr_un *)ss;
		bool abstract = s->sun_path[0] == '\0';
		const char *p = s->sun_path + (abstract ? 1 : 0);
		int n = (int)strnlen(p, sizeof s->sun_path - (abstract ? 1 : 0));
		snprintf(out, len, "unix:%s%.*s", abstract ? "@" : "", n, p);
	} else {
		snprintf(out, len, "-");
	}
}

int
main(void)
{
	static uint8_t buf[65536 + 16];
	size_t n = 0;
	ssize_t r;
	struct pp_header h;
	char src[160], dst[160];

	while (n < sizeof buf && (r = read(0, buf + n, sizeof buf - n)) > 0)
		n += (size_t)r;
	int rc = pp_parse(buf, n, &h);
	if (rc == PP_MALFORMED) {
		printf("status=malformed reason=%s\n", pp_reason_str(h.reason));
		return 0;
	}
	if (rc == PP_NEED_MORE) {
		printf("status=need-more\n");
		return 0;
	}
	fmt_addr(&h.src, src, sizeof src);
	fmt_addr(&h.dst, dst, sizeof dst);
	printf("status=ok version=%d command=%s family=%s src=%s dst=%s len=%zu tlvs=%u\n", h.version,
	    pp_command_str(h.command), pp_family_str(h.family), src, dst, h.len, h.tlv_count);
	return 0;
}
