/*
 * tickets — per-cluster TLS session-ticket keys; see tickets.h.
 */
#include "supervisor/tickets.h"

#include <sodium.h>
#include <string.h>

#include "common/log.h"

static void
tickets_fill(struct tlskeys_key *k)
{
	randombytes_buf(k->name, sizeof k->name);
	randombytes_buf(k->aes, sizeof k->aes);
	randombytes_buf(k->hmac, sizeof k->hmac);
}

void
tickets_rotate(struct tlskeys *k)
{
	uint32_t n = k->n < TLSKEYS_MAX ? k->n + 1 : TLSKEYS_MAX;
	/* the oldest falls off the end (wiped: memmove overwrites it, and the
	 * slot past n is cleared below) */
	memmove(&k->key[1], &k->key[0], (n - 1) * sizeof k->key[0]);
	for (uint32_t i = n; i < TLSKEYS_MAX; i++)
		sodium_memzero(&k->key[i], sizeof k->key[i]);
	tickets_fill(&k->key[0]);
	k->n = n;
	k->pad = 0;
	k->serial++;
}

const struct tlskeys *
tickets_of(struct sup_cluster *c)
{
	if (c->tickets)
		return c->tickets;
	struct tlskeys *k = sodium_malloc(sizeof *k);
	if (!k) {
		log_error("cannot allocate session-ticket keys: TLS sessions will not resume",
		    "cluster=%s", c->name);
		return NULL;
	}
	sodium_memzero(k, sizeof *k);
	tickets_rotate(k);
	c->tickets = k;
	log_info("session-ticket keys created", "cluster=%s keep=%d", c->name, TLSKEYS_MAX);
	return k;
}

int
tickets_import(struct sup_cluster *c, const struct tlskeys *k)
{
	if (k->n == 0 || k->n > TLSKEYS_MAX)
		return -1;
	struct tlskeys *d = c->tickets ? c->tickets : sodium_malloc(sizeof *d);
	if (!d)
		return -1;
	memcpy(d, k, sizeof *d);
	c->tickets = d;
	log_info("session-ticket keys taken over", "cluster=%s serial=%llu keys=%u", c->name,
	    (unsigned long long)d->serial, d->n);
	return 0;
}

void
tickets_free(struct sup_cluster *c)
{
	if (c->tickets)
		sodium_free(c->tickets);  /* (wipes it) */
	c->tickets = NULL;
}
