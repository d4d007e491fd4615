/* Libraries installed in two copies: with -DFULL the copy defines prec_extra, without it does
   not. libprec_*.so: the full copy sits next to the extension, the other in the LD_LIBRARY_PATH
   directory. libhw.so: the full copy in lib/glibc-hwcaps/x86-64-v2/, the other in lib/.
   libdupe.so: the full copy in ext_dupe_b, the other in ext_dupe_a. */
int prec_value(void) { return 1; }
#ifdef FULL
int prec_extra(void) { return 2; }
#endif
