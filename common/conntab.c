/*
 * conntab — the shared table of one worker's client connections; see
 * conntab.h.
 */
#include "common/conntab.h"
#include "common/shmblock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* The header (counts and software slots) fits the first two pages; rows
 * start after it and take pages only when used. */
_Static_assert(offsetof(struct conntab, row) <= 8192, "conntab header beyond two pages");

uint32_t
conntab_rows(uint64_t max_connections)
{
	if (max_connections == 0)
		return 1;
	return max_connections < CONNTAB_MAX_ROWS ? (uint32_t)max_connections : CONNTAB_MAX_ROWS;
}

size_t
conntab_size(uint32_t rows)
{
	return offsetof(struct conntab, row) + (size_t)rows * sizeof(struct conntab_row);
}

int
conntab_create(uint32_t rows, struct conntab **out)
{
	void *p;

	if (rows == 0 || rows > CONNTAB_MAX_ROWS) {
		errno = EINVAL;
		return -1;
	}
	int fd = shmblock_create("ferry-connections", conntab_size(rows), &p);
	if (fd == -1)
		return -1;
	struct conntab *t = p;
	t->magic = CONNTAB_MAGIC;
	t->rows = rows;
	*out = t;
	return fd;
}

int
conntab_map(int fd, uint32_t rows, struct conntab **out)
{
	void *p;

	if (rows == 0 || rows > CONNTAB_MAX_ROWS ||
	    shmblock_map(fd, conntab_size(rows), &p) == -1) {
		errno = EINVAL;
		return -1;
	}
	struct conntab *t = p;
	if (t->magic != CONNTAB_MAGIC || t->rows != rows) {
		munmap(p, conntab_size(rows));
		errno = EINVAL;
		return -1;
	}
	*out = t;
	return 0;
}

void
conntab_unmap(struct conntab *t, uint32_t rows)
{
	if (t)
		munmap(t, conntab_size(rows));
}

/* ---- the worker's side -------------------------------------------------- */

int
conntab_writer_init(struct conntab_writer *w, struct conntab *t, uint32_t rows)
{
	memset(w, 0, sizeof *w);
	if (!t || rows == 0)
		return 0;
	w->free = malloc((size_t)rows * sizeof *w->free);
	if (!w->free)
		return -1;
	w->t = t;
	w->rows = rows;
	return 0;
}

void
conntab_writer_free(struct conntab_writer *w)
{
	free(w->free);
	memset(w, 0, sizeof *w);
}

/* The free rows are a binary min-heap: the lowest is reused first, so the
 * rows in use (and the pages a reader touches) stay packed at the front. */
static void
heap_push(struct conntab_writer *w, uint32_t v)
{
	uint32_t i = w->n_free++;

	while (i > 0 && w->free[(i - 1) / 2] > v) {
		w->free[i] = w->free[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	w->free[i] = v;
}

static uint32_t
heap_pop(struct conntab_writer *w)
{
	uint32_t top = w->free[0], last = w->free[--w->n_free], i = 0;

	for (;;) {
		uint32_t c = 2 * i + 1;

		if (c >= w->n_free)
			break;
		if (c + 1 < w->n_free && w->free[c + 1] < w->free[c])
			c++;
		if (w->free[c] >= last)
			break;
		w->free[i] = w->free[c];
		i = c;
	}
	if (w->n_free)
		w->free[i] = last;
	return top;
}

int
conntab_take(struct conntab_writer *w)
{
	struct conntab *t = w->t;
	uint32_t i;

	if (!t)
		return -1;
	if (w->n_free) {
		i = heap_pop(w);
	} else {
		i = atomic_load_explicit(&t->hwm, memory_order_relaxed);
		if (i >= w->rows) {
			atomic_fetch_add_explicit(&t->unlisted, 1, memory_order_relaxed);
			return -1;
		}
		/* (the row is written before a reader may look at it) */
		atomic_store_explicit(&t->hwm, i + 1, memory_order_release);
	}
	atomic_fetch_add_explicit(&t->used, 1, memory_order_relaxed);
	return (int)i;
}

void
conntab_put(struct conntab_writer *w, int i, const struct conntab_entry *e)
{
	struct conntab *t = w->t;

	if (!t || i < 0 || (uint32_t)i >= w->rows)
		return;
	struct conntab_row *r = &t->row[i];
	uint32_t s = atomic_load_explicit(&r->seq, memory_order_relaxed);

	atomic_store_explicit(&r->seq, s + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	r->e = *e;
	r->used = 1;
	atomic_store_explicit(&r->seq, s + 2, memory_order_release);
}

void
conntab_release(struct conntab_writer *w, int i)
{
	struct conntab *t = w->t;

	if (!t)
		return;
	if (i < 0 || (uint32_t)i >= w->rows) {
		if (atomic_load_explicit(&t->unlisted, memory_order_relaxed))
			atomic_fetch_sub_explicit(&t->unlisted, 1, memory_order_relaxed);
		return;
	}
	struct conntab_row *r = &t->row[i];
	uint32_t s = atomic_load_explicit(&r->seq, memory_order_relaxed);

	atomic_store_explicit(&r->seq, s + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	r->used = 0;
	atomic_store_explicit(&r->seq, s + 2, memory_order_release);
	atomic_fetch_sub_explicit(&t->used, 1, memory_order_relaxed);
	heap_push(w, (uint32_t)i);
}

static _Atomic uint64_t *
soft_counter(struct conntab *t, int b)
{
	switch (b) {
	case CONNTAB_B_UNKNOWN: return &t->soft_unknown;
	case CONNTAB_B_INVALID: return &t->soft_invalid;
	case CONNTAB_B_OTHER: return &t->soft_other;
	default:
		return b >= 0 && b < CONNTAB_SOFTWARE ? &t->soft[b].count : NULL;
	}
}

void
conntab_soft_add(struct conntab_writer *w, int b)
{
	_Atomic uint64_t *n = w->t ? soft_counter(w->t, b) : NULL;

	if (n)
		atomic_fetch_add_explicit(n, 1, memory_order_relaxed);
}

void
conntab_soft_drop(struct conntab_writer *w, int b)
{
	_Atomic uint64_t *n = w->t ? soft_counter(w->t, b) : NULL;

	if (n && atomic_load_explicit(n, memory_order_relaxed))
		atomic_fetch_sub_explicit(n, 1, memory_order_relaxed);
}

/* The slot of (name, version): one that has it, else a free one (count
 * zero), renamed; CONNTAB_B_OTHER when all are taken. */
static int
soft_slot(struct conntab *t, const char *name, const char *version)
{
	int free_slot = -1;

	for (int s = 0; s < CONNTAB_SOFTWARE; s++) {
		struct conntab_soft *e = &t->soft[s];
		bool busy = atomic_load_explicit(&e->count, memory_order_relaxed) > 0;

		if (busy && strcmp(e->name, name) == 0 && strcmp(e->version, version) == 0)
			return s;
		if (!busy && free_slot < 0)
			free_slot = s;
	}
	if (free_slot < 0)
		return CONNTAB_B_OTHER;
	struct conntab_soft *e = &t->soft[free_slot];
	uint32_t q = atomic_load_explicit(&e->seq, memory_order_relaxed);

	atomic_store_explicit(&e->seq, q + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	snprintf(e->name, sizeof e->name, "%s", name);
	snprintf(e->version, sizeof e->version, "%s", version);
	atomic_store_explicit(&e->seq, q + 2, memory_order_release);
	return free_slot;
}

int
conntab_soft_move(struct conntab_writer *w, int from, bool seen, bool valid,
		  const char *name, const char *version)
{
	struct conntab *t = w->t;

	if (!t || from == CONNTAB_B_NONE)
		return CONNTAB_B_NONE;
	int to = !seen ? CONNTAB_B_UNKNOWN : !valid ? CONNTAB_B_INVALID :
	    soft_slot(t, name, version);

	if (to == from)
		return from;
	/* counted in the new bucket first: a slot whose count fell to zero
	 * could be renamed under it */
	conntab_soft_add(w, to);
	conntab_soft_drop(w, from);
	return to;
}

/* ---- the supervisor's side -------------------------------------------- */

uint32_t
conntab_hwm(const struct conntab *t, uint32_t rows)
{
	uint32_t n = atomic_load_explicit(&((struct conntab *)t)->hwm, memory_order_acquire);

	return n < rows ? n : rows;
}

void
conntab_sanitize(char *dst, size_t dstlen, const char *src, size_t srclen)
{
	size_t i;

	if (dstlen == 0)
		return;
	for (i = 0; i < srclen && i + 1 < dstlen && src[i] != '\0'; i++)
		dst[i] = src[i] >= 0x20 && src[i] <= 0x7e ? src[i] : '?';
	dst[i] = '\0';
}

#define SANE(field) conntab_sanitize(out->field, sizeof out->field, e.field, sizeof e.field)

bool
conntab_read(const struct conntab *t, uint32_t rows, uint32_t i, struct conntab_entry *out)
{
	if (i >= conntab_hwm(t, rows))
		return false;
	struct conntab_row *r = (struct conntab_row *)&t->row[i];

	for (int tries = 0; tries < 8; tries++) {
		uint32_t a = atomic_load_explicit(&r->seq, memory_order_acquire);

		if (a & 1)
			continue;
		if (!r->used)
			return false;
		struct conntab_entry e = r->e;

		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&r->seq, memory_order_relaxed) != a)
			continue;
		out->id = e.id;
		out->since_ms = e.since_ms;
		out->node_id = e.node_id;
		out->flags = e.flags;
		SANE(addr);
		SANE(state);
		SANE(client_id);
		SANE(software_name);
		SANE(software_version);
		SANE(mechanism);
		SANE(principal);
		return true;
	}
	return false;
}

#undef SANE

bool
conntab_soft_read(const struct conntab *t, unsigned s, char *name, char *version,
		  uint64_t *count)
{
	if (s >= CONNTAB_SOFTWARE)
		return false;
	struct conntab_soft *e = (struct conntab_soft *)&t->soft[s];

	for (int tries = 0; tries < 8; tries++) {
		uint32_t a = atomic_load_explicit(&e->seq, memory_order_acquire);

		if (a & 1)
			continue;
		uint64_t n = atomic_load_explicit(&e->count, memory_order_relaxed);
		char nm[CONNTAB_SOFTWARE_MAX], v[CONNTAB_SOFTWARE_MAX];

		memcpy(nm, e->name, sizeof nm);
		memcpy(v, e->version, sizeof v);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&e->seq, memory_order_relaxed) != a)
			continue;
		if (n == 0)
			return false;
		conntab_sanitize(name, CONNTAB_SOFTWARE_MAX, nm, sizeof nm);
		conntab_sanitize(version, CONNTAB_SOFTWARE_MAX, v, sizeof v);
		*count = n;
		return true;
	}
	return false;
}

void
conntab_fmt_addr(const struct sockaddr *sa, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN];

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;

		if (inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof ip)) {
			snprintf(buf, len, "%s:%u", ip, ntohs(s4->sin_port));
			return;
		}
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;

		if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr) &&
		    inet_ntop(AF_INET, s6->sin6_addr.s6_addr + 12, ip, sizeof ip)) {
			snprintf(buf, len, "%s:%u", ip, ntohs(s6->sin6_port));
			return;
		}
		if (inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof ip)) {
			snprintf(buf, len, "[%s]:%u", ip, ntohs(s6->sin6_port));
			return;
		}
	} else if (sa->sa_family == AF_UNIX) {
		snprintf(buf, len, "unix");
		return;
	}
	snprintf(buf, len, "?");
}
