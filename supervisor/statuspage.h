/*
 * statuspage — the self-contained HTML status page of the admin API
 * (GET / and GET /admin/); see statuspage.c.
 */
#ifndef FERRY_SUPERVISOR_STATUSPAGE_H
#define FERRY_SUPERVISOR_STATUSPAGE_H

#include <stddef.h>

/* The page (static, NUL-terminated); its length without the NUL in *len. */
const char *statuspage_text(size_t *len);

/* Headers sent with it: no caching, and a policy that allows nothing but
 * the inline style and script and requests to ferryd itself. */
#define STATUSPAGE_HEADERS \
	"Cache-Control: no-store\r\n" \
	"Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline'; " \
	"script-src 'unsafe-inline'; connect-src 'self'; base-uri 'none'; form-action 'none'\r\n"

#endif
