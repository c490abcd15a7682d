package install

import (
	"strconv"
	"strings"

	"github.com/gdrconf/gdrconf/internal/nvdriver"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// SMIArgs are the nvidia-smi arguments JudgeSMI reads the output of.
var SMIArgs = []string{"--query-gpu=pci.bus_id,name,driver_version", "--format=csv,noheader"}

// SMIDirs are where driver packages put nvidia-smi outside PATH (the
// NVIDIA container toolkit: /usr/local/nvidia/bin).
var SMIDirs = []string{"/usr/bin", "/usr/local/nvidia/bin", "/opt/nvidia/bin"}

// NoSMI is INST-04's failure when the driver (version) is loaded but
// nvidia-smi is nowhere it looked; in a container the toolkit mounts it
// only for the utility capability.
func NoSMI(version string, looked []string, inPod bool) *verdict.Finding {
	remedy := "install the driver's utilities (Ubuntu: nvidia-utils-<ver>-server; RHEL: nvidia-driver-cuda)"
	if inPod {
		remedy = "in a container the NVIDIA container toolkit mounts nvidia-smi when NVIDIA_DRIVER_CAPABILITIES includes utility (set it to compute,utility, or all); on the host, " + remedy
	}
	return verdict.Failf(remedy, "NVIDIA driver %s is loaded but nvidia-smi is not installed (looked in %s)", version, strings.Join(looked, ", "))
}

// JudgeSMI is INST-04 on nvidia-smi's answer to SMIArgs: every GPU it
// lists reports the loaded kernel module's version (driver), and it lists
// as many GPUs as the PCI bus has bound to nvidia (gpus). A line it cannot
// read fails: the utilities are not the driver's.
func JudgeSMI(out, driver string, gpus []*pci.Device) Judged {
	var j Judged
	const reinstall = "upgrade or reinstall the NVIDIA driver utilities"
	n := 0
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) != 3 {
			j.add(verdict.Failf(reinstall, "nvidia-smi printed %q, want \"<bus id>, <name>, <driver version>\"", line))
			return j
		}
		id, err := pci.NormalizeAddr(f[0])
		if err != nil {
			j.add(verdict.Failf(reinstall, "nvidia-smi: %v", err))
			return j
		}
		ver := strings.TrimSpace(f[2])
		if !nvdriver.SameVersion(ver, driver) {
			v := verdict.Failf("reboot, or install one driver version for kernel module and utilities", "nvidia-smi reports driver %s for GPU %s but the loaded kernel module is %s", ver, id, driver)
			v.Device = id
			j.add(v)
		}
		j.info("nvidia-smi: %s %s driver %s", id, strings.TrimSpace(f[1]), ver)
		n++
	}
	j.attr("gpu_count", strconv.Itoa(n))
	bound := 0
	for _, g := range gpus {
		if g.Driver == "nvidia" {
			bound++
		}
	}
	if n != bound {
		j.add(verdict.Failf("check dmesg for NVRM/Xid errors and nvidia-smi -q", "nvidia-smi lists %d GPU(s) but %d PCI GPU(s) are bound to the nvidia driver", n, bound))
	}
	return j
}

// SMIFailed is INST-04's failure when nvidia-smi ran and failed with err,
// printing out: its own message names the cause (a driver/library
// mismatch, no devices), so the remedy points at it.
func SMIFailed(err error, out string) *verdict.Finding {
	return verdict.Failf("follow nvidia-smi's message (driver/library version mismatch: reboot or reinstall; no devices: check dmesg for NVRM/Xid)",
		"%v:\n%s", err, FirstLines(out, 20))
}
