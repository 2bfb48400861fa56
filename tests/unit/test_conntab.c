/*
 * Unit tests for common/conntab: the block (sizes, seals, a worker mapping
 * the supervisor's block), rows taken lowest-first and reused, the
 * high-water mark readers stop at, a full table counting unlisted
 * connections, software slots (found, renamed when free, other when full,
 * unknown and invalid buckets), and readers that sanitise whatever a
 * writer left in a row (the supervisor trusts no byte of it), and the
 * block's cost: a new table of 10,000 rows holds its first page only, an
 * idle worker's table stays so however often it is read, and a connection
 * adds the pages of its row.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/conntab.h"
#include "shm_pages.h"

/* (the tests know what they created; the block says it too) */
#define ROWS_OF(t) ((t)->rows)

static struct conntab *
make(uint32_t rows, int *fd)
{
	struct conntab *t = NULL;
	*fd = conntab_create(rows, &t);
	cr_assert_geq(*fd, 0);
	return t;
}

static struct conntab_entry
entry(uint64_t id, const char *addr, const char *client_id)
{
	struct conntab_entry e;
	memset(&e, 0, sizeof e);
	e.id = id;
	e.since_ms = 1000 + (int64_t)id;
	e.flags = CONNTAB_F_CLIENT_ID;
	snprintf(e.addr, sizeof e.addr, "%s", addr);
	snprintf(e.client_id, sizeof e.client_id, "%s", client_id);
	snprintf(e.state, sizeof e.state, "open");
	return e;
}

Test(conntab, sizes_and_capacity)
{
	cr_expect_eq(conntab_rows(0), 1);
	cr_expect_eq(conntab_rows(500), 500);
	cr_expect_eq(conntab_rows(10000), 10000);
	cr_expect_eq(conntab_rows(1000000), CONNTAB_MAX_ROWS);
	cr_expect_gt(conntab_size(2), conntab_size(1));
	struct conntab *t;
	cr_expect_eq(conntab_create(0, &t), -1);
	cr_expect_eq(conntab_create(CONNTAB_MAX_ROWS + 1, &t), -1);
}

Test(conntab, a_new_table_holds_its_first_page_only)
{
	int fd;
	struct conntab *sup = make(10000, &fd), *wk = NULL;
	size_t size = conntab_size(10000);
	cr_assert_gt(size / shm_page_size(), 1000, "a table of 10,000 rows spans many pages");
	cr_assert_eq(shm_pages_resident(sup, size), 1, "created: the header written, nothing else");

	/* the worker maps it and sets up its writer; the supervisor reads
	 * what /metrics and the listing read of an idle table */
	cr_assert_eq(conntab_map(fd, 10000, &wk), 0);
	struct conntab_writer w;
	cr_assert_eq(conntab_writer_init(&w, wk, 10000), 0);
	for (int k = 0; k < 3; k++) {
		cr_assert_eq(conntab_hwm(sup, 10000), 0);
		cr_assert_eq(atomic_load(&sup->used), 0);
		cr_assert_eq(atomic_load(&sup->unlisted), 0);
		cr_assert_eq(atomic_load(&sup->soft_unknown) + atomic_load(&sup->soft_other) +
		    atomic_load(&sup->soft_invalid), 0);
	}
	cr_assert_eq(shm_pages_resident(sup, size), 1, "reading an idle table allocated pages");

	/* a connection: its row's pages (and the header's counters) */
	int r = conntab_take(&w);
	cr_assert_eq(r, 0);
	struct conntab_entry e = entry(1, "10.0.0.1:5", "app");
	conntab_put(&w, r, &e);
	conntab_soft_add(&w, CONNTAB_B_UNKNOWN);
	size_t off = offsetof(struct conntab, row);
	size_t last = shm_page_of(off + sizeof(struct conntab_row) - 1);
	cr_assert_leq(shm_pages_resident(sup, size), last + 1,
	    "one connection allocated pages beyond its row");
	struct conntab_entry got;
	cr_assert(conntab_read(sup, 10000, 0, &got));
	cr_assert_str_eq(got.client_id, "app");
	cr_assert_leq(shm_pages_resident(sup, size), last + 1);
	conntab_writer_free(&w);
	conntab_unmap(wk, 10000);
	conntab_unmap(sup, 10000);
	close(fd);
}

Test(conntab, worker_maps_the_supervisors_block)
{
	int fd;
	struct conntab *sup = make(8, &fd), *wk = NULL;
	cr_expect_eq(conntab_map(fd, 9, &wk), -1, "another row count is refused");
	cr_assert_eq(conntab_map(fd, 8, &wk), 0);
	struct conntab_writer w;
	cr_assert_eq(conntab_writer_init(&w, wk, ROWS_OF(wk)), 0);
	int r = conntab_take(&w);
	cr_assert_eq(r, 0);
	struct conntab_entry e = entry(7, "127.0.0.2:4000", "orders"), got;
	conntab_put(&w, r, &e);
	/* the supervisor sees it through its own mapping */
	cr_assert(conntab_read(sup, ROWS_OF(sup), 0, &got));
	cr_expect_eq(got.id, 7);
	cr_expect_str_eq(got.addr, "127.0.0.2:4000");
	cr_expect_str_eq(got.client_id, "orders");
	cr_expect_eq(conntab_hwm(sup, ROWS_OF(sup)), 1);
	conntab_writer_free(&w);
	conntab_unmap(wk, ROWS_OF(wk));
	conntab_unmap(sup, ROWS_OF(sup));
	close(fd);
}

Test(conntab, a_block_without_seals_is_refused)
{
	int fd = memfd_create("not-sealed", MFD_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, (off_t)conntab_size(4)), 0);
	struct conntab *t;
	cr_expect_eq(conntab_map(fd, 4, &t), -1);
	close(fd);
}

Test(conntab, rows_lowest_first_and_reused)
{
	int fd;
	struct conntab *t = make(4, &fd);
	struct conntab_writer w;
	cr_assert_eq(conntab_writer_init(&w, t, ROWS_OF(t)), 0);
	int a = conntab_take(&w), b = conntab_take(&w), c = conntab_take(&w);
	cr_expect_eq(a, 0);
	cr_expect_eq(b, 1);
	cr_expect_eq(c, 2);
	cr_expect_eq(conntab_hwm(t, ROWS_OF(t)), 3);
	struct conntab_entry e = entry(1, "a", "x");
	conntab_put(&w, b, &e);
	conntab_release(&w, c);
	conntab_release(&w, a);
	struct conntab_entry got;
	cr_expect(!conntab_read(t, ROWS_OF(t), (uint32_t)a, &got), "a released row is not listed");
	cr_expect(conntab_read(t, ROWS_OF(t), (uint32_t)b, &got));
	/* the lowest free row first: the used rows stay packed */
	cr_expect_eq(conntab_take(&w), 0);
	cr_expect_eq(conntab_take(&w), 2);
	cr_expect_eq(conntab_take(&w), 3);
	cr_expect_eq(conntab_hwm(t, ROWS_OF(t)), 4);
	cr_expect_eq(atomic_load(&t->used), 4);
	cr_expect(!conntab_read(t, ROWS_OF(t), 4, &got), "beyond the table");
	conntab_writer_free(&w);
	conntab_unmap(t, ROWS_OF(t));
	close(fd);
}

Test(conntab, a_full_table_counts_unlisted)
{
	int fd;
	struct conntab *t = make(2, &fd);
	struct conntab_writer w;
	cr_assert_eq(conntab_writer_init(&w, t, ROWS_OF(t)), 0);
	cr_expect_eq(conntab_take(&w), 0);
	cr_expect_eq(conntab_take(&w), 1);
	cr_expect_eq(conntab_take(&w), -1);
	cr_expect_eq(conntab_take(&w), -1);
	cr_expect_eq(atomic_load(&t->unlisted), 2);
	conntab_release(&w, -1);
	cr_expect_eq(atomic_load(&t->unlisted), 1);
	conntab_release(&w, 0);
	cr_expect_eq(conntab_take(&w), 0);
	conntab_writer_free(&w);
	conntab_unmap(t, ROWS_OF(t));
	close(fd);
}

Test(conntab, no_table_is_a_no_op)
{
	struct conntab_writer w;
	cr_assert_eq(conntab_writer_init(&w, NULL, 0), 0);
	cr_expect_eq(conntab_take(&w), -1);
	struct conntab_entry e = entry(1, "a", "b");
	conntab_put(&w, 0, &e);
	conntab_release(&w, 0);
	conntab_soft_add(&w, CONNTAB_B_UNKNOWN);
	cr_expect_eq(conntab_soft_move(&w, CONNTAB_B_UNKNOWN, true, true, "a", "1"),
	    CONNTAB_B_NONE);
	conntab_writer_free(&w);
}

/* A writer that breaks every rule: strings without a NUL, control bytes,
 * bytes above ASCII. The reader's copy is terminated and printable. */
Test(conntab, readers_sanitise_what_they_copy)
{
	int fd;
	struct conntab *t = make(2, &fd);
	struct conntab_writer w;
	cr_assert_eq(conntab_writer_init(&w, t, ROWS_OF(t)), 0);
	int r = conntab_take(&w);
	struct conntab_entry e;
	memset(&e, 'A', sizeof e);
	e.id = 5;
	e.client_id[3] = '\n';
	e.principal[0] = (char)0xff;
	e.addr[1] = '\x1b';
	conntab_put(&w, r, &e);
	struct conntab_entry got;
	cr_assert(conntab_read(t, ROWS_OF(t), (uint32_t)r, &got));
	cr_expect_eq(strlen(got.client_id), sizeof got.client_id - 1);
	cr_expect_eq(got.client_id[3], '?');
	cr_expect_eq(got.principal[0], '?');
	cr_expect_eq(got.addr[1], '?');
	cr_expect_eq(strlen(got.addr), sizeof got.addr - 1);
	cr_expect_eq(strlen(got.state), sizeof got.state - 1);
	for (size_t i = 0; i < strlen(got.software_name); i++)
		cr_expect(got.software_name[i] >= 0x20 && got.software_name[i] <= 0x7e);
	/* a row being written is not read */
	atomic_store(&t->row[r].seq, atomic_load(&t->row[r].seq) + 1);
	cr_expect(!conntab_read(t, ROWS_OF(t), (uint32_t)r, &got));
	conntab_writer_free(&w);
	conntab_unmap(t, ROWS_OF(t));
	close(fd);
}

Test(conntab, software_slots)
{
	int fd;
	struct conntab *t = make(4, &fd);
	struct conntab_writer w;
	cr_assert_eq(conntab_writer_init(&w, t, ROWS_OF(t)), 0);
	int a = CONNTAB_B_UNKNOWN, b = CONNTAB_B_UNKNOWN, c = CONNTAB_B_UNKNOWN;
	conntab_soft_add(&w, a);
	conntab_soft_add(&w, b);
	conntab_soft_add(&w, c);
	cr_expect_eq(atomic_load(&t->soft_unknown), 3);
	a = conntab_soft_move(&w, a, true, true, "librdkafka", "2.0.2");
	b = conntab_soft_move(&w, b, true, true, "librdkafka", "2.0.2");
	c = conntab_soft_move(&w, c, true, false, "bad name!", "1");
	cr_expect_geq(a, 0);
	cr_expect_eq(a, b, "one slot per pair");
	cr_expect_eq(c, CONNTAB_B_INVALID);
	cr_expect_eq(atomic_load(&t->soft_unknown), 0);
	cr_expect_eq(atomic_load(&t->soft_invalid), 1);
	char name[CONNTAB_SOFTWARE_MAX], version[CONNTAB_SOFTWARE_MAX];
	uint64_t n;
	cr_assert(conntab_soft_read(t, (unsigned)a, name, version, &n));
	cr_expect_str_eq(name, "librdkafka");
	cr_expect_str_eq(version, "2.0.2");
	cr_expect_eq(n, 2);
	/* the same pair again: nothing moves */
	cr_expect_eq(conntab_soft_move(&w, a, true, true, "librdkafka", "2.0.2"), a);
	cr_expect_eq(atomic_load(&t->soft[a].count), 2);
	/* the slot empties and is renamed for the next pair */
	conntab_soft_drop(&w, a);
	conntab_soft_drop(&w, b);
	cr_expect(!conntab_soft_read(t, (unsigned)a, name, version, &n), "an empty slot");
	int d = conntab_soft_move(&w, CONNTAB_B_UNKNOWN, true, true, "kafka-python", "2.0.2");
	conntab_soft_add(&w, CONNTAB_B_NONE);  /* (never counted) */
	cr_expect_eq(d, a, "the free slot is reused");
	cr_assert(conntab_soft_read(t, (unsigned)d, name, version, &n));
	cr_expect_str_eq(name, "kafka-python");
	/* full: every slot busy with another pair -> other */
	for (int s = 0; s < CONNTAB_SOFTWARE; s++) {
		char v[8];
		snprintf(v, sizeof v, "%d", s);
		conntab_soft_move(&w, CONNTAB_B_UNKNOWN, true, true, "filler", v);
	}
	int e = conntab_soft_move(&w, CONNTAB_B_UNKNOWN, true, true, "late", "1.0");
	cr_expect_eq(e, CONNTAB_B_OTHER);
	cr_expect_eq(atomic_load(&t->soft_other), 2, "the 32nd filler and this one");
	/* a connection that never sent its software stays unknown */
	cr_expect_eq(conntab_soft_move(&w, CONNTAB_B_UNKNOWN, false, false, "", ""),
	    CONNTAB_B_UNKNOWN);
	conntab_writer_free(&w);
	conntab_unmap(t, ROWS_OF(t));
	close(fd);
}

Test(conntab, addresses)
{
	char buf[CONNTAB_ADDR_MAX];
	struct sockaddr_in a4 = { .sin_family = AF_INET, .sin_port = htons(9092) };
	inet_pton(AF_INET, "10.1.2.3", &a4.sin_addr);
	conntab_fmt_addr((struct sockaddr *)&a4, buf, sizeof buf);
	cr_expect_str_eq(buf, "10.1.2.3:9092");
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_port = htons(1) };
	inet_pton(AF_INET6, "2001:db8::1", &a6.sin6_addr);
	conntab_fmt_addr((struct sockaddr *)&a6, buf, sizeof buf);
	cr_expect_str_eq(buf, "[2001:db8::1]:1");
	inet_pton(AF_INET6, "::ffff:192.0.2.7", &a6.sin6_addr);
	conntab_fmt_addr((struct sockaddr *)&a6, buf, sizeof buf);
	cr_expect_str_eq(buf, "192.0.2.7:1", "a mapped address reads as IPv4");
	inet_pton(AF_INET6, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", &a6.sin6_addr);
	a6.sin6_port = htons(65535);
	conntab_fmt_addr((struct sockaddr *)&a6, buf, sizeof buf);
	cr_expect_str_eq(buf, "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535");
	struct sockaddr unk = { .sa_family = AF_UNSPEC };
	conntab_fmt_addr(&unk, buf, sizeof buf);
	cr_expect_str_eq(buf, "?");
}

/* A worker that scribbles over the header (rows, high-water mark) cannot
 * make a reader look past the rows it mapped the block with. */
Test(conntab, a_scribbled_header_does_not_move_the_reader)
{
	int fd;
	struct conntab *t = make(4, &fd);
	t->rows = UINT32_MAX;
	atomic_store(&t->hwm, UINT32_MAX);
	cr_expect_eq(conntab_hwm(t, 4), 4);
	struct conntab_entry got;
	cr_expect(!conntab_read(t, 4, 4, &got));
	cr_expect(!conntab_read(t, 4, 1u << 30, &got));
	conntab_unmap(t, 4);
	close(fd);
}
