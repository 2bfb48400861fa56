/*
 * Unit tests for supervisor/tickets: the per-cluster session-ticket keys
 * (created once, random, distinct names; rotation moves the keys down, keeps
 * at most TLSKEYS_MAX, raises the serial, never repeats a key) and the
 * IPC_TICKET_KEYS payload rule (exact size, at most TLSKEYS_MAX keys).
 */
#include <criterion/criterion.h>
#include <sodium.h>
#include <string.h>

#include "common/ipc.h"
#include "supervisor/tickets.h"

static void
init(void)
{
	cr_assert_geq(sodium_init(), 0);
}

Test(tickets, created_once_and_rotated, .init = init)
{
	struct sup_cluster c;
	memset(&c, 0, sizeof c);
	snprintf(c.name, sizeof c.name, "T");
	const struct tlskeys *k = tickets_of(&c);
	cr_assert_not_null(k);
	cr_assert_eq(tickets_of(&c), k, "kept, not made again");
	cr_assert_eq(k->n, 1);
	cr_assert_eq(k->serial, 1);
	static const uint8_t zero[32];
	cr_assert(memcmp(k->key[0].aes, zero, 32) != 0, "random key");
	cr_assert(memcmp(k->key[1].aes, zero, 32) == 0, "unused slots empty");

	struct tlskeys_key first = k->key[0];
	tickets_rotate(c.tickets);
	cr_assert_eq(k->n, 2);
	cr_assert_eq(k->serial, 2);
	cr_assert(memcmp(&k->key[1], &first, sizeof first) == 0, "the old key decrypts still");
	cr_assert(memcmp(&k->key[0], &first, sizeof first) != 0, "a new key encrypts");
	cr_assert(memcmp(k->key[0].name, k->key[1].name, 16) != 0, "names differ");
	struct tlskeys_key second = k->key[0];
	for (int i = 0; i < 5; i++)
		tickets_rotate(c.tickets);
	cr_assert_eq(k->n, TLSKEYS_MAX, "bounded");
	cr_assert_eq(k->serial, 7);
	for (int i = 0; i < TLSKEYS_MAX; i++) {
		cr_assert(memcmp(&k->key[i], &first, sizeof first) != 0, "old key %d dropped", i);
		cr_assert(memcmp(&k->key[i], &second, sizeof second) != 0, "old key %d dropped", i);
	}
	tickets_free(&c);
	cr_assert_null(c.tickets);
	tickets_free(&c);  /* twice: harmless */
}

Test(tickets, ipc_payload_is_the_struct_exactly)
{
	struct tlskeys k;
	memset(&k, 0, sizeof k);
	k.n = TLSKEYS_MAX;
	uint8_t dg[sizeof(struct ipc_hdr) + sizeof k + 1];
	struct ipc_msg msg;
	char err[128];
	ssize_t n = ipc_encode(dg, sizeof dg, IPC_TICKET_KEYS, 3, &k, sizeof k);
	cr_assert_eq(ipc_decode(dg, (size_t)n, &msg, err, sizeof err), 0, "%s", err);
	n = ipc_encode(dg, sizeof dg, IPC_TICKET_KEYS, 3, &k, sizeof k - 1);
	cr_assert_eq(ipc_decode(dg, (size_t)n, &msg, err, sizeof err), -1, "short");
	uint8_t longer[sizeof k + 1];
	memset(longer, 0, sizeof longer);
	n = ipc_encode(dg, sizeof dg, IPC_TICKET_KEYS, 3, longer, sizeof longer);
	cr_assert_eq(ipc_decode(dg, (size_t)n, &msg, err, sizeof err), -1, "long");
	k.n = TLSKEYS_MAX + 1;
	n = ipc_encode(dg, sizeof dg, IPC_TICKET_KEYS, 3, &k, sizeof k);
	cr_assert_eq(ipc_decode(dg, (size_t)n, &msg, err, sizeof err), -1, "too many keys");
	cr_assert(strstr(err, "ticket-keys"), "%s", err);
}
