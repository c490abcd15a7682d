package reqs

// The soak (conformance/soak): hours of traffic on every rail with the
// GPUs' copy engines busy, judged over time (internal/soak). It runs only
// when GDR_SOAK asks for it, so its requirements are OptIn: a run that did
// not ask leaves them out of the verdict instead of INCOMPLETE.
func init() {
	const soak = "GDR_SOAK"
	register(
		Req{ID: "SOAK-01", Area: "soak", OptIn: soak, Title: "soak: no rail below its floor longer than a window (dips counted and timed)"},
		Req{ID: "SOAK-02", Area: "soak", OptIn: soak, Title: "soak: error counter rates (per hour) under thresholds: port counters, RoCE retransmits and out-of-sequence, PCIe AER and replays of the GPU, the NIC and the switch ports between"},
		Req{ID: "SOAK-03", Area: "soak", OptIn: soak, Title: "soak: no link flap (link_downed rises, DOWN samples, link events)"},
		Req{ID: "SOAK-04", Area: "soak", OptIn: soak, Title: "soak: no BER rise beyond a factor over the run (mlxlink effective, symbol and raw BER)"},
		Req{ID: "SOAK-05", Area: "soak", OptIn: soak, Level: ReportOnly, Title: "soak: no GPU thermal or power throttling under the copy load (reported: the site's cooling decides)"},
		Req{ID: "SOAK-06", Area: "soak", OptIn: soak, Title: "soak: bandwidth stable (last quarter / first quarter ratio; worst window)"},
		Req{ID: "SOAK-07", Area: "soak", OptIn: soak, Title: "soak: no Xid or AER line in the kernel log during the soak"},
		Req{ID: "SOAK-08", Area: "soak", OptIn: "GDR_SOAK_FLAP", Title: "soak: link-flap guard: after a deliberate retrain the port recovers (opt-in, disruptive)"},
	)
	soakNode := ContainerRule{From: FromBoth, How: "verbs traffic and CUDA copies on what the pod was given, with the rail NICs' counters, the path's AER counters and the kernel log read from the node", Needs: []string{NeedNICs, NeedGPUs, NeedHostNetwork, NeedIPCLock, NeedHostRoot}}
	for _, id := range []string{"SOAK-01", "SOAK-02", "SOAK-03", "SOAK-06", "SOAK-07"} {
		containerRules[id] = soakNode
	}
	containerRules["SOAK-04"] = ContainerRule{From: FromBoth, How: "mlxlink (MFT) or mstlink (mstflint) on each rail NIC during the soak", Needs: []string{NeedNICs, NeedPrivileged}}
	containerRules["SOAK-05"] = ContainerRule{From: FromPod, How: "NVML clocks, temperature, power and clock event reasons of the pod's GPUs during the copy load", Needs: []string{NeedGPUs}}
	containerRules["SOAK-08"] = ContainerRule{From: FromBoth, How: "a deliberate port retrain (mlxlink) and the BER and bandwidth after it", Needs: []string{NeedNICs, NeedPrivileged, NeedHostNetwork}}
}
