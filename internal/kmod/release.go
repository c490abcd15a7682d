package kmod

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gdrconf/gdrconf/internal/clip"
)

// ParseRelease reads the major and minor version from a kernel release
// string ("6.18.44-fc-v657-gpu", "5.14.0-427.13.1.el9_4.x86_64", "6.1.0-28-amd64").
func ParseRelease(s string) (major, minor int, err error) {
	orig := s
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "-+_ "); i >= 0 {
		s = s[:i]
	}
	parts := strings.Split(s, ".")
	if len(parts) < 2 {
		return 0, 0, fmt.Errorf("kernel release %s is not of the form <major>.<minor>[...]", clip.QuoteN(orig, 120))
	}
	var n [2]int
	for i := range n {
		p := parts[i]
		if p == "" || len(p) > 4 || strings.Trim(p, "0123456789") != "" {
			return 0, 0, fmt.Errorf("kernel release %s is not of the form <major>.<minor>[...]", clip.QuoteN(orig, 120))
		}
		n[i], _ = strconv.Atoi(p)
	}
	if n[0] == 0 {
		return 0, 0, fmt.Errorf("kernel release %s has major version 0", clip.QuoteN(orig, 120))
	}
	return n[0], n[1], nil
}

// AtLeast reports whether release s is major.minor or newer; an unparsable
// release is an error.
func AtLeast(s string, major, minor int) (bool, error) {
	a, b, err := ParseRelease(s)
	if err != nil {
		return false, err
	}
	return a > major || a == major && b >= minor, nil
}
