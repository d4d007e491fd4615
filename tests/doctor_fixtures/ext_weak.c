/* ext_weak._ext: a weak undefined reference to a function no object defines. */
#include "module.h"

extern int nobody_defines_this(void) __attribute__((weak));

static void fixture_touch(void) {
    if (nobody_defines_this) {
        (void)nobody_defines_this();
    }
}
