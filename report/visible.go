package report

import (
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"
)

// visible writes what a terminal, a browser or an XML parser would act on
// or choke on as escapes, so that text a host or its tests wrote (a hostile
// host.json, a test that printed an escape sequence) reaches every format as
// characters to read: control characters but tab and newline (ESC, BEL,
// NUL, CR; DEL and the C1 set, whose 0x9b starts a terminal sequence too),
// bytes that are not UTF-8, U+FFFD itself (a reader cannot tell it from a
// decoding error), U+FFFE/U+FFFF, and the bidirectional overrides that
// reorder what is shown. Each is \xNN (below U+0100 and bad bytes) or
// \uNNNN.
func visible(s string) string {
	if plainText(s) {
		return s // the common case: nothing to escape, no copy
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case !shown(r) && r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		case !shown(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// shown says whether r is written as itself.
func shown(r rune) bool {
	switch {
	case r == '\t' || r == '\n':
		return true
	case r < 0x20 || r >= 0x7f && r <= 0x9f:
		return false
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return false
	case r == utf8.RuneError, r == 0xfffe, r == 0xffff:
		return false
	}
	return true
}

// plainText: printable ASCII, tab and newline only.
func plainText(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 || c > 0x7e) && c != '\t' && c != '\n' {
			return false
		}
	}
	return true
}

// visibleAll applies visible to every string v points at (a struct's
// fields, slices, maps' values), in place: what a host wrote in host.json.
func visibleAll(v any) {
	walk(reflect.ValueOf(v))
}

func walk(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			walk(v.Elem())
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				walk(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			walk(v.Index(i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			e := v.MapIndex(k) // not addressable: walk a copy, store it back
			c := reflect.New(e.Type()).Elem()
			c.Set(e)
			walk(c)
			v.SetMapIndex(k, c)
		}
	case reflect.String:
		if v.CanSet() {
			v.SetString(visible(v.String()))
		}
	}
}
