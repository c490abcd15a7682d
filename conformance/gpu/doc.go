// Package gpu checks, with the gpu build tag, what GPUDirect RDMA asks of
// each GPU: the CUDA driver, compute capability, the GPUDirect RDMA and
// dma-buf attributes, the BAR1 aperture, dma-buf export, and pinned copy
// bandwidth against the PCIe link's theoretical rate (requirements
// GPU-01..11); and, with two or more GPUs selected, every GPU copying at
// once and GPU<->GPU peer access and bandwidth (GPU-12..15). The copies are
// timed, and the links and shared uplinks found, by harness/gpucopy; the
// tests here hold the results to the requirements.
//
//	go test -tags gpu ./conformance/gpu/
//	go test -tags gpu -run '^$' -bench . ./conformance/gpu/   # make bench
package gpu
