/* Stand-ins for CUDA 13 runtime libraries (libnvrtc.so.13, libnvJitLink.so.13). */
int nvrtcVersion(int* major, int* minor) { *major = 13; *minor = 0; return 0; }
int nvJitLinkVersion(unsigned int* major, unsigned int* minor) { *major = 13; *minor = 0; return 0; }
