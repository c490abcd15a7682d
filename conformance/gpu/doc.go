// Package gpu checks, with the gpu build tag, what GPUDirect RDMA asks of
// each GPU: the CUDA driver, compute capability, the GPUDirect RDMA and
// dma-buf attributes, the BAR1 aperture, dma-buf export, and pinned copy
// bandwidth against the PCIe link's theoretical rate (requirements GPU-01..).
//
//	go test -tags gpu ./conformance/gpu/
//	go test -tags gpu -run '^$' -bench . ./conformance/gpu/   # make bench
package gpu
