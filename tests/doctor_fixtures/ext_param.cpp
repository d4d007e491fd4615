// ext_param._ext: built against host 1.x, where `line` was an int.
#include "module.h"

namespace c10 {
namespace cuda {
void c10_cuda_check_implementation(int err, const char* file, const char* func, int line,
                                   bool device_assertions);
}
}  // namespace c10

static void fixture_touch(void) {
    c10::cuda::c10_cuda_check_implementation(0, __FILE__, "fixture_touch", __LINE__, false);
}
