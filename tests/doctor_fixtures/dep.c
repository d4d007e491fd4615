/* libdep_*.so: needs libleaf_*.so. libdep_r/libdep_n have no search path of their own; libdep_m
   has a DT_RUNPATH that does not lead to libleaf_m.so. */
int leaf_value(void);
int dep_value(void) { return leaf_value() + 1; }
