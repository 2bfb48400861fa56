/*
 * shmblock — a block of shared memory that the supervisor creates and hands
 * to workers: an anonymous memfd of a fixed size, sealed so that neither
 * its size nor its seals can ever change (a mapping of a file a peer could
 * truncate would fault with SIGBUS), mapped read-write and shared. The
 * metrics block (metrics.h) and the generation block (genshm.h) are both
 * one.
 *
 * A block costs memory only for the pages someone touched: it starts as
 * zeros without a page allocated. A read of a page never written
 * allocates it too (a shared memfd mapping has no zero page), so readers
 * that scan a block look at a written-map in its first page first (see
 * genshm_node_get, metrics_api_seen).
 *
 * Return convention: the fd (O_CLOEXEC) or 0, -1 with errno; a block
 * without the seals or of another size is refused with EINVAL.
 */
#ifndef FERRY_COMMON_SHMBLOCK_H
#define FERRY_COMMON_SHMBLOCK_H

#include <fcntl.h>
#include <stddef.h>

#define SHMBLOCK_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

/* Create, size, seal and map a zero-filled block (no page touched);
 * returns its fd. */
int shmblock_create(const char *name, size_t size, void **out);
/* Map a received block after checking its seals and size. */
int shmblock_map(int fd, size_t size, void **out);

/*
 * Bytes that travel beside a message too large for it (a posted config, a
 * /metrics answer): a memfd holding exactly len bytes, sealed against any
 * change (SHMBLOCK_BYTES_SEALS: also F_SEAL_WRITE). The receiver copies
 * them out with shmblock_read_bytes, which checks the seals and the size
 * against what the message said and never maps the file, so nothing the
 * sender does afterwards can change what was read or fault the reader.
 */
#define SHMBLOCK_BYTES_SEALS (SHMBLOCK_SEALS | F_SEAL_WRITE)

/* A sealed memfd holding data[0..len) (len > 0); its fd (O_CLOEXEC). */
int shmblock_seal_bytes(const char *name, const void *data, size_t len);
/* Copy the len bytes of a sealed memfd into out (len of them). EINVAL:
 * not sealed so, or not exactly len bytes long. */
int shmblock_read_bytes(int fd, void *out, size_t len);

#endif
