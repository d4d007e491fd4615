/* libcls_*.so, built 64-bit (normal) and 32-bit (-m32 -nostdlib): same name, other ELF class. */
int cls_value(void) { return 64; }
