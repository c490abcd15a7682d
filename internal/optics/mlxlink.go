package optics

import (
	"math"
	"regexp"
	"strconv"
	"strings"
)

// Link is what `mlxlink -d <dev> -m -c` (MFT) or `mstlink` (mstflint) says
// about a port (mstflint mlxlink/modules/mlxlink_commander.cpp, read at
// v4.36): "key<pad>: value" records under section titles, keys parsed by
// name because the order and the sections vary between versions. mlxlink
// writes ANSI colour codes even into a pipe (the reset lands at the start of
// the next line); they are stripped.
type Link struct {
	State, PhysState, Speed, Width, FEC string
	// BERs as numbers; nil when the tool printed none (older devices,
	// link down). A BER of "15E-255" is the firmware's "no error seen".
	EffectiveBER, RawBER, SymbolBER *float64
	EffectiveErrors, SymbolErrors   *float64
	LinkDown, Recovery              *float64 // counters since the last clear
	SinceClearMin                   *float64
	// Module identity as mlxlink reads it (-m).
	Vendor, PartNumber, Serial string
	Fields                     map[string]string // every record, by key
}

var ansiRE = regexp.MustCompile("\x1b\\[[0-9;]*m")

// ParseMlxlink parses mlxlink/mstlink output.
func ParseMlxlink(out string) *Link {
	l := &Link{Fields: map[string]string{}}
	for _, raw := range strings.Split(ansiRE.ReplaceAllString(out, ""), "\n") {
		k, v, ok := strings.Cut(raw, ": ")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if k == "" {
			continue
		}
		l.Fields[k] = v
	}
	f := l.Fields
	l.State, l.PhysState, l.Speed, l.Width, l.FEC = f["State"], f["Physical state"], f["Speed"], f["Width"], f["FEC"]
	l.Vendor, l.PartNumber, l.Serial = f["Vendor Name"], f["Vendor Part Number"], f["Vendor Serial Number"]
	l.EffectiveBER = ber(f["Effective Physical BER"])
	l.RawBER = ber(f["Raw Physical BER"])
	l.SymbolBER = ber(f["Symbol BER"])
	l.EffectiveErrors = num(f["Effective Physical Errors"])
	l.SymbolErrors = num(f["Symbol Errors"])
	l.LinkDown = num(f["Link Down Counter"])
	l.Recovery = num(f["Link Error Recovery Counter"])
	l.SinceClearMin = num(f["Time Since Last Clear [Min]"])
	return l
}

// ber parses "4E-11" (mantissa E- magnitude, mlxlink's spelling); an
// exponent of 200 or more is the firmware's zero.
func ber(s string) *float64 {
	mant, exp, ok := strings.Cut(strings.ToUpper(strings.TrimSpace(s)), "E-")
	if !ok {
		return nil
	}
	m, err1 := strconv.ParseFloat(mant, 64)
	e, err2 := strconv.Atoi(exp)
	if err1 != nil || err2 != nil || m < 0 {
		return nil
	}
	v := 0.0
	if e < 200 {
		v = m * math.Pow(10, -float64(e))
	}
	return &v
}

func num(s string) *float64 {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return nil
	}
	return &f
}
