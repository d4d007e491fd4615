/* ext_dep_first._ext: an undefined symbol of its own and a dependency (lib/libdfirst.so) with
   another; ld.so relocates dependencies first, so the dependency's symbol is reported. */
#include "module.h"

int aa_root_missing(void);
int dfirst_value(void);

static void fixture_touch(void) { (void)(aa_root_missing() + dfirst_value()); }
