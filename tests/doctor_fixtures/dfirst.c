/* libdfirst.so: a dependency with an undefined symbol of its own. */
int dfirst_missing(void);

int dfirst_value(void) { return dfirst_missing(); }
