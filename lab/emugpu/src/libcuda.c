/* The emulated GPU: a libcuda.so.1 for machines without one.
 *
 * Unit tests load it in place of the NVIDIA driver, and the Soft-RoCE lab
 * installs it in its VMs so that the suite's GPU code paths (pingpong on GPU
 * memory, memreg, conformance/gpu) run against rxe. "Device memory" is a
 * memfd mapped twice:
 *
 *   alias A  the address cuMemAlloc returns, which the suite registers with
 *            the NIC. At the first copy, memset, synchronize or flush after
 *            the allocation it becomes PROT_NONE: from then on a CPU access
 *            faults (SIGSEGV), as a CPU read of cuMemAlloc memory does on a
 *            real driver, while rxe, which reached the pages through the
 *            registration, still reads and writes them.
 *   alias B  the emulator's private view, through which cuMemcpy* and
 *            cuMemsetD8 move data.
 *
 * A shadow copy of each allocation holds what the emulator last wrote, read
 * or flushed. A cuMemcpyDtoH of bytes that differ from the shadow reads data
 * the NIC wrote since the last cuFlushGPUDirectRDMAWrites: the emulator
 * refuses it loudly, naming the missing call (the emulated device reports
 * writes ordering NONE with the HOST flush option, so a flush is required).
 *
 * The virtual memory management calls (cuMemCreate and friends, NCCL's
 * allocator) give the same kind of memory: see "VMM" below.
 *
 * Not emulated, and reported so: dma-buf export (the lab kernel has no
 * udmabuf, and rxe has no dma-buf MRs). Everything here is labelled emulated
 * by the suite (gdrEmulatedGPU below) and is never counted as hardware
 * evidence.
 *
 * Environment: FAKE_CUDA_INIT=<CUresult> makes cuInit fail with it;
 * FAKE_CUDA_DEVICES=<1..8> sets the device count (default 1), each found
 * through its device file as the driver finds it (FAKE_CUDA_DEV_DIR, see
 * "device files");
 * FAKE_CUDA_PEER=0 makes the devices unable to reach each other (see "peers");
 * FAKE_CUDA_VMM_RDMA=0 makes GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED read 0
 * (cuMemCreate memory not registrable, see "VMM");
 * FAKE_CUDA_DMABUF_PCIE=1 accepts the PCIe mapping flag of a dma-buf export
 * (refused by default, as on a PCIe GPU) and FAKE_CUDA_DMABUF=memfd lets
 * exports succeed with a memfd (see "dma-buf export").
 * Build flags: -DOMIT_MANAGED drops a required symbol (loader tests);
 * -DNO_DMABUF_SYMBOL drops cuMemGetHandleForAddressRange (a pre-11.7 driver);
 * -DNO_PEER_SYMBOL drops cuDeviceCanAccessPeer (a library without the peer calls);
 * -DNO_VMM_SYMBOL drops cuMemCreate (a library without the VMM calls).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef unsigned long long CUdeviceptr;

enum {
	OK = 0,
	ERR_INVALID_VALUE = 1,
	ERR_OUT_OF_MEMORY = 2,
	ERR_NOT_INITIALIZED = 3,
	ERR_NO_DEVICE = 100,
	ERR_INVALID_DEVICE = 101,
	ERR_INVALID_CONTEXT = 201,
	ERR_NOT_SUPPORTED = 801,
	ERR_UNKNOWN = 999,
};

#define MAX_DEV 8
#define MEM_LIMIT ((size_t)1 << 30)

/* Marks this library as the emulator: harness/cuda labels every result on it. */
const char *gdrEmulatedGPU(void) {
	return "GDR emulated GPU: host memory (memfd) behind PROT_NONE, reached by the NIC through its registration; copies through a private alias";
}

static int inited;
static __thread CUcontext current;
static char last_msg[512];

static void say(const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "gdr-emulated-gpu: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
}

/* ndev_env is how many GPUs the emulated host has (FAKE_CUDA_DEVICES). */
static int ndev_env(void) {
	const char *v = getenv("FAKE_CUDA_DEVICES");
	int n = v ? atoi(v) : 1;
	return n < 1 ? 1 : (n > MAX_DEV ? MAX_DEV : n);
}

/* ---- device files ----
 *
 * The NVIDIA driver's user-space library reaches the GPUs through character
 * devices of major 195: /dev/nvidiactl (minor 255) for the driver as a whole
 * and /dev/nvidia<N> (minor N) for GPU N (NVIDIA/open-gpu-kernel-modules,
 * kernel-open/common/inc/nv-chardev-numbers.h; nv.c registers "nvidia" for
 * minors 0..247 and "nvidiactl" for 255). What hides a GPU from a process is
 * what hides those files: a device cgroup (Slurm's ConstrainDevices, a
 * container runtime) makes open(2) fail with EPERM, a container not given
 * the GPU has no node (ENOENT), a node's mode can refuse it (EACCES). cuInit
 * here opens them (O_RDWR) as the driver does, and the real driver's answers
 * are the emulation's (driver 580.159.04 on an H200, one GPU, with a BPF
 * device cgroup denying the node, and as an unprivileged user on a mode 000
 * node): /dev/nvidiactl or the only /dev/nvidia0 refused makes cuInit return
 * CUDA_ERROR_NO_DEVICE, and cuDeviceGetCount then CUDA_ERROR_NOT_INITIALIZED.
 * A refused /dev/nvidia<N> leaves GPU N out; the others keep their ordinals
 * in order and their PCI addresses.
 *
 * Reachable means open(2) succeeded (a driver serves the node; the unit
 * tests' regular files) or failed with ENXIO: the node exists and nothing
 * denied it, but no driver serves major 195, which is the lab VMs' case
 * (Linux fs/char_dev.c chrdev_open: no cdev for the device number, -ENXIO;
 * the device cgroup is checked before that, in may_open, and gives EPERM).
 * Any other errno hides the device.
 *
 * Not emulated: the real driver, run as root, creates a missing node itself
 * (seen on the H200: a /dev without nvidiactl or nvidia0 had both again
 * after cuInit, nvidia-modprobe absent); a device cgroup then still decides.
 * Here a missing node stays missing. CUDA_VISIBLE_DEVICES is not read.
 *
 * FAKE_CUDA_DEV_DIR=<dir> looks for the nodes in dir instead of /dev (the
 * unit tests plant trees there). */
static int nvis;              /* devices cuInit found reachable */
static int visible[MAX_DEV];  /* ordinal -> the emulated host's GPU index */

static int ndev(void) { return nvis; }

/* phys is the host's GPU index of ordinal d: its name and PCI address. */
static int phys(CUdevice d) { return visible[d]; }

static const char *dev_dir(void) {
	const char *v = getenv("FAKE_CUDA_DEV_DIR");
	return v && *v ? v : "/dev";
}

/* reachable opens dir/name O_RDWR as the driver does and reports whether
 * the device is there for this process; why gets the errno text when not. */
static int reachable(const char *name, char *why, size_t n) {
	char p[4096];
	snprintf(p, sizeof p, "%s/%s", dev_dir(), name);
	int fd = open(p, O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		close(fd);
		return 1;
	}
	int e = errno;
	snprintf(why, n, "%s: %s", p, strerror(e));
	return e == ENXIO;
}

static int cur_dev(void) { return current ? (int)((uintptr_t)current - 0x1000) : -1; }

/* ---- allocations ---- */

/* K_VMM is one cuMemMap mapping of a cuMemCreate allocation (struct phys,
 * in "VMM" below): alias A is the mapping, alias B and the shadow are the
 * allocation's, shared by all its mappings. */
enum kind { K_DEVICE, K_MANAGED, K_HOST, K_VMM };

struct phys;

struct alloc {
	struct alloc *next;
	enum kind kind;
	int dev;
	uintptr_t user;     /* what the caller got */
	size_t ulen;        /* what the caller asked for */
	uintptr_t a;        /* alias A mapping (device) or malloc block */
	size_t maplen;
	char *b;            /* alias B (device) */
	unsigned char *shadow;
	int fd;
	int prot_none;
	int sync_memops;
	struct phys *phys;  /* K_VMM: the allocation mapped */
	int accessible;     /* K_VMM: cuMemSetAccess granted READWRITE */
};

/* device memory: what the NIC may reach and the CPU may not */
static int is_dev(const struct alloc *x) { return x->kind == K_DEVICE || x->kind == K_VMM; }

/* usable: device memory a copy may touch (a VMM mapping only after cuMemSetAccess) */
static int usable(const struct alloc *x) { return x->kind != K_HOST && (x->kind != K_VMM || x->accessible); }

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct alloc *allocs;

/* find_locked is the allocation holding [p, p+n); p must lie inside it, so
 * that the address just past one (the start of a neighbouring VMM mapping or
 * reservation) is not taken for it. */
static struct alloc *find_locked(uintptr_t p, size_t n) {
	for (struct alloc *x = allocs; x; x = x->next)
		if (p >= x->user && p - x->user < x->ulen && n <= x->ulen - (p - x->user))
			return x;
	return NULL;
}

/* protect_fresh makes every device allocation PROT_NONE at the first CUDA
 * operation that is not part of allocating it (the suite registers right
 * after allocating; a registration after this point gets EFAULT). */
static void protect_fresh_locked(const char *op) {
	for (struct alloc *x = allocs; x; x = x->next) {
		/* a VMM mapping stays as it is until cuMemSetAccess: the suite
		 * registers it after that */
		if (!is_dev(x) || x->prot_none || (x->kind == K_VMM && !x->accessible))
			continue;
		if (mprotect((void *)x->a, x->maplen, PROT_NONE) != 0) {
			say("mprotect(0x%lx, %zu, PROT_NONE) failed: %s", (unsigned long)x->a, x->maplen, strerror(errno));
			continue;
		}
		x->prot_none = 1;
		say("0x%lx (+%zu bytes) is now PROT_NONE at %s: the CPU can no longer touch it; an ibv_reg_mr of it from now on fails with EFAULT (the emulator's limit, not the suite's)",
		    (unsigned long)x->user, x->ulen, op);
	}
}

static CUresult need_ctx(void) { return current ? OK : ERR_INVALID_CONTEXT; }

static CUresult dev_alloc(CUdeviceptr *p, size_t n, enum kind k) {
	long pg = sysconf(_SC_PAGESIZE);
	if (!inited)
		return ERR_NOT_INITIALIZED;
	if (need_ctx())
		return ERR_INVALID_CONTEXT;
	if (!p || n == 0)
		return ERR_INVALID_VALUE;
	if (n > MEM_LIMIT)
		return ERR_OUT_OF_MEMORY;
	struct alloc *x = calloc(1, sizeof *x);
	if (!x)
		return ERR_OUT_OF_MEMORY;
	x->kind = k;
	x->dev = cur_dev();
	x->ulen = n;
	x->fd = -1;
	/* Like cuMemAlloc: large allocations are 2 MiB aligned in a real
	 * driver, small ones only 512-byte aligned inside a page; the suite
	 * must align them itself, so small ones start 512 bytes into a page. */
	size_t off = n < ((size_t)2 << 20) ? 512 : 0;
	x->maplen = (off + n + pg - 1) / pg * pg;
	if (k == K_MANAGED) {
		void *m = NULL;
		if (posix_memalign(&m, pg, x->maplen) != 0) {
			free(x);
			return ERR_OUT_OF_MEMORY;
		}
		memset(m, 0, x->maplen);
		x->a = (uintptr_t)m;
	} else {
		x->fd = memfd_create("gdr-emulated-gpu", MFD_CLOEXEC);
		if (x->fd < 0 || ftruncate(x->fd, (off_t)x->maplen) != 0)
			goto oom;
		void *a = mmap(NULL, x->maplen, PROT_READ | PROT_WRITE, MAP_SHARED, x->fd, 0);
		if (a == MAP_FAILED)
			goto oom;
		x->a = (uintptr_t)a;
		void *b = mmap(NULL, x->maplen, PROT_READ | PROT_WRITE, MAP_SHARED, x->fd, 0);
		if (b == MAP_FAILED) {
			munmap(a, x->maplen);
			goto oom;
		}
		x->b = b;
		x->shadow = calloc(1, x->maplen);
		if (!x->shadow) {
			munmap(a, x->maplen);
			munmap(b, x->maplen);
			goto oom;
		}
	}
	x->user = x->a + off;
	pthread_mutex_lock(&mu);
	x->next = allocs;
	allocs = x;
	pthread_mutex_unlock(&mu);
	*p = (CUdeviceptr)x->user;
	return OK;
oom:
	if (x->fd >= 0)
		close(x->fd);
	free(x);
	return ERR_OUT_OF_MEMORY;
}

static void drop(struct alloc *x) {
	if (x->kind == K_DEVICE) {
		munmap((void *)x->a, x->maplen);
		munmap(x->b, x->maplen);
		close(x->fd);
		free(x->shadow);
	} else {
		free((void *)x->a);
	}
	free(x);
}

static CUresult free_kind(uintptr_t p, int host) {
	pthread_mutex_lock(&mu);
	for (struct alloc **pp = &allocs; *pp; pp = &(*pp)->next) {
		struct alloc *x = *pp;
		if (x->kind != K_VMM && x->user == p && ((x->kind == K_HOST) == host)) {
			*pp = x->next;
			pthread_mutex_unlock(&mu);
			drop(x);
			return OK;
		}
	}
	pthread_mutex_unlock(&mu);
	return ERR_INVALID_VALUE;
}

/* ---- peers and streams: several emulated GPUs (FAKE_CUDA_DEVICES >= 2) ----
 *
 * Every emulated device's memory is host memory, so each device can reach
 * every other's: cuDeviceCanAccessPeer is 1 between distinct devices (0 for a
 * device and itself, as on a real driver), unless FAKE_CUDA_PEER=0 emulates a
 * platform without peer-to-peer (then cuCtxEnablePeerAccess fails with
 * CUDA_ERROR_PEER_ACCESS_UNSUPPORTED). cuCtxEnablePeerAccess keeps a table
 * of (context, peer) and answers as the driver does: ALREADY_ENABLED the
 * second time, NOT_ENABLED for a disable without an enable; the table of a
 * device is cleared when its primary context's last retain is released.
 * cuMemcpyPeer(Async) moves bytes from alias B to alias B under the rules of
 * the other copies: source bytes the NIC wrote since the last flush are
 * refused (as cuMemcpyDtoH refuses them), the destination's shadow is
 * updated (as cuMemcpyHtoD does), and a fresh allocation becomes PROT_NONE.
 * Like a real driver it copies whether or not peer access is enabled (the
 * real one then stages through host memory). Streams are handles whose work
 * is done at once: every copy here completes before it returns.
 *
 * Not emulated, and so reported by the suite: a link. There is no NVLink
 * (NVML is not emulated) and no PCIe path (the devices are not in sysfs), and
 * copy rates are those of CPU memcpy.
 */
enum {
	ERR_PEER_UNSUPPORTED = 217,
	ERR_INVALID_HANDLE = 400,
	ERR_PEER_ALREADY = 704,
	ERR_PEER_NOT_ENABLED = 705,
};

static int peer_on[MAX_DEV][MAX_DEV]; /* [context's device][peer's device] */
static int ctx_refs[MAX_DEV];

static int peer_allowed(void) {
	const char *v = getenv("FAKE_CUDA_PEER");
	return !(v && strcmp(v, "0") == 0);
}

/* ctx_dev is the device of a context handle (see cuDevicePrimaryCtxRetain), or -1. */
static int ctx_dev(CUcontext c) {
	uintptr_t v = (uintptr_t)c;
	return (v >= 0x1000 && v < 0x1000 + (uintptr_t)ndev()) ? (int)(v - 0x1000) : -1;
}

static void peer_retained(CUdevice d) {
	pthread_mutex_lock(&mu);
	ctx_refs[d]++;
	pthread_mutex_unlock(&mu);
}

/* peer_released drops a retain; the last one forgets d's peer mappings both
 * ways, as destroying a real context does. */
static void peer_released(CUdevice d) {
	pthread_mutex_lock(&mu);
	if (ctx_refs[d] > 0 && --ctx_refs[d] == 0)
		for (int i = 0; i < MAX_DEV; i++)
			peer_on[d][i] = peer_on[i][d] = 0;
	pthread_mutex_unlock(&mu);
}

static int peer_error_name(CUresult r, const char **s) {
	switch (r) {
	case ERR_PEER_UNSUPPORTED: *s = "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED"; return 1;
	case ERR_INVALID_HANDLE: *s = "CUDA_ERROR_INVALID_HANDLE"; return 1;
	case ERR_PEER_ALREADY: *s = "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED"; return 1;
	case ERR_PEER_NOT_ENABLED: *s = "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED"; return 1;
	}
	return 0;
}

static int peer_error_string(CUresult r, const char **s) {
	switch (r) {
	case ERR_PEER_UNSUPPORTED: *s = "peer access is not supported between these two devices"; return 1;
	case ERR_INVALID_HANDLE: *s = "invalid resource handle"; return 1;
	case ERR_PEER_ALREADY: *s = "peer access is already enabled"; return 1;
	case ERR_PEER_NOT_ENABLED: *s = "peer access has not been enabled"; return 1;
	}
	return 0;
}

#ifndef NO_PEER_SYMBOL
CUresult cuDeviceCanAccessPeer(int *v, CUdevice d, CUdevice p) {
	if (!inited) return ERR_NOT_INITIALIZED;
	if (!v) return ERR_INVALID_VALUE;
	if (d < 0 || d >= ndev() || p < 0 || p >= ndev()) return ERR_INVALID_DEVICE;
	*v = d != p && peer_allowed();
	return OK;
}
#endif

CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags) {
	int d = cur_dev(), p = ctx_dev(peer);
	if (!current || p < 0) return ERR_INVALID_CONTEXT;
	if (flags != 0) return ERR_INVALID_VALUE;
	if (p == d) return ERR_INVALID_DEVICE;
	if (!peer_allowed()) return ERR_PEER_UNSUPPORTED;
	pthread_mutex_lock(&mu);
	int was = peer_on[d][p];
	peer_on[d][p] = 1;
	pthread_mutex_unlock(&mu);
	return was ? ERR_PEER_ALREADY : OK;
}

CUresult cuCtxDisablePeerAccess(CUcontext peer) {
	int d = cur_dev(), p = ctx_dev(peer);
	if (!current || p < 0) return ERR_INVALID_CONTEXT;
	pthread_mutex_lock(&mu);
	int was = peer_on[d][p];
	peer_on[d][p] = 0;
	pthread_mutex_unlock(&mu);
	return was ? OK : ERR_PEER_NOT_ENABLED;
}

#define STREAM_MAGIC 0x5eed57a1u
struct stream { unsigned magic; int dev; };

static int bad_stream(void *s) { return s && ((struct stream *)s)->magic != STREAM_MAGIC; }

CUresult cuStreamCreate(void **s, unsigned int flags) {
	if (need_ctx()) return ERR_INVALID_CONTEXT;
	if (!s || flags > 1) return ERR_INVALID_VALUE; /* DEFAULT 0, NON_BLOCKING 1 */
	struct stream *x = calloc(1, sizeof *x);
	if (!x) return ERR_OUT_OF_MEMORY;
	x->magic = STREAM_MAGIC;
	x->dev = cur_dev();
	*s = x;
	return OK;
}

CUresult cuStreamSynchronize(void *s) {
	if (bad_stream(s)) return ERR_INVALID_HANDLE;
	if (need_ctx()) return ERR_INVALID_CONTEXT;
	pthread_mutex_lock(&mu);
	protect_fresh_locked("cuStreamSynchronize");
	pthread_mutex_unlock(&mu);
	return OK;
}

CUresult cuStreamDestroy_v2(void *s) {
	if (!s || bad_stream(s)) return ERR_INVALID_HANDLE;
	((struct stream *)s)->magic = 0;
	free(s);
	return OK;
}

/* peer_copy copies n bytes from src (memory of srcCtx's device) to dst
 * (memory of dstCtx's device) through their private aliases. */
static CUresult peer_copy(const char *op, CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n) {
	int dd = ctx_dev(dctx), sd = ctx_dev(sctx);
	if (need_ctx() || dd < 0 || sd < 0) return ERR_INVALID_CONTEXT;
	if (n == 0) return OK;
	pthread_mutex_lock(&mu);
	protect_fresh_locked(op);
	struct alloc *x = find_locked((uintptr_t)src, n), *y = find_locked((uintptr_t)dst, n);
	if (!x || !y || !is_dev(x) || !is_dev(y) || !usable(x) || !usable(y) || x->dev != sd || y->dev != dd) {
		snprintf(last_msg, sizeof last_msg,
			 "emulated GPU: %s of %zu bytes from 0x%llx (device %d) to 0x%llx (device %d): both ends must be cuMemAlloc memory of their context's device (managed memory is not emulated here)",
			 op, n, (unsigned long long)src, sd, (unsigned long long)dst, dd);
		say("%s", last_msg);
		pthread_mutex_unlock(&mu);
		return ERR_INVALID_VALUE;
	}
	size_t soff = (uintptr_t)src - x->a, doff = (uintptr_t)dst - y->a;
	if (memcmp(x->b + soff, x->shadow + soff, n) != 0) {
		snprintf(last_msg, sizeof last_msg,
			 "emulated GPU: %s of %zu bytes from 0x%llx would read bytes that the NIC wrote after the last cuFlushGPUDirectRDMAWrites; "
			 "with writes ordering NONE the suite must call cuFlushGPUDirectRDMAWrites before reading RDMA-written GPU memory",
			 op, n, (unsigned long long)src);
		say("%s", last_msg);
		pthread_mutex_unlock(&mu);
		return ERR_UNKNOWN;
	}
	memmove(y->b + doff, x->b + soff, n);
	memcpy(y->shadow + doff, y->b + doff, n);
	pthread_mutex_unlock(&mu);
	return OK;
}

CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n) {
	return peer_copy("cuMemcpyPeer", dst, dctx, src, sctx, n);
}

CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n, void *s) {
	if (bad_stream(s)) return ERR_INVALID_HANDLE;
	return peer_copy("cuMemcpyPeerAsync", dst, dctx, src, sctx, n);
}

/* ---- VMM: cuMemCreate, cuMemAddressReserve, cuMemMap, cuMemSetAccess ----
 *
 * NCCL allocates its buffers this way (NCCL_CUMEM_ENABLE, on by default;
 * NVIDIA/nccl src/include/alloc.h ncclCuMemAlloc), so the suite registers
 * such memory beside cuMemAlloc memory. The emulation:
 *
 *   cuMemCreate          a memfd of the size (a multiple of the 2 MiB
 *                        granularity) with its private alias B and shadow:
 *                        the physical allocation. Its handle is the address
 *                        of its record, as the driver's handles are host
 *                        addresses; a handle not handed out is refused (the
 *                        driver itself crashed on one).
 *   cuMemAddressReserve  a PROT_NONE anonymous mapping, aligned: the address
 *                        range, whose pages no one can touch.
 *   cuMemMap             the memfd mapped MAP_FIXED over part of a
 *                        reservation, still PROT_NONE: alias A.
 *   cuMemSetAccess       alias A becomes readable and writable, so that the
 *                        suite can register it; from then on the mapping is
 *                        cuMemAlloc memory in every way (a struct alloc of
 *                        kind K_VMM): copies, the flush rule, PROT_NONE at the
 *                        first use after allocation, NIC access through the
 *                        registration.
 *   cuMemUnmap           the reservation's PROT_NONE placeholder back.
 *   cuMemAddressFree     the reservation gone.
 *   cuMemRelease         the allocation gone once its last mapping is.
 *
 * Misuse gets the answers the driver gave (CUDA 13.0, driver 580.159.04, on
 * an H200): sizes or addresses off the granularity, a mapping outside a
 * reservation or over another one, a copy before cuMemSetAccess, freeing a
 * reservation that is still mapped or not as reserved, a second release:
 * CUDA_ERROR_INVALID_VALUE; mapping part of an allocation (offset or size):
 * CUDA_ERROR_NOT_SUPPORTED; an unknown device: CUDA_ERROR_INVALID_DEVICE;
 * SYNC_MEMOPS on a mapping: CUDA_ERROR_NOT_SUPPORTED. Unmapping a reserved
 * range that holds no mapping succeeds, as there. Where the driver was
 * lenient the emulator is strict: it refuses a mapping that runs past its
 * reservation (the driver mapped one). Access other than READWRITE is not
 * emulated (CUDA_ERROR_NOT_SUPPORTED). IS_GPU_DIRECT_RDMA_CAPABLE reads the
 * allocation's gpuDirectRDMACapable flag, as the driver's does.
 */
#define GRAN ((size_t)2 << 20)

/* The layouts of cuda.h (CUDA 11+), as the driver reads them: sizes and
 * offsets printed against CUDA 13.0's header. */
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct { int type; int id; } CUmemLocation;
typedef struct {
	int type;                 /* CU_MEM_ALLOCATION_TYPE_PINNED = 1 */
	int requestedHandleTypes; /* NONE 0, POSIX_FILE_DESCRIPTOR 1, ... */
	CUmemLocation location;   /* CU_MEM_LOCATION_TYPE_DEVICE = 1, ordinal */
	void *win32HandleMetaData;
	struct {
		unsigned char compressionType;
		unsigned char gpuDirectRDMACapable;
		unsigned short usage;
		unsigned char reserved[4];
	} allocFlags;
} CUmemAllocationProp;
typedef struct {
	CUmemLocation location;
	int flags;                /* PROT_NONE 0, PROT_READ 1, PROT_READWRITE 3 */
} CUmemAccessDesc;
_Static_assert(sizeof(CUmemAllocationProp) == 32, "CUmemAllocationProp is 32 bytes");
_Static_assert(offsetof(CUmemAllocationProp, allocFlags) == 24, "allocFlags at 24");
_Static_assert(sizeof(CUmemAccessDesc) == 12, "CUmemAccessDesc is 12 bytes");

struct phys {
	struct phys *next;
	int dev;
	size_t size;
	int fd;
	char *b;                /* private alias */
	unsigned char *shadow;
	int rdma;               /* gpuDirectRDMACapable */
	int released;
	int maps;               /* live mappings */
};

struct resv {
	struct resv *next;
	uintptr_t addr;
	size_t size;
};

static struct phys *physs;
static struct resv *resvs;

static int vmm_rdma(const struct alloc *x) { return x->phys && x->phys->rdma; }

static int vmm_rdma_allowed(void) {
	const char *v = getenv("FAKE_CUDA_VMM_RDMA");
	return !(v && strcmp(v, "0") == 0);
}

static int off_gran(uintptr_t p, size_t n) { return p % GRAN != 0 || n == 0 || n % GRAN != 0; }

static struct phys *phys_find_locked(CUmemGenericAllocationHandle h) {
	for (struct phys *p = physs; p; p = p->next)
		if ((CUmemGenericAllocationHandle)(uintptr_t)p == h)
			return p;
	return NULL;
}

static void phys_free_locked(struct phys *p) {
	for (struct phys **pp = &physs; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	munmap(p->b, p->size);
	close(p->fd);
	free(p->shadow);
	free(p);
}

static struct resv *resv_covering_locked(uintptr_t a, size_t n) {
	for (struct resv *r = resvs; r; r = r->next)
		if (a >= r->addr && a - r->addr <= r->size && n <= r->size - (a - r->addr))
			return r;
	return NULL;
}

static int overlaps(uintptr_t a, size_t n, uintptr_t b, size_t m) { return a < b + m && b < a + n; }

CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop, int option) {
	if (!inited) return ERR_NOT_INITIALIZED;
	if (!g || !prop || (option != 0 && option != 1)) return ERR_INVALID_VALUE; /* MINIMUM 0, RECOMMENDED 1 */
	*g = GRAN;
	return OK;
}

#ifndef NO_VMM_SYMBOL
CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop, unsigned long long flags) {
	if (!inited) return ERR_NOT_INITIALIZED;
	if (!h || !prop || flags != 0 || prop->type != 1 || prop->location.type != 1) return ERR_INVALID_VALUE;
	if (prop->location.id < 0 || prop->location.id >= ndev()) return ERR_INVALID_DEVICE;
	if (prop->requestedHandleTypes & ~1) {
		snprintf(last_msg, sizeof last_msg, "the emulated GPU has no shareable handle type but POSIX_FILE_DESCRIPTOR (requested %#x)", prop->requestedHandleTypes);
		return ERR_NOT_SUPPORTED;
	}
	if (size == 0 || size % GRAN != 0) {
		say("cuMemCreate of %zu bytes: not a multiple of the %zu-byte granularity", size, GRAN);
		return ERR_INVALID_VALUE;
	}
	if (size > MEM_LIMIT) return ERR_OUT_OF_MEMORY;
	struct phys *p = calloc(1, sizeof *p);
	if (!p) return ERR_OUT_OF_MEMORY;
	p->dev = prop->location.id;
	p->size = size;
	p->rdma = prop->allocFlags.gpuDirectRDMACapable != 0;
	p->fd = memfd_create("gdr-emulated-gpu-vmm", MFD_CLOEXEC);
	if (p->fd < 0 || ftruncate(p->fd, (off_t)size) != 0)
		goto oom;
	p->b = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, p->fd, 0);
	if (p->b == MAP_FAILED)
		goto oom;
	p->shadow = calloc(1, size);
	if (!p->shadow) {
		munmap(p->b, size);
		goto oom;
	}
	pthread_mutex_lock(&mu);
	p->next = physs;
	physs = p;
	pthread_mutex_unlock(&mu);
	*h = (CUmemGenericAllocationHandle)(uintptr_t)p;
	return OK;
oom:
	if (p->fd >= 0)
		close(p->fd);
	free(p);
	return ERR_OUT_OF_MEMORY;
}
#endif

CUresult cuMemRelease(CUmemGenericAllocationHandle h) {
	pthread_mutex_lock(&mu);
	struct phys *p = phys_find_locked(h);
	if (!p || p->released) {
		pthread_mutex_unlock(&mu);
		say("cuMemRelease(0x%llx): not a live allocation handle", h);
		return ERR_INVALID_VALUE;
	}
	p->released = 1;
	if (p->maps == 0)
		phys_free_locked(p);
	pthread_mutex_unlock(&mu);
	return OK;
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t align, CUdeviceptr addr, unsigned long long flags) {
	(void)addr; /* a hint the driver may ignore; the emulator does */
	if (!inited) return ERR_NOT_INITIALIZED;
	if (!ptr || flags != 0 || size == 0 || size % GRAN != 0 || (align & (align - 1)) != 0)
		return ERR_INVALID_VALUE;
	size_t al = align > GRAN ? align : GRAN;
	char *m = mmap(NULL, size + al, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED) return ERR_OUT_OF_MEMORY;
	uintptr_t start = ((uintptr_t)m + al - 1) & ~(uintptr_t)(al - 1);
	if (start > (uintptr_t)m)
		munmap(m, start - (uintptr_t)m);
	size_t tail = (uintptr_t)m + size + al - (start + size);
	if (tail)
		munmap((void *)(start + size), tail);
	struct resv *r = calloc(1, sizeof *r);
	if (!r) {
		munmap((void *)start, size);
		return ERR_OUT_OF_MEMORY;
	}
	r->addr = start;
	r->size = size;
	pthread_mutex_lock(&mu);
	r->next = resvs;
	resvs = r;
	pthread_mutex_unlock(&mu);
	*ptr = (CUdeviceptr)start;
	return OK;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
	pthread_mutex_lock(&mu);
	for (struct resv **rp = &resvs; *rp; rp = &(*rp)->next) {
		struct resv *r = *rp;
		if (r->addr != (uintptr_t)ptr || r->size != size)
			continue;
		for (struct alloc *x = allocs; x; x = x->next)
			if (x->kind == K_VMM && overlaps(x->a, x->maplen, r->addr, r->size)) {
				pthread_mutex_unlock(&mu);
				say("cuMemAddressFree(0x%llx, %zu): 0x%lx is still mapped (cuMemUnmap first)", ptr, size, (unsigned long)x->a);
				return ERR_INVALID_VALUE;
			}
		*rp = r->next;
		munmap((void *)r->addr, r->size);
		free(r);
		pthread_mutex_unlock(&mu);
		return OK;
	}
	pthread_mutex_unlock(&mu);
	say("cuMemAddressFree(0x%llx, %zu): no reservation starts there with that size", ptr, size);
	return ERR_INVALID_VALUE;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle h, unsigned long long flags) {
	if (flags != 0 || off_gran((uintptr_t)ptr, size)) return ERR_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	CUresult r = OK;
	struct phys *p = NULL;
	if (!resv_covering_locked((uintptr_t)ptr, size)) {
		say("cuMemMap(0x%llx, %zu): not inside one reservation (cuMemAddressReserve)", ptr, size);
		r = ERR_INVALID_VALUE;
		goto out;
	}
	p = phys_find_locked(h);
	if (!p || p->released) {
		say("cuMemMap(0x%llx): 0x%llx is not a live allocation handle", ptr, h);
		r = ERR_INVALID_VALUE;
		goto out;
	}
	if (offset != 0 || size != p->size) {
		snprintf(last_msg, sizeof last_msg, "operation not supported (the driver maps whole allocations only: offset %zu, %zu of %zu bytes)", offset, size, p->size);
		r = ERR_NOT_SUPPORTED;
		goto out;
	}
	for (struct alloc *x = allocs; x; x = x->next)
		if (x->kind == K_VMM && overlaps(x->a, x->maplen, (uintptr_t)ptr, size)) {
			say("cuMemMap(0x%llx, %zu): 0x%lx is mapped already", ptr, size, (unsigned long)x->a);
			r = ERR_INVALID_VALUE;
			goto out;
		}
	struct alloc *x = calloc(1, sizeof *x);
	if (!x) {
		r = ERR_OUT_OF_MEMORY;
		goto out;
	}
	if (mmap((void *)(uintptr_t)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, p->fd, 0) == MAP_FAILED) {
		say("cuMemMap: mmap of the allocation at 0x%llx failed: %s", ptr, strerror(errno));
		free(x);
		r = ERR_OUT_OF_MEMORY;
		goto out;
	}
	x->kind = K_VMM;
	x->dev = p->dev;
	x->user = x->a = (uintptr_t)ptr;
	x->ulen = x->maplen = size;
	x->b = p->b;
	x->shadow = p->shadow;
	x->fd = -1;
	x->phys = p;
	p->maps++;
	x->next = allocs;
	allocs = x;
out:
	pthread_mutex_unlock(&mu);
	return r;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
	if (off_gran((uintptr_t)ptr, size)) return ERR_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	if (!resv_covering_locked((uintptr_t)ptr, size)) {
		pthread_mutex_unlock(&mu);
		say("cuMemUnmap(0x%llx, %zu): not inside one reservation", ptr, size);
		return ERR_INVALID_VALUE;
	}
	for (struct alloc *x = allocs; x; x = x->next)
		if (x->kind == K_VMM && overlaps(x->a, x->maplen, (uintptr_t)ptr, size) &&
		    (x->a < (uintptr_t)ptr || x->a + x->maplen > (uintptr_t)ptr + size)) {
			pthread_mutex_unlock(&mu);
			say("cuMemUnmap(0x%llx, %zu): cuts the mapping at 0x%lx (+%zu); whole mappings only", ptr, size, (unsigned long)x->a, x->maplen);
			return ERR_INVALID_VALUE;
		}
	for (struct alloc **pp = &allocs; *pp;) {
		struct alloc *x = *pp;
		if (x->kind != K_VMM || !overlaps(x->a, x->maplen, (uintptr_t)ptr, size)) {
			pp = &x->next;
			continue;
		}
		*pp = x->next;
		/* back to the reservation's placeholder */
		if (mmap((void *)x->a, x->maplen, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) == MAP_FAILED)
			say("cuMemUnmap: restoring the reservation at 0x%lx failed: %s", (unsigned long)x->a, strerror(errno));
		struct phys *p = x->phys;
		if (--p->maps == 0 && p->released)
			phys_free_locked(p);
		free(x);
	}
	pthread_mutex_unlock(&mu);
	return OK;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count) {
	if (!desc || count == 0 || off_gran((uintptr_t)ptr, size)) return ERR_INVALID_VALUE;
	for (size_t i = 0; i < count; i++) {
		if (desc[i].location.type != 1 || desc[i].location.id < 0 || desc[i].location.id >= ndev() ||
		    (desc[i].flags != 0 && desc[i].flags != 1 && desc[i].flags != 3))
			return ERR_INVALID_VALUE;
		if (desc[i].flags != 3) {
			snprintf(last_msg, sizeof last_msg, "the emulated GPU emulates READWRITE access only (flags %d)", desc[i].flags);
			return ERR_NOT_SUPPORTED;
		}
	}
	pthread_mutex_lock(&mu);
	/* every byte of the range must be mapped */
	for (uintptr_t q = (uintptr_t)ptr; q < (uintptr_t)ptr + size;) {
		struct alloc *m = NULL;
		for (struct alloc *x = allocs; x; x = x->next)
			if (x->kind == K_VMM && q >= x->a && q < x->a + x->maplen)
				m = x;
		if (!m) {
			pthread_mutex_unlock(&mu);
			say("cuMemSetAccess(0x%llx, %zu): 0x%lx is not mapped", ptr, size, (unsigned long)q);
			return ERR_INVALID_VALUE;
		}
		q = m->a + m->maplen;
	}
	for (struct alloc *x = allocs; x; x = x->next) {
		if (x->kind != K_VMM || x->accessible || !overlaps(x->a, x->maplen, (uintptr_t)ptr, size))
			continue;
		if (mprotect((void *)x->a, x->maplen, PROT_READ | PROT_WRITE) != 0) {
			pthread_mutex_unlock(&mu);
			say("cuMemSetAccess: mprotect of 0x%lx failed: %s", (unsigned long)x->a, strerror(errno));
			return ERR_UNKNOWN;
		}
		x->accessible = 1;
	}
	pthread_mutex_unlock(&mu);
	return OK;
}

/* ---- driver API ---- */

/* cuInit finds the devices through their files (see "device files"). */
CUresult cuInit(unsigned int f) {
	const char *v = getenv("FAKE_CUDA_INIT");
	char why[4200];
	(void)f;
	if (v && atoi(v) != 0)
		return atoi(v);
	if (!reachable("nvidiactl", why, sizeof why)) {
		say("cuInit: %s: the driver's control device is hidden from this process: CUDA_ERROR_NO_DEVICE, as the NVIDIA driver answers", why);
		return ERR_NO_DEVICE;
	}
	int n = 0;
	for (int i = 0; i < ndev_env(); i++) {
		char name[32];
		snprintf(name, sizeof name, "nvidia%d", i);
		if (reachable(name, why, sizeof why))
			visible[n++] = i;
		else
			say("cuInit: %s: GPU %d is hidden from this process and left out", why, i);
	}
	if (n == 0) {
		say("cuInit: every GPU's device file is hidden: CUDA_ERROR_NO_DEVICE, as the NVIDIA driver answers");
		return ERR_NO_DEVICE;
	}
	nvis = n;
	inited = 1;
	return OK;
}
CUresult cuDriverGetVersion(int *v) { *v = 12040; return OK; }
CUresult cuDeviceGetCount(int *n) { if (!inited) return ERR_NOT_INITIALIZED; *n = ndev(); return OK; }
CUresult cuDeviceGet(CUdevice *d, int i) { if (i < 0 || i >= ndev()) return ERR_INVALID_DEVICE; *d = i; return OK; }
CUresult cuDeviceGetName(char *s, int n, CUdevice d) {
	if (d < 0 || d >= ndev()) return ERR_INVALID_DEVICE;
	snprintf(s, (size_t)n, "GDR emulated GPU %d", phys(d));
	return OK;
}
/* Devices sit at fictional PCI addresses that no VM or test tree has. */
static int bus_of(CUdevice d) { return 0x3b + 0x10 * d; }
CUresult cuDeviceGetAttribute(int *v, int a, CUdevice d) {
	if (d < 0 || d >= ndev()) return ERR_INVALID_DEVICE;
	switch (a) {
	case 33: *v = bus_of(phys(d)); return OK; /* PCI_BUS_ID */
	case 34: *v = 0; return OK;              /* PCI_DEVICE_ID */
	case 50: *v = 0; return OK;              /* PCI_DOMAIN_ID */
	case 41: *v = 1; return OK;              /* UNIFIED_ADDRESSING */
	case 75: *v = 9; return OK;              /* compute capability 9.0 */
	case 76: *v = 0; return OK;
	case 102: *v = 1; return OK;             /* VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED */
	case 110: *v = vmm_rdma_allowed(); return OK; /* GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED: see "VMM" */
	case 116: *v = 1; return OK;             /* GPU_DIRECT_RDMA_SUPPORTED */
	case 117: *v = 1; return OK;             /* FLUSH_WRITES_OPTIONS: HOST */
	case 118: *v = 0; return OK;             /* WRITES_ORDERING NONE: reads need a flush */
	case 124: *v = 0; return OK;             /* DMA_BUF_SUPPORTED: not emulated */
	case 999: return ERR_INVALID_VALUE;      /* unit tests: an attribute that fails */
	}
	*v = 0;
	return OK;
}
CUresult cuDeviceGetPCIBusId(char *s, int n, CUdevice d) {
	if (d < 0 || d >= ndev()) return ERR_INVALID_DEVICE;
	snprintf(s, (size_t)n, "0000:%02X:00.0", bus_of(phys(d)));
	return OK;
}
CUresult cuDeviceTotalMem_v2(size_t *b, CUdevice d) { if (d < 0 || d >= ndev()) return ERR_INVALID_DEVICE; *b = MEM_LIMIT; return OK; }
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
	if (!inited) return ERR_NOT_INITIALIZED;
	if (d < 0 || d >= ndev()) return ERR_INVALID_DEVICE;
	*c = (CUcontext)(uintptr_t)(0x1000 + d);
	peer_retained(d);
	return OK;
}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
	if (d < 0 || d >= ndev()) return ERR_INVALID_DEVICE;
	peer_released(d);
	return OK;
}
CUresult cuCtxSetCurrent(CUcontext c) { current = c; return OK; }
CUresult cuCtxGetCurrent(CUcontext *c) { *c = current; return OK; }
CUresult cuCtxSynchronize(void) {
	if (need_ctx()) return ERR_INVALID_CONTEXT;
	pthread_mutex_lock(&mu);
	protect_fresh_locked("cuCtxSynchronize");
	pthread_mutex_unlock(&mu);
	return OK;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) { return dev_alloc(p, n, K_DEVICE); }
#ifndef OMIT_MANAGED
CUresult cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned int f) { (void)f; return dev_alloc(p, n, K_MANAGED); }
#endif
CUresult cuMemFree_v2(CUdeviceptr p) { return free_kind((uintptr_t)p, 0); }

CUresult cuMemHostAlloc(void **p, size_t n, unsigned int f) {
	long pg = sysconf(_SC_PAGESIZE);
	(void)f;
	if (!inited) return ERR_NOT_INITIALIZED;
	if (!p || n == 0) return ERR_INVALID_VALUE;
	struct alloc *x = calloc(1, sizeof *x);
	void *m = NULL;
	if (!x || posix_memalign(&m, pg, n) != 0) {
		free(x);
		return ERR_OUT_OF_MEMORY;
	}
	x->kind = K_HOST;
	x->dev = -1;
	x->a = x->user = (uintptr_t)m;
	x->ulen = x->maplen = n;
	x->fd = -1;
	pthread_mutex_lock(&mu);
	x->next = allocs;
	allocs = x;
	pthread_mutex_unlock(&mu);
	*p = m;
	return OK;
}
CUresult cuMemFreeHost(void *p) { return free_kind((uintptr_t)p, 1); }

/* copy_in writes n bytes at device address d from src through alias B (or
 * directly, for managed memory) and records them in the shadow. */
static CUresult copy_in(const char *op, CUdeviceptr d, const void *src, int v, size_t n) {
	if (need_ctx()) return ERR_INVALID_CONTEXT;
	pthread_mutex_lock(&mu);
	protect_fresh_locked(op);
	struct alloc *x = find_locked((uintptr_t)d, n);
	if (!x || !usable(x)) {
		if (x)
			say("%s of %zu bytes at 0x%llx: the mapping has no cuMemSetAccess yet", op, n, (unsigned long long)d);
		pthread_mutex_unlock(&mu);
		return ERR_INVALID_VALUE;
	}
	size_t off = (uintptr_t)d - x->a;
	if (x->kind == K_MANAGED) {
		if (src) memcpy((void *)(uintptr_t)d, src, n); else memset((void *)(uintptr_t)d, v, n);
	} else {
		if (src) memcpy(x->b + off, src, n); else memset(x->b + off, v, n);
		memcpy(x->shadow + off, x->b + off, n);
	}
	pthread_mutex_unlock(&mu);
	return OK;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) { return copy_in("cuMemcpyHtoD", d, s, 0, n); }
CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) { return copy_in("cuMemsetD8", d, NULL, v, n); }

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr s, size_t n) {
	if (need_ctx()) return ERR_INVALID_CONTEXT;
	pthread_mutex_lock(&mu);
	protect_fresh_locked("cuMemcpyDtoH");
	struct alloc *x = find_locked((uintptr_t)s, n);
	if (!x || !usable(x)) {
		if (x)
			say("cuMemcpyDtoH of %zu bytes at 0x%llx: the mapping has no cuMemSetAccess yet", n, (unsigned long long)s);
		pthread_mutex_unlock(&mu);
		return ERR_INVALID_VALUE;
	}
	size_t off = (uintptr_t)s - x->a;
	if (x->kind == K_MANAGED) {
		memcpy(dst, (void *)(uintptr_t)s, n);
		pthread_mutex_unlock(&mu);
		return OK;
	}
	if (memcmp(x->b + off, x->shadow + off, n) != 0) {
		size_t first = 0, count = 0;
		for (size_t i = 0; i < n; i++)
			if (x->b[off + i] != (char)x->shadow[off + i]) {
				if (!count) first = i;
				count++;
			}
		snprintf(last_msg, sizeof last_msg,
			 "emulated GPU: cuMemcpyDtoH of %zu bytes at 0x%llx would read %zu bytes (first at +%zu) that the NIC wrote after the last cuFlushGPUDirectRDMAWrites; "
			 "with writes ordering NONE the suite must call cuFlushGPUDirectRDMAWrites before reading RDMA-written GPU memory",
			 n, (unsigned long long)s, count, first);
		say("%s", last_msg);
		pthread_mutex_unlock(&mu);
		return ERR_UNKNOWN;
	}
	memcpy(dst, x->b + off, n);
	pthread_mutex_unlock(&mu);
	return OK;
}

/* cuFlushGPUDirectRDMAWrites(target CURRENT_CTX = 0, scope TO_OWNER = 100 or
 * TO_ALL_DEVICES = 200): what the NIC wrote becomes what the device sees. */
CUresult cuFlushGPUDirectRDMAWrites(int target, int scope) {
	if (target != 0 || (scope != 100 && scope != 200)) return ERR_INVALID_VALUE;
	if (need_ctx()) return ERR_INVALID_CONTEXT;
	pthread_mutex_lock(&mu);
	protect_fresh_locked("cuFlushGPUDirectRDMAWrites");
	for (struct alloc *x = allocs; x; x = x->next)
		if (is_dev(x) && (scope == 200 || x->dev == cur_dev()))
			memcpy(x->shadow, x->b, x->maplen);
	pthread_mutex_unlock(&mu);
	return OK;
}

CUresult cuPointerGetAttribute(void *v, int a, CUdeviceptr p) {
	pthread_mutex_lock(&mu);
	struct alloc *x = find_locked((uintptr_t)p, 0);
	CUresult r = OK;
	if (!x) {
		r = ERR_INVALID_VALUE; /* not CUDA memory */
	} else if (a == 2) {       /* MEMORY_TYPE: HOST 1, DEVICE 2 */
		*(unsigned *)v = x->kind == K_HOST ? 1 : 2;
	} else if (a == 8) {       /* IS_MANAGED */
		*(int *)v = x->kind == K_MANAGED;
	} else if (a == 6) {       /* SYNC_MEMOPS */
		*(int *)v = x->sync_memops;
	} else if (a == 15) {      /* IS_GPU_DIRECT_RDMA_CAPABLE (an int, as driver 580 writes it) */
		*(int *)v = x->kind == K_DEVICE || (x->kind == K_VMM && vmm_rdma(x));
	} else {
		r = ERR_INVALID_VALUE;
	}
	pthread_mutex_unlock(&mu);
	return r;
}
CUresult cuPointerSetAttribute(const void *v, int a, CUdeviceptr p) {
	pthread_mutex_lock(&mu);
	struct alloc *x = find_locked((uintptr_t)p, 0);
	CUresult r = OK;
	if (!x || x->kind == K_HOST || a != 6) {
		r = ERR_INVALID_VALUE;
	} else if (x->kind == K_VMM) {
		/* driver 580 refuses SYNC_MEMOPS on VMM memory */
		snprintf(last_msg, sizeof last_msg, "operation not supported");
		r = ERR_NOT_SUPPORTED;
	} else {
		x->sync_memops = *(const unsigned *)v != 0;
	}
	pthread_mutex_unlock(&mu);
	return r;
}

#ifndef NO_DMABUF_SYMBOL
/* ---- dma-buf export ----
 *
 * Not emulated by default: DMA_BUF_SUPPORTED reads 0 and every export
 * answers NOT_SUPPORTED, naming why (the lab kernel has no udmabuf and rxe
 * has no dma-buf MRs).
 *
 * The flags are judged first, as the driver does: the only one is
 * CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE (1, CUDA 12.8), the PCIe
 * (BAR1) mapping a GPU on NVLink-C2C is asked for when its NIC sits on a
 * PCIe path of its own (NCCL's gdrMode PCI). A PCIe GPU refuses it: the
 * H200 with driver 580.159.04 answers 801 NOT_SUPPORTED (measured), and so
 * does the emulator unless FAKE_CUDA_DMABUF_PCIE=1, which accepts it as a
 * C2C GPU's driver would. Any other bit is INVALID_VALUE.
 *
 * FAKE_CUDA_DMABUF=memfd makes an export answer with a duplicate of the
 * memory's memfd: not a dma-buf (nothing here can make one), so that unit
 * tests see which flags an export that succeeds carried. DMA_BUF_SUPPORTED
 * still reads 0, so the suite's own dma-buf checks keep reporting the path
 * absent in the lab. */
static int env_is(const char *name, const char *want) {
	const char *v = getenv(name);
	return v && strcmp(v, want) == 0;
}

CUresult cuMemGetHandleForAddressRange(void *h, CUdeviceptr p, size_t n, int type, unsigned long long f) {
	if (!inited) return ERR_NOT_INITIALIZED;
	if (!h || type != 1 || (f & ~1ULL) != 0) {
		snprintf(last_msg, sizeof last_msg, "invalid argument");
		return ERR_INVALID_VALUE;
	}
	if ((f & 1) && !env_is("FAKE_CUDA_DMABUF_PCIE", "1")) {
		snprintf(last_msg, sizeof last_msg, "operation not supported (the PCIe mapping type of a dma-buf: refused as the PCIe H200 refuses it; FAKE_CUDA_DMABUF_PCIE=1 accepts it)");
		say("cuMemGetHandleForAddressRange(0x%llx, %zu, flags 0x%llx): PCIe mapping type refused (801)", p, n, f);
		return ERR_NOT_SUPPORTED;
	}
	if (!env_is("FAKE_CUDA_DMABUF", "memfd")) {
		snprintf(last_msg, sizeof last_msg, "the emulated GPU cannot export dma-buf: the lab kernel has no udmabuf and rxe has no dma-buf MRs, so the dma-buf path is not proven by the lab");
		return ERR_NOT_SUPPORTED;
	}
	long pg = sysconf(_SC_PAGESIZE);
	pthread_mutex_lock(&mu);
	struct alloc *x = find_locked((uintptr_t)p, n);
	int fd = -1;
	if (x && is_dev(x) && n > 0 && p % (unsigned long)pg == 0 && n % (size_t)pg == 0)
		fd = dup(x->kind == K_VMM ? x->phys->fd : x->fd);
	pthread_mutex_unlock(&mu);
	if (fd < 0) {
		snprintf(last_msg, sizeof last_msg, "invalid argument");
		return ERR_INVALID_VALUE;
	}
	*(int *)h = fd;
	say("cuMemGetHandleForAddressRange(0x%llx, %zu, flags 0x%llx): memfd %d (FAKE_CUDA_DMABUF=memfd: not a dma-buf)", p, n, f, fd);
	return OK;
}
#endif

CUresult cuGetErrorName(CUresult r, const char **s) {
	if (peer_error_name(r, s)) return OK;
	switch (r) {
	case ERR_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; return OK;
	case ERR_OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; return OK;
	case ERR_NOT_INITIALIZED: *s = "CUDA_ERROR_NOT_INITIALIZED"; return OK;
	case ERR_NO_DEVICE: *s = "CUDA_ERROR_NO_DEVICE"; return OK;
	case ERR_INVALID_DEVICE: *s = "CUDA_ERROR_INVALID_DEVICE"; return OK;
	case ERR_INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; return OK;
	case ERR_NOT_SUPPORTED: *s = "CUDA_ERROR_NOT_SUPPORTED"; return OK;
	case ERR_UNKNOWN: *s = "CUDA_ERROR_UNKNOWN"; return OK;
	}
	*s = NULL;
	return ERR_INVALID_VALUE;
}
CUresult cuGetErrorString(CUresult r, const char **s) {
	if (peer_error_string(r, s)) return OK;
	switch (r) {
	case ERR_INVALID_VALUE: *s = "invalid argument"; return OK;
	case ERR_OUT_OF_MEMORY: *s = "out of memory"; return OK;
	case ERR_NOT_INITIALIZED: *s = "initialization error"; return OK;
	case ERR_NO_DEVICE: *s = "no CUDA-capable device is detected"; return OK;
	case ERR_INVALID_DEVICE: *s = "invalid device ordinal"; return OK;
	case ERR_INVALID_CONTEXT: *s = "invalid device context"; return OK;
	case ERR_NOT_SUPPORTED:
	case ERR_UNKNOWN: *s = last_msg[0] ? last_msg : "unknown error"; return OK;
	}
	*s = NULL;
	return ERR_INVALID_VALUE;
}
