/* libleaf_*.so: the end of a dependency chain. */
int leaf_value(void) { return 42; }
