/*
 * splice — zero-copy forwarding of frame bodies; see splice.h.
 */
#include "worker/splice.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

const char *
splice_way_str(enum splice_way w)
{
	switch (w) {
	case SPLICE_COPY: return "copy";
	case SPLICE_WAIT: return "wait";
	case SPLICE_MOVE: return "move";
	}
	return "?";
}

enum splice_way
splice_decide(const struct splice_view *v)
{
	/* TLS, or switched off: always the buffer. At a frame boundary (or
	 * in a frame collected for a rewrite): the buffer, which the parser
	 * reads; a pipe still holding the previous frame's tail is written
	 * first by the caller. */
	if (!v->enabled || !v->plain || v->frame_left == 0)
		return SPLICE_COPY;
	/* A short rest costs two splices for what one read and one write
	 * move as cheaply; a frame already in the pipe goes on there. */
	if (!v->holding && v->frame_left < v->threshold)
		return SPLICE_COPY;
	/* Bytes read before them leave first. */
	if (v->buffered > 0)
		return SPLICE_WAIT;
	return SPLICE_MOVE;
}

size_t
splice_amount(uint64_t frame_left, size_t cap, size_t piped)
{
	if (piped >= cap)
		return 0;
	size_t room = cap - piped;
	return frame_left < room ? (size_t)frame_left : room;
}

void
splice_pool_init(struct splice_pool *p, struct metrics *m)
{
	p->n_idle = 0;
	p->n_open = 0;
	p->retry_at = 0;
	p->m = m;
}

static void
pipe_close(struct splice_pool *p, struct splice_pipe *pp)
{
	close(pp->rd);
	close(pp->wr);
	pp->rd = pp->wr = -1;
	pp->cap = 0;
	pp->full = false;
	p->n_open--;
	METRIC_SUB(p->m, splice_pipes, 1);
}

int
splice_pool_get(struct splice_pool *p, double now, struct splice_pipe *out)
{
	if (p->n_idle) {
		*out = p->idle[--p->n_idle];
		return 0;
	}
	if (p->n_open >= SPLICE_PIPES_MAX || now < p->retry_at)
		goto none;
	int fds[2];
	if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) == -1)
		goto failed;   /* EMFILE, ENFILE: descriptors go to connections */
	/* Best effort: beyond the user's pipe-user-pages-soft the kernel
	 * refuses (EPERM) and the pipe keeps its size. */
	(void)fcntl(fds[1], F_SETPIPE_SZ, SPLICE_PIPE_BYTES);
	int cap = fcntl(fds[1], F_GETPIPE_SZ);
	if (cap < SPLICE_PIPE_MIN) {
		/* (a user over its soft limit gets 2 pages a pipe) */
		close(fds[0]);
		close(fds[1]);
		goto failed;
	}
	*out = (struct splice_pipe){ .rd = fds[0], .wr = fds[1], .cap = (size_t)cap };
	p->n_open++;
	METRIC_ADD(p->m, splice_pipes, 1);
	return 0;
failed:
	p->retry_at = now + SPLICE_RETRY_S;
none:
	METRIC_ADD(p->m, splice_fallbacks, 1);
	return -1;
}

void
splice_pool_put(struct splice_pool *p, struct splice_pipe *pp)
{
	if (!pp->cap)
		return;
	pp->full = false;
	if (p->n_idle < SPLICE_PIPES_IDLE) {
		p->idle[p->n_idle++] = *pp;
		pp->rd = pp->wr = -1;
		pp->cap = 0;
		return;
	}
	pipe_close(p, pp);
}

void
splice_pool_drop(struct splice_pool *p, struct splice_pipe *pp)
{
	if (pp->cap)
		pipe_close(p, pp);
}

void
splice_pool_free(struct splice_pool *p)
{
	while (p->n_idle)
		pipe_close(p, &p->idle[--p->n_idle]);
}
