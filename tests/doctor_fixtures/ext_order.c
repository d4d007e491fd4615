/* ext_reloc_order._ext: two undefined symbols. The symbol table lists aa_missing_call first, but
   ld.so relocates .rela.dyn (zz_missing_var, GLOB_DAT) before .rela.plt (aa_missing_call). */
#include "module.h"

extern int zz_missing_var;
int aa_missing_call(void);

int fixture_sink;

static void fixture_touch(void) { fixture_sink = aa_missing_call() + zz_missing_var; }
