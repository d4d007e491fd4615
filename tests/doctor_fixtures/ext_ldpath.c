/* ext_ldpath._ext: needs libldp.so, which lies only in a directory LD_LIBRARY_PATH may name. */
#include "module.h"

int ldp_value(void);

static void fixture_touch(void) { (void)ldp_value(); }
