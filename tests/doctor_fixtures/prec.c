/* libprec_*.so in two copies: with -DFULL (next to the extension) it defines prec_extra; the copy
   in the LD_LIBRARY_PATH directory does not. */
int prec_value(void) { return 1; }
#ifdef FULL
int prec_extra(void) { return 2; }
#endif
