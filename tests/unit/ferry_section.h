/*
 * ferry_section — what the admin API's suites (test_adminauth.c,
 * test_admincreds.c) share: a config made of a [ferry] section under test
 * and one fixed cluster, parsed as "t.ini" (so [ferry] keys sit at line 2
 * on), and its release.
 */
#ifndef FERRY_TESTS_UNIT_FERRY_SECTION_H
#define FERRY_TESTS_UNIT_FERRY_SECTION_H

#include <stdio.h>
#include <string.h>

#include "common/config.h"

#define FERRY_SECTION_CLUSTER "[cluster a]\nupstream = 127.0.0.1:9092\n" \
	"bootstrap = 127.0.0.1:19092\nbroker_ports = 19093-19094\n"

struct res {
	int rc;
	struct cfg c;
	struct cfg_errors e;
};

/* Parse "[ferry]\n" + ferry + the cluster into *r. */
static inline void
parse(struct res *r, const char *ferry)
{
	char text[4096];

	snprintf(text, sizeof text, "[ferry]\n%s" FERRY_SECTION_CLUSTER, ferry);
	memset(r, 0, sizeof *r);
	cfg_errors_init(&r->e);
	r->rc = cfg_parse_string("t.ini", text, strlen(text), &r->c, &r->e);
}

static inline void
done(struct res *r)
{
	cfg_free(&r->c);
	cfg_errors_free(&r->e);
}

#endif
