/* An extension module that links the driver (libcuda.so.1) directly, as sgl-kernel does. */
int cuInit(unsigned int flags);

__attribute__((visibility("default"))) void* PyInit__drv(void) {
  static int value;
  value = cuInit(0);
  return &value;
}
