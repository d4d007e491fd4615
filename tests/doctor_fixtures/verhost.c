/* libverhost.so: verhost_old at HOST_1.0; with -DV2 also verhost_new at HOST_2.0. */
int verhost_old(void) { return 1; }
#ifdef V2
int verhost_new(void) { return 2; }
#endif
