/*
 * tls — the TLS transport: OpenSSL 3 over a non-blocking socket, filling
 * the common/transport.h table, so conn.c and upstream.c speak TLS without
 * knowing it. Contexts come from common/tlsctx.h.
 *
 * Every OpenSSL call is one step on the non-blocking fd: SSL_ERROR_WANT_READ
 * / WANT_WRITE become errno EAGAIN and rd_want / wr_want / hs_want (a read
 * may need the socket writable, a write readable, as TLS 1.3 key updates
 * and post-handshake messages can); nothing loops waiting. A read step
 * reads record after record until its buffer is full or the socket has no
 * more (one step moves what one read(2) would on plain TCP); read-ahead is
 * on, so OpenSSL takes whatever the socket holds (up to ~16 KiB) per
 * read(2), not a header and a body per record. pending() is SSL_pending
 * (decrypted bytes of the current record), else 1 while records read ahead
 * wait undecrypted (SSL_has_pending) — unless the last read or handshake
 * step blocked: then what is buffered is part of a record, which only the
 * socket can complete — or 1 while a close or failure met after bytes a
 * read returned waits to be reported by the next read. A peer closing
 * without close_notify
 * reads as EOF (Kafka frames carry their length: a truncation is seen by
 * the codec). Renegotiation is refused by the contexts, and a server
 * connection whose client attempted it fails its next read.
 *
 * Server side: before the first handshake byte is read, the first byte is
 * peeked; anything but a TLS handshake record (0x16) fails the handshake
 * with transport_tls_plaintext() true — a plaintext Kafka client on a TLS
 * port, closed and counted by the caller.
 *
 * peer(): the peer certificate's subject (RFC 2253) when the peer sent one,
 * else the socket address as for TCP. movable = false: the session lives in
 * this process, so live handover falls back to closing such connections at
 * request boundaries.
 *
 * Return convention: init 0, or -1 with errno (ENOMEM); the steps as in
 * transport.h. After a failed step, transport_tls_error() says why.
 */
#ifndef FERRY_COMMON_TLS_H
#define FERRY_COMMON_TLS_H

#include <stdbool.h>

#include <openssl/ssl.h>

#include "common/tlskeys.h"
#include "common/transport.h"

/* Accepted socket fd, server context: state HANDSHAKE, waiting to read. */
int transport_tls_server_init(struct transport *t, int fd, SSL_CTX *ctx);

/* Connected (or connecting) socket fd, client context. host: the broker's
 * name — sent as SNI (unless an IP literal) and, when verify_host, the name
 * (or address) the certificate must carry. NULL = no SNI, no name check. */
int transport_tls_client_init(struct transport *t, int fd, SSL_CTX *ctx,
    const char *host, bool verify_host);

/* Whether t is a TLS transport. */
bool transport_is_tls(const struct transport *t);

/* The OpenSSL session of a TLS transport (server name, peer certificate,
 * protocol, resumption), NULL for another transport. */
SSL *transport_tls_ssl(const struct transport *t);

/* Why the last step failed ("certificate verify failed: hostname
 * mismatch", "peer closed during the handshake", ...); "" when none. */
const char *transport_tls_error(const struct transport *t);

/* The server handshake failed because the peer did not speak TLS (its first
 * byte was not a TLS handshake record). */
bool transport_tls_plaintext(const struct transport *t);

/* A read failed because the client tried to renegotiate (TLS 1.2): the
 * attempt is refused and the connection closed, whatever the client does
 * with the no_renegotiation alert it was sent. */
bool transport_tls_renegotiation(const struct transport *t);

/*
 * Session tickets from caller-owned keys: installs the ticket-key callback
 * on a server context. New tickets are encrypted with keys->key[0]; a
 * ticket made with any of keys->key[0..n) is accepted (and renewed when not
 * made with key[0]); keys->n == 0: no ticket is issued and none accepted
 * (full handshakes). The struct is read at every handshake, so the owner
 * updates it in place (same thread) and every context that points at it
 * follows; it must outlive the context. 0, or -1 (out of memory).
 */
int tls_ticket_keys_install(SSL_CTX *ctx, const struct tlskeys *keys);

#endif
