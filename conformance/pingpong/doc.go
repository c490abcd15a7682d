// Package pingpong (build tag rdma) moves data over RC queue pairs and checks
// it: loopback on one host (two QPs on one device in one process) when
// GDR_ROLE is unset, or between two hosts running the identical command with
// GDR_ROLE=server / GDR_ROLE=client GDR_PEER=<server>. Every test opens its
// own out-of-band session (harness/oob) keyed by the test name, so the hosts
// agree to run or skip each test with the same reason.
//
// The buffers come from newBuffer (mem_host.go: host memory; with the gpu tag
// harness/cuda provides GPU memory), so the same tests qualify GPUDirect RDMA.
// The checks themselves (data verification, latency, bandwidth, all rails
// at once, host vs GPU memory) are harness/traffic's engines; the tests here
// state the requirement, run an engine and record its verdict.
package pingpong
