/* libnover.so: built with nover.map (version NOVER_1.0) to link against, and without a version
   script to install. The installed copy still has .gnu.version (it refers to getpid@GLIBC_2.2.5),
   so nover_value is defined there at the base version (index 1). */
#include <unistd.h>

int nover_value(void) { return getpid() > 0; }
