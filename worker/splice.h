/*
 * splice — frame bodies that move between the two sockets of a connection
 * without passing through the worker's memory: splice(2) from the source
 * socket into a pipe, then from the pipe into the destination socket
 * (docs/design.md §5, "Zero copy").
 *
 * Only the bytes frame.c streams unchanged (frame_left of a pass-through
 * frame: Produce requests, Fetch responses below v16, the record sets of
 * larger Fetch v16+ responses, ...) ever
 * take this way, and only the rest of a frame that is still large once the
 * bytes already read into the direction's buffer are written: a frame's
 * header and everything rewritten or read for the client's identity go
 * through the buffer as before. splice_decide() says, per direction and
 * moment, which way the next bytes go; it is pure and unit-tested
 * (tests/unit/test_splice.c).
 *
 * Order: the buffer is flushed before the first byte of a frame enters the
 * pipe, a pipe never holds more than the current frame (the next header
 * goes through the parser), and the pipe is emptied before any later byte
 * of the buffer is written. Bytes in a pipe are owed like bytes in a
 * buffer (frame_dir.piped; frame_owes_nothing): a connection with a
 * non-empty pipe is at no boundary, so a drain or a handover waits for it.
 *
 * Pipes: a worker keeps a small pool (at most SPLICE_PIPES_MAX open, 2
 * descriptors each, SPLICE_PIPES_IDLE of them kept when unused); a
 * direction holds one only while it streams a large frame and gives it
 * back, empty, when the frame's last byte has left. No pipe, a pipe the
 * kernel sizes below SPLICE_PIPE_MIN (the user's pipe-user-pages-soft is
 * used up), or a transport that is not plain TCP (TLS: no kernel TLS
 * here): the bytes are copied through the buffer, as before.
 *
 * Return convention: splice_pool_get 0 or -1 (no pipe: copy); the rest
 * cannot fail.
 */
#ifndef FERRY_WORKER_SPLICE_H
#define FERRY_WORKER_SPLICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/metrics.h"

/* What is left of a frame, once its buffered bytes are written, for its
 * rest to be spliced: below it the buffer copy is as cheap (measured with
 * scripts/bench --compare-rev; see docs/performance.md). */
#define SPLICE_THRESHOLD (64 * 1024)
#define SPLICE_PIPE_BYTES (1024 * 1024)  /* asked of F_SETPIPE_SZ */
#define SPLICE_PIPE_MIN (64 * 1024)      /* smaller pipes are not used */
#define SPLICE_PIPES_MAX 32              /* open at once, per worker */
#define SPLICE_PIPES_IDLE 8              /* kept open when unused */
#define SPLICE_RETRY_S 1.0               /* no new pipe this long after a failure */

/* Which way the next bytes of one direction go. */
enum splice_way {
	SPLICE_COPY = 0,   /* read into the buffer (frame.c parses or streams them) */
	SPLICE_WAIT,       /* the frame's rest will be spliced: write what the
	                      buffer holds first, read nothing meanwhile */
	SPLICE_MOVE,       /* splice the frame's rest: socket -> pipe -> socket */
};
const char *splice_way_str(enum splice_way w);

/* What the decision knows of one direction. */
struct splice_view {
	bool enabled;          /* the cluster's splice = on */
	bool plain;            /* both sockets can splice (plain TCP, open) */
	bool holding;          /* the direction holds a pipe (this frame's
	                          rest is being spliced, or its tail is still
	                          in the pipe) */
	uint64_t frame_left;   /* bytes of the current pass-through frame not
	                          read yet (0: none, or at a frame boundary, or a
	                          frame collected to be rewritten) */
	size_t buffered;       /* bytes of this direction in user space still
	                          to be written or parsed */
	uint64_t threshold;    /* SPLICE_THRESHOLD (a parameter for the tests) */
};

enum splice_way splice_decide(const struct splice_view *v);

/* How many bytes to splice into a pipe of cap bytes holding piped: the
 * frame's rest, at most the pipe's room; 0 when it is full. */
size_t splice_amount(uint64_t frame_left, size_t cap, size_t piped);

/* One pipe: its two ends and its capacity in bytes. cap 0: none. full: a
 * splice into it found no room (a pipe counts pages, not bytes): no read
 * until some of it was written. */
struct splice_pipe {
	int rd, wr;
	size_t cap;
	bool full;
};

struct splice_pool {
	struct splice_pipe idle[SPLICE_PIPES_IDLE];
	size_t n_idle;
	size_t n_open;         /* idle + held by connections */
	double retry_at;       /* after a failure: no pipe2 before this */
	struct metrics *m;     /* splice_pipes, splice_fallbacks */
};

void splice_pool_init(struct splice_pool *p, struct metrics *m);
/* A pipe for a direction about to splice, into *out: 0, or -1 when there
 * is none (SPLICE_PIPES_MAX open, pipe2 failed, the kernel gave a pipe
 * below SPLICE_PIPE_MIN, or a failure less than SPLICE_RETRY_S ago before
 * now): the caller copies, counted splice_fallbacks. */
int splice_pool_get(struct splice_pool *p, double now, struct splice_pipe *out);
/* An empty pipe back to the pool (closed when SPLICE_PIPES_IDLE are kept);
 * *pp becomes none. */
void splice_pool_put(struct splice_pool *p, struct splice_pipe *pp);
/* A pipe that may hold bytes (its connection is closing): closed; *pp
 * becomes none. Nothing when it is none. */
void splice_pool_drop(struct splice_pool *p, struct splice_pipe *pp);
/* Close the idle pipes (the worker exits). */
void splice_pool_free(struct splice_pool *p);

#endif
