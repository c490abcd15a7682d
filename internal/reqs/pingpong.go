package reqs

func init() {
	register(
		Req{ID: "PP-01", Area: "pingpong", Title: "on every rail: an RDMA device with an ACTIVE port is present and opens through libibverbs; port, GID (type, netdev) and rate reported", EmulatedMust: true},
		Req{ID: "PP-02", Area: "pingpong", Title: "on every rail: an RC queue pair goes RESET -> INIT -> RTR -> RTS on both ends and carries a message", EmulatedMust: true},
		Req{ID: "PP-03", Area: "pingpong", Title: "on every rail: RDMA WRITE delivers every byte intact (fresh pattern per iteration, compared at the target)", EmulatedMust: true},
		Req{ID: "PP-04", Area: "pingpong", Title: "on every rail: RDMA WRITE_WITH_IMM delivers the data and the immediate value with a RECV_RDMA_WITH_IMM completion; gpu builds: again on cuMemCreate memory (NCCL's allocator) where GPU-05 allows", EmulatedMust: true},
		Req{ID: "PP-05", Area: "pingpong", Title: "on every rail: RDMA READ fetches the peer's data intact; gpu builds: again on cuMemCreate memory (NCCL's allocator) where GPU-05 allows", EmulatedMust: true},
		Req{ID: "PP-06", Area: "pingpong", Title: "on every rail: SEND/RECV delivers the message intact with the right length", EmulatedMust: true},
		Req{ID: "PP-07", Area: "pingpong", Title: "on every rail: small RDMA WRITE latency p50/p99/p99.9 (ib_write_lat method); p50 within GDR_MAX_LAT_US, or on hardware NICs the ceiling of the memory kind measured: 2.5 us host memory (ngc_multinode_perf), 3.5 us GPU memory (provisional) (p99 twice, p99.9 four times that from 10000 iterations); software devices exempt", EmulatedMust: true},
		Req{ID: "PP-08", Area: "pingpong", Title: "on every rail: RDMA WRITE/READ bandwidth over GDR_BW_SIZES (ib_write_bw method) and bidirectional WRITE; on hardware NICs every size >= its floor: 0.6 from 4 KiB, 0.8 from 16 KiB, 0.9 from 64 KiB (ngc_multinode_perf) of the bottleneck of the point's streams over the port's payload share (headers and framing at the path MTU, and the line code) and each PCIe link per direction (loopback bidirectional: min(port, one direction of the NIC link); two hosts bidirectional: twice min(port, links)), for READ also of the outstanding reads per measured round trip; GDR_MIN_BW_GBPS replaces them at the largest size", EmulatedMust: true},
		Req{ID: "PP-10", Area: "pingpong", Title: "RDMA WRITE bandwidth (largest GDR_BW_SIZES) on all rails at once: per-rail and aggregate Gb/s; on hardware NICs each rail keeps >= 80% of its PP-08 rate alone (rails sharing a root port are named)", MultiRail: true},
		Req{ID: "PP-09", Area: "pingpong", Title: "gpu builds: on one (NIC, peer) pair, RDMA WRITE data, bandwidth (largest GDR_BW_SIZES) and 2-byte latency on host then GPU memory; GPU data verified by a device-to-host copy; both reported side by side with GPU/host ratios (reported, not judged)", Level: ReportOnly, GPUOnly: true, EmulatedMust: true},
	)
}
