/* ext_version._ext: linked against libverhost.so 2 (HOST_1.0 and HOST_2.0). */
#include "module.h"

int verhost_old(void);
int verhost_new(void);

static void fixture_touch(void) { (void)(verhost_old() + verhost_new()); }
