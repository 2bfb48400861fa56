/*
 * fuzz_common — tiny helpers shared by the libFuzzer harnesses in tests/fuzz/.
 *
 * FUZZ_CHECK(cond, ...) is the oracle assertion: it prints what went wrong
 * and aborts, so libFuzzer records the input as a crash artifact.
 */
#ifndef FERRY_TESTS_FUZZ_COMMON_H
#define FERRY_TESTS_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define FUZZ_CHECK(cond, ...)							\
	do {									\
		if (!(cond)) {							\
			fprintf(stderr, "\nFUZZ ORACLE FAILED at %s:%d: %s\n  ",	\
			    __FILE__, __LINE__, #cond);				\
			fprintf(stderr, __VA_ARGS__);				\
			fprintf(stderr, "\n");					\
			abort();						\
		}								\
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* xorshift32; never returns to 0 once seeded with a non-zero state. */
static inline uint32_t
fuzz_rand(uint32_t *s)
{
	uint32_t x = *s;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	*s = x;
	return x;
}

/* Copies size bytes to a fresh allocation of exactly that size, so that
 * ASan flags any read past the end (libFuzzer's own buffer is exact too,
 * but harnesses slice it). */
static inline uint8_t *
fuzz_dup(const uint8_t *data, size_t size)
{
	uint8_t *p = malloc(size ? size : 1);

	if (p == NULL)
		abort();
	for (size_t i = 0; i < size; i++)
		p[i] = data[i];
	return p;
}

#endif
