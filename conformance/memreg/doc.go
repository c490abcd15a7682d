// Package memreg checks, with the gpu and rdma build tags, that the NIC can
// register GPU memory: the host-memory baseline, a negative control proving
// the buffer is device memory, the peermem path (ibv_reg_mr on GPU memory
// through nvidia_peermem) and the dma-buf path (ibv_reg_dmabuf_mr on an fd
// from cuMemGetHandleForAddressRange). Each path runs on cuMemAlloc memory
// and on cuMemCreate memory, the way NCCL allocates (subtests named by the
// allocator, gdr.gpu_alloc). Requirements MREG-01...
// The registration attempts and the data moved through them are
// harness/gpumr's; the tests here judge their outcomes.
//
//	go test -tags gpu,rdma ./conformance/memreg/
package memreg
