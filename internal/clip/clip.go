// Package clip shortens untrusted text (file content, environment values,
// peer messages) before it goes into an error message: a 100 MB sysfs
// attribute or a garbage GDR_* value must give a readable line, not a flood.
package clip

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Max is how many bytes of a value a message quotes.
const Max = 64

// Prefix returns s, or its first Max bytes (not splitting a UTF-8
// sequence). Whether s was cut is the second result.
func Prefix(s string) (string, bool) { return prefix(s, Max) }

func prefix(s string, max int) (string, bool) {
	if len(s) <= max {
		return s, false
	}
	n := max
	for n > max-utf8.UTFMax && n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n], true
}

// Quote is s as a Go-quoted string (control bytes and invalid UTF-8
// escaped), at most Max bytes of it, with the full length when cut:
// "abc"... (104857600 bytes).
func Quote(s string) string { return QuoteN(s, Max) }

// QuoteN is Quote keeping up to max bytes, for context such as a tool's
// output line (a few hundred bytes at most).
func QuoteN(s string, max int) string {
	p, cut := prefix(s, max)
	if !cut {
		return fmt.Sprintf("%q", p)
	}
	return fmt.Sprintf("%q... (%d bytes)", p, len(s))
}

// Bytes is Quote for a byte slice, without copying all of a large one.
func Bytes(b []byte) string {
	if len(b) <= Max {
		return Quote(string(b))
	}
	p, _ := Prefix(string(b[:Max+1]))
	return fmt.Sprintf("%q... (%d bytes)", p, len(b))
}

// LastLines is the last n lines of s (a tool's output, a log) on one line,
// joined by " | ", for the end of an error message.
func LastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, " | ")
}
