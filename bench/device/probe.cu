// One kernel and a host function that launches it and checks its result: built once per
// single target (sm_120, sm_100, sm_80, sm_90a SASS, compute_80 PTX) to see which of them a GPU
// runs. probe_run returns 0, a cudaError_t, or -1 for a wrong result.
#include <cuda_runtime.h>

__global__ void fill(int *out, int value) { out[threadIdx.x] = value + threadIdx.x; }

extern "C" int probe_run(void) {
    int *device = nullptr;
    int host[32];
    cudaError_t e = cudaMalloc(&device, sizeof host);
    if (e != cudaSuccess) return (int)e;
    fill<<<1, 32>>>(device, 7);
    e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaMemcpy(host, device, sizeof host, cudaMemcpyDeviceToHost);
    cudaFree(device);
    if (e != cudaSuccess) return (int)e;
    for (int i = 0; i < 32; ++i) {
        if (host[i] != 7 + i) return -1;
    }
    return 0;
}

extern "C" const char *probe_error(int code) {
    return code < 0 ? "wrong result" : cudaGetErrorString((cudaError_t)code);
}
