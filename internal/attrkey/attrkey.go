// Package attrkey is the naming rule for the suite's test attributes, which
// reach JUnit as properties and the report as numbers:
//
//   - gdr.<words>: lowercase words joined by "_" ([a-z][a-z0-9]*), so no PCI
//     address, device name or other value ever sits inside a key (one key,
//     many values: a device goes into a value or a subtest's name);
//   - a measured quantity carries its unit as words of the key, from Units:
//     gdr.bw_gbit_s, gdr.copy_gbyte_s, gdr.lat_us_p50, gdr.size_bytes,
//     gdr.bar1_free_mib; words after the unit qualify it (p50, mean, host);
//   - ambiguous unit words (gbps, mbps, ...) are not allowed: Gb/s and GB/s
//     differ by 8, MB/s and MiB/s by 5%;
//   - a key whose first word names a quantity (bw, lat, copy, rate, size, ...)
//     must carry a unit, or say it has none (fraction, ratio, count) or that
//     it is not a number (mode, op, kind, ...).
package attrkey

import (
	"fmt"
	"regexp"
	"strings"
)

// Prefix starts every key.
const Prefix = "gdr."

// Unit is one unit word sequence and how the report prints it.
type Unit struct {
	Word    string // in keys: "gbit_s"
	Display string // for people: "Gbit/s"
}

// Units are the unit words a key may carry, longest first so that "gbit_s"
// wins over "s".
var Units = []Unit{
	{"gbit_s", "Gbit/s"}, {"gbyte_s", "GB/s"}, {"mbyte_s", "MB/s"}, {"mib_s", "MiB/s"}, {"gt_s", "GT/s"},
	{"bytes", "B"}, {"kib", "KiB"}, {"mib", "MiB"}, {"gib", "GiB"},
	{"ns", "ns"}, {"us", "µs"}, {"ms", "ms"}, {"sec", "s"}, {"pct", "%"},
}

// Unitless words: a number that has no unit, said so.
var unitless = map[string]bool{"fraction": true, "ratio": true, "count": true}

// Words that say the value is not a number.
var descriptive = map[string]bool{"mode": true, "op": true, "kind": true, "name": true, "choice": true,
	"source": true, "warning": true, "type": true, "note": true, "dir": true}

// Words that name a measured quantity when they start a key.
var quantity = map[string]bool{"bw": true, "lat": true, "copy": true, "rate": true, "size": true, "sizes": true,
	"bar1": true, "speed": true, "throughput": true, "elapsed": true}

// Ambiguous unit words.
var banned = map[string]string{
	"gbps": "gbit_s (Gbit/s) or gbyte_s (GB/s)", "mbps": "mib_s (MiB/s) or mbyte_s (MB/s)",
	"kbps": "a unit from attrkey.Units", "gbs": "gbyte_s", "mbs": "mbyte_s", "bps": "a unit from attrkey.Units",
}

var syntax = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// Check says whether key (with or without the gdr. prefix) follows the rule.
func Check(key string) error {
	name := strings.TrimPrefix(key, Prefix)
	if !syntax.MatchString(name) {
		return fmt.Errorf("attribute key %q: want gdr.<lowercase words joined by _> (a device or address goes into the value or a subtest name, never the key)", key)
	}
	words := strings.Split(name, "_")
	for _, w := range words {
		if alt, ok := banned[w]; ok {
			return fmt.Errorf("attribute key %q: %q is an ambiguous unit; use %s", key, w, alt)
		}
		if strings.Trim(w, "0123456789") == "" {
			return fmt.Errorf("attribute key %q: the word %q is a number; numbers, addresses and indexes go into the value or a subtest name", key, w)
		}
	}
	if !quantity[words[0]] {
		return nil
	}
	if _, _, ok := UnitOf(key); ok {
		return nil
	}
	for _, w := range words {
		if unitless[w] || descriptive[w] {
			return nil
		}
	}
	return fmt.Errorf("attribute key %q names a quantity but carries no unit; add one of %s (or fraction/ratio/count)", key, unitWords())
}

// CheckPart checks a literal fragment of a key built at run time ("acs_" +
// name): its characters must be ones the rule allows.
func CheckPart(part string) error {
	p := strings.TrimPrefix(part, Prefix)
	if p == "" || strings.Trim(p, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
		return fmt.Errorf("attribute key fragment %q: only lowercase letters, digits and _ are allowed", part)
	}
	for _, w := range strings.Split(strings.Trim(p, "_"), "_") {
		if alt, ok := banned[w]; ok {
			return fmt.Errorf("attribute key fragment %q: %q is an ambiguous unit; use %s", part, w, alt)
		}
	}
	return nil
}

// UnitOf finds the unit words of key: gdr.lat_us_p50 -> ("us", "µs").
// It allocates nothing: a report asks for every attribute of every case.
func UnitOf(key string) (word, display string, ok bool) {
	name := strings.TrimPrefix(key, Prefix)
	for i := strings.IndexByte(name, '_'); i >= 0; {
		rest := name[i+1:] // the words after the first, then after the second, ...
		for _, u := range Units {
			if strings.HasPrefix(rest, u.Word) && (len(rest) == len(u.Word) || rest[len(u.Word)] == '_') {
				return u.Word, u.Display, true
			}
		}
		j := strings.IndexByte(rest, '_')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return "", "", false
}

func unitWords() string {
	var s []string
	for _, u := range Units {
		s = append(s, u.Word)
	}
	return strings.Join(s, ", ")
}
