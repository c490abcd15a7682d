// Package gpumr is the engine of the GPU memory registration checks
// (MREG-01..05): opening the rail's NIC and GPU, registering GPU memory
// with the NIC through nvidia_peermem (plain ibv_reg_mr) or dma-buf
// (ibv_reg_dmabuf_mr), on each allocator (EachAlloc: cuMemAlloc, and
// cuMemCreate as NCCL allocates), each attempt's outcome with its cause and
// remedy, and the RDMA WRITE and READ that prove a registered path carries
// data. It tries and explains; conformance/memreg judges. What opens a
// device needs build tags gpu and rdma; the classification of outcomes
// builds without.
package gpumr
