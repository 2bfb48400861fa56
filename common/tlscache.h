/*
 * tlscache — client-side TLS session resumption: the newest resumable
 * session per upstream, so the next connection to the same broker resumes
 * (an abbreviated handshake: no certificate chain, no key exchange by
 * signature) instead of making a full handshake.
 *
 * A key names one upstream exactly: the name the connection sends as SNI
 * and, with verification, checks in the certificate, plus the address and
 * port actually dialled (tlscache_key). A resumed handshake skips the
 * certificate check; that is sound only because the session came from a
 * handshake that passed it under the same context (same trust anchors,
 * same verify setting) for the same name, which is what the key and the
 * one cache per client context guarantee.
 *
 * Sessions are learnt through the context's new-session callback
 * (tlscache_attach): TLS 1.3 tickets arrive after the handshake, so a
 * connection that resumed stores the ticket it was given next. The cache
 * keeps copies (SSL_SESSION_dup), never the connection's own session: a
 * connection freed without close_notify marks its session not resumable,
 * which must not reach the copy offered to the next one; for the same
 * reason a copy is offered (tlscache_use). Bounded: at most max keys, one
 * session each; a new key beyond that replaces the least recently used.
 * An expired or unresumable session is dropped when looked up; a failed
 * handshake drops its key's session (tlscache_forget).
 *
 * One cache per client context, used from one thread. Role-free: no
 * config, no log, no I/O.
 *
 * Return convention: 0 / -1 with errno (ENOMEM; EINVAL for a key that
 * cannot be built), unless said otherwise.
 */
#ifndef FERRY_COMMON_TLSCACHE_H
#define FERRY_COMMON_TLSCACHE_H

#include <stdbool.h>
#include <stddef.h>

#include <sys/socket.h>

#include <openssl/ssl.h>

/* A key: a host name (<= 255) + '|' + "[v6 address]:port". */
#define TLSCACHE_KEY_MAX 320

struct tlscache;

/* A cache of at most max keys (max >= 1). NULL: ENOMEM or EINVAL. */
struct tlscache *tlscache_new(size_t max);
/* Frees every session. NULL is fine. Detach first (free the contexts it is
 * attached to, or never attach): a callback must not find it freed. */
void tlscache_free(struct tlscache *c);

/* Makes ctx (a client context) report new sessions to c, and only to c
 * (OpenSSL's own client cache stays empty). */
int tlscache_attach(struct tlscache *c, SSL_CTX *ctx);

/* The key of a connection to name (SNI / verified name; NULL or "" when
 * none) dialled at sa (AF_INET or AF_INET6). */
int tlscache_key(char *buf, size_t len, const char *name, const struct sockaddr *sa);

/* Before the handshake of ssl (made from a context c is attached to):
 * remembers key for the sessions ssl will be given, and offers the cached
 * session of key if there is one. 1 offered, 0 none, -1 ENOMEM (ssl is
 * unchanged: a full handshake, nothing learnt). */
int tlscache_use(struct tlscache *c, SSL *ssl, const char *key);

/* The handshake of ssl failed: its key's session (if any) is dropped, so
 * the next connection makes a full handshake. Nothing for an ssl that
 * tlscache_use never saw. */
void tlscache_forget(SSL *ssl);

/* The entries, directly (the callback and tests use them). */
/* Stores a copy of s as key's session (replacing the older one). 0/-1. */
int tlscache_put(struct tlscache *c, const char *key, SSL_SESSION *s);
/* key's session (borrowed: valid until the next call on c), or NULL; an
 * expired or unresumable one is dropped and NULL returned. */
SSL_SESSION *tlscache_get(struct tlscache *c, const char *key);
/* Drops key's session. Whether there was one. */
bool tlscache_drop(struct tlscache *c, const char *key);
/* Keys held. */
size_t tlscache_count(const struct tlscache *c);

#endif
