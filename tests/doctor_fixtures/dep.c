/* libdep_*.so: needs libleaf_*.so and has no DT_RPATH/DT_RUNPATH of its own. */
int leaf_value(void);
int dep_value(void) { return leaf_value() + 1; }
