/*
 * tlscache — client-side TLS session resumption; see tlscache.h.
 */
#include "common/tlscache.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/err.h>

struct tlscache_entry {
	char key[TLSCACHE_KEY_MAX];
	SSL_SESSION *sess;       /* NULL = free slot */
	uint64_t used;           /* tick of the last put/get */
};

struct tlscache {
	struct tlscache_entry *e;
	size_t max, n;
	uint64_t tick;
};

/* ex_data: the cache of a context; the key (malloc'd, freed with the SSL)
 * of a connection. */
static int tlscache_ctx_idx = -1, tlscache_ssl_idx = -1;

static void
tlscache_key_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp)
{
	(void)parent;
	(void)ad;
	(void)idx;
	(void)argl;
	(void)argp;
	free(ptr);
}

static int
tlscache_indexes(void)
{
	if (tlscache_ctx_idx < 0 &&
	    (tlscache_ctx_idx = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, NULL)) < 0)
		return -1;
	if (tlscache_ssl_idx < 0 &&
	    (tlscache_ssl_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, tlscache_key_free)) < 0)
		return -1;
	return 0;
}

struct tlscache *
tlscache_new(size_t max)
{
	struct tlscache *c;

	if (max == 0 || max > SIZE_MAX / sizeof(struct tlscache_entry)) {
		errno = EINVAL;
		return NULL;
	}
	if ((c = calloc(1, sizeof *c)) == NULL || (c->e = calloc(max, sizeof *c->e)) == NULL) {
		free(c);
		errno = ENOMEM;
		return NULL;
	}
	c->max = max;
	return c;
}

void
tlscache_free(struct tlscache *c)
{
	if (c == NULL)
		return;
	for (size_t i = 0; i < c->max; i++)
		SSL_SESSION_free(c->e[i].sess);
	free(c->e);
	free(c);
}

static struct tlscache_entry *
tlscache_find(struct tlscache *c, const char *key)
{
	for (size_t i = 0; i < c->max; i++)
		if (c->e[i].sess != NULL && strcmp(c->e[i].key, key) == 0)
			return &c->e[i];
	return NULL;
}

static void
tlscache_clear(struct tlscache *c, struct tlscache_entry *e)
{
	SSL_SESSION_free(e->sess);
	e->sess = NULL;
	e->key[0] = '\0';
	c->n--;
}

int
tlscache_put(struct tlscache *c, const char *key, SSL_SESSION *s)
{
	struct tlscache_entry *e;
	SSL_SESSION *copy;

	if (strlen(key) >= TLSCACHE_KEY_MAX) {
		errno = EINVAL;
		return -1;
	}
	if ((copy = SSL_SESSION_dup(s)) == NULL) {
		ERR_clear_error();
		errno = ENOMEM;
		return -1;
	}
	if ((e = tlscache_find(c, key)) != NULL) {
		SSL_SESSION_free(e->sess);
	} else {
		/* a free slot, else the least recently used one */
		struct tlscache_entry *lru = NULL;
		for (size_t i = 0; i < c->max; i++) {
			if (c->e[i].sess == NULL) {
				e = &c->e[i];
				break;
			}
			if (lru == NULL || c->e[i].used < lru->used)
				lru = &c->e[i];
		}
		if (e == NULL) {
			e = lru;
			tlscache_clear(c, e);
		}
		snprintf(e->key, sizeof e->key, "%s", key);
		c->n++;
	}
	e->sess = copy;
	e->used = ++c->tick;
	return 0;
}

SSL_SESSION *
tlscache_get(struct tlscache *c, const char *key)
{
	struct tlscache_entry *e = tlscache_find(c, key);

	if (e == NULL)
		return NULL;
	long t = SSL_SESSION_get_time(e->sess), life = SSL_SESSION_get_timeout(e->sess);
	if (!SSL_SESSION_is_resumable(e->sess) || (long)time(NULL) - t >= life) {
		tlscache_clear(c, e);
		return NULL;
	}
	e->used = ++c->tick;
	return e->sess;
}

bool
tlscache_drop(struct tlscache *c, const char *key)
{
	struct tlscache_entry *e = tlscache_find(c, key);

	if (e == NULL)
		return false;
	tlscache_clear(c, e);
	return true;
}

size_t
tlscache_count(const struct tlscache *c)
{
	return c->n;
}

int
tlscache_key(char *buf, size_t len, const char *name, const struct sockaddr *sa)
{
	char addr[INET6_ADDRSTRLEN];
	unsigned port;
	int n;

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
		if (inet_ntop(AF_INET, &s4->sin_addr, addr, sizeof addr) == NULL)
			goto bad;
		port = ntohs(s4->sin_port);
		n = snprintf(buf, len, "%s|%s:%u", name ? name : "", addr, port);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
		if (inet_ntop(AF_INET6, &s6->sin6_addr, addr, sizeof addr) == NULL)
			goto bad;
		port = ntohs(s6->sin6_port);
		n = snprintf(buf, len, "%s|[%s]:%u", name ? name : "", addr, port);
	} else {
		goto bad;
	}
	if (n < 0 || (size_t)n >= len || (size_t)n >= TLSCACHE_KEY_MAX)
		goto bad;
	return 0;
bad:
	if (len > 0)
		buf[0] = '\0';
	errno = EINVAL;
	return -1;
}

/* New session (after a full handshake; in TLS 1.3 each ticket, which
 * arrives after the handshake). 0: the reference stays OpenSSL's. */
static int
tlscache_new_cb(SSL *ssl, SSL_SESSION *sess)
{
	struct tlscache *c = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), tlscache_ctx_idx);
	const char *key = SSL_get_ex_data(ssl, tlscache_ssl_idx);

	if (c != NULL && key != NULL && SSL_SESSION_is_resumable(sess))
		(void)tlscache_put(c, key, sess);  /* ENOMEM: not learnt */
	return 0;
}

int
tlscache_attach(struct tlscache *c, SSL_CTX *ctx)
{
	if (tlscache_indexes() != 0 || SSL_CTX_set_ex_data(ctx, tlscache_ctx_idx, c) != 1) {
		ERR_clear_error();
		errno = ENOMEM;
		return -1;
	}
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT |
	    SSL_SESS_CACHE_NO_INTERNAL_STORE);
	SSL_CTX_sess_set_new_cb(ctx, tlscache_new_cb);
	return 0;
}

int
tlscache_use(struct tlscache *c, SSL *ssl, const char *key)
{
	char *k;
	int offered = 0;

	if (tlscache_indexes() != 0 || (k = strdup(key)) == NULL) {
		errno = ENOMEM;
		return -1;
	}
	SSL_SESSION *s = tlscache_get(c, key), *copy = NULL;
	if (s != NULL && (copy = SSL_SESSION_dup(s)) == NULL) {
		ERR_clear_error();
		free(k);
		errno = ENOMEM;
		return -1;
	}
	free(SSL_get_ex_data(ssl, tlscache_ssl_idx));  /* a second use: the new key */
	SSL_set_ex_data(ssl, tlscache_ssl_idx, NULL);
	if (SSL_set_ex_data(ssl, tlscache_ssl_idx, k) != 1) {
		ERR_clear_error();
		SSL_SESSION_free(copy);
		free(k);
		errno = ENOMEM;
		return -1;
	}
	if (copy != NULL) {
		offered = SSL_set_session(ssl, copy) == 1;
		SSL_SESSION_free(copy);  /* ssl holds its own reference */
		ERR_clear_error();
	}
	return offered;
}

void
tlscache_forget(SSL *ssl)
{
	if (ssl == NULL || tlscache_ctx_idx < 0 || tlscache_ssl_idx < 0)
		return;
	struct tlscache *c = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), tlscache_ctx_idx);
	const char *key = SSL_get_ex_data(ssl, tlscache_ssl_idx);

	if (c != NULL && key != NULL)
		(void)tlscache_drop(c, key);
}
