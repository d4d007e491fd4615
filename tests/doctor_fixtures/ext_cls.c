/* ext_class32._ext / ext_classonly._ext: need libcls_*.so; a 32-bit copy comes first. */
#include "module.h"

int cls_value(void);

static void fixture_touch(void) { (void)cls_value(); }
