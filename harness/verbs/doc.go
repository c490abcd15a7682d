// Package verbs is the RDMA verbs harness: devices, protection domains,
// completion queues, RC queue pairs, memory regions (plain and dma-buf),
// posting and batched polling. The verbs themselves need build tag rdma
// (cgo and rdma-core's headers); libibverbs.so.1 is opened at run time, so a
// host without rdma-core gets a clear absence instead of a loader error.
// The sysfs readers (GID types and netdevs, software devices) need no tag.
package verbs
