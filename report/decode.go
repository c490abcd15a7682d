package report

import (
	"encoding/json"
	"hash/maphash"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// interner keeps one copy of each string the events of a merge repeat: a
// fleet's hosts name the same packages, tests and attributes and print the
// same lines, so 1024 hosts hold about one host's text, not 1024 copies.
type interner struct {
	mu sync.Mutex
	m  map[string]string
}

func newInterner() *interner { return &interner{m: map[string]string{}} }

// reader is one file's view of an interner: the strings it has met are
// found without the lock. A nil *reader interns nothing.
type reader struct {
	shared *interner
	seen   map[string]string
	buf    []byte // a string's bytes with its escapes undone
}

func (in *interner) reader() *reader {
	if in == nil {
		return nil
	}
	return &reader{shared: in, seen: map[string]string{}}
}

// bytes is b as an interned string; b is not kept.
func (r *reader) bytes(b []byte) string {
	if r == nil {
		return string(b)
	}
	if s, ok := r.seen[string(b)]; ok {
		return s
	}
	r.shared.mu.Lock()
	s, ok := r.shared.m[string(b)]
	if !ok {
		s = string(b)
		r.shared.m[s] = s
	}
	r.shared.mu.Unlock()
	r.seen[s] = s
	return s
}

// str is s interned.
func (r *reader) str(s string) string {
	if r == nil {
		return s
	}
	if v, ok := r.seen[s]; ok {
		return v
	}
	r.shared.mu.Lock()
	v, ok := r.shared.m[s]
	if !ok {
		v = s
		r.shared.m[s] = s
	}
	r.shared.mu.Unlock()
	r.seen[v] = v
	return v
}

// decodeEvent reads one go test -json line into e as readEvents does (the
// strings a test wrote made visible, every string interned in r): test2json's
// lines are flat objects of strings and one number, which it reads without
// encoding/json's reflection and, for text met before, without allocating.
// Any other line (other bytes than printable ASCII, a key in another case,
// a value not a string or number, a syntax error) it decodes with
// encoding/json, so both read every line alike.
func decodeEvent(line []byte, r *reader, e *Event) error {
	*e = Event{}
	if fastEvent(line, r, e) {
		return nil
	}
	*e = Event{}
	if err := json.Unmarshal(line, e); err != nil {
		return err
	}
	e.Action = r.str(e.Action)
	for _, p := range []*string{&e.Package, &e.Test, &e.Output, &e.Key, &e.Value, &e.ImportPath} {
		*p = r.str(visible(*p))
	}
	return nil
}

// eventKeys are Event's fields as test2json names them.
var eventKeys = []string{"Time", "Action", "Package", "Test", "Elapsed", "Output", "Key", "Value", "ImportPath"}

// fastEvent is decodeEvent's reading of a flat test2json object; false when
// the line is anything else.
func fastEvent(line []byte, r *reader, e *Event) bool {
	i := skipSpace(line, 0)
	if i == len(line) || line[i] != '{' {
		return false
	}
	i = skipSpace(line, i+1)
	if i < len(line) && line[i] == '}' {
		return skipSpace(line, i+1) == len(line)
	}
	for {
		if i == len(line) || line[i] != '"' {
			return false
		}
		j := i + 1
		for j < len(line) && line[j] > 0x20 && line[j] < 0x7f && line[j] != '"' && line[j] != '\\' {
			j++
		}
		if j == len(line) || line[j] != '"' {
			return false
		}
		key := line[i+1 : j]
		i = skipSpace(line, j+1)
		if i == len(line) || line[i] != ':' {
			return false
		}
		i = skipSpace(line, i+1)
		if i == len(line) {
			return false
		}
		var ok bool
		switch string(key) {
		case "Elapsed":
			j := i
			for j < len(line) && (line[j] >= '0' && line[j] <= '9' || line[j] == '-' || line[j] == '+' || line[j] == '.' || line[j] == 'e' || line[j] == 'E') {
				j++
			}
			if j == i || line[i] == '+' || !json.Valid(line[i:j]) {
				return false
			}
			f, err := strconv.ParseFloat(string(line[i:j]), 64)
			if err != nil {
				return false
			}
			e.Elapsed, i = f, j
		case "Time":
			start := i
			if _, i, ok = r.stringAt(line, i, false); !ok {
				return false
			}
			t := new(time.Time)
			if t.UnmarshalJSON(line[start:i]) != nil {
				return false
			}
			e.Time = t
		case "Action":
			if e.Action, i, ok = r.stringAt(line, i, false); !ok {
				return false
			}
		case "Package", "Test", "Output", "Key", "Value", "ImportPath":
			var s string
			if s, i, ok = r.stringAt(line, i, true); !ok {
				return false
			}
			switch string(key) {
			case "Package":
				e.Package = s
			case "Test":
				e.Test = s
			case "Output":
				e.Output = s
			case "Key":
				e.Key = s
			case "Value":
				e.Value = s
			default:
				e.ImportPath = s
			}
		default:
			for _, k := range eventKeys {
				if strings.EqualFold(k, string(key)) {
					return false // encoding/json matches keys in any case
				}
			}
			if _, i, ok = (*reader)(nil).stringAt(line, i, false); !ok {
				return false // a value this reader does not skip
			}
		}
		i = skipSpace(line, i)
		if i == len(line) {
			return false
		}
		if line[i] == '}' {
			return skipSpace(line, i+1) == len(line)
		}
		if line[i] != ',' {
			return false
		}
		i = skipSpace(line, i+1)
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringAt reads the JSON string that starts at line[i] (its quote) and
// returns it, interned, and the index after its closing quote; shown: made
// visible as readEvents makes what tests wrote. ok is false for bytes
// outside printable ASCII (encoding/json's handling of other bytes is left
// to it) and for an escape JSON does not have.
func (r *reader) stringAt(line []byte, i int, shown bool) (s string, next int, ok bool) {
	if i == len(line) || line[i] != '"' {
		return "", i, false
	}
	j := i + 1
	for j < len(line) && line[j] >= 0x20 && line[j] < 0x7f && line[j] != '"' && line[j] != '\\' {
		j++
	}
	if j < len(line) && line[j] == '"' {
		return r.bytes(line[i+1 : j]), j + 1, true // no escapes: printable ASCII as it stands
	}
	var buf []byte
	if r != nil {
		buf = r.buf[:0]
	}
	buf = append(buf, line[i+1:j]...)
	for {
		if j == len(line) {
			return "", j, false
		}
		c := line[j]
		switch {
		case c == '"':
			if r != nil {
				r.buf = buf
			}
			if shown {
				return r.str(visible(string(buf))), j + 1, true
			}
			return r.bytes(buf), j + 1, true
		case c == '\\':
			if j+1 == len(line) {
				return "", j, false
			}
			j++
			switch line[j] {
			case '"', '\\', '/':
				buf = append(buf, line[j])
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				c1, ok := hex4(line, j+1)
				if !ok {
					return "", j, false
				}
				j += 4
				ru := rune(c1)
				if utf16.IsSurrogate(ru) {
					// A pair makes one rune; a lone half is U+FFFD, as encoding/json has it.
					ru = utf8.RuneError
					if j+2 < len(line) && line[j+1] == '\\' && line[j+2] == 'u' {
						if c2, ok := hex4(line, j+3); ok {
							if d := utf16.DecodeRune(rune(c1), rune(c2)); d != utf8.RuneError {
								ru, j = d, j+6
							}
						}
					}
				}
				buf = utf8.AppendRune(buf, ru)
			default:
				return "", j, false
			}
			j++
		case c < 0x20 || c >= 0x7f:
			return "", j, false
		default:
			buf = append(buf, c)
			j++
		}
	}
}

func hex4(b []byte, i int) (uint16, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var v uint16
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | uint16(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | uint16(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | uint16(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
}

// mapTable keeps one copy of each attribute map the cases of a merge
// repeat: a fleet's hosts ran the same tests and most of their cases set the
// same facts, so 1024 hosts' cases share their maps. A map is read-only once
// shared (link shares a case's maps when it is done with them).
type mapTable struct {
	mu   sync.Mutex
	seed maphash.Seed
	m    map[uint64][]map[string]string
}

func newMapTable() *mapTable {
	return &mapTable{seed: maphash.MakeSeed(), m: map[uint64][]map[string]string{}}
}

// share is a map equal to a: one seen before, else a itself. A nil table
// shares nothing.
func (t *mapTable) share(a map[string]string) map[string]string {
	if t == nil || len(a) == 0 {
		return a
	}
	var h uint64
	for k, v := range a {
		// A sum over the pairs: the same whatever order the map gives them.
		h += maphash.String(t.seed, k)*0x9e3779b97f4a7c15 ^ maphash.String(t.seed, v)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range t.m[h] {
		if maps.Equal(c, a) {
			return c
		}
	}
	t.m[h] = append(t.m[h], a)
	return a
}
