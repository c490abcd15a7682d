// mgpu-compare: the multi-GPU figures of GPU-12..15 measured with the CUDA
// runtime instead of the suite, as a cross-check in the same session.
// Host code only (no kernels); build and run on the GPU host:
//
//   nvcc -O2 -o mgpu-compare mgpu-compare.cu && ./mgpu-compare
//
// Prints one line per figure ("key value ..."):
//   h2d_solo <gpu> <GB/s>        best of 5 pinned 256 MiB copies, one GPU alone
//   h2d_together <gpu> <GB/s>    20 copies on every GPU at once, each GPU's own rate
//   h2d_aggregate <GB/s>         the sum of the together rates   (d2h_* the same)
//   p2p <src> <dst> <GB/s>       best of 5 batches of 8 x 256 MiB cudaMemcpyPeerAsync
//   p2p_bidir <a> <b> <GB/s>     8 copies each way at once, both together (host clock)
// Pinned buffers come from cudaHostAlloc on the calling thread (no NUMA
// placement, unlike the suite); rates are 10^9 bytes per second.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
	fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)

enum { MAXG = 16, REPS = 5, BATCH = 8, TOGETHER = 20 };
static const size_t N = (size_t)256 << 20;

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }

// timed runs k copies on s between events and returns GB/s.
static double timed(int dev, cudaStream_t s, void *dst, const void *src, int peerDst, int peerSrc, int k, cudaMemcpyKind kind) {
	cudaEvent_t a, b;
	float ms;
	CK(cudaSetDevice(dev));
	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));
	CK(cudaEventRecord(a, s));
	for (int i = 0; i < k; i++) {
		if (peerDst >= 0) CK(cudaMemcpyPeerAsync(dst, peerDst, src, peerSrc, N, s));
		else CK(cudaMemcpyAsync(dst, src, N, kind, s));
	}
	CK(cudaEventRecord(b, s));
	CK(cudaEventSynchronize(b));
	CK(cudaEventElapsedTime(&ms, a, b));
	CK(cudaEventDestroy(a));
	CK(cudaEventDestroy(b));
	return (double)N * k / (ms / 1e3) / 1e9;
}

int main(void) {
	int n, drv, rt;
	char bus[MAXG][32];
	void *dev[MAXG], *dev2[MAXG], *host[MAXG];
	cudaStream_t st[MAXG];
	CK(cudaGetDeviceCount(&n));
	CK(cudaDriverGetVersion(&drv));
	CK(cudaRuntimeGetVersion(&rt));
	if (n > MAXG) n = MAXG;
	printf("gpus %d driver %d runtime %d\n", n, drv, rt);
	for (int i = 0; i < n; i++) {
		CK(cudaDeviceGetPCIBusId(bus[i], sizeof bus[i], i));
		CK(cudaSetDevice(i));
		CK(cudaMalloc(&dev[i], N));
		CK(cudaMalloc(&dev2[i], N));
		CK(cudaHostAlloc(&host[i], N, cudaHostAllocPortable));
		CK(cudaStreamCreateWithFlags(&st[i], cudaStreamNonBlocking));
		printf("gpu %d %s\n", i, bus[i]);
	}
	for (int d = 0; d < 2; d++) {
		const char *name = d ? "d2h" : "h2d";
		cudaMemcpyKind kind = d ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice;
		for (int i = 0; i < n; i++) {
			double best = 0;
			for (int r = 0; r <= REPS; r++) { // the first is a warm-up
				double v = timed(i, st[i], d ? host[i] : dev[i], d ? dev[i] : host[i], -1, -1, 1, kind);
				if (r > 0 && v > best) best = v;
			}
			printf("%s_solo %s %.2f\n", name, bus[i], best);
		}
		// Together: queue every GPU's copies first, then time each GPU.
		cudaEvent_t a[MAXG], b[MAXG];
		double sum = 0;
		for (int i = 0; i < n; i++) {
			CK(cudaSetDevice(i));
			CK(cudaEventCreate(&a[i]));
			CK(cudaEventCreate(&b[i]));
			CK(cudaEventRecord(a[i], st[i]));
			for (int k = 0; k < TOGETHER; k++)
				CK(cudaMemcpyAsync(d ? host[i] : dev[i], d ? dev[i] : host[i], N, kind, st[i]));
			CK(cudaEventRecord(b[i], st[i]));
		}
		for (int i = 0; i < n; i++) {
			float ms;
			CK(cudaSetDevice(i));
			CK(cudaEventSynchronize(b[i]));
			CK(cudaEventElapsedTime(&ms, a[i], b[i]));
			double v = (double)N * TOGETHER / (ms / 1e3) / 1e9;
			sum += v;
			printf("%s_together %s %.2f\n", name, bus[i], v);
		}
		printf("%s_aggregate %.2f\n", name, sum);
	}
	for (int i = 0; i < n; i++)
		for (int j = 0; j < n; j++) {
			int ok = 0;
			if (i == j) continue;
			CK(cudaDeviceCanAccessPeer(&ok, i, j));
			if (!ok) { printf("p2p %s %s no_peer_access\n", bus[i], bus[j]); continue; }
			CK(cudaSetDevice(i));
			cudaError_t e = cudaDeviceEnablePeerAccess(j, 0);
			if (e == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
			else CK(e);
		}
	for (int i = 0; i < n; i++)
		for (int j = 0; j < n; j++) {
			int ok = 0;
			if (i == j) continue;
			CK(cudaDeviceCanAccessPeer(&ok, i, j));
			if (!ok) continue;
			double best = 0;
			for (int r = 0; r <= REPS; r++) {
				double v = timed(i, st[i], dev2[j], dev[i], j, i, r ? BATCH : 1, cudaMemcpyDefault);
				if (r > 0 && v > best) best = v;
			}
			printf("p2p %s %s %.2f\n", bus[i], bus[j], best);
		}
	for (int i = 0; i < n; i++)
		for (int j = i + 1; j < n; j++) {
			int ok1 = 0, ok2 = 0;
			CK(cudaDeviceCanAccessPeer(&ok1, i, j));
			CK(cudaDeviceCanAccessPeer(&ok2, j, i));
			if (!ok1 || !ok2) continue;
			double t0 = now();
			for (int k = 0; k < BATCH; k++) {
				CK(cudaSetDevice(i));
				CK(cudaMemcpyPeerAsync(dev2[j], j, dev[i], i, N, st[i]));
				CK(cudaSetDevice(j));
				CK(cudaMemcpyPeerAsync(dev2[i], i, dev[j], j, N, st[j]));
			}
			CK(cudaSetDevice(i));
			CK(cudaStreamSynchronize(st[i]));
			CK(cudaSetDevice(j));
			CK(cudaStreamSynchronize(st[j]));
			printf("p2p_bidir %s %s %.2f\n", bus[i], bus[j], 2.0 * BATCH * N / (now() - t0) / 1e9);
		}
	return 0;
}
