/* hostpkg._C: the host's own extension module, linked to lib/libhost_core.so via $ORIGIN/lib. */
#include "module.h"

int host_core_version(void);

static void fixture_touch(void) { (void)host_core_version(); }
