/* libldp.so, libldtok.so: found only through LD_LIBRARY_PATH. */
int ldp_value(void) { return 7; }
