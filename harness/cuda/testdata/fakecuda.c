/* A stand-in for libcuda.so.1 for unit tests on machines without a GPU: it
 * exports the entry points harness/cuda resolves, backs "device" memory with
 * host memory, and answers cuInit with $FAKE_CUDA_INIT. Build with
 * -DOMIT_MANAGED to drop a required symbol. */
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef unsigned long long CUdeviceptr;

static CUcontext current;

CUresult cuInit(unsigned int f) { const char *v = getenv("FAKE_CUDA_INIT"); (void)f; return v ? atoi(v) : 0; }
CUresult cuDriverGetVersion(int *v) { *v = 12040; return 0; }
CUresult cuDeviceGetCount(int *n) { *n = 1; return 0; }
CUresult cuDeviceGet(CUdevice *d, int i) { if (i != 0) return 101; *d = i; return 0; }
CUresult cuDeviceGetName(char *s, int n, CUdevice d) { (void)d; strncpy(s, "Fake GPU", n); return 0; }
CUresult cuDeviceGetAttribute(int *v, int a, CUdevice d) {
	(void)d;
	switch (a) {
	case 75: *v = 9; return 0;
	case 76: *v = 0; return 0;
	case 124: *v = 1; return 0;
	case 999: return 1;
	}
	*v = 0;
	return 0;
}
CUresult cuDeviceGetPCIBusId(char *s, int n, CUdevice d) { (void)d; strncpy(s, "0000:3B:00.0", n); return 0; }
CUresult cuDeviceTotalMem_v2(size_t *b, CUdevice d) { (void)d; *b = (size_t)1 << 30; return 0; }
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) { (void)d; *c = (CUcontext)0x1000; return 0; }
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) { (void)d; return 0; }
CUresult cuCtxSetCurrent(CUcontext c) { current = c; return 0; }
CUresult cuCtxGetCurrent(CUcontext *c) { *c = current; return 0; }
CUresult cuCtxSynchronize(void) { return current ? 0 : 201; }
static CUresult alloc(CUdeviceptr *p, size_t n) {
	void *m = NULL;
	if (!current) return 201; /* CUDA_ERROR_INVALID_CONTEXT */
	if (n > ((size_t)1 << 30)) return 2;
	if (posix_memalign(&m, 512, n) != 0) return 2;
	*p = (CUdeviceptr)(unsigned long)m;
	return 0;
}
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) { return alloc(p, n); }
#ifndef OMIT_MANAGED
CUresult cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned int f) { (void)f; return alloc(p, n); }
#endif
CUresult cuMemFree_v2(CUdeviceptr p) { free((void *)(unsigned long)p); return 0; }
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) { memcpy((void *)(unsigned long)d, s, n); return 0; }
CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) { memcpy(d, (void *)(unsigned long)s, n); return 0; }
CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) { memset((void *)(unsigned long)d, v, n); return 0; }
CUresult cuMemHostAlloc(void **p, size_t n, unsigned int f) { (void)f; return posix_memalign(p, 4096, n) ? 2 : 0; }
CUresult cuMemFreeHost(void *p) { free(p); return 0; }
CUresult cuPointerGetAttribute(void *v, int a, CUdeviceptr p) { (void)v; (void)a; (void)p; return 1; }
CUresult cuPointerSetAttribute(const void *v, int a, CUdeviceptr p) { (void)v; (void)a; (void)p; return 0; }
CUresult cuGetErrorName(CUresult r, const char **s) {
	switch (r) {
	case 1: *s = "CUDA_ERROR_INVALID_VALUE"; return 0;
	case 2: *s = "CUDA_ERROR_OUT_OF_MEMORY"; return 0;
	case 100: *s = "CUDA_ERROR_NO_DEVICE"; return 0;
	case 201: *s = "CUDA_ERROR_INVALID_CONTEXT"; return 0;
	}
	*s = NULL;
	return 1;
}
CUresult cuGetErrorString(CUresult r, const char **s) {
	switch (r) {
	case 1: *s = "invalid argument"; return 0;
	case 2: *s = "out of memory"; return 0;
	case 100: *s = "no CUDA-capable device is detected"; return 0;
	case 201: *s = "invalid device context"; return 0;
	}
	*s = NULL;
	return 1;
}
/* No cuMemGetHandleForAddressRange: a driver older than CUDA 11.7. */
