package reqs

// Health around traffic (issue 10): counter deltas and the kernel log
// around the traffic and copy tests. The HLTH family crosses areas: each
// requirement's Area is the conformance package whose traffic it judges
// (the report finds its tests there), its prefix is HLTH everywhere.
func init() {
	register(
		Req{ID: "HLTH-01", Area: "pingpong", Title: "on every rail the pingpong tests drove: no error counter rose from the first traffic test to the end of the package: the NIC's port counters (symbol_error, link_downed, port_rcv_errors, ...) and hw_counters (out_of_sequence, packet_seq_err, local_ack_timeout_err, ...; rxe's own set, its emulation-timer retries warned), and PCIe AER of the GPU, the NIC and the bridges between them; each rise names counter, device, delta, usual cause and the tests it rose during; per-counter deltas and kernel log lines (Xid, mlx5, AER) reported"},
		Req{ID: "HLTH-02", Area: "gpu", Title: "on every GPU the copy tests drove: no PCIe AER error counter of the GPU, its rail's NIC or the bridges between (or above the GPU) rose during the host<->GPU and peer copy tests, nor an error counter of the rail NIC's ports; per-counter deltas and kernel log lines (Xid, AER) reported"},
	)
}
