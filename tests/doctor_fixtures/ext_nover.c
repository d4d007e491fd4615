/* ext_nover._ext: refers to nover_value@NOVER_1.0; the installed libnover.so defines nover_value
   without a version (and defines no versions at all). */
#include "module.h"

int nover_value(void);

static void fixture_touch(void) { (void)nover_value(); }
