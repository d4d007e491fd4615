/* ext_rpath._ext / ext_runpath._ext / ext_runpath_mid._ext: need libdep_*.so from $ORIGIN/a (which
   needs libleaf_*.so). */
#include "module.h"

int dep_value(void);

static void fixture_touch(void) { (void)dep_value(); }
