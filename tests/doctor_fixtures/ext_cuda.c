/* ext_missing_lib._ext / ext_missing_cand._ext: need a CUDA 13 library that is not on the
   loader's search path. */
#include "module.h"

int nvrtcVersion(int* major, int* minor);
int nvJitLinkVersion(unsigned int* major, unsigned int* minor);

static void fixture_touch(void) {
#ifdef USE_NVRTC
    int major, minor;
    (void)nvrtcVersion(&major, &minor);
#else
    unsigned int major, minor;
    (void)nvJitLinkVersion(&major, &minor);
#endif
}
