/* An extension module that needs glibc 2.34: close_range() is versioned GLIBC_2.34. */
#define _GNU_SOURCE
#include <unistd.h>

int PyInit__newglibc(void) { return 0; }

int abifit_fixture_close_all_from(unsigned int first) {
    return close_range(first, ~0U, 0);
}
