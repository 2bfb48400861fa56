/*
 * shm_pages — how many pages of a shared block hold memory, for the unit
 * tests of the blocks' cost (test_genshm, test_metrics): mincore(2) on the
 * mapping reports which pages of the memfd are allocated, whoever touched
 * them (this process through another mapping, or a sibling).
 */
#ifndef FERRY_TESTS_SHM_PAGES_H
#define FERRY_TESTS_SHM_PAGES_H

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static inline size_t
shm_page_size(void)
{
	return (size_t)sysconf(_SC_PAGESIZE);
}

/* Pages of [p, p + size) that hold memory. */
static inline size_t
shm_pages_resident(const void *p, size_t size)
{
	size_t ps = shm_page_size(), n = (size + ps - 1) / ps, r = 0;
	unsigned char *v = malloc(n);
	cr_assert_not_null(v);
	cr_assert_eq(mincore((void *)p, size, v), 0, "mincore");
	for (size_t i = 0; i < n; i++)
		r += v[i] & 1;
	free(v);
	return r;
}

/* The page of the block at p that holds byte offset off. */
static inline size_t
shm_page_of(size_t off)
{
	return off / shm_page_size();
}

#endif
