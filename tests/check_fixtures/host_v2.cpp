// hostlib 2.0: `line` became unsigned int (as in torch 2.10), which changes the mangled name.
// Built with -DHOSTLIB_LOG it also calls puts(), so that build needs one more symbol.
#ifdef HOSTLIB_LOG
#include <cstdio>
#endif

namespace hostlib {
int check_impl(int code, const char* file, const char* func, unsigned int line, bool strict) {
#ifdef HOSTLIB_LOG
  std::puts(file);
#endif
  return code + static_cast<int>(line) + (strict ? 1 : 0) + (file != func);
}
}  // namespace hostlib
