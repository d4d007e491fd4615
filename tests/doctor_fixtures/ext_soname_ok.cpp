// ext_soname_ok._ext: built against host 2.x, no RPATH; its NEEDED libhost_core.so is found
// only because `import hostpkg` mapped that library (matched by DT_SONAME).
#include <string>

#include "module.h"

namespace c10 {
namespace cuda {
void c10_cuda_check_implementation(int err, const char* file, const char* func,
                                   unsigned int line, bool device_assertions);
}
}  // namespace c10

namespace host {
std::size_t describe(const std::string& text);
}

static void fixture_touch(void) {
    c10::cuda::c10_cuda_check_implementation(0, __FILE__, "fixture_touch", __LINE__, false);
    (void)host::describe(std::string("fixture"));
}
