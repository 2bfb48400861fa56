/*
 * tlskeys — the TLS session-ticket keys of a cluster, as they travel from
 * the supervisor (which creates them with libsodium's random generator,
 * keeps them across worker restarts and reloads, and rotates them on a
 * schedule) to every worker of every generation of that cluster (which
 * encrypts new tickets with key[0] and accepts tickets made with any of
 * them). So a session resumed after a reload or a worker restart resumes,
 * and a stolen worker memory image holds only the keys of the last few
 * rotation periods.
 *
 * The struct is the IPC payload as is (fixed size, no pointers). Receivers
 * wipe old copies with sodium_memzero.
 */
#ifndef FERRY_COMMON_TLSKEYS_H
#define FERRY_COMMON_TLSKEYS_H

#include <stdint.h>

#define TLSKEYS_MAX 3            /* current + the previous two periods */

struct tlskeys_key {
	uint8_t name[16];        /* ticket key name: identifies the key in a ticket */
	uint8_t aes[32];         /* AES-256-CBC key */
	uint8_t hmac[32];        /* HMAC-SHA256 key */
};

struct tlskeys {
	uint32_t n;              /* valid entries; 0 = no keys (tickets off) */
	uint32_t pad;
	uint64_t serial;         /* rises with every rotation */
	struct tlskeys_key key[TLSKEYS_MAX]; /* key[0] encrypts; all decrypt */
};

#endif
