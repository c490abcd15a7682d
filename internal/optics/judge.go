package optics

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gdrconf/gdrconf/internal/verdict"
)

// How bad a value past a limit is: an alarm fails (the part is out of its
// own or the standard's limits), a warning is reported.
const (
	Alarm   = verdict.Fail
	Warning = verdict.Warn
)

// PartOptic is the part a finding of this package points at
// (verdict.Finding.Part): the cable or optic, or its switch port.
const PartOptic = "cable/optic"

// past is one value past a limit, as a finding says it.
type past struct {
	level  verdict.Level
	what   string  // "Rx power lane 3", "effective BER"
	value  float64 // in unit
	limit  float64
	unit   string // "mW", "mA", "C", "V", "" for BER and counters
	bound  string // "low alarm threshold", "ceiling"
	source string
}

// finding is p as the suite's finding: its words the cause, the limit's
// origin the source, the cable or optic the part.
func (p past) finding() verdict.Finding {
	return verdict.Finding{Level: p.level, Cause: p.String(), Source: p.source, Part: PartOptic,
		Remedy: "reseat, clean or replace the cable or optic; if it persists with a known-good one, check the switch port"}
}

func (p past) String() string {
	v, l := trim(p.value), trim(p.limit)
	if p.unit == "" {
		v, l = fmt.Sprintf("%.3g", p.value), fmt.Sprintf("%.3g", p.limit)
	}
	u := ""
	if p.unit != "" {
		u = " " + p.unit
	}
	rel := "above"
	if p.value < p.limit {
		rel = "below"
	}
	return fmt.Sprintf("%s %s%s %s its %s %s%s", p.what, v, u, rel, p.bound, l, u)
}

func trim(f float64) string { return fmt.Sprintf("%.4g", f) }

// Sources of the limits.
const (
	SrcModule = "the module's own thresholds (SFF-8636 upper page 03h, CMIS page 02h), as ethtool -m prints them"
	SrcIBBER  = "InfiniBand specification: post-FEC BER below 1E-12 (NVIDIA DGX SuperPOD cabling guide, \"Bit Error Rate\")"
	SrcPAM4   = "IEEE 802.3 pre-FEC BER at most 2.4E-4 on PAM4 lanes with RS(544,514) FEC (Dell KB 000286734, ConnectX-6 Dx)"
)

// BER limits.
const (
	MaxEffectiveBER = 1e-12
	MaxRawBER       = 2.4e-4
)

// ActiveLanes are the lanes that carry light: transmitting (bias or Tx
// power above zero), or every lane with an Rx reading when the module
// reports no transmitter monitors. CMIS prints 8 lanes for a 4-lane module;
// the unused ones read zero everywhere and are not judged.
func (m *Module) ActiveLanes() []int {
	var out []int
	if len(m.TxMW) == 0 && len(m.BiasMA) == 0 {
		var out []int
		for _, l := range lanes(m.RxMW) {
			if m.PortLanes == 0 || l <= m.PortLanes {
				out = append(out, l)
			}
		}
		return out
	}
	seen := map[int]bool{}
	for _, l := range append(lanes(m.TxMW), lanes(m.BiasMA)...) {
		if m.PortLanes > 0 && l > m.PortLanes {
			continue
		}
		if !seen[l] && (m.TxMW[l] > 0 || m.BiasMA[l] > 0) {
			seen[l] = true
			out = append(out, l)
		}
	}
	sort.Ints(out)
	return out
}

// JudgeModule compares the module's readings with its own thresholds. A
// module without diagnostics (copper) gives nothing.
func JudgeModule(m *Module) []verdict.Finding {
	if !m.HasDOM() {
		return nil
	}
	var out []verdict.Finding
	check := func(what, group, unit string, v float64) {
		t, ok := m.Thresholds[group]
		if !ok {
			return
		}
		for _, b := range []struct {
			lim   *float64
			high  bool
			level verdict.Level
			name  string
		}{{t.HighAlarm, true, Alarm, "high alarm threshold"}, {t.LowAlarm, false, Alarm, "low alarm threshold"},
			{t.HighWarning, true, Warning, "high warning threshold"}, {t.LowWarning, false, Warning, "low warning threshold"}} {
			if b.lim == nil || math.IsNaN(*b.lim) {
				continue
			}
			if (b.high && v > *b.lim) || (!b.high && v < *b.lim) {
				out = append(out, past{level: b.level, what: what, value: v, limit: *b.lim, unit: unit, bound: b.name, source: SrcModule}.finding())
				return // the alarm hides the warning it implies
			}
		}
	}
	if m.TempC != nil {
		check("module temperature", "Module temperature", "C", *m.TempC)
	}
	if m.VoltageV != nil {
		check("module voltage", "Module voltage", "V", *m.VoltageV)
	}
	for _, l := range m.ActiveLanes() {
		if v, ok := m.RxMW[l]; ok {
			if v == 0 {
				out = append(out, past{level: Alarm, what: fmt.Sprintf("Rx power lane %d", l), value: 0, limit: 0, unit: "mW",
					bound: "no light on a transmitting lane: floor", source: SrcModule}.finding())
			} else {
				check(fmt.Sprintf("Rx power lane %d", l), "Laser rx power", "mW", v)
			}
		}
		if v, ok := m.TxMW[l]; ok {
			check(fmt.Sprintf("Tx power lane %d", l), "Laser output power", "mW", v)
		}
		if v, ok := m.BiasMA[l]; ok {
			check(fmt.Sprintf("laser bias lane %d", l), "Laser bias current", "mA", v)
		}
	}
	return out
}

// JudgeLink judges a port's error rates: effective (post-FEC) and symbol
// BER above 1E-12 are alarms, raw (pre-FEC) BER above 2.4E-4 and link-down
// or recovery events since the counters were cleared are warnings.
func JudgeLink(l *Link) []verdict.Finding {
	var out []verdict.Finding
	if l.EffectiveBER != nil && *l.EffectiveBER > MaxEffectiveBER {
		out = append(out, past{level: Alarm, what: "effective (post-FEC) BER", value: *l.EffectiveBER, limit: MaxEffectiveBER, bound: "ceiling", source: SrcIBBER}.finding())
	}
	if l.SymbolBER != nil && *l.SymbolBER > MaxEffectiveBER {
		out = append(out, past{level: Alarm, what: "symbol BER", value: *l.SymbolBER, limit: MaxEffectiveBER, bound: "ceiling", source: SrcIBBER}.finding())
	}
	if l.RawBER != nil && *l.RawBER > MaxRawBER {
		out = append(out, past{level: Warning, what: "raw (pre-FEC) BER", value: *l.RawBER, limit: MaxRawBER, bound: "ceiling", source: SrcPAM4}.finding())
	}
	if l.LinkDown != nil && *l.LinkDown > 0 {
		out = append(out, past{level: Warning, what: "link down events since the counters were cleared", value: *l.LinkDown, limit: 0, bound: "ceiling", source: "mlxlink Link Down Counter"}.finding())
	}
	if l.Recovery != nil && *l.Recovery > 0 {
		out = append(out, past{level: Warning, what: "link error recoveries since the counters were cleared", value: *l.Recovery, limit: 0, bound: "ceiling", source: "mlxlink Link Error Recovery Counter"}.finding())
	}
	return out
}

var widthRE = regexp.MustCompile(`\((\d+)X\b`)

// PortWidth is the lane count in a port's sysfs rate ("400 Gb/sec (4X
// NDR)" is 4); 0 when it names none.
func PortWidth(rate string) int {
	m := widthRE.FindStringSubmatch(rate)
	if m == nil {
		return 0
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n < 1 || n > 16 {
		return 0
	}
	return n
}

// JudgeNIC is TOPO-10's one failure for NIC name (PCI address pci) whose
// module and link gave findings fs: the alarms are its evidence and name
// part, the cable or optic to reseat or replace; nil without an alarm.
// The findings below alarm level are returned for the log.
func JudgeNIC(name, pci, part string, fs []verdict.Finding) (fail *verdict.Finding, warnings []verdict.Finding) {
	var alarms, sources []string
	for _, f := range fs {
		if f.Level != Alarm {
			warnings = append(warnings, f)
			continue
		}
		alarms = append(alarms, f.Cause)
		if !slices.Contains(sources, f.Source) {
			sources = append(sources, f.Source)
		}
	}
	if len(alarms) == 0 {
		return nil, warnings
	}
	return &verdict.Finding{
		Device:   name,
		Cause:    fmt.Sprintf("%s (%s) %s: %s", name, pci, part, strings.Join(alarms, "; ")),
		Remedy:   fmt.Sprintf("reseat, clean or replace the %s; if it persists with a known-good one, check the switch port", part),
		Source:   strings.Join(sources, "; "),
		Evidence: alarms,
		Part:     PartOptic,
	}, warnings
}
