// Package cpulist reads the kernel's CPU list format ("0-27,56-83", as in a
// PCI function's local_cpulist or /sys/devices/system/node/online), so that
// devices can be compared by the CPUs near them when numa_node is unknown.
package cpulist

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gdrconf/gdrconf/internal/clip"
)

// maxCPU bounds a list: far above any real machine, small enough that a
// garbage value cannot make a huge set.
const maxCPU = 1 << 16

// Range is an inclusive range of CPU (or node) numbers.
type Range struct{ Lo, Hi int }

// Set is a CPU list as ranges, sorted and merged. The zero value is empty.
type Set struct{ r []Range }

// Parse reads "0-3,8,10-11". An empty string is the empty set. Anything else
// that is not a list of numbers and ranges is an error naming the value.
func Parse(s string) (Set, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return Set{}, nil
	}
	var rs []Range
	for _, f := range strings.Split(t, ",") {
		lo, hi, isRange := strings.Cut(f, "-")
		a, err1 := num(lo)
		b, err2 := a, error(nil)
		if isRange {
			b, err2 = num(hi)
		}
		if err1 != nil || err2 != nil || b < a {
			return Set{}, fmt.Errorf("CPU list %s: %s is not a number or a range lo-hi (0 to %d)", clip.Quote(s), clip.Quote(f), maxCPU)
		}
		rs = append(rs, Range{a, b})
	}
	return Set{r: merge(rs)}, nil
}

func num(s string) (int, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("not a number")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > maxCPU {
		return 0, fmt.Errorf("out of range")
	}
	return n, nil
}

func merge(rs []Range) []Range {
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && rs[j].Lo < rs[j-1].Lo; j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
	var out []Range
	for _, r := range rs {
		if n := len(out); n > 0 && r.Lo <= out[n-1].Hi+1 {
			out[n-1].Hi = max(out[n-1].Hi, r.Hi)
			continue
		}
		out = append(out, r)
	}
	return out
}

// Empty reports a set with no CPU.
func (s Set) Empty() bool { return len(s.r) == 0 }

// Count is the number of CPUs in the set.
func (s Set) Count() int {
	n := 0
	for _, r := range s.r {
		n += r.Hi - r.Lo + 1
	}
	return n
}

// Equal reports whether both sets hold the same CPUs.
func (s Set) Equal(o Set) bool {
	if len(s.r) != len(o.r) {
		return false
	}
	for i := range s.r {
		if s.r[i] != o.r[i] {
			return false
		}
	}
	return true
}

// Intersects reports whether the sets share a CPU.
func (s Set) Intersects(o Set) bool {
	for _, a := range s.r {
		for _, b := range o.r {
			if a.Lo <= b.Hi && b.Lo <= a.Hi {
				return true
			}
		}
	}
	return false
}

// Contains reports whether cpu is in the set.
func (s Set) Contains(cpu int) bool {
	for _, r := range s.r {
		if cpu >= r.Lo && cpu <= r.Hi {
			return true
		}
	}
	return false
}

// First is the lowest CPU in the set, or -1 when it is empty.
func (s Set) First() int {
	if len(s.r) == 0 {
		return -1
	}
	return s.r[0].Lo
}

// CPUs lists the set's CPU numbers in order.
func (s Set) CPUs() []int {
	var out []int
	for _, r := range s.r {
		for c := r.Lo; c <= r.Hi; c++ {
			out = append(out, c)
		}
	}
	return out
}

// String writes the set in the kernel's format ("0-3,8").
func (s Set) String() string {
	var b strings.Builder
	for i, r := range s.r {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(r.Lo))
		if r.Hi != r.Lo {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(r.Hi))
		}
	}
	return b.String()
}
