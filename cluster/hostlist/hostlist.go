// Package hostlist expands Slurm's hostlist expressions (SLURM_JOB_NODELIST,
// `scontrol show hostnames`) into node names.
//
// The grammar is Slurm's own (src/common/hostlist.c, one-dimensional
// clusters), read from its source rather than guessed:
//
//   - Top level: names separated by commas, spaces or tabs; a separator inside
//     brackets does not split (gpu[1,3],cpu1 is two tokens).
//   - A name may carry several bracket groups; the last one must end the name
//     (rack[1-2]n[01-03] is valid, gpu[1-2]-ib is not: Slurm rejects it).
//     Earlier groups vary slowest: a[1-2]b[3-4] is a1b3 a1b4 a2b3 a2b4.
//   - Inside brackets: comma-separated items, each N or LO-HI in decimal
//     digits with LO <= HI. The width of LO is the zero padding of the whole
//     item: [08-10] is 08 09 10, [8-10] is 8 9 10. A range holds at most
//     65536 names, as in Slurm.
//   - Not part of the grammar, and rejected here with the offending text:
//     negative numbers, steps or exclusions (^, !, :), x-boxes (only
//     multi-dimensional systems have them), nested or unbalanced brackets,
//     empty items.
//   - Stricter than Slurm, on purpose (a node name becomes the address a
//     peer dials): an unclosed '[' or a stray ']' (Slurm keeps them as literal
//     names), characters outside letters, digits, '-', '.', '_' (Slurm keeps
//     "gpu^1" as a name), spaces or '+' inside brackets (Slurm's strtoul
//     reads "[1, 2]" as 1 and 02), numbers beyond 32 bits.
//
// TestAgreesWithScontrol compares every valid case, and the rejections both
// share, with `scontrol show hostnames` (Slurm 22.05) where it is installed.
//
// Names are returned in expression order, duplicates kept (as Slurm does);
// callers that need one task per node check uniqueness themselves.
package hostlist

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxRange is the most names one LO-HI item may expand to (Slurm's MAX_RANGE).
const MaxRange = 64 * 1024

// MaxNames bounds a whole expansion, so a hostile a[0-65535]b[0-65535] fails
// with an error instead of exhausting memory.
const MaxNames = 1 << 20

// Error says which part of which expression is wrong.
type Error struct {
	Expr string // the whole expression
	Part string // the token or item that is wrong
	Why  string
}

func (e *Error) Error() string {
	if e.Part == "" || e.Part == e.Expr {
		return fmt.Sprintf("hostlist %q: %s", e.Expr, e.Why)
	}
	return fmt.Sprintf("hostlist %q: %q: %s", e.Expr, e.Part, e.Why)
}

// Expand returns every name the expression denotes, in order. An empty or
// all-separator expression is an empty list.
func Expand(expr string) ([]string, error) {
	toks, err := split(expr)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, tok := range toks {
		names, err := expandToken(expr, tok, MaxNames-len(out))
		if err != nil {
			return nil, err
		}
		out = append(out, names...)
	}
	return out, nil
}

func isSep(c byte) bool { return c == ',' || c == ' ' || c == '\t' }

// split cuts expr at top-level separators.
func split(expr string) ([]string, error) {
	var toks []string
	depth, start := 0, -1
	for i := 0; i < len(expr); i++ {
		c := expr[i]
		switch {
		case c == '[':
			if depth > 0 {
				return nil, &Error{Expr: expr, Part: expr[max(start, 0) : i+1], Why: "nested '['"}
			}
			depth++
		case c == ']':
			if depth == 0 {
				return nil, &Error{Expr: expr, Part: expr[max(start, 0) : i+1], Why: "']' without '['"}
			}
			depth--
		case depth == 0 && isSep(c):
			if start >= 0 {
				toks = append(toks, expr[start:i])
				start = -1
			}
			continue
		case c < 0x21 || c > 0x7e:
			return nil, &Error{Expr: expr, Part: expr[max(start, 0):min(i+1, len(expr))], Why: fmt.Sprintf("character %q is not allowed in a node name", c)}
		}
		if start < 0 {
			start = i
		}
	}
	if depth > 0 {
		return nil, &Error{Expr: expr, Part: expr[max(start, 0):], Why: "'[' is never closed"}
	}
	if start >= 0 {
		toks = append(toks, expr[start:])
	}
	return toks, nil
}

// group is one bracket group: the literal text before it and its numbers.
type group struct {
	lit  string
	nums []string
}

// expandToken expands one top-level name with zero or more bracket groups.
func expandToken(expr, tok string, budget int) ([]string, error) {
	var groups []group
	rest := tok
	for {
		open := strings.IndexByte(rest, '[')
		if open < 0 {
			break
		}
		close := strings.IndexByte(rest, ']') // split guarantees it exists and follows
		nums, err := expandRanges(expr, tok, rest[open+1:close], budget)
		if err != nil {
			return nil, err
		}
		groups = append(groups, group{lit: rest[:open], nums: nums})
		rest = rest[close+1:]
	}
	if err := checkLiteral(expr, tok, strings.Join(append(lits(groups), rest), "")); err != nil {
		return nil, err
	}
	if len(groups) == 0 {
		return []string{tok}, nil
	}
	if rest != "" {
		return nil, &Error{Expr: expr, Part: tok, Why: fmt.Sprintf("text %q after the last ']' (Slurm allows none: write the suffix before the brackets or list the names)", rest)}
	}
	total := 1
	for _, g := range groups {
		total *= len(g.nums)
		if total > budget {
			return nil, &Error{Expr: expr, Part: tok, Why: fmt.Sprintf("expands to more than %d names", MaxNames)}
		}
	}
	out := make([]string, 0, total)
	var walk func(i int, prefix string)
	walk = func(i int, prefix string) {
		if i == len(groups) {
			out = append(out, prefix)
			return
		}
		for _, n := range groups[i].nums {
			walk(i+1, prefix+groups[i].lit+n)
		}
	}
	walk(0, "")
	return out, nil
}

func lits(gs []group) []string {
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = g.lit
	}
	return out
}

// checkLiteral rejects characters that cannot be part of a node name used as
// a network host name (the peer address is the node name).
func checkLiteral(expr, tok, lit string) error {
	for i := 0; i < len(lit); i++ {
		c := lit[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' {
			continue
		}
		return &Error{Expr: expr, Part: tok, Why: fmt.Sprintf("character %q is not allowed in a node name (letters, digits, '-', '.', '_')", c)}
	}
	return nil
}

// expandRanges expands the inside of one bracket group: "001-004,017".
func expandRanges(expr, tok, inner string, budget int) ([]string, error) {
	if inner == "" {
		return nil, &Error{Expr: expr, Part: tok, Why: "empty brackets"}
	}
	var out []string
	for _, item := range strings.Split(inner, ",") {
		lo, hi, isRange := strings.Cut(item, "-")
		if item == "" || !digits(lo) || isRange && !digits(hi) {
			return nil, &Error{Expr: expr, Part: tok, Why: fmt.Sprintf("bad range item %q: want N or LO-HI in decimal digits", item)}
		}
		l, err1 := strconv.ParseUint(lo, 10, 32)
		h := l
		var err2 error
		if isRange {
			h, err2 = strconv.ParseUint(hi, 10, 32)
		}
		if err1 != nil || err2 != nil {
			return nil, &Error{Expr: expr, Part: tok, Why: fmt.Sprintf("number in %q is too large", item)}
		}
		if l > h {
			return nil, &Error{Expr: expr, Part: tok, Why: fmt.Sprintf("range %q runs backwards", item)}
		}
		if h-l+1 > MaxRange {
			return nil, &Error{Expr: expr, Part: tok, Why: fmt.Sprintf("range %q holds more than %d names", item, MaxRange)}
		}
		if len(out)+int(h-l+1) > budget {
			return nil, &Error{Expr: expr, Part: tok, Why: fmt.Sprintf("expands to more than %d names", MaxNames)}
		}
		width := len(lo)
		for n := l; n <= h; n++ {
			out = append(out, fmt.Sprintf("%0*d", width, n))
		}
	}
	return out, nil
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
