/*
 * nodemap — the learned-brokers map on the wire; see nodemap.h.
 */
#include "common/nodemap.h"

#include <stdio.h>
#include <string.h>

#define NODEMAP_REC_FIXED 7u  /* node_id 4 + port 2 + host_len 1 */

static bool
nodemap_host_ok(const char *h, size_t n)
{
	if (n == 0 || n >= CFG_HOST_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)h[i] < 0x20 || (unsigned char)h[i] == 0x7f)
			return false;
	return true;
}

size_t
nodemap_entry_size(const struct nodemap_entry *e)
{
	return NODEMAP_REC_FIXED + strnlen(e->host, sizeof e->host);
}

void
nodemap_writer_init(struct nodemap_writer *w, uint8_t *buf, size_t cap, uint32_t flags)
{
	w->buf = buf;
	w->cap = cap;
	w->len = sizeof(struct nodemap_hdr);
	w->count = 0;
	struct nodemap_hdr h = { .count = 0, .flags = flags };
	memcpy(buf, &h, sizeof h);
}

bool
nodemap_writer_add(struct nodemap_writer *w, const struct nodemap_entry *e)
{
	size_t hl = strnlen(e->host, sizeof e->host);
	if (!nodemap_host_ok(e->host, hl) || e->port <= 0 || e->port > 65535 ||
	    w->count >= NODEMAP_MAX_COUNT || w->cap - w->len < NODEMAP_REC_FIXED + hl)
		return false;
	uint8_t *p = w->buf + w->len;
	uint16_t port = (uint16_t)e->port;
	uint8_t l = (uint8_t)hl;
	memcpy(p, &e->node_id, 4);
	memcpy(p + 4, &port, 2);
	memcpy(p + 6, &l, 1);
	memcpy(p + 7, e->host, hl);
	w->len += NODEMAP_REC_FIXED + hl;
	w->count++;
	return true;
}

size_t
nodemap_writer_finish(struct nodemap_writer *w)
{
	memcpy(w->buf, &w->count, sizeof w->count);  /* hdr.count is first */
	return w->len;
}

int
nodemap_reader_init(struct nodemap_reader *r, const void *buf, size_t len, uint32_t max_count,
		    char *err, size_t errlen)
{
	struct nodemap_hdr h;
	if (len < sizeof h) {
		snprintf(err, errlen, "node map: %zu bytes, need at least %zu", len, sizeof h);
		return -1;
	}
	memcpy(&h, buf, sizeof h);
	if (h.flags & ~NODEMAP_FLAGS_KNOWN) {
		snprintf(err, errlen, "node map: unknown flags 0x%x", h.flags);
		return -1;
	}
	if (h.count > max_count || h.count > NODEMAP_MAX_COUNT) {
		snprintf(err, errlen, "node map: %u nodes, at most %u", h.count,
		    max_count < NODEMAP_MAX_COUNT ? max_count : NODEMAP_MAX_COUNT);
		return -1;
	}
	if ((uint64_t)h.count * (NODEMAP_REC_FIXED + 1) > len - sizeof h) {
		snprintf(err, errlen, "node map: %u nodes cannot fit in %zu bytes", h.count,
		    len - sizeof h);
		return -1;
	}
	r->p = (const uint8_t *)buf + sizeof h;
	r->left = len - sizeof h;
	r->count = h.count;
	r->done = 0;
	r->flags = h.flags;
	return 0;
}

int
nodemap_reader_next(struct nodemap_reader *r, struct nodemap_entry *e, char *err, size_t errlen)
{
	if (r->done == r->count) {
		if (r->left) {
			snprintf(err, errlen, "node map: %zu bytes after the last node", r->left);
			return -1;
		}
		return 0;
	}
	if (r->left < NODEMAP_REC_FIXED) {
		snprintf(err, errlen, "node map: node %u truncated", r->done);
		return -1;
	}
	uint16_t port;
	uint8_t hl;
	memcpy(&e->node_id, r->p, 4);
	memcpy(&port, r->p + 4, 2);
	memcpy(&hl, r->p + 6, 1);
	if (r->left - NODEMAP_REC_FIXED < hl) {
		snprintf(err, errlen, "node map: host of node %u truncated", r->done);
		return -1;
	}
	const char *h = (const char *)r->p + NODEMAP_REC_FIXED;
	if (port == 0 || !nodemap_host_ok(h, hl) || memchr(h, 0, hl)) {
		snprintf(err, errlen, "node map: node %u (id %d): bad %s", r->done, e->node_id,
		    port == 0 ? "port 0" : "host");
		return -1;
	}
	memcpy(e->host, h, hl);
	e->host[hl] = 0;
	e->port = port;
	r->p += NODEMAP_REC_FIXED + hl;
	r->left -= NODEMAP_REC_FIXED + hl;
	r->done++;
	return 1;
}

int
nodemap_check(const void *buf, size_t len, uint32_t max_count, char *err, size_t errlen)
{
	struct nodemap_reader r;
	struct nodemap_entry e;
	if (nodemap_reader_init(&r, buf, len, max_count, err, errlen) == -1)
		return -1;
	int rc;
	while ((rc = nodemap_reader_next(&r, &e, err, errlen)) == 1)
		;
	return rc;
}
