/* ext_local_scope._ext: calls host_core_version without DT_NEEDED libhost_core.so. `import hostpkg`
   mapped that library RTLD_LOCAL, so its symbols are not in this module's lookup scope. */
#include "module.h"

int host_core_version(void);

static void fixture_touch(void) { (void)host_core_version(); }
