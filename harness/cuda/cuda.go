//go:build gpu

// Package cuda is the CUDA driver API, opened at run time from libcuda.so.1
// with dlopen. Nothing from the CUDA toolkit is needed to build it: the few
// types, enums and prototypes used are declared below, with the _v2 entry
// points the 64-bit ABI exports. A host without the driver gets an error
// naming libcuda.so.1 and the package that ships it, not a loader failure.
//
// CUDA calls that need a context run through Context.Do, which locks the
// goroutine to its OS thread and makes the device's primary context current
// there for the duration of the call.
package cuda

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef unsigned long long CUdeviceptr; // 64-bit ABI (the _v2 entry points)
typedef struct CUstream_st *CUstream;

// The virtual memory management (VMM) types, laid out as cuda.h declares
// them (CUDA 11+; NVIDIA/cuda-python cuda/bindings/cydriver.pxd, generated
// from CUDA 13.0's cuda.h: CUmemLocation_st, CUmemAllocationProp_st,
// CUmemAccessDesc_st). The sizes and offsets were also printed by a C
// program built against the H200 machine's CUDA 13.0 cuda.h: prop 32 bytes,
// location at 8, allocFlags at 24, gpuDirectRDMACapable at 25; access
// descriptor 12 bytes, flags at 8. The asserts pin them on every build.
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct { int type; int id; } gdr_CUmemLocation; // CUmemLocationType, ordinal
typedef struct {
	int type;                 // CUmemAllocationType: PINNED = 1
	int requestedHandleTypes; // CUmemAllocationHandleType: NONE = 0
	gdr_CUmemLocation location;
	void *win32HandleMetaData;
	struct {
		unsigned char compressionType;
		unsigned char gpuDirectRDMACapable;
		unsigned short usage;
		unsigned char reserved[4];
	} allocFlags;
} gdr_CUmemAllocationProp;
typedef struct {
	gdr_CUmemLocation location;
	int flags; // CUmemAccess_flags: PROT_READWRITE = 3
} gdr_CUmemAccessDesc;
_Static_assert(sizeof(gdr_CUmemAllocationProp) == 32, "CUmemAllocationProp is 32 bytes");
_Static_assert(offsetof(gdr_CUmemAllocationProp, location) == 8, "CUmemAllocationProp.location at 8");
_Static_assert(offsetof(gdr_CUmemAllocationProp, allocFlags) == 24, "CUmemAllocationProp.allocFlags at 24");
_Static_assert(offsetof(gdr_CUmemAllocationProp, allocFlags.gpuDirectRDMACapable) == 25, "gpuDirectRDMACapable at 25");
_Static_assert(sizeof(gdr_CUmemAccessDesc) == 12, "CUmemAccessDesc is 12 bytes");
_Static_assert(offsetof(gdr_CUmemAccessDesc, flags) == 8, "CUmemAccessDesc.flags at 8");

// The driver's function table, filled by gdr_cuda_load.
static struct {
	CUresult (*Init)(unsigned int);
	CUresult (*DriverGetVersion)(int *);
	CUresult (*DeviceGetCount)(int *);
	CUresult (*DeviceGet)(CUdevice *, int);
	CUresult (*DeviceGetName)(char *, int, CUdevice);
	CUresult (*DeviceGetAttribute)(int *, int, CUdevice);
	CUresult (*DeviceGetPCIBusId)(char *, int, CUdevice);
	CUresult (*DeviceTotalMem)(size_t *, CUdevice);
	CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult (*DevicePrimaryCtxRelease)(CUdevice);
	CUresult (*CtxSetCurrent)(CUcontext);
	CUresult (*CtxGetCurrent)(CUcontext *);
	CUresult (*CtxSynchronize)(void);
	CUresult (*MemAlloc)(CUdeviceptr *, size_t);
	CUresult (*MemAllocManaged)(CUdeviceptr *, size_t, unsigned int);
	CUresult (*MemFree)(CUdeviceptr);
	CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
	CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
	CUresult (*MemsetD8)(CUdeviceptr, unsigned char, size_t);
	CUresult (*MemHostAlloc)(void **, size_t, unsigned int);
	CUresult (*MemFreeHost)(void *);
	CUresult (*PointerGetAttribute)(void *, int, CUdeviceptr);
	CUresult (*PointerSetAttribute)(const void *, int, CUdeviceptr);
	CUresult (*GetErrorName)(CUresult, const char **);
	CUresult (*GetErrorString)(CUresult, const char **);
	// Optional: CUDA 11.7 and later.
	CUresult (*MemGetHandleForAddressRange)(void *, CUdeviceptr, size_t, int, unsigned long long);
	// Optional: CUDA 11.3 and later.
	CUresult (*FlushGPUDirectRDMAWrites)(int, int);
	// Only in the lab's emulated GPU (lab/emugpu).
	const char *(*EmulatedGPU)(void);
	// Peer-to-peer and streams (multi-GPU checks). Every driver this suite
	// supports has them; they are optional so that a library without them
	// fails those checks by name instead of failing to load.
	CUresult (*DeviceCanAccessPeer)(int *, CUdevice, CUdevice);
	CUresult (*CtxEnablePeerAccess)(CUcontext, unsigned int);
	CUresult (*CtxDisablePeerAccess)(CUcontext);
	CUresult (*MemcpyPeerAsync)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream);
	CUresult (*StreamCreate)(CUstream *, unsigned int);
	CUresult (*StreamSynchronize)(CUstream);
	CUresult (*StreamDestroy)(CUstream);
	// Virtual memory management (CUDA 10.2+; NCCL's allocator). Optional
	// like the peer calls: a library without them fails the VMM cases by
	// name instead of failing to load.
	CUresult (*MemGetAllocationGranularity)(size_t *, const gdr_CUmemAllocationProp *, int);
	CUresult (*MemCreate)(CUmemGenericAllocationHandle *, size_t, const gdr_CUmemAllocationProp *, unsigned long long);
	CUresult (*MemRelease)(CUmemGenericAllocationHandle);
	CUresult (*MemAddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
	CUresult (*MemAddressFree)(CUdeviceptr, size_t);
	CUresult (*MemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
	CUresult (*MemUnmap)(CUdeviceptr, size_t);
	CUresult (*MemSetAccess)(CUdeviceptr, size_t, const gdr_CUmemAccessDesc *, size_t);
} gdr_cu;

static void *gdr_cu_lib;

// gdr_cuda_load opens the library and resolves every required symbol. On
// failure it returns the dlerror text or the name of the missing symbol in
// *why (static storage; valid until the next call on this thread).
static int gdr_cuda_load(const char *name, const char **why, const char **missing) {
	*why = "";
	*missing = "";
	if (gdr_cu_lib) return 0;
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		*why = e ? e : "dlopen failed";
		return -1;
	}
#define SYM(field, sym) do { \
		*(void **)(&gdr_cu.field) = dlsym(h, sym); \
		if (!gdr_cu.field) { *missing = sym; dlclose(h); return -2; } \
	} while (0)
	SYM(Init, "cuInit");
	SYM(DriverGetVersion, "cuDriverGetVersion");
	SYM(DeviceGetCount, "cuDeviceGetCount");
	SYM(DeviceGet, "cuDeviceGet");
	SYM(DeviceGetName, "cuDeviceGetName");
	SYM(DeviceGetAttribute, "cuDeviceGetAttribute");
	SYM(DeviceGetPCIBusId, "cuDeviceGetPCIBusId");
	SYM(DeviceTotalMem, "cuDeviceTotalMem_v2");
	SYM(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
	SYM(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
	SYM(CtxSetCurrent, "cuCtxSetCurrent");
	SYM(CtxGetCurrent, "cuCtxGetCurrent");
	SYM(CtxSynchronize, "cuCtxSynchronize");
	SYM(MemAlloc, "cuMemAlloc_v2");
	SYM(MemAllocManaged, "cuMemAllocManaged");
	SYM(MemFree, "cuMemFree_v2");
	SYM(MemcpyHtoD, "cuMemcpyHtoD_v2");
	SYM(MemcpyDtoH, "cuMemcpyDtoH_v2");
	SYM(MemsetD8, "cuMemsetD8_v2");
	SYM(MemHostAlloc, "cuMemHostAlloc");
	SYM(MemFreeHost, "cuMemFreeHost");
	SYM(PointerGetAttribute, "cuPointerGetAttribute");
	SYM(PointerSetAttribute, "cuPointerSetAttribute");
	SYM(GetErrorName, "cuGetErrorName");
	SYM(GetErrorString, "cuGetErrorString");
#undef SYM
	*(void **)(&gdr_cu.MemGetHandleForAddressRange) = dlsym(h, "cuMemGetHandleForAddressRange");
	*(void **)(&gdr_cu.FlushGPUDirectRDMAWrites) = dlsym(h, "cuFlushGPUDirectRDMAWrites");
	*(void **)(&gdr_cu.EmulatedGPU) = dlsym(h, "gdrEmulatedGPU");
	*(void **)(&gdr_cu.DeviceCanAccessPeer) = dlsym(h, "cuDeviceCanAccessPeer");
	*(void **)(&gdr_cu.CtxEnablePeerAccess) = dlsym(h, "cuCtxEnablePeerAccess");
	*(void **)(&gdr_cu.CtxDisablePeerAccess) = dlsym(h, "cuCtxDisablePeerAccess");
	*(void **)(&gdr_cu.MemcpyPeerAsync) = dlsym(h, "cuMemcpyPeerAsync");
	*(void **)(&gdr_cu.StreamCreate) = dlsym(h, "cuStreamCreate");
	*(void **)(&gdr_cu.StreamSynchronize) = dlsym(h, "cuStreamSynchronize");
	*(void **)(&gdr_cu.StreamDestroy) = dlsym(h, "cuStreamDestroy_v2");
	*(void **)(&gdr_cu.MemGetAllocationGranularity) = dlsym(h, "cuMemGetAllocationGranularity");
	*(void **)(&gdr_cu.MemCreate) = dlsym(h, "cuMemCreate");
	*(void **)(&gdr_cu.MemRelease) = dlsym(h, "cuMemRelease");
	*(void **)(&gdr_cu.MemAddressReserve) = dlsym(h, "cuMemAddressReserve");
	*(void **)(&gdr_cu.MemAddressFree) = dlsym(h, "cuMemAddressFree");
	*(void **)(&gdr_cu.MemMap) = dlsym(h, "cuMemMap");
	*(void **)(&gdr_cu.MemUnmap) = dlsym(h, "cuMemUnmap");
	*(void **)(&gdr_cu.MemSetAccess) = dlsym(h, "cuMemSetAccess");
	gdr_cu_lib = h;
	return 0;
}

// gdr_cuda_unload forgets the library (unit tests load fakes one after another).
static void gdr_cuda_unload(void) {
	if (gdr_cu_lib) dlclose(gdr_cu_lib);
	gdr_cu_lib = NULL;
	*(void **)(&gdr_cu.MemGetHandleForAddressRange) = NULL;
	*(void **)(&gdr_cu.FlushGPUDirectRDMAWrites) = NULL;
	*(void **)(&gdr_cu.EmulatedGPU) = NULL;
	*(void **)(&gdr_cu.DeviceCanAccessPeer) = NULL;
	*(void **)(&gdr_cu.CtxEnablePeerAccess) = NULL;
	*(void **)(&gdr_cu.CtxDisablePeerAccess) = NULL;
	*(void **)(&gdr_cu.MemcpyPeerAsync) = NULL;
	*(void **)(&gdr_cu.StreamCreate) = NULL;
	*(void **)(&gdr_cu.StreamSynchronize) = NULL;
	*(void **)(&gdr_cu.StreamDestroy) = NULL;
	*(void **)(&gdr_cu.MemGetAllocationGranularity) = NULL;
	*(void **)(&gdr_cu.MemCreate) = NULL;
	*(void **)(&gdr_cu.MemRelease) = NULL;
	*(void **)(&gdr_cu.MemAddressReserve) = NULL;
	*(void **)(&gdr_cu.MemAddressFree) = NULL;
	*(void **)(&gdr_cu.MemMap) = NULL;
	*(void **)(&gdr_cu.MemUnmap) = NULL;
	*(void **)(&gdr_cu.MemSetAccess) = NULL;
}

static int gdr_has_dmabuf_export(void) { return gdr_cu.MemGetHandleForAddressRange != NULL; }
static int gdr_has_flush(void) { return gdr_cu.FlushGPUDirectRDMAWrites != NULL; }
static const char *gdr_emulated(void) { return gdr_cu.EmulatedGPU ? gdr_cu.EmulatedGPU() : NULL; }
// target CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX (0), scope TO_OWNER (100).
static CUresult gdr_cuFlushGPUDirectRDMAWrites(void) { return gdr_cu.FlushGPUDirectRDMAWrites(0, 100); }

static CUresult gdr_cuInit(unsigned int f) { return gdr_cu.Init(f); }
static CUresult gdr_cuDriverGetVersion(int *v) { return gdr_cu.DriverGetVersion(v); }
static CUresult gdr_cuDeviceGetCount(int *n) { return gdr_cu.DeviceGetCount(n); }
static CUresult gdr_cuDeviceGet(CUdevice *d, int i) { return gdr_cu.DeviceGet(d, i); }
static CUresult gdr_cuDeviceGetName(char *s, int n, CUdevice d) { return gdr_cu.DeviceGetName(s, n, d); }
static CUresult gdr_cuDeviceGetAttribute(int *v, int a, CUdevice d) { return gdr_cu.DeviceGetAttribute(v, a, d); }
static CUresult gdr_cuDeviceGetPCIBusId(char *s, int n, CUdevice d) { return gdr_cu.DeviceGetPCIBusId(s, n, d); }
static CUresult gdr_cuDeviceTotalMem(size_t *b, CUdevice d) { return gdr_cu.DeviceTotalMem(b, d); }
static CUresult gdr_cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) { return gdr_cu.DevicePrimaryCtxRetain(c, d); }
static CUresult gdr_cuDevicePrimaryCtxRelease(CUdevice d) { return gdr_cu.DevicePrimaryCtxRelease(d); }
static CUresult gdr_cuCtxSetCurrent(CUcontext c) { return gdr_cu.CtxSetCurrent(c); }
static CUresult gdr_cuCtxGetCurrent(CUcontext *c) { return gdr_cu.CtxGetCurrent(c); }
static CUresult gdr_cuCtxSynchronize(void) { return gdr_cu.CtxSynchronize(); }
static CUresult gdr_cuMemAlloc(CUdeviceptr *p, size_t n) { return gdr_cu.MemAlloc(p, n); }
static CUresult gdr_cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned int f) { return gdr_cu.MemAllocManaged(p, n, f); }
static CUresult gdr_cuMemFree(CUdeviceptr p) { return gdr_cu.MemFree(p); }
static CUresult gdr_cuMemcpyHtoD(CUdeviceptr d, const void *s, size_t n) { return gdr_cu.MemcpyHtoD(d, s, n); }
static CUresult gdr_cuMemcpyDtoH(void *d, CUdeviceptr s, size_t n) { return gdr_cu.MemcpyDtoH(d, s, n); }
static CUresult gdr_cuMemsetD8(CUdeviceptr d, unsigned char v, size_t n) { return gdr_cu.MemsetD8(d, v, n); }
static CUresult gdr_cuMemHostAlloc(void **p, size_t n, unsigned int f) { return gdr_cu.MemHostAlloc(p, n, f); }
static CUresult gdr_cuMemFreeHost(void *p) { return gdr_cu.MemFreeHost(p); }
static CUresult gdr_cuPointerGetAttribute(void *v, int a, CUdeviceptr p) { return gdr_cu.PointerGetAttribute(v, a, p); }
static CUresult gdr_cuPointerSetAttribute(const void *v, int a, CUdeviceptr p) { return gdr_cu.PointerSetAttribute(v, a, p); }
static CUresult gdr_cuMemGetHandleForAddressRange(int *fd, CUdeviceptr p, size_t n, int type, unsigned long long flags) {
	return gdr_cu.MemGetHandleForAddressRange(fd, p, n, type, flags);
}
// The peer-to-peer and stream calls; gdr_missing_peer names the first one the
// library lacks (NULL when it has them all).
static const char *gdr_missing_peer(void) {
	if (!gdr_cu.DeviceCanAccessPeer) return "cuDeviceCanAccessPeer";
	if (!gdr_cu.CtxEnablePeerAccess) return "cuCtxEnablePeerAccess";
	if (!gdr_cu.CtxDisablePeerAccess) return "cuCtxDisablePeerAccess";
	if (!gdr_cu.MemcpyPeerAsync) return "cuMemcpyPeerAsync";
	if (!gdr_cu.StreamCreate) return "cuStreamCreate";
	if (!gdr_cu.StreamSynchronize) return "cuStreamSynchronize";
	if (!gdr_cu.StreamDestroy) return "cuStreamDestroy_v2";
	return NULL;
}
static CUresult gdr_cuDeviceCanAccessPeer(int *v, CUdevice d, CUdevice p) { return gdr_cu.DeviceCanAccessPeer(v, d, p); }
static CUresult gdr_cuCtxEnablePeerAccess(CUcontext peer) { return gdr_cu.CtxEnablePeerAccess(peer, 0); }
static CUresult gdr_cuCtxDisablePeerAccess(CUcontext peer) { return gdr_cu.CtxDisablePeerAccess(peer); }
static CUresult gdr_cuMemcpyPeerAsync(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream st) {
	return gdr_cu.MemcpyPeerAsync(d, dc, s, sc, n, st);
}
static CUresult gdr_cuStreamCreate(CUstream *s) { return gdr_cu.StreamCreate(s, 1); } // CU_STREAM_NON_BLOCKING
static CUresult gdr_cuStreamSynchronize(CUstream s) { return gdr_cu.StreamSynchronize(s); }
static CUresult gdr_cuStreamDestroy(CUstream s) { return gdr_cu.StreamDestroy(s); }
// The VMM calls; gdr_missing_vmm names the first one the library lacks.
static const char *gdr_missing_vmm(void) {
	if (!gdr_cu.MemGetAllocationGranularity) return "cuMemGetAllocationGranularity";
	if (!gdr_cu.MemCreate) return "cuMemCreate";
	if (!gdr_cu.MemRelease) return "cuMemRelease";
	if (!gdr_cu.MemAddressReserve) return "cuMemAddressReserve";
	if (!gdr_cu.MemAddressFree) return "cuMemAddressFree";
	if (!gdr_cu.MemMap) return "cuMemMap";
	if (!gdr_cu.MemUnmap) return "cuMemUnmap";
	if (!gdr_cu.MemSetAccess) return "cuMemSetAccess";
	return NULL;
}
// gdr_vmm_prop describes pinned memory on device dev, as NCCL's
// ncclCuMemAlloc (src/include/alloc.h) does: type PINNED (1), location
// DEVICE (1) with the ordinal, no shareable handle type, and
// gpuDirectRDMACapable when rdma is set.
static void gdr_vmm_prop(gdr_CUmemAllocationProp *p, int dev, int rdma) {
	memset(p, 0, sizeof *p);
	p->type = 1;
	p->location.type = 1;
	p->location.id = dev;
	p->allocFlags.gpuDirectRDMACapable = rdma ? 1 : 0;
}
static CUresult gdr_cuMemGetAllocationGranularity(size_t *g, int dev, int rdma, int option) {
	gdr_CUmemAllocationProp p;
	gdr_vmm_prop(&p, dev, rdma);
	return gdr_cu.MemGetAllocationGranularity(g, &p, option);
}
static CUresult gdr_cuMemCreate(CUmemGenericAllocationHandle *h, size_t n, int dev, int rdma) {
	gdr_CUmemAllocationProp p;
	gdr_vmm_prop(&p, dev, rdma);
	return gdr_cu.MemCreate(h, n, &p, 0);
}
static CUresult gdr_cuMemRelease(CUmemGenericAllocationHandle h) { return gdr_cu.MemRelease(h); }
static CUresult gdr_cuMemAddressReserve(CUdeviceptr *p, size_t n, size_t align) { return gdr_cu.MemAddressReserve(p, n, align, 0, 0); }
static CUresult gdr_cuMemAddressFree(CUdeviceptr p, size_t n) { return gdr_cu.MemAddressFree(p, n); }
static CUresult gdr_cuMemMap(CUdeviceptr p, size_t n, CUmemGenericAllocationHandle h) { return gdr_cu.MemMap(p, n, 0, h, 0); }
static CUresult gdr_cuMemUnmap(CUdeviceptr p, size_t n) { return gdr_cu.MemUnmap(p, n); }
// gdr_cuMemSetAccess grants device dev read and write access (location
// DEVICE, CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3).
static CUresult gdr_cuMemSetAccess(CUdeviceptr p, size_t n, int dev) {
	gdr_CUmemAccessDesc d;
	memset(&d, 0, sizeof d);
	d.location.type = 1;
	d.location.id = dev;
	d.flags = 3;
	return gdr_cu.MemSetAccess(p, n, &d, 1);
}
static const char *gdr_cuGetErrorName(CUresult r) {
	const char *s = NULL;
	if (gdr_cu.GetErrorName(r, &s) != 0 || !s) return "";
	return s;
}
static const char *gdr_cuGetErrorString(CUresult r) {
	const char *s = NULL;
	if (gdr_cu.GetErrorString(r, &s) != 0 || !s) return "";
	return s;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/nvdriver"
	"github.com/gdrconf/gdrconf/internal/pci"
)

// Library is the soname opened at run time.
const Library = "libcuda.so.1"

// Package names what ships Library, for messages.
var Package = "the NVIDIA driver's CUDA library (Ubuntu/Debian: libnvidia-compute-<driver version>; RHEL: nvidia-driver-cuda-libs from nvidia-driver-cuda; runfile: " + nvdriver.Runfile + ")"

// Result codes the suite tells apart.
const (
	Success           = 0
	ErrInvalidValue   = 1
	ErrOutOfMemory    = 2
	ErrNoDevice       = 100
	ErrInvalidDevice  = 101
	ErrNotSupported   = 801
	ErrDriverMismatch = 803
	ErrStubLibrary    = 34
	ErrInsufficientDr = 35 // CUDA_ERROR_INSUFFICIENT_DRIVER

	ErrPeerAccessUnsupported    = 217 // CUDA_ERROR_PEER_ACCESS_UNSUPPORTED
	ErrPeerAccessAlreadyEnabled = 704 // CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
	ErrPeerAccessNotEnabled     = 705 // CUDA_ERROR_PEER_ACCESS_NOT_ENABLED
	ErrTooManyPeers             = 711 // CUDA_ERROR_TOO_MANY_PEERS
)

// Attribute is a CUdevice_attribute value.
type Attribute int

// Device attributes used by the suite (values from the CUDA driver ABI).
const (
	AttrPCIBusID                  Attribute = 33
	AttrPCIDeviceID               Attribute = 34
	AttrUnifiedAddressing         Attribute = 41
	AttrPCIDomainID               Attribute = 50
	AttrComputeCapabilityMajor    Attribute = 75
	AttrComputeCapabilityMinor    Attribute = 76
	AttrGPUDirectRDMAWithVMM      Attribute = 110 // GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED
	AttrGPUDirectRDMASupported    Attribute = 116
	AttrGPUDirectRDMAFlushOptions Attribute = 117 // bitmask of FlushHost|FlushMemOps
	AttrGPUDirectRDMAWritesOrder  Attribute = 118 // WritesOrdering*
	AttrDMABufSupported           Attribute = 124
)

// Values of AttrGPUDirectRDMAFlushOptions (CUflushGPUDirectRDMAWritesOptions).
const (
	FlushHost   = 1 << 0 // cuFlushGPUDirectRDMAWrites is available
	FlushMemOps = 1 << 1 // CU_STREAM_WAIT_VALUE_FLUSH is available
)

// Values of AttrGPUDirectRDMAWritesOrder (CUGPUDirectRDMAWritesOrdering).
const (
	WritesOrderingNone       = 0
	WritesOrderingOwner      = 100
	WritesOrderingAllDevices = 200
)

// WritesOrderingName names an AttrGPUDirectRDMAWritesOrder value.
func WritesOrderingName(v int) string {
	switch v {
	case WritesOrderingNone:
		return "NONE"
	case WritesOrderingOwner:
		return "OWNER"
	case WritesOrderingAllDevices:
		return "ALL_DEVICES"
	}
	return fmt.Sprintf("unknown(%d)", v)
}

// Pointer attributes (CUpointer_attribute).
const (
	ptrAttrMemoryType = 2
	ptrAttrSyncMemops = 6
	ptrAttrIsManaged  = 8
	ptrAttrGDRCapable = 15 // IS_GPU_DIRECT_RDMA_CAPABLE (CUDA 11.3+)
)

// Options of cuMemGetAllocationGranularity (CUmemAllocationGranularity_flags).
const (
	granMinimum     = 0
	granRecommended = 1
)

// Memory types (CUmemorytype).
const (
	memTypeHost    = 1
	memTypeDevice  = 2
	memTypeArray   = 3
	memTypeUnified = 4
)

const (
	memHostAllocPortable = 1 // pinned for every context, not only the current one
	memAttachGlobal      = 1
	rangeHandleDmabufFD  = 1 // CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD
)

// Error is a failed CUDA call. Its text is
// "cuMemAlloc(2 MiB): CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
type Error struct {
	Op   string // the call and its main argument
	Code int    // CUresult
	Name string // cuGetErrorName
	Desc string // cuGetErrorString
	// Why is what the suite knows lies behind the result, with what to do
	// ("the Slurm step was given no GPUs (...): ..."), and Remedy that
	// remedy alone; both "" when it knows nothing more than CUDA says.
	Why, Remedy string
}

func (e *Error) Error() string {
	name := e.Name
	if name == "" {
		name = fmt.Sprintf("CUresult %d", e.Code)
	}
	s := fmt.Sprintf("%s: %s", e.Op, name)
	if e.Desc != "" {
		s = fmt.Sprintf("%s: %s (%s)", e.Op, name, e.Desc)
	}
	if e.Why != "" {
		s += "; " + e.Why
	}
	return s
}

// explainNoDevice adds to a CUDA_ERROR_NO_DEVICE what hid the GPUs where
// the suite can tell: a Slurm step given none. A device cgroup denying
// /dev/nvidia* (Slurm's ConstrainDevices) is what makes cuInit answer so
// (driver 580.159.04 on an H200 with its nodes denied: cuInit 100).
func explainNoDevice(err error, s config.Slurm) error {
	var ce *Error
	if !errors.As(err, &ce) || ce.Code != ErrNoDevice || !s.StepWithoutGPUs() {
		return err
	}
	e := *ce
	e.Why, e.Remedy = s.NoGPUsCause(), config.SlurmNoGPUsRemedy
	return &e
}

// slurm is Slurm's word on this process's GPUs, read through
// internal/config's reader of it: Load runs once per process, outside any
// test (the selection's GPU source calls it), so not through testenv.Config.
func slurm() config.Slurm { return config.ParseSlurm(os.LookupEnv) }

// Code returns the CUresult inside err, or -1 when err is not a CUDA error.
func Code(err error) int {
	var ce *Error
	if errors.As(err, &ce) {
		return ce.Code
	}
	return -1
}

func check(op string, r C.CUresult) error {
	if r == 0 {
		return nil
	}
	return &Error{Op: op, Code: int(r),
		Name: C.GoString(C.gdr_cuGetErrorName(r)), Desc: C.GoString(C.gdr_cuGetErrorString(r))}
}

// LoadError says libcuda.so.1 is missing or unusable; tests turn it into
// testenv.Absent (missing) or a failure (present but broken).
type LoadError struct {
	Missing bool   // the library itself did not open
	Msg     string // dlerror text or the missing symbol
}

func (e *LoadError) Error() string {
	if e.Missing {
		return fmt.Sprintf("%s does not open (%s); install %s", Library, e.Msg, Package)
	}
	return fmt.Sprintf("%s opened but %s", Library, e.Msg)
}

// Driver is the initialised CUDA driver API.
type Driver struct {
	version  int
	emulated string // the emulated GPU's description; "" for a real driver
}

// Emulated says whether libcuda.so.1 is the lab's emulated GPU
// (lab/emugpu), and describes it. Everything measured on it is labelled
// gpu-emulated and is no hardware evidence.
func (d *Driver) Emulated() (bool, string) { return d.emulated != "", d.emulated }

// libraryPath is what load opens; UseDriver points it at another driver.
var libraryPath = Library

var (
	loadOnce sync.Once
	loaded   *Driver
	loadErr  error
)

// Load opens libcuda.so.1 and calls cuInit(0), once per process: the driver
// cannot be unloaded and initialised again, so the library stays open.
func Load() (*Driver, error) {
	loadOnce.Do(func() { loaded, loadErr = load() })
	return loaded, loadErr
}

func load() (*Driver, error) {
	name := C.CString(libraryPath)
	defer C.free(unsafe.Pointer(name))
	// dlerror's text is per thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var why, missing *C.char
	switch C.gdr_cuda_load(name, &why, &missing) {
	case -1:
		return nil, &LoadError{Missing: true, Msg: C.GoString(why)}
	case -2:
		return nil, &LoadError{Msg: fmt.Sprintf("has no symbol %s: the driver is older than this suite supports (CUDA 11.0); upgrade the NVIDIA driver", C.GoString(missing))}
	}
	return initDriver()
}

// UseDriver forgets the loaded library and makes the next Load open path
// (Library to go back). Only the tests of the emulated GPU (lab/emugpu) call
// it: a real driver cannot be unloaded safely under a live context.
func UseDriver(path string) {
	C.gdr_cuda_unload()
	loadOnce = sync.Once{}
	loaded, loadErr = nil, nil
	libraryPath = path
}

func initDriver() (*Driver, error) {
	if err := check("cuInit(0)", C.gdr_cuInit(0)); err != nil {
		return nil, explainNoDevice(err, slurm())
	}
	var v C.int
	if err := check("cuDriverGetVersion", C.gdr_cuDriverGetVersion(&v)); err != nil {
		return nil, err
	}
	drv := &Driver{version: int(v)}
	if e := C.gdr_emulated(); e != nil {
		drv.emulated = C.GoString(e)
	}
	return drv, nil
}

// InitRemedy says what to do about a cuInit failure.
func InitRemedy(err error) string {
	var ce *Error
	if errors.As(err, &ce) && ce.Remedy != "" {
		return ce.Remedy
	}
	switch Code(err) {
	case ErrNoDevice:
		return "check nvidia-smi, /dev/nvidia*, CUDA_VISIBLE_DEVICES, and the container's GPU runtime"
	case ErrDriverMismatch:
		return "libcuda and the loaded nvidia kernel module differ in version: reboot, or reload the module, or reinstall one driver version"
	case ErrInsufficientDr:
		return "the kernel driver is older than libcuda: install matching driver packages"
	case ErrStubLibrary:
		return "libcuda.so.1 is the toolkit's stub (…/cuda/lib64/stubs): remove that directory from LD_LIBRARY_PATH and install the NVIDIA driver"
	}
	return "check dmesg for NVRM/Xid errors and that /dev/nvidia* exist and are accessible"
}

// Version is cuDriverGetVersion: 1000*major + 10*minor (13000 is 13.0).
func (d *Driver) Version() int { return d.version }

// VersionString formats a CUDA version number as "13.0".
func VersionString(v int) string { return fmt.Sprintf("%d.%d", v/1000, (v%1000)/10) }

// DmabufVersion is the first CUDA driver with cuMemGetHandleForAddressRange.
const DmabufVersion = 11070

// HasDmabufExport reports whether the driver exports cuMemGetHandleForAddressRange.
func (d *Driver) HasDmabufExport() bool { return C.gdr_has_dmabuf_export() != 0 }

// Device is one GPU as the CUDA driver numbers it.
type Device struct {
	Ordinal  int
	Name     string
	PCI      string // lowercase dddd:bb:dd.f
	TotalMem uint64
	Emulated bool // the lab's emulated GPU (Driver.Emulated)
	h        C.CUdevice
}

// MemLabel is what gdr.mem says about this device's memory: "gpu", or
// "gpu-emulated" on the lab's emulated GPU.
func (dev Device) MemLabel() string {
	if dev.Emulated {
		return "gpu-emulated"
	}
	return "gpu"
}

// Devices lists every GPU the driver sees, in CUDA ordinal order.
func (d *Driver) Devices() ([]Device, error) {
	var n C.int
	if err := check("cuDeviceGetCount", C.gdr_cuDeviceGetCount(&n)); err != nil {
		return nil, err
	}
	out := make([]Device, 0, int(n))
	for i := 0; i < int(n); i++ {
		dev := Device{Ordinal: i, Emulated: d.emulated != ""}
		if err := check(fmt.Sprintf("cuDeviceGet(%d)", i), C.gdr_cuDeviceGet(&dev.h, C.int(i))); err != nil {
			return out, err
		}
		var buf [256]C.char
		if err := check(fmt.Sprintf("cuDeviceGetName(%d)", i), C.gdr_cuDeviceGetName(&buf[0], C.int(len(buf)), dev.h)); err != nil {
			return out, err
		}
		dev.Name = C.GoString(&buf[0])
		if err := check(fmt.Sprintf("cuDeviceGetPCIBusId(%d)", i), C.gdr_cuDeviceGetPCIBusId(&buf[0], C.int(len(buf)), dev.h)); err != nil {
			return out, err
		}
		addr, err := pci.NormalizeAddr(C.GoString(&buf[0]))
		if err != nil {
			return out, fmt.Errorf("cuDeviceGetPCIBusId(%d): %w", i, err)
		}
		dev.PCI = addr
		var mem C.size_t
		if err := check(fmt.Sprintf("cuDeviceTotalMem(%d)", i), C.gdr_cuDeviceTotalMem(&mem, dev.h)); err != nil {
			return out, err
		}
		dev.TotalMem = uint64(mem)
		out = append(out, dev)
	}
	return out, nil
}

// Attr reads a device attribute.
func (dev Device) Attr(a Attribute) (int, error) {
	var v C.int
	err := check(fmt.Sprintf("cuDeviceGetAttribute(%s, gpu %d)", a, dev.Ordinal), C.gdr_cuDeviceGetAttribute(&v, C.int(a), dev.h))
	return int(v), err
}

func (a Attribute) String() string {
	switch a {
	case AttrPCIBusID:
		return "PCI_BUS_ID"
	case AttrPCIDeviceID:
		return "PCI_DEVICE_ID"
	case AttrUnifiedAddressing:
		return "UNIFIED_ADDRESSING"
	case AttrPCIDomainID:
		return "PCI_DOMAIN_ID"
	case AttrComputeCapabilityMajor:
		return "COMPUTE_CAPABILITY_MAJOR"
	case AttrComputeCapabilityMinor:
		return "COMPUTE_CAPABILITY_MINOR"
	case AttrGPUDirectRDMAWithVMM:
		return "GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED"
	case AttrGPUDirectRDMASupported:
		return "GPU_DIRECT_RDMA_SUPPORTED"
	case AttrGPUDirectRDMAFlushOptions:
		return "GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS"
	case AttrGPUDirectRDMAWritesOrder:
		return "GPU_DIRECT_RDMA_WRITES_ORDERING"
	case AttrDMABufSupported:
		return "DMA_BUF_SUPPORTED"
	}
	return fmt.Sprintf("attribute %d", int(a))
}

// ComputeCapability returns the major and minor compute capability.
func (dev Device) ComputeCapability() (major, minor int, err error) {
	if major, err = dev.Attr(AttrComputeCapabilityMajor); err != nil {
		return 0, 0, err
	}
	minor, err = dev.Attr(AttrComputeCapabilityMinor)
	return major, minor, err
}

// Context is a retained primary context of one device.
type Context struct {
	Dev Device
	mu  sync.Mutex
	ctx C.CUcontext

	flushOnce sync.Once
	flush     bool  // RDMA-written memory must be flushed before reads
	flushErr  error // it must be and cannot be
}

// Retain retains the device's primary context (the one the CUDA runtime,
// NCCL and PyTorch share). Release it with Release.
func (dev Device) Retain() (*Context, error) {
	c := &Context{Dev: dev}
	if err := check(fmt.Sprintf("cuDevicePrimaryCtxRetain(gpu %d)", dev.Ordinal), C.gdr_cuDevicePrimaryCtxRetain(&c.ctx, dev.h)); err != nil {
		return nil, err
	}
	return c, nil
}

// Release drops the retain; a second Release is a no-op.
func (c *Context) Release() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx == nil {
		return nil
	}
	c.ctx = nil
	return check(fmt.Sprintf("cuDevicePrimaryCtxRelease(gpu %d)", c.Dev.Ordinal), C.gdr_cuDevicePrimaryCtxRelease(c.Dev.h))
}

// Do runs f on a locked OS thread with the context current, and restores the
// thread's previous current context afterwards (none, unless Do is nested),
// so a thread going back to Go's pool carries no context. f must not hand
// CUDA work to other goroutines: they run on other threads.
func (c *Context) Do(f func() error) error {
	c.mu.Lock()
	ctx := c.ctx
	c.mu.Unlock()
	if ctx == nil {
		return fmt.Errorf("gpu %d: primary context already released", c.Dev.Ordinal)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var prev C.CUcontext
	if err := check("cuCtxGetCurrent", C.gdr_cuCtxGetCurrent(&prev)); err != nil {
		return err
	}
	if prev != ctx {
		if err := check("cuCtxSetCurrent", C.gdr_cuCtxSetCurrent(ctx)); err != nil {
			return err
		}
		defer C.gdr_cuCtxSetCurrent(prev)
	}
	return f()
}

// Synchronize waits for all work in the context.
func (c *Context) Synchronize() error { return c.Do(ctxSynchronize) }

// Size formats a byte count for call descriptions ("2 MiB").
func Size(n int) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// MemoryType is what CU_POINTER_ATTRIBUTE_MEMORY_TYPE and IS_MANAGED say about
// an address.
type MemoryType string

const (
	MemDevice  MemoryType = "device"  // cuMemAlloc memory: what GPUDirect RDMA registers
	MemManaged MemoryType = "managed" // cuMemAllocManaged: DEVICE type, but migratable
	MemHost    MemoryType = "host"    // cuMemHostAlloc / registered host memory
	MemArray   MemoryType = "array"
	MemUnknown MemoryType = "unknown" // not CUDA memory at all (plain malloc)
)

// PointerType classifies addr. Managed memory reports type DEVICE, so
// IS_MANAGED is read too: only MemDevice is genuine device memory.
func (c *Context) PointerType(addr uintptr) (MemoryType, error) {
	var mt MemoryType
	err := c.Do(func() error {
		var t C.uint
		r := C.gdr_cuPointerGetAttribute(unsafe.Pointer(&t), ptrAttrMemoryType, C.CUdeviceptr(addr))
		if r == ErrInvalidValue {
			mt = MemUnknown // not allocated or registered with CUDA
			return nil
		}
		if err := check(fmt.Sprintf("cuPointerGetAttribute(MEMORY_TYPE, %#x)", addr), r); err != nil {
			return err
		}
		switch t {
		case memTypeHost:
			mt = MemHost
		case memTypeArray:
			mt = MemArray
		case memTypeDevice, memTypeUnified:
			mt = MemDevice
			var managed C.int
			if err := check(fmt.Sprintf("cuPointerGetAttribute(IS_MANAGED, %#x)", addr),
				C.gdr_cuPointerGetAttribute(unsafe.Pointer(&managed), ptrAttrIsManaged, C.CUdeviceptr(addr))); err != nil {
				return err
			}
			if managed != 0 {
				mt = MemManaged
			}
		default:
			return fmt.Errorf("cuPointerGetAttribute(MEMORY_TYPE, %#x): unknown memory type %d", addr, t)
		}
		return nil
	})
	return mt, err
}

// SetSyncMemops sets CU_POINTER_ATTRIBUTE_SYNC_MEMOPS on the allocation
// holding addr, so CUDA memory operations on it complete synchronously and
// data a NIC reads or writes is never raced by a copy still in flight (the
// GPUDirect RDMA guide asks for it on every buffer RDMA touches).
func (c *Context) SetSyncMemops(addr uintptr) error {
	return c.Do(func() error {
		one := C.uint(1)
		return check(fmt.Sprintf("cuPointerSetAttribute(SYNC_MEMOPS, %#x)", addr),
			C.gdr_cuPointerSetAttribute(unsafe.Pointer(&one), ptrAttrSyncMemops, C.CUdeviceptr(addr)))
	})
}

// SyncMemops reads CU_POINTER_ATTRIBUTE_SYNC_MEMOPS back.
func (c *Context) SyncMemops(addr uintptr) (bool, error) {
	var v C.int
	err := c.Do(func() error {
		return check(fmt.Sprintf("cuPointerGetAttribute(SYNC_MEMOPS, %#x)", addr),
			C.gdr_cuPointerGetAttribute(unsafe.Pointer(&v), ptrAttrSyncMemops, C.CUdeviceptr(addr)))
	})
	return v != 0, err
}

// memAlloc allocates device memory (managed when managed is set).
func (c *Context) memAlloc(size int, managed bool) (uintptr, error) {
	if size <= 0 {
		return 0, fmt.Errorf("cuMemAlloc: size %d is not positive", size)
	}
	var p C.CUdeviceptr
	err := c.Do(func() error {
		if managed {
			return check(fmt.Sprintf("cuMemAllocManaged(%s)", Size(size)), C.gdr_cuMemAllocManaged(&p, C.size_t(size), memAttachGlobal))
		}
		return check(fmt.Sprintf("cuMemAlloc(%s)", Size(size)), C.gdr_cuMemAlloc(&p, C.size_t(size)))
	})
	return uintptr(p), err
}

func (c *Context) memFree(p uintptr) error {
	return c.Do(func() error {
		return check(fmt.Sprintf("cuMemFree(%#x)", p), C.gdr_cuMemFree(C.CUdeviceptr(p)))
	})
}

// HtoD copies n bytes from host address src to device address dst. src must
// be C or pinned memory, or Go memory that holds no Go pointers.
func (c *Context) HtoD(dst uintptr, src unsafe.Pointer, n int) error {
	return c.Do(func() error { return c.htod(dst, src, n) })
}

// htod and dtoh assume the context is current (inside Do).
func (c *Context) htod(dst uintptr, src unsafe.Pointer, n int) error {
	return check(fmt.Sprintf("cuMemcpyHtoD(%s)", Size(n)), C.gdr_cuMemcpyHtoD(C.CUdeviceptr(dst), src, C.size_t(n)))
}

func (c *Context) dtoh(dst unsafe.Pointer, src uintptr, n int) error {
	return check(fmt.Sprintf("cuMemcpyDtoH(%s)", Size(n)), C.gdr_cuMemcpyDtoH(dst, C.CUdeviceptr(src), C.size_t(n)))
}

// hostAlloc pins n bytes of host memory for every context (PORTABLE).
func (c *Context) hostAlloc(n int) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	err := c.Do(func() error {
		return check(fmt.Sprintf("cuMemHostAlloc(%s)", Size(n)), C.gdr_cuMemHostAlloc(&p, C.size_t(n), memHostAllocPortable))
	})
	return p, err
}

func (c *Context) hostFree(p unsafe.Pointer, n int) error {
	return c.Do(func() error {
		return check(fmt.Sprintf("cuMemFreeHost(%s)", Size(n)), C.gdr_cuMemFreeHost(p))
	})
}

// HasFlush reports whether the driver exports cuFlushGPUDirectRDMAWrites (CUDA 11.3+).
func (d *Driver) HasFlush() bool { return C.gdr_has_flush() != 0 }

// flushRemoteWrites makes what a NIC wrote into the current context's
// memory visible to the device (cuFlushGPUDirectRDMAWrites, scope owner),
// where the device needs it: writes ordering below OWNER with the HOST
// flush option. Devices that order RDMA writes for their own consumers
// (OWNER or ALL_DEVICES, every Ampere and newer GPU) need no flush. The
// context must be current (inside Do).
func (c *Context) flushRemoteWrites() error {
	need, err := c.needsFlush()
	if err != nil || !need {
		return err
	}
	return check("cuFlushGPUDirectRDMAWrites(CURRENT_CTX, TO_OWNER)", C.gdr_cuFlushGPUDirectRDMAWrites())
}

// needsFlush reads (once per context) whether RDMA-written memory of this
// device must be flushed before the device reads it, and fails when it must
// but cannot be.
func (c *Context) needsFlush() (bool, error) {
	c.flushOnce.Do(func() {
		order, err := c.Dev.Attr(AttrGPUDirectRDMAWritesOrder)
		if err != nil {
			c.flushErr = err
			return
		}
		if order >= WritesOrderingOwner {
			return
		}
		opts, err := c.Dev.Attr(AttrGPUDirectRDMAFlushOptions)
		switch {
		case err != nil:
			c.flushErr = err
		case opts&FlushHost == 0 || C.gdr_has_flush() == 0:
			c.flushErr = fmt.Errorf("GPU %s orders RDMA writes NONE and offers no cuFlushGPUDirectRDMAWrites (flush options %#x, symbol present %v): data a NIC wrote cannot be read back reliably (see GPU-06); upgrade the NVIDIA driver",
				c.Dev.PCI, opts, C.gdr_has_flush() != 0)
		default:
			c.flush = true
		}
	})
	return c.flush, c.flushErr
}

// Memset sets n bytes at dst to v.
func (c *Context) Memset(dst uintptr, v byte, n int) error {
	return c.Do(func() error {
		return check(fmt.Sprintf("cuMemsetD8(%s)", Size(n)), C.gdr_cuMemsetD8(C.CUdeviceptr(dst), C.uchar(v), C.size_t(n)))
	})
}

// dmabufFD exports [addr, addr+size) as a dma-buf with the flags of
// cuMemGetHandleForAddressRange (0, or nvdriver.DmabufFlagPCIe). Both must
// be host-page aligned (the driver rejects anything else with
// CUDA_ERROR_INVALID_VALUE).
func (c *Context) dmabufFD(addr uintptr, size, flags int) (int, error) {
	if C.gdr_has_dmabuf_export() == 0 {
		return -1, &Error{Op: "cuMemGetHandleForAddressRange", Code: ErrNotSupported, Name: "symbol missing",
			Desc: fmt.Sprintf("the CUDA driver predates %s; dma-buf export needs driver CUDA %s or later", VersionString(DmabufVersion), VersionString(DmabufVersion))}
	}
	if err := exportRange(addr, size, pageSize()); err != nil {
		return -1, err
	}
	op := fmt.Sprintf("cuMemGetHandleForAddressRange(DMA_BUF_FD, %s)", Size(size))
	if flags != 0 {
		op = fmt.Sprintf("cuMemGetHandleForAddressRange(DMA_BUF_FD, %s, flags %#x)", Size(size), flags)
	}
	fd := C.int(-1)
	err := c.Do(func() error {
		return check(op, C.gdr_cuMemGetHandleForAddressRange(&fd, C.CUdeviceptr(addr), C.size_t(size), rangeHandleDmabufFD, C.ulonglong(flags)))
	})
	return int(fd), err
}

// exportRange checks a dma-buf export range against the host page size
// page: 4 KiB on x86, 64 KiB on arm64 kernels built with 64K pages (NCCL
// rounds exports to the host page too: src/transport/net.cc
// ncclOsGetPageSize).
func exportRange(addr uintptr, size, page int) error {
	if addr%uintptr(page) != 0 || size%page != 0 || size <= 0 {
		return fmt.Errorf("cuMemGetHandleForAddressRange(%#x, %d): address and size must be multiples of the %d-byte host page", addr, size, page)
	}
	return nil
}

func pageSize() int { return os.Getpagesize() }

// Peer-to-peer and stream calls (peer.go builds on them). Each returns an
// error naming the entry point when the library lacks one.

func missingPeer(op string) error {
	if m := C.gdr_missing_peer(); m != nil {
		return &Error{Op: op, Code: ErrNotSupported, Name: "symbol missing",
			Desc: fmt.Sprintf("%s does not export %s; upgrade the NVIDIA driver", Library, C.GoString(m))}
	}
	return nil
}

func canAccessPeer(dev, peer Device) (bool, error) {
	op := fmt.Sprintf("cuDeviceCanAccessPeer(gpu %d, gpu %d)", dev.Ordinal, peer.Ordinal)
	if err := missingPeer(op); err != nil {
		return false, err
	}
	var v C.int
	err := check(op, C.gdr_cuDeviceCanAccessPeer(&v, dev.h, peer.h))
	return v != 0, err
}

// The calls below assume a context is current (inside Do).

// handle is the context's CUcontext, or an error once it is released.
func (c *Context) handle() (C.CUcontext, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx == nil {
		return nil, fmt.Errorf("gpu %d: primary context already released", c.Dev.Ordinal)
	}
	return c.ctx, nil
}

func ctxEnablePeerAccess(c, peer *Context) error {
	op := fmt.Sprintf("cuCtxEnablePeerAccess(gpu %d -> gpu %d)", c.Dev.Ordinal, peer.Dev.Ordinal)
	if err := missingPeer(op); err != nil {
		return err
	}
	h, err := peer.handle()
	if err != nil {
		return err
	}
	return check(op, C.gdr_cuCtxEnablePeerAccess(h))
}

func ctxDisablePeerAccess(c, peer *Context) error {
	op := fmt.Sprintf("cuCtxDisablePeerAccess(gpu %d -> gpu %d)", c.Dev.Ordinal, peer.Dev.Ordinal)
	if err := missingPeer(op); err != nil {
		return err
	}
	h, err := peer.handle()
	if err != nil {
		return err
	}
	return check(op, C.gdr_cuCtxDisablePeerAccess(h))
}

// stream is a CUDA stream of the context current when it was made.
type stream struct{ s C.CUstream }

func streamCreate() (stream, error) {
	if err := missingPeer("cuStreamCreate"); err != nil {
		return stream{}, err
	}
	var s C.CUstream
	err := check("cuStreamCreate(NON_BLOCKING)", C.gdr_cuStreamCreate(&s))
	return stream{s}, err
}

func (s stream) sync() error { return check("cuStreamSynchronize", C.gdr_cuStreamSynchronize(s.s)) }

func (s stream) destroy() error { return check("cuStreamDestroy", C.gdr_cuStreamDestroy(s.s)) }

// memcpyPeerAsync queues a copy of n bytes from src (in srcCtx) to dst (in
// dstCtx) on s.
func (s stream) memcpyPeerAsync(dst uintptr, dstCtx *Context, src uintptr, srcCtx *Context, n int) error {
	dh, err := dstCtx.handle()
	if err != nil {
		return err
	}
	sh, err := srcCtx.handle()
	if err != nil {
		return err
	}
	return check(fmt.Sprintf("cuMemcpyPeerAsync(gpu %d -> gpu %d, %s)", srcCtx.Dev.Ordinal, dstCtx.Dev.Ordinal, Size(n)),
		C.gdr_cuMemcpyPeerAsync(C.CUdeviceptr(dst), dh, C.CUdeviceptr(src), sh, C.size_t(n), s.s))
}

// The VMM calls (vmm.go builds on them). Each returns an error naming the
// entry point when the library lacks one; the context must be current.

func missingVMM(op string) error {
	if m := C.gdr_missing_vmm(); m != nil {
		return &Error{Op: op, Code: ErrNotSupported, Name: "symbol missing",
			Desc: fmt.Sprintf("%s does not export %s; upgrade the NVIDIA driver", Library, C.GoString(m))}
	}
	return nil
}

// HasVMM reports whether the driver exports every VMM call the suite uses.
func (d *Driver) HasVMM() bool { return C.gdr_missing_vmm() == nil }

func rdmaFlag(rdma bool) C.int {
	if rdma {
		return 1
	}
	return 0
}

func memGranularity(dev Device, rdma, recommended bool) (int, error) {
	opt, name := C.int(granMinimum), "MINIMUM"
	if recommended {
		opt, name = granRecommended, "RECOMMENDED"
	}
	op := fmt.Sprintf("cuMemGetAllocationGranularity(%s, gpu %d, gpuDirectRDMACapable=%d)", name, dev.Ordinal, rdmaFlag(rdma))
	if err := missingVMM(op); err != nil {
		return 0, err
	}
	var g C.size_t
	err := check(op, C.gdr_cuMemGetAllocationGranularity(&g, C.int(dev.h), rdmaFlag(rdma), opt))
	return int(g), err
}

func memCreate(dev Device, n int, rdma bool) (uint64, error) {
	op := fmt.Sprintf("cuMemCreate(%s, gpu %d, gpuDirectRDMACapable=%d)", Size(n), dev.Ordinal, rdmaFlag(rdma))
	if err := missingVMM(op); err != nil {
		return 0, err
	}
	var h C.CUmemGenericAllocationHandle
	err := check(op, C.gdr_cuMemCreate(&h, C.size_t(n), C.int(dev.h), rdmaFlag(rdma)))
	return uint64(h), err
}

func memRelease(h uint64, n int) error {
	op := fmt.Sprintf("cuMemRelease(%s)", Size(n))
	if err := missingVMM(op); err != nil {
		return err
	}
	return check(op, C.gdr_cuMemRelease(C.CUmemGenericAllocationHandle(h)))
}

func memAddressReserve(n, align int) (uintptr, error) {
	op := fmt.Sprintf("cuMemAddressReserve(%s, align %s)", Size(n), Size(align))
	if err := missingVMM(op); err != nil {
		return 0, err
	}
	var p C.CUdeviceptr
	err := check(op, C.gdr_cuMemAddressReserve(&p, C.size_t(n), C.size_t(align)))
	return uintptr(p), err
}

func memAddressFree(p uintptr, n int) error {
	op := fmt.Sprintf("cuMemAddressFree(%#x, %s)", p, Size(n))
	if err := missingVMM(op); err != nil {
		return err
	}
	return check(op, C.gdr_cuMemAddressFree(C.CUdeviceptr(p), C.size_t(n)))
}

func memMap(p uintptr, n int, h uint64) error {
	op := fmt.Sprintf("cuMemMap(%#x, %s)", p, Size(n))
	if err := missingVMM(op); err != nil {
		return err
	}
	return check(op, C.gdr_cuMemMap(C.CUdeviceptr(p), C.size_t(n), C.CUmemGenericAllocationHandle(h)))
}

func memUnmap(p uintptr, n int) error {
	op := fmt.Sprintf("cuMemUnmap(%#x, %s)", p, Size(n))
	if err := missingVMM(op); err != nil {
		return err
	}
	return check(op, C.gdr_cuMemUnmap(C.CUdeviceptr(p), C.size_t(n)))
}

func memSetAccess(p uintptr, n int, dev Device) error {
	op := fmt.Sprintf("cuMemSetAccess(%#x, %s, READWRITE for gpu %d)", p, Size(n), dev.Ordinal)
	if err := missingVMM(op); err != nil {
		return err
	}
	return check(op, C.gdr_cuMemSetAccess(C.CUdeviceptr(p), C.size_t(n), C.int(dev.h)))
}

// ctxSynchronize waits for the current context's work.
func ctxSynchronize() error { return check("cuCtxSynchronize", C.gdr_cuCtxSynchronize()) }

// gdrCapable reads CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE. The
// driver writes an int (driver 580 left the upper half of a pre-filled
// 8-byte word alone); a zeroed 8-byte word takes either width.
func gdrCapable(p uintptr) (bool, error) {
	var v C.ulonglong
	err := check(fmt.Sprintf("cuPointerGetAttribute(IS_GPU_DIRECT_RDMA_CAPABLE, %#x)", p),
		C.gdr_cuPointerGetAttribute(unsafe.Pointer(&v), ptrAttrGDRCapable, C.CUdeviceptr(p)))
	return v != 0, err
}
