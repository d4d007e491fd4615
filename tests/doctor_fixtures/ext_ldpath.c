/* ext_ldpath._ext / ext_ldtoken._ext: need libldp.so / libldtok.so, which lie only in directories
   LD_LIBRARY_PATH may name. */
#include "module.h"

int ldp_value(void);

static void fixture_touch(void) { (void)ldp_value(); }
