/* Stands for the NVIDIA driver at link time only: it is never put in a wheel. */
int cuInit(unsigned int flags) { return (int)flags; }
