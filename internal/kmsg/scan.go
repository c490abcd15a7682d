package kmsg

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Severity of a matched line.
type Severity int

const (
	Warn  Severity = iota + 1 // worth reporting; does not by itself mean the run is bad
	Error                     // a fault on the GPU, the NIC or the PCIe path
)

func (s Severity) String() string {
	if s == Error {
		return "error"
	}
	return "warning"
}

// Match is a log record that matters, with what it is about.
type Match struct {
	Record
	Kind     string // xid, nvrm, mlx5-health, mlx5-cqe, mlx5-module, mlx5, aer, iommu-fault, kernel
	Severity Severity
	Device   string // PCI address or device named by the line, when it names one
	Meaning  string
}

func (m Match) String() string {
	dev := ""
	if m.Device != "" {
		dev = " " + m.Device
	}
	return fmt.Sprintf("%s %s%s: %s (%s)", m.Severity, m.Kind, dev, m.Text, m.Meaning)
}

// Sources of the patterns.
const (
	srcXid  = "NVIDIA Xid catalog (docs.nvidia.com/deploy/xid-errors)"
	srcAER  = "kernel drivers/pci/pcie/aer.c (the lines it prints)"
	srcMLX5 = "kernel drivers/net/ethernet/mellanox/mlx5/core (health.c, events.c) and drivers/infiniband/hw/mlx5/cq.c"
)

// xidMeaning is what the common Xids usually mean (NVIDIA's Xid catalog);
// others are reported with their number.
var xidMeaning = map[int]string{
	13:  "graphics engine exception (often the application, else driver or hardware)",
	31:  "GPU memory page fault (an illegal address, usually the application)",
	43:  "GPU stopped processing (usually the application)",
	45:  "preemptive cleanup after an earlier error",
	48:  "double-bit ECC error: uncorrectable GPU memory error",
	61:  "internal micro-controller breakpoint/warning",
	62:  "internal micro-controller halt",
	63:  "ECC page retirement or row remapping recorded: reset the GPU to apply",
	64:  "ECC page retirement or row remapping failed",
	74:  "NVLink error",
	79:  "GPU has fallen off the bus: PCIe link, power or thermal failure",
	92:  "high single-bit ECC error rate",
	94:  "contained ECC error",
	95:  "uncontained ECC error: reset the GPU",
	109: "context switch timeout",
	119: "GSP RPC timeout",
	120: "GSP error",
	154: "GPU recovery action changed (reset or reboot required)",
}

var (
	reXid      = regexp.MustCompile(`NVRM: Xid \((?:PCI:)?([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)\): (\d+)`)
	reFellOff  = regexp.MustCompile(`NVRM: GPU (?:at )?(?:PCI:)?([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)?.*(?:fallen off the bus|has failed to respond|RmInitAdapter failed)`)
	rePCIDev   = regexp.MustCompile(`^(\S+) ([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]): `) // "<driver> <bdf>: " prefix
	reAERRecv  = regexp.MustCompile(`AER: (?:Multiple )?(Corrected|Correctable|Uncorrected \(Non-Fatal\)|Uncorrectable \(Non-Fatal\)|Uncorrected \(Fatal\)|Uncorrectable \(Fatal\)) error (?:message )?received(?::| from) ([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}[.:][0-7])`)
	reAERBus   = regexp.MustCompile(`PCIe Bus Error: severity=(Corrected|Correctable|Uncorrected \(Non-Fatal\)|Uncorrectable \(Non-Fatal\)|Uncorrected \(Fatal\)|Uncorrectable \(Fatal\)), type=([^,]+)`)
	reDMAR     = regexp.MustCompile(`DMAR: \[DMA (?:Read|Write)[^\]]*\] Request device \[([0-9a-f:.]+)\]`)
	reAMDVi    = regexp.MustCompile(`(?:AMD-Vi|iommu).*IO_PAGE_FAULT.*device[= ]([0-9a-f:.]+)`)
	reSMMU     = regexp.MustCompile(`arm-smmu.*(?:Unhandled context fault|event 0x[0-9a-f]+ received)`)
	reMLX5Hlth = regexp.MustCompile(`(?i)health compromised|health recovery|poll_health|print_health_info|assert_var|synd 0x|internal error|fw fatal|firmware fatal|device's health`)
	reMLX5CQE  = regexp.MustCompile(`(?i)dump error cqe|cqe error|bad cqe|error cqe`)
	reMLX5Mod  = regexp.MustCompile(`Port module event(\[error\])?: module (\d+), (.*)`)
	reMLX5Pwr  = regexp.MustCompile(`(?i)insufficient power|power budget`)
	reMLX5Cmd  = regexp.MustCompile(`(?i)time ?out|cmd_work_handler|command failed|wait_func`)
	reKernel   = regexp.MustCompile(`^(BUG: |Oops|general protection fault|watchdog: BUG: soft lockup|INFO: task .* blocked for more than|Out of memory: Killed process|Kernel panic)`)
)

func aerSeverity(s string) (Severity, string) {
	switch {
	case strings.HasPrefix(s, "Correct"):
		return Warn, "corrected PCIe error (the link layer recovered; a rising rate means a marginal link)"
	case strings.Contains(s, "Fatal)") && !strings.Contains(s, "Non-Fatal"):
		return Error, "fatal uncorrectable PCIe error: the link is unreliable"
	}
	return Error, "uncorrectable PCIe error"
}

// Scan returns the records that matter, in order.
func Scan(recs []Record) []Match {
	var out []Match
	for _, r := range recs {
		if m, ok := match(r); ok {
			out = append(out, m)
		}
	}
	return out
}

func match(r Record) (Match, bool) {
	t := r.Text
	m := Match{Record: r, Severity: Error}
	var drv string
	if p := rePCIDev.FindStringSubmatch(t); p != nil {
		drv, m.Device = p[1], p[2]
	}
	switch {
	case reXid.MatchString(t):
		s := reXid.FindStringSubmatch(t)
		code, _ := strconv.Atoi(s[2])
		m.Kind, m.Device = "xid", strings.ToLower(s[1])
		m.Meaning = fmt.Sprintf("Xid %d: %s; %s", code, orDefault(xidMeaning[code], "see the Xid catalog"), srcXid)
	case strings.Contains(t, "NVRM:") && reFellOff.MatchString(t):
		s := reFellOff.FindStringSubmatch(t)
		m.Kind = "nvrm"
		if s[1] != "" {
			m.Device = strings.ToLower(s[1])
		}
		m.Meaning = "the NVIDIA driver lost the GPU (PCIe link, power or thermal)"
	case reAERRecv.MatchString(t):
		s := reAERRecv.FindStringSubmatch(t)
		m.Kind = "aer"
		m.Device = s[2]
		if m.Device[10] == ':' { // older kernels printed dddd:bb:dd:f
			m.Device = m.Device[:10] + "." + m.Device[11:]
		}
		m.Severity, m.Meaning = aerSeverity(s[1])
		m.Meaning += "; reported by root port " + orDefault(rePCIDevBDF(t), "?") + "; " + srcAER
	case reAERBus.MatchString(t):
		s := reAERBus.FindStringSubmatch(t)
		m.Kind = "aer"
		m.Severity, m.Meaning = aerSeverity(s[1])
		m.Meaning += fmt.Sprintf(" (%s); %s", s[2], srcAER)
	case reDMAR.MatchString(t) || reAMDVi.MatchString(t) || reSMMU.MatchString(t):
		m.Kind = "iommu-fault"
		if s := reDMAR.FindStringSubmatch(t); s != nil {
			m.Device = s[1]
		} else if s := reAMDVi.FindStringSubmatch(t); s != nil {
			m.Device = s[1]
		}
		m.Meaning = "the IOMMU blocked a DMA: peer-to-peer between GPU and NIC translated or not mapped (see TOPO-05, iommu=pt)"
	case isMLX5(drv, t):
		switch {
		case reMLX5Hlth.MatchString(t):
			m.Kind, m.Meaning = "mlx5-health", "the NIC firmware reported a health problem (syndrome, assert, recovery); "+srcMLX5
		case reMLX5CQE.MatchString(t):
			m.Kind, m.Meaning = "mlx5-cqe", "a completion with error was dumped (access error, retry exceeded, ...); "+srcMLX5
		case reMLX5Mod.MatchString(t):
			s := reMLX5Mod.FindStringSubmatch(t)
			m.Kind = "mlx5-module"
			if s[1] == "" && strings.Contains(s[3], "plugged") {
				m.Severity = Warn
			}
			m.Meaning = fmt.Sprintf("cable or transceiver module %s: %s", s[2], s[3])
		case reMLX5Pwr.MatchString(t):
			m.Kind, m.Severity, m.Meaning = "mlx5", Warn, "the PCIe slot does not give the NIC the power it needs"
		case reMLX5Cmd.MatchString(t) && r.Level <= 4:
			m.Kind, m.Meaning = "mlx5", "a firmware command failed or timed out"
		case r.Level <= 3:
			m.Kind, m.Severity, m.Meaning = "mlx5", Warn, "an mlx5 error message"
		default:
			return Match{}, false
		}
	case strings.Contains(t, "nvidia-peermem") && r.Level <= 4:
		m.Kind, m.Severity, m.Meaning = "peermem", Warn, "nvidia-peermem reported a problem (GPU memory registration for the NIC)"
	case reKernel.MatchString(t):
		m.Kind, m.Meaning = "kernel", "the kernel reported a bug, hang or out-of-memory kill"
	default:
		return Match{}, false
	}
	return m, true
}

func isMLX5(drv, t string) bool {
	return strings.HasPrefix(drv, "mlx5") || strings.HasPrefix(t, "mlx5_") || strings.Contains(t, "mlx5_core")
}

func rePCIDevBDF(t string) string {
	if p := rePCIDev.FindStringSubmatch(t); p != nil {
		return p[2]
	}
	return ""
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
