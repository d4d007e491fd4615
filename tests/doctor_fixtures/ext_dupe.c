/* ext_dupe_a._ext / ext_dupe_b._ext: each needs its own lib/libdupe.so (one soname, two contents).
   Only ext_dupe_b's copy defines prec_extra, and only ext_dupe_b (-DWANT_EXTRA) needs it. */
#include "module.h"

int prec_value(void);
int prec_extra(void);

static void fixture_touch(void) {
#ifdef WANT_EXTRA
    (void)prec_extra();
#else
    (void)prec_value();
#endif
}
