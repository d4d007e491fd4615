/* A stand-in for a Python extension module: one exported PyInit_ function, a versioned libc
   dependency and a weak undefined symbol. Built by the CLI tests into a real wheel. */
#include <stdlib.h>
#include <string.h>

extern int demo_optional_hook(void) __attribute__((weak));

void *PyInit__ext(void) {
    static char buffer[16];
    strncpy(buffer, getenv("DEMO_EXT") ? getenv("DEMO_EXT") : "demo", 15);
    if (demo_optional_hook) demo_optional_hook();
    return buffer;
}
