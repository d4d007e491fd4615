/* libpreload.so: put into the process by LD_PRELOAD, so its symbols are in the global scope. */
int preload_value(void) { return 3; }
