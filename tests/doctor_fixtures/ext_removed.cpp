// ext_removed._ext: calls host::legacy_entry, which host 2.x removed.
#include "module.h"

namespace host {
int legacy_entry(int x);
}

static void fixture_touch(void) { (void)host::legacy_entry(1); }
