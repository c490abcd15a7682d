package soak

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/gdrconf/gdrconf/internal/counters"
	"github.com/gdrconf/gdrconf/internal/kmsg"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// PartGPU is the part a GPU's own finding points at (report/part.go).
const PartGPU = "gpu"

// reasons names the bits of mask set in r: "SW thermal slowdown, HW
// thermal slowdown".
func reasons(r, mask uint64) string {
	var out []string
	for _, n := range reasonNames {
		if r&mask&n.bit != 0 {
			out = append(out, n.name)
		}
	}
	if rest := r & mask &^ ThrottleThermalOrPower; rest != 0 {
		out = append(out, fmt.Sprintf("reasons 0x%x", rest))
	}
	return join(out)
}

// gpuLine is GPU gi at sample i as evidence: "00:19:50 1980 MHz 83 C
// 690 W reasons 0x0"; fields not read are left out.
func (s *Series) gpuLine(gi, i int) string {
	line := s.elapsed(s.Samples[i].At)
	if gi >= len(s.Samples[i].GPUs) {
		return line + " not read"
	}
	g := s.Samples[i].GPUs[gi]
	if g.SMClockMHz != nil {
		line += fmt.Sprintf(" %.0f MHz", *g.SMClockMHz)
	}
	if g.TempC != nil {
		line += fmt.Sprintf(" %.0f C", *g.TempC)
	}
	if g.PowerW != nil {
		line += fmt.Sprintf(" %.0f W", *g.PowerW)
	}
	if g.CopyGbps != nil {
		line += " copy " + gbit(*g.CopyGbps)
	}
	if g.Throttle != nil {
		line += fmt.Sprintf(" reasons 0x%x", *g.Throttle)
	}
	return line
}

// JudgeThrottle is SOAK-05: no GPU's clocks were held back by a thermal
// or power reason (th.ThrottleMask) under the copy load, reported at
// th.ThrottleLevel (the site's cooling decides). It counts and times the
// throttled samples (gdr.throttled_sec) and names the reasons, the
// temperature and the clocks. A GPU whose reasons NVML never gave is
// absent; a run with no GPU has no result.
func JudgeThrottle(s *Series, th Thresholds) []Result {
	if r := nothing(s, ReqThrottle); r != nil {
		return r
	}
	var out []Result
	for gi, gpu := range s.GPUs {
		r := Result{Req: ReqThrottle, Device: gpu.PCI}
		name := "GPU " + gpu.PCI
		if gpu.Name != "" {
			name += " (" + gpu.Name + ")"
		}
		read, first, last, n := 0, -1, -1, 0
		var seen uint64
		var throttled time.Duration
		var tmax, cmin, cmax float64
		cmin = -1
		for i, x := range s.Samples {
			if gi >= len(x.GPUs) {
				continue
			}
			g := x.GPUs[gi]
			if g.TempC != nil {
				tmax = max(tmax, *g.TempC)
			}
			if g.SMClockMHz != nil {
				cmax = max(cmax, *g.SMClockMHz)
				if cmin < 0 || *g.SMClockMHz < cmin {
					cmin = *g.SMClockMHz
				}
			}
			if g.Throttle == nil {
				continue
			}
			read++
			if *g.Throttle&th.ThrottleMask == 0 {
				continue
			}
			seen |= *g.Throttle & th.ThrottleMask
			if first < 0 {
				first = i
			}
			last = i
			n++
			throttled += s.span(i)
		}
		if read == 0 {
			r.add(*verdict.Absentf("", "%s: NVML gave no clock event reasons in %d samples, so its throttling could not be followed%s", name, len(s.Samples), s.unread(UnreadNVML)))
			out = append(out, r)
			continue
		}
		r.count("throttled_count", n)
		r.num("throttled_sec", throttled.Seconds())
		if tmax > 0 {
			r.num("temp_c_max", tmax)
		}
		if cmin >= 0 {
			r.num("sm_clock_mhz_min", cmin)
			r.num("sm_clock_mhz_max", cmax)
		}
		if n > 0 {
			temp, clocks := "", ""
			if tmax > 0 {
				temp = fmt.Sprintf(", up to %.0f C", tmax)
			}
			if cmin >= 0 && cmax > cmin {
				clocks = fmt.Sprintf(", SM clock between %.0f and %.0f MHz", cmin, cmax)
			}
			r.add(verdict.Finding{
				Level: th.ThrottleLevel,
				Cause: fmt.Sprintf("%s was throttled (%s) in %d of %d samples, %s in all, from %s to %s%s%s",
					name, reasons(seen, th.ThrottleMask), n, read, throttled, s.since(s.Samples[first].At), s.since(s.Samples[last].At), temp, clocks),
				Remedy:   "check the GPU's cooling (airflow, inlet temperature, fans or cold plate) and power delivery and limit (nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER); whether this is acceptable is the site's call",
				Measured: "gdr.throttled_sec",
				Source:   SrcThrottle,
				Evidence: s.gpuEvidence(gi, first, last),
				Part:     PartGPU,
			})
		}
		out = append(out, r)
	}
	if len(s.GPUs) == 0 {
		r := Result{Req: ReqThrottle}
		r.add(*verdict.Absentf("", "the soak on %s kept no GPU busy (Series.GPUs is empty): no throttling to judge%s", orHost(s.Host), s.unread(UnreadNVML)))
		out = append(out, r)
	}
	return finish(s, out)
}

// gpuEvidence is GPU gi's samples from just before first to last (at
// most 6 lines).
func (s *Series) gpuEvidence(gi, first, last int) []string {
	idx := s.around(first, last, 2, 1)
	if len(idx) > 6 {
		idx = append(idx[:4], idx[len(idx)-2:]...)
	}
	var out []string
	for _, i := range idx {
		out = append(out, s.gpuLine(gi, i))
	}
	return out
}

// JudgeKernel is SOAK-07: no Xid and no AER line in the kernel log during
// the soak (Series.Events of kinds Xid and AER). Lines are read as
// internal/kmsg reads them: a corrected AER error warns, any other AER
// line and every Xid fails; one finding per device and kind, naming the
// first line's time and meaning. A kernel log the runner could not read
// (Series.Unread) is absent.
func JudgeKernel(s *Series, th Thresholds) []Result {
	if r := nothing(s, ReqKernel); r != nil {
		return r
	}
	r := Result{Req: ReqKernel}
	if why := s.Unread[UnreadKmsg]; why != "" {
		r.add(*verdict.Absentf("run the soak where it can read the kernel log (root, or CAP_SYSLOG in a container)", "the kernel log could not be read during the soak: %s; Xid and AER lines cannot be judged", why))
		return finish(s, []Result{r})
	}
	type group struct {
		kind   EventKind
		device string
		evs    []Event
		ms     []kmsg.Match
	}
	var groups []*group
	by := map[string]*group{}
	xids, aers := 0, 0
	for _, e := range s.Events {
		if e.Kind != Xid && e.Kind != AER {
			continue
		}
		m := kmsg.Scan([]kmsg.Record{{Text: e.Text}})
		var mt kmsg.Match
		if len(m) > 0 {
			mt = m[0]
		} else {
			// A line the runner kept that kmsg's patterns do not know: an
			// error of its kind.
			mt = kmsg.Match{Kind: string(e.Kind), Severity: kmsg.Error, Meaning: "a kernel line the suite's patterns do not name"}
		}
		dev := e.Device
		if dev == "" {
			dev = mt.Device
		}
		if e.Kind == Xid {
			xids++
		} else {
			aers++
		}
		k := string(e.Kind) + "|" + dev + "|" + mt.Severity.String()
		g := by[k]
		if g == nil {
			g = &group{kind: e.Kind, device: dev}
			by[k] = g
			groups = append(groups, g)
		}
		g.evs = append(g.evs, e)
		g.ms = append(g.ms, mt)
	}
	r.count("xid_count", xids)
	r.count("aer_count", aers)
	var fs []verdict.Finding
	for _, g := range groups {
		first, m := g.evs[0], g.ms[0]
		what := "Xid"
		part, remedy := PartGPU, "look the Xid up in NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors) and run the GPU's field diagnostics (dcgmi diag -r 3); an Xid under the suite's own copy load points at the GPU, its driver or its PCIe link"
		if g.kind == AER {
			what, part, remedy = "AER", counters.PartPCIe, counters.Remedy(counters.CausePCIe)
		}
		level := verdict.Fail
		if m.Severity == kmsg.Warn {
			level = verdict.Warn
		}
		dev := g.device
		if dev == "" {
			dev = "an unnamed device"
		}
		var ev []string
		for i, e := range g.evs {
			if i == 5 {
				ev = append(ev, fmt.Sprintf("... %d more lines", len(g.evs)-i))
				break
			}
			ev = append(ev, s.elapsed(e.At)+" "+e.Text)
		}
		fs = append(fs, verdict.Finding{
			Level:    level,
			Device:   g.device,
			Cause:    fmt.Sprintf("%s logged %s during the soak, the first at %s: %s", dev, plural(len(g.evs), what+" line", what+" lines"), s.since(first.At), strings.TrimSpace(m.Meaning)),
			Remedy:   remedy,
			Measured: "gdr." + strings.ToLower(what) + "_count",
			Source:   "kernel log (/dev/kmsg) during the soak; none expected under load",
			Evidence: ev,
			Part:     part,
		})
	}
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].Level == verdict.Fail && fs[j].Level != verdict.Fail })
	for _, f := range fs {
		r.add(f)
	}
	return finish(s, []Result{r})
}
