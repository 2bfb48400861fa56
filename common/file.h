/*
 * file — reading a whole (small) file into memory, the one way every role
 * does it: the supervisor's config file, a posted config's fallback, a
 * file ferryctl sends.
 */
#ifndef FERRY_COMMON_FILE_H
#define FERRY_COMMON_FILE_H

#include <stddef.h>

/* Read all of path. Returns a malloc'd buffer, NUL-terminated (the NUL is
 * not counted in *len), or NULL with "PATH: cannot read: reason" or
 * "PATH: larger than MAX bytes" in err. */
char *file_read_all(const char *path, size_t max, size_t *len, char *err, size_t errlen);

#endif
