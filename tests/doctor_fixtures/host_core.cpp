// libhost_core.so: the host package's core library (plays torch's libc10/libc10_cuda).
// HOST_VERSION=1: `line` is an int and host::legacy_entry exists.
// HOST_VERSION=2: `line` became unsigned int and host::legacy_entry was removed.
#include <string>

namespace c10 {
namespace cuda {
#if HOST_VERSION >= 2
void c10_cuda_check_implementation(int err, const char* file, const char* func,
                                   unsigned int line, bool device_assertions) {
    (void)err; (void)file; (void)func; (void)line; (void)device_assertions;
}
#else
void c10_cuda_check_implementation(int err, const char* file, const char* func, int line,
                                   bool device_assertions) {
    (void)err; (void)file; (void)func; (void)line; (void)device_assertions;
}
#endif
}  // namespace cuda
}  // namespace c10

namespace host {
std::size_t describe(const std::string& text) { return text.size(); }
int version() { return HOST_VERSION; }
#if HOST_VERSION < 2
int legacy_entry(int x) { return x + 1; }
#endif
}  // namespace host

extern "C" int host_core_version(void) { return HOST_VERSION; }
