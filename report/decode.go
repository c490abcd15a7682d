package report

import (
	"bytes"
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
// same lines, so 1024 hosts hold about one host's text per reader, not 1024
// copies. Its readers are pooled: a file is read by one reader at a time,
// each with its own table, so no lock is taken per string (with two or more
// reading at once the text is held once per reader).
type interner struct {
	pool sync.Pool
}

func newInterner() *interner {
	return &interner{pool: sync.Pool{New: func() any { return &reader{seen: map[string]string{}} }}}
}

// reader is one table of an interner, taken for one file at a time. A nil
// *reader interns nothing.
type reader struct {
	seen map[string]string
	buf  []byte // a string's bytes with its escapes undone
}

// reader takes a table for reading one file; done gives it back.
func (in *interner) reader() *reader {
	if in == nil {
		return nil
	}
	return in.pool.Get().(*reader)
}

func (in *interner) done(r *reader) {
	if in != nil && r != nil {
		in.pool.Put(r)
	}
}

// bytes is b as an interned string; b is not kept.
func (r *reader) bytes(b []byte) string {
	if r == nil {
		return string(b)
	}
	if s, ok := r.seen[string(b)]; ok {
		return s
	}
	s := string(b)
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
	r.seen[s] = s
	return s
}

// decodeEvent reads one go test -json line into e as readEvents does (the
// strings a test wrote made visible, every string interned in r): test2json's
// lines are flat objects of strings and one number, which it reads without
// encoding/json's reflection and, for text met before, without allocating.
// Any other line (other bytes than printable ASCII, a key in another case,
// a value not a string or number, a syntax error) it decodes with
// encoding/json, so both read every line alike. dropEcho: an output event
// whose text starts "=== ATTR " (test2json's echo of an attr event) is
// skipped, read no further.
func decodeEvent(line []byte, r *reader, e *Event, dropEcho bool) (skip bool, err error) {
	*e = Event{}
	if ok, skip := fastEvent(line, r, e, dropEcho); ok || skip {
		return skip, nil
	}
	var slow Event // its own variable: e stays the caller's, on its stack
	if err := json.Unmarshal(line, &slow); err != nil {
		return false, err
	}
	if dropEcho && slow.Action == "output" && strings.HasPrefix(slow.Output, "=== ATTR ") {
		return true, nil
	}
	*e = slow
	e.Action = r.str(e.Action)
	for _, p := range []*string{&e.Package, &e.Test, &e.Output, &e.Key, &e.Value, &e.ImportPath} {
		*p = r.str(visible(*p))
	}
	return false, nil
}

// eventKeys are Event's fields as test2json names them.
var eventKeys = []string{"Time", "Action", "Package", "Test", "Elapsed", "Output", "Key", "Value", "ImportPath"}

// fastEvent is decodeEvent's reading of a flat test2json object: ok false
// when the line is anything else; skip for an echo (dropEcho), which it
// stops reading at its text.
func fastEvent(line []byte, r *reader, e *Event, dropEcho bool) (ok, skip bool) {
	i := skipSpace(line, 0)
	if i == len(line) || line[i] != '{' {
		return false, false
	}
	i = skipSpace(line, i+1)
	if i < len(line) && line[i] == '}' {
		return skipSpace(line, i+1) == len(line), false
	}
	var when []byte // the time, read once the line is known to be kept
	for {
		if i == len(line) || line[i] != '"' {
			return false, false
		}
		j := i + 1
		for j < len(line) && line[j] > 0x20 && line[j] < 0x7f && line[j] != '"' && line[j] != '\\' {
			j++
		}
		if j == len(line) || line[j] != '"' {
			return false, false
		}
		key := line[i+1 : j]
		i = skipSpace(line, j+1)
		if i == len(line) || line[i] != ':' {
			return false, false
		}
		i = skipSpace(line, i+1)
		if i == len(line) {
			return false, false
		}
		var ok bool
		switch string(key) {
		case "Elapsed":
			j := i
			for j < len(line) && (line[j] >= '0' && line[j] <= '9' || line[j] == '-' || line[j] == '+' || line[j] == '.' || line[j] == 'e' || line[j] == 'E') {
				j++
			}
			if j == i || line[i] == '+' || !json.Valid(line[i:j]) {
				return false, false
			}
			f, err := strconv.ParseFloat(string(line[i:j]), 64)
			if err != nil {
				return false, false
			}
			e.Elapsed, i = f, j
		case "Time":
			start := i
			if i, ok = skipString(line, i); !ok {
				return false, false
			}
			when = line[start:i] // every event's own: not interned
		case "Action":
			if e.Action, i, ok = r.stringAt(line, i, false); !ok {
				return false, false
			}
		case "Package", "Test", "Output", "Key", "Value", "ImportPath":
			if dropEcho && e.Action == "output" && string(key) == "Output" && bytes.HasPrefix(line[i:], echoText) {
				return false, true
			}
			var s string
			if s, i, ok = r.stringAt(line, i, true); !ok {
				return false, false
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
					return false, false // encoding/json matches keys in any case
				}
			}
			if _, i, ok = (*reader)(nil).stringAt(line, i, false); !ok {
				return false, false // a value this reader does not skip
			}
		}
		i = skipSpace(line, i)
		if i == len(line) {
			return false, false
		}
		if line[i] == '}' {
			if skipSpace(line, i+1) != len(line) {
				return false, false
			}
			if when != nil {
				t := new(time.Time)
				if t.UnmarshalJSON(when) != nil {
					return false, false
				}
				e.Time = t
			}
			return true, false
		}
		if line[i] != ',' {
			return false, false
		}
		i = skipSpace(line, i+1)
	}
}

// echoText starts test2json's echo of an attr event, as a JSON string.
var echoText = []byte(`"=== ATTR `)

// skipString is the index after the JSON string at line[i], printable
// ASCII and escapes (what a time holds); ok false for anything else.
func skipString(line []byte, i int) (int, bool) {
	if i == len(line) || line[i] != '"' {
		return i, false
	}
	for j := i + 1; j < len(line); j++ {
		switch c := line[j]; {
		case c == '"':
			return j + 1, true
		case c == '\\':
			j++
		case c < 0x20 || c >= 0x7f:
			return j, false
		}
	}
	return len(line), false
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
