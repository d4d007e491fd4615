/* ext_prec_rpath._ext / ext_prec_runpath._ext / ext_hwcaps._ext: need prec_extra from
   libprec_*.so / libhw.so. */
#include "module.h"

int prec_extra(void);

static void fixture_touch(void) { (void)prec_extra(); }
