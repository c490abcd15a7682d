// Package optics reads the health of a port's transceiver and link: the
// module's digital diagnostics (temperature, voltage, per-lane laser bias,
// transmit and receive power) against the module's own alarm and warning
// thresholds, as `ethtool -m <netdev>` prints them, and the link's error
// rates (effective and raw BER, symbol errors, link-down and recovery
// counters) as NVIDIA's `mlxlink`/`mstlink -m -c` prints them. A lane past
// an alarm threshold or a link past its BER limit names the cable or optic
// (with its vendor, part number and serial) as the part to look at.
//
// ethtool's text (ethtool 6.15 module-common.c, qsfp.c, cmis.c, read): one
// "\t<name padded to 41> : <value>" line per field; power as "0.7244 mW /
// -1.40 dBm" ("0.0000 mW / -inf dBm" for no light); thresholds as "<group>
// {high,low} {alarm,warning} threshold". ethtool <= 6.13 padded flag names
// and wrote "Channel" where 6.14 writes "Chan", and no space in
// "power(Channel 1)": names are normalised before use. CMIS modules print 8
// lanes per bank even when 4 are used, and ethtool's per-lane CMIS alarm
// flags test the wrong bit (cmis.c, "& chan"), so flags are never trusted:
// values are compared with the thresholds here.
package optics

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/gdrconf/gdrconf/internal/verdict"
)

// Module is one transceiver as ethtool -m describes it.
type Module struct {
	Identifier  string // "0x11 (QSFP28)"
	Vendor      string
	PartNumber  string
	Serial      string
	Rev         string
	Transmitter string // "0x00 (850 nm VCSEL)", "0xa0 (Copper cable, unequalized)"
	// TempC and VoltageV are nil when the module has no diagnostics (a
	// passive copper cable reads 0 and ethtool stops there).
	TempC, VoltageV *float64
	// Lanes are indexed from 1; a monitor the module does not report is
	// absent from its map.
	BiasMA, TxMW, RxMW map[int]float64
	// Thresholds by group: "Laser bias current", "Laser output power",
	// "Module temperature", "Module voltage", "Laser rx power".
	Thresholds map[string]Threshold
	// PortLanes, when set (the port's width: 4 for "4X"), bounds the lanes
	// judged: a twin-port OSFP reports all 8 lanes to each port's netdev,
	// and the other port's lanes are not this port's fault.
	PortLanes int
}

// Threshold is a group's four limits, in the group's unit (mA, mW, C, V).
type Threshold struct {
	HighAlarm, LowAlarm, HighWarning, LowWarning *float64
}

// Copper reports a passive or active copper cable (no optics to judge).
func (m *Module) Copper() bool { return strings.Contains(strings.ToLower(m.Transmitter), "copper") }

// HasDOM reports that the module reported diagnostics.
func (m *Module) HasDOM() bool {
	return m.TempC != nil && !(*m.TempC == 0 && (m.VoltageV == nil || *m.VoltageV == 0))
}

// Part is "NVIDIA FX-Q28SR4-0100 serial FXQ2831170042" for messages.
func (m *Module) Part() string {
	var p []string
	for _, s := range []string{m.Vendor, m.PartNumber} {
		if s != "" {
			p = append(p, s)
		}
	}
	if m.Serial != "" {
		p = append(p, "serial "+m.Serial)
	}
	if len(p) == 0 {
		return "module of unknown make"
	}
	return strings.Join(p, " ")
}

var (
	lineRE  = regexp.MustCompile(`^\s*(\S.*?)\s*:\s?(.*)$`)
	laneRE  = regexp.MustCompile(`^(.*?)\s*\((?:Chan|Channel) (\d+)\)$`)
	numRE   = regexp.MustCompile(`^(-?[0-9.]+|-?inf)`)
	spaceRE = regexp.MustCompile(`\s+`)
)

// normName collapses runs of blanks and puts a space before "(".
func normName(s string) string {
	s = strings.ReplaceAll(s, "(", " (")
	return strings.TrimSpace(spaceRE.ReplaceAllString(s, " "))
}

// number is the first number of a value: 0.7244 of "0.7244 mW / -1.40 dBm".
func number(v string) (float64, bool) {
	m := numRE.FindString(strings.TrimSpace(v))
	if m == "" || strings.Contains(m, "inf") {
		return 0, false
	}
	f, err := strconv.ParseFloat(m, 64)
	return f, err == nil
}

// ErrUnsupported means the module's EEPROM could not be read: the driver
// cannot, or (Denied) the kernel refused this process ("Operation not
// permitted": without CAP_NET_ADMIN, net/ethtool/netlink.c answers
// ETHTOOL_MSG_MODULE_EEPROM_GET, GENL_UNS_ADMIN_PERM, with EPERM, and so
// does the ioctl, net/ethtool/ioctl.c).
type ErrUnsupported struct {
	Msg    string
	Denied bool
}

func (e *ErrUnsupported) Error() string { return e.Msg }

// Unparsed is the finding for output src names (ethtool -m or a tree's
// recording) that ParseEthtool could not read, other than an
// ErrUnsupported: the suite could not judge the module.
func Unparsed(src string, err error) verdict.Finding {
	return *verdict.NotJudgedf("run ethtool -m by hand", "%s: %v", src, err)
}

// ParseEthtool parses `ethtool -m` output.
func ParseEthtool(out string) (*Module, error) {
	m := &Module{BiasMA: map[int]float64{}, TxMW: map[int]float64{}, RxMW: map[int]float64{}, Thresholds: map[string]Threshold{}}
	fields := 0
	for _, raw := range strings.Split(out, "\n") {
		line := strings.TrimRight(raw, " \r")
		if strings.Contains(line, "Operation not supported") || strings.HasPrefix(line, "Cannot get module EEPROM") ||
			strings.HasPrefix(line, "Cannot get Module EEPROM") || strings.HasPrefix(line, "netlink error:") {
			return nil, &ErrUnsupported{Msg: strings.TrimSpace(line), Denied: strings.Contains(line, "Operation not permitted")}
		}
		g := lineRE.FindStringSubmatch(line)
		if g == nil {
			continue
		}
		name, val := normName(g[1]), strings.TrimSpace(g[2])
		fields++
		switch name {
		case "Identifier":
			m.Identifier = val
		case "Vendor name":
			m.Vendor = val
		case "Vendor PN":
			m.PartNumber = val
		case "Vendor SN":
			m.Serial = val
		case "Vendor rev":
			m.Rev = val
		case "Transmitter technology":
			m.Transmitter = val
		case "Module temperature":
			if f, ok := number(val); ok {
				m.TempC = &f
			}
		case "Module voltage":
			if f, ok := number(val); ok {
				m.VoltageV = &f
			}
		}
		if lg := laneRE.FindStringSubmatch(name); lg != nil {
			lane, _ := strconv.Atoi(lg[2])
			f, ok := number(val)
			if strings.Contains(val, "-inf") {
				f, ok = 0, true // no light: 0 mW
			}
			if !ok || lane < 1 || lane > 64 {
				continue
			}
			switch lg[1] {
			case "Laser tx bias current":
				m.BiasMA[lane] = f
			case "Transmit avg optical power":
				m.TxMW[lane] = f
			case "Rcvr signal avg optical power", "Receiver signal OMA", "Receiver signal average optical power":
				m.RxMW[lane] = f
			}
			continue
		}
		if grp, kind, ok := thresholdName(name); ok {
			f, isNum := number(val)
			if !isNum {
				continue
			}
			t := m.Thresholds[grp]
			switch kind {
			case "high alarm":
				t.HighAlarm = &f
			case "low alarm":
				t.LowAlarm = &f
			case "high warning":
				t.HighWarning = &f
			case "low warning":
				t.LowWarning = &f
			}
			m.Thresholds[grp] = t
		}
	}
	if fields == 0 || m.Identifier == "" {
		return m, fmt.Errorf("no module fields (Identifier) in ethtool -m output of %d bytes", len(out))
	}
	return m, nil
}

var thresholdGroups = []string{"Laser bias current", "Laser output power", "Module temperature", "Module voltage", "Laser rx power"}

func thresholdName(name string) (group, kind string, ok bool) {
	rest, found := strings.CutSuffix(name, " threshold")
	if !found {
		return "", "", false
	}
	for _, g := range thresholdGroups {
		if k, ok := strings.CutPrefix(rest, g+" "); ok {
			switch k {
			case "high alarm", "low alarm", "high warning", "low warning":
				return g, k, true
			}
		}
	}
	return "", "", false
}

// lanes is the sorted lane numbers of a monitor map.
func lanes(m map[int]float64) []int {
	out := make([]int, 0, len(m))
	for l := range m {
		out = append(out, l)
	}
	sort.Ints(out)
	return out
}
