// hostlib 1.0: the parameter `line` is an int (as c10_cuda_check_implementation was in torch 2.9).
namespace hostlib {
int check_impl(int code, const char* file, const char* func, int line, bool strict) {
  return code + line + (strict ? 1 : 0) + (file != func);
}
}  // namespace hostlib
