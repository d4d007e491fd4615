/* ext_preload._ext: calls preload_value without DT_NEEDED on any library that defines it. */
#include "module.h"

int preload_value(void);

static void fixture_touch(void) { (void)preload_value(); }
