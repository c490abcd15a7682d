package soak

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gdrconf/gdrconf/internal/counters"
	"github.com/gdrconf/gdrconf/internal/optics"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// The soak requirements the judges judge (internal/reqs registers them).
const (
	ReqDip      = "SOAK-01"
	ReqRates    = "SOAK-02"
	ReqFlap     = "SOAK-03"
	ReqBER      = "SOAK-04"
	ReqThrottle = "SOAK-05"
	ReqStable   = "SOAK-06"
	ReqKernel   = "SOAK-07"
	ReqRecovery = "SOAK-08"
)

// Thresholds are the bounds the judges hold a series to; each field's
// source is the Src constant its comment names, which the findings carry.
type Thresholds struct {
	// MaxDip is how long a rail may stay below its floor (SOAK-01, SrcDip).
	MaxDip time.Duration
	// MaxSymbolErrorsPerHour bounds a port's symbol_error rate (SOAK-02,
	// SrcSymbolRate).
	MaxSymbolErrorsPerHour float64
	// MaxErrorsPerHour bounds every other error counter of the table
	// (internal/counters, kind error) on the rail's NIC, GPU and the PCIe
	// functions between them (SOAK-02, SrcErrorRate).
	MaxErrorsPerHour float64
	// MaxCorrectedPerHour bounds corrected errors (PCIe replays, receiver
	// errors: counters kind corrected), at CorrectedLevel (SOAK-02,
	// SrcCorrectedRate).
	MaxCorrectedPerHour float64
	CorrectedLevel      verdict.Level
	// MaxFlaps is how many times a link may go down (SOAK-03, SrcFlap).
	MaxFlaps int
	// MaxEffectiveBER bounds mlxlink's effective (post-FEC) and symbol BER,
	// MaxRawBER its raw (pre-FEC) BER, at any reading (SOAK-04,
	// optics.SrcIBBER, optics.SrcPAM4).
	MaxEffectiveBER, MaxRawBER float64
	// MaxBERRise bounds any BER's rise over the run, as the ratio of a
	// reading to the run's first (SOAK-04, SrcBERRise); readings below
	// BERRiseFloor count as BERRiseFloor (SrcBERRiseFloor).
	MaxBERRise, BERRiseFloor float64
	// ThrottleMask are NVML's clock event reasons that are thermal or power
	// throttling, reported at ThrottleLevel (SOAK-05, SrcThrottle).
	ThrottleMask  uint64
	ThrottleLevel verdict.Level
	// MinStableRatio bounds the ratio of a rail's mean rate in the run's
	// last quarter to its first (SOAK-06, SrcStable); StableWindow is the
	// span of the worst window reported beside it.
	MinStableRatio float64
	StableWindow   time.Duration
	// StableSource is where MinStableRatio comes from when not SrcStable
	// (GDR_SOAK_STABLE_FRACTION).
	StableSource string
	// MaxRecovery is how long a deliberately retrained port may take to be
	// ACTIVE again, MinRecoveryRatio the rate it keeps after it against
	// before (SOAK-08, SrcRecovery).
	MaxRecovery      time.Duration
	MinRecoveryRatio float64
	// RecoverySource is where MinRecoveryRatio comes from when not
	// SrcRecovery (GDR_SOAK_RECOVERY_FRACTION).
	RecoverySource string
}

// Sources of the thresholds, in words (verdict.Finding.Source).
const (
	SrcDip = "the suite's choice: two sampling intervals at the default GDR_SOAK_INTERVAL (10 s); a shorter dip is counted and timed, not failed (the floor is the rail's own, Rail.FloorSource)"
	// NVSentinel docs/nic-health-monitor/link-counter-detection.md, 2.4.2
	// "The 10E-12 BER Threshold": "Maximum allowable symbol error rate is
	// 120 errors per hour" (IBTA, via Oracle's "Determine Which Links Are
	// Experiencing Significant Errors").
	SrcSymbolRate    = "IBTA: at most 120 symbol errors per hour on a link at BER 1E-12 (NVIDIA NVSentinel, NIC health monitor: link counter detection, 'The 10E-12 BER Threshold')"
	SrcErrorRate     = "the suite's counter table (internal/counters, kind error): a healthy link, lossless fabric and PCIe path show none under load; NVSentinel treats link_downed, local_link_integrity_errors, excessive_buffer_overrun_errors and rnr_nak_retry_err as fatal at any rise"
	SrcCorrectedRate = "the suite's counter table (internal/counters, kind corrected): recovered by the hardware, no data lost, but a healthy PCIe link replays nothing under load; reported, not failed"
	// NVSentinel link-counter-detection.md, Appendix A: link_downed
	// "Delta > 0" is fatal (REPLACE_VM).
	SrcFlap = "IBTA PortCounters LinkDownedCounter; NVSentinel treats any rise of link_downed as fatal (link counter detection, Appendix A)"
	// sonic-mgmt PR 26555 (docs, transceiver system test plan, "Pre-FEC
	// BER guard after link flap"): a link back up after a flap whose
	// pre-FEC BER degraded "by roughly an order of magnitude (e.g. ~1E-10
	// -> ~1E-8)" passes every other check.
	SrcBERRise      = "sonic-mgmt Pre-FEC BER guard after link flap (transceiver system test plan): a link back up whose BER rose by an order of magnitude (1E-10 to 1E-8) passes every other check"
	SrcBERRiseFloor = "the suite's choice: readings below 1E-14, two decades under the InfiniBand post-FEC ceiling 1E-12, count as 1E-14, so a link that saw no error at first (mlxlink prints 15E-255) is not failed for its first corrected bit"
	// nvml.h (go-nvml v0.13.4-1 pkg/nvml/nvml.h): nvmlClocksEventReason*
	// bits: SwPowerCap 0x4, HwSlowdown 0x8, SwThermalSlowdown 0x20,
	// HwThermalSlowdown 0x40, HwPowerBrakeSlowdown 0x80; the others (idle,
	// application clocks, sync boost, display clock) are not throttling.
	SrcThrottle = "NVML clock event reasons (nvml.h, nvmlDeviceGetCurrentClocksEventReasons): SW power cap, HW slowdown, SW thermal, HW thermal and HW power brake slowdown; report-only: the site's cooling and power budget decide"
	// harness/traffic.ConcurrentFraction: PP-10's "keeps >= 80% of its
	// rate alone", the suite's measure of a rail keeping its rate.
	SrcStable   = "the suite's PP-10 fraction: a rail keeps at least 0.8 of its rate (harness/traffic ConcurrentFraction)"
	SrcRecovery = "the suite's choice: InfiniBand and Ethernet link training takes seconds; a port not ACTIVE within a minute holds up every job on the rail; after it the rail keeps 0.8 of its rate (PP-10's fraction) and its BER (SOAK-04's factor)"
)

// The NVML clock event reasons (nvml.h) the throttle judge names.
const (
	ClocksSwPowerCap       uint64 = 0x4
	ClocksHwSlowdown       uint64 = 0x8
	ClocksSwThermal        uint64 = 0x20
	ClocksHwThermal        uint64 = 0x40
	ClocksHwPowerBrake     uint64 = 0x80
	ThrottleThermalOrPower        = ClocksSwPowerCap | ClocksHwSlowdown | ClocksSwThermal | ClocksHwThermal | ClocksHwPowerBrake
)

var reasonNames = []struct {
	bit  uint64
	name string
}{
	{ClocksSwPowerCap, "SW power cap"}, {ClocksHwSlowdown, "HW slowdown"}, {ClocksSwThermal, "SW thermal slowdown"},
	{ClocksHwThermal, "HW thermal slowdown"}, {ClocksHwPowerBrake, "HW power brake slowdown"},
}

// DefaultThresholds are the cited defaults.
func DefaultThresholds() Thresholds {
	return Thresholds{
		MaxDip:                 20 * time.Second,
		MaxSymbolErrorsPerHour: 120,
		MaxErrorsPerHour:       0,
		MaxCorrectedPerHour:    0,
		CorrectedLevel:         verdict.Warn,
		MaxFlaps:               0,
		MaxEffectiveBER:        optics.MaxEffectiveBER,
		MaxRawBER:              optics.MaxRawBER,
		MaxBERRise:             10,
		BERRiseFloor:           1e-14,
		ThrottleMask:           ThrottleThermalOrPower,
		ThrottleLevel:          verdict.Warn,
		MinStableRatio:         0.8,
		StableWindow:           time.Minute,
		MaxRecovery:            time.Minute,
		MinRecoveryRatio:       0.8,
	}
}

// Result is one requirement's judgement of one part over the run: the
// values it measured and their bounds (Attrs: the keys its findings'
// Measured and Threshold name, and the facts beside them), and what it
// found. No finding of level fail: the part passed.
type Result struct {
	Req string
	// Device is the part judged: a rail's RDMA device, a GPU's PCI
	// address; "" for the host.
	Device   string
	Attrs    []verdict.Attr
	Findings []verdict.Finding
}

// Failed says whether r holds a finding at level fail: fell short, not
// judged, or absent (which skips a test, or fails it under GDR_STRICT=1).
func (r Result) Failed() bool {
	for _, f := range r.Findings {
		if f.Level == verdict.Fail {
			return true
		}
	}
	return false
}

func (r *Result) attr(key, value string) {
	r.Attrs = append(r.Attrs, verdict.Attr{Key: "gdr." + key, Value: value})
}

// num writes a float the way testenv.Attr does (3 decimals).
func (r *Result) num(key string, v float64) { r.attr(key, strconv.FormatFloat(v, 'f', 3, 64)) }

func (r *Result) count(key string, n int) { r.attr(key, strconv.Itoa(n)) }

// ber writes a bit error ratio in E notation (3 decimals would read 0).
func (r *Result) ber(key string, v float64) { r.attr(key, strconv.FormatFloat(v, 'e', 2, 64)) }

func (r *Result) add(f verdict.Finding) {
	f.Req = r.Req
	if f.Device == "" {
		f.Device = r.Device
	}
	r.Findings = append(r.Findings, f)
}

// Judge judges s: every finding's Req is its SOAK-NN requirement; a
// requirement with nothing wrong has no finding (beyond an Info note when
// the run was cut), one that could not be judged (nothing measured to
// judge it by) has a finding whose Outcome says so.
func Judge(s *Series, th Thresholds) []verdict.Finding {
	var out []verdict.Finding
	for _, r := range JudgeAll(s, th) {
		out = append(out, r.Findings...)
	}
	return out
}

// JudgeAll is every requirement's results over s, SOAK-01 to SOAK-07 in
// order (SOAK-08 needs a retrain: JudgeRecovery).
func JudgeAll(s *Series, th Thresholds) []Result {
	var out []Result
	for _, j := range []func(*Series, Thresholds) []Result{JudgeDips, JudgeRates, JudgeFlaps, JudgeBER, JudgeThrottle, JudgeStable, JudgeKernel} {
		out = append(out, j(s, th)...)
	}
	return out
}

// nothing is req's result for a series with no sample: not judged.
func nothing(s *Series, req string) []Result {
	if s != nil && len(s.Samples) > 0 {
		return nil
	}
	r := Result{Req: req}
	why := "no soak series"
	if s != nil {
		why = fmt.Sprintf("the soak on %s recorded no sample", orHost(s.Host))
		if s.Cut != "" {
			why += fmt.Sprintf(" (cut: %s)", s.Cut)
		}
	}
	r.add(*verdict.NotJudgedf("", "%s: nothing to judge", why))
	return []Result{r}
}

func orHost(h string) string {
	if h == "" {
		return "this host"
	}
	return h
}

// finish adds the cut run's note to rs: every finding's cause says the run
// was judged on what it measured, and a result with no finding says it in
// an Info finding.
func finish(s *Series, rs []Result) []Result {
	if s.Cut == "" {
		return rs
	}
	note := fmt.Sprintf("judged on the %s the run measured of %s planned: it was cut (%s)", s.Duration().Round(time.Second), s.Planned, s.Cut)
	for i := range rs {
		if len(rs[i].Findings) == 0 {
			rs[i].add(verdict.Finding{Level: verdict.Info, Cause: note})
			continue
		}
		for j := range rs[i].Findings {
			rs[i].Findings[j].Cause += "; " + note
		}
	}
	return rs
}

// since is t as the findings say it: "00:41:10 into the run (01:41:10
// UTC)".
func (s *Series) since(t time.Time) string {
	return fmt.Sprintf("%s into the run (%s UTC)", s.elapsed(t), t.UTC().Format("15:04:05"))
}

// elapsed is hh:mm:ss since the run's start.
func (s *Series) elapsed(t time.Time) string {
	d := t.Sub(s.Start)
	sign := ""
	if d < 0 {
		sign, d = "-", -d
	}
	d = d.Truncate(time.Second) // as the wall clock beside it reads
	return fmt.Sprintf("%s%02d:%02d:%02d", sign, int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60)
}

// span is sample i's interval: from the previous sample (or the start) to
// its own time.
func (s *Series) span(i int) time.Duration {
	prev := s.Start
	if i > 0 {
		prev = s.Samples[i-1].At
	}
	if d := s.Samples[i].At.Sub(prev); d > 0 {
		return d
	}
	return 0
}

// railName is "rail 0 mlx5_0 port 1 (GPU 0000:1b:00.0)".
func railName(r Rail) string {
	n := fmt.Sprintf("rail %d %s port %d", r.Index, r.Device, r.Port)
	if r.GPU != "" {
		n += " (GPU " + r.GPU + ")"
	}
	if r.Peer != "" {
		n += " to " + r.Peer
	}
	return n
}

// railLine is sample i of rail ri as evidence: "00:40:50 312.4 Gbit/s
// ACTIVE"; "-" for a rate not measured, "?" for a state not read.
func (s *Series) railLine(ri, i int) string {
	x := s.Samples[i].Rails[ri]
	bw := "-"
	if x.Gbps != nil {
		bw = gbit(*x.Gbps)
	}
	st := x.State
	if st == "" {
		st = "?"
	}
	return fmt.Sprintf("%s %s %s", s.elapsed(s.Samples[i].At), bw, st)
}

// around is the indexes of the samples from i-before to j+after, within
// the series.
func (s *Series) around(i, j, before, after int) []int {
	var out []int
	for k := max(0, i-before); k <= min(len(s.Samples)-1, j+after); k++ {
		out = append(out, k)
	}
	return out
}

// railEvidence is the samples around i..j of rail ri, as lines.
func (s *Series) railEvidence(ri, i, j int) []string {
	var out []string
	for _, k := range s.around(i, j, 2, 2) {
		out = append(out, s.railLine(ri, k))
	}
	return out
}

// unread is why source was not read, "" when it was (or nobody said).
func (s *Series) unread(source string) string {
	if why := s.Unread[source]; why != "" {
		return ": " + why
	}
	return ""
}

// software says whether the rail's NIC is a software device (rxe, siw):
// it has no PCI function (internal/rdmadev: Device.Software).
func software(r Rail) bool { return r.PCI == "" }

// gbit is a rate as the findings say it: one decimal, or three
// significant digits below 1 Gbit/s, where one decimal read 0.0 (a
// software device under make lab-soak moved 0.013 Gbit/s, and SOAK-06
// said "0.0 Gbit/s, 0.56 of its first quarter's 0.0 Gbit/s").
func gbit(v float64) string {
	if v > 0 && v < 1 {
		return strconv.FormatFloat(v, 'g', 3, 64) + " Gbit/s"
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " Gbit/s"
}

func berText(v float64) string { return strconv.FormatFloat(v, 'e', 1, 64) }

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func join(xs []string) string { return strings.Join(xs, ", ") }

// remedyLink is what to do about a link that flaps, errs or decays.
var remedyLink = counters.Remedy(counters.CauseLink)
