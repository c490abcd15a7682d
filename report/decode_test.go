package report

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slowEvent is how readEvents read a line before decodeEvent: encoding/json,
// then the strings a test wrote made visible.
func slowEvent(line []byte) (Event, error) {
	var e Event
	if err := json.Unmarshal(line, &e); err != nil {
		return Event{}, err
	}
	e.Package, e.Test, e.Output, e.Key, e.Value, e.ImportPath = visible(e.Package), visible(e.Test), visible(e.Output), visible(e.Key), visible(e.Value), visible(e.ImportPath)
	return e, nil
}

func sameEvent(t *testing.T, line string, r *reader) bool {
	t.Helper()
	want, werr := slowEvent([]byte(line))
	var got Event
	_, gerr := decodeEvent([]byte(line), r, &got, false)
	if (werr == nil) != (gerr == nil) {
		return assert.Fail(t, "errors differ", "%q: encoding/json %v, decodeEvent %v", line, werr, gerr)
	}
	if werr != nil {
		return true
	}
	if (want.Time == nil) != (got.Time == nil) || want.Time != nil && !want.Time.Equal(*got.Time) {
		return assert.Fail(t, "times differ", "%q", line)
	}
	want.Time, got.Time = nil, nil
	return assert.Equal(t, want, got, "%q", line)
}

// decodeEvent reads every line as encoding/json (then visible) does: every
// line of every recorded run, and lines made to stray from test2json's.
func TestDecodeEventAsEncodingJSON(t *testing.T) {
	in := newInterner()
	r := in.reader()
	files, err := filepath.Glob(filepath.Join(runsDir, "*", "*", "test.json"))
	require.NoError(t, err)
	more, _ := filepath.Glob(filepath.Join(runsDir, "*", "test.json"))
	files = append(files, more...)
	require.NotEmpty(t, files)
	lines := 0
	for _, f := range files {
		fh, err := os.Open(f)
		require.NoError(t, err)
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			lines++
			if !sameEvent(t, sc.Text(), r) {
				break
			}
		}
		fh.Close()
	}
	t.Logf("%d recorded lines read alike", lines)
	for _, l := range []string{
		`{"Action":"output","Test":"T","Output":"a \u003cif\u003e \u0026 \"q\" \\ \/ \b\f\n\r\t"}`,
		`{"Action":"output","Output":"\u001b[0m bell\u0007 del\u007f nul\u0000"}`,
		`{"Action":"output","Output":"pair \ud83d\ude00 lone \ud83d x \ude00 y \ud83d\u0041"}`,
		`{"Action":"output","Output":"µs ✓ raw UTF-8"}`,
		"{\"Action\":\"output\",\"Output\":\"bad \xff byte\"}",
		"{\"Action\":\"output\",\"Output\":\"raw \x01 control\"}",
		`{"Action":"output","Output":"bidi \u202e override"}`,
		`{"action":"pass","test":"lower case keys"}`,
		`{"Action":"pass","Elapsed":1.5e-3,"Extra":"x","FailedBuild":"pkg"}`,
		`{"Action":"pass","Elapsed":-0,"Nested":{"a":1}}`,
		`{"Action":"pass","Elapsed":"1"}`,
		`{"Action":"pass","Elapsed":01}`,
		`{"Action":"pass","Elapsed":1.}`,
		`{"Action":"pass","Test":null}`,
		`{"Action":"pass","Test":"a","Test":"b"}`,
		`{"Time":"2026-12-02T02:47:59.554658246Z","Action":"run"}`,
		`{"Time":"2026-12-02T02:47:59+01:00","Action":"run"}`,
		`{"Time":"yesterday","Action":"run"}`,
		`{"Time":"2026-12-02T02:47:59Z","Time":"2026-12-03T02:47:59Z","Action":"run"}`,
		` { "Action" : "skip" , "Key" : "k" , "Value" : "v" } `,
		`{"Action":"pass",}`,
		`{"Action":"pass"} trailing`,
		`{"Action":"pass"`,
		`{}`,
		`[1,2]`,
		`not json at all`,
		`{"Action":"output","Output":"\x41"}`,
		`{"Action":"output","Output":"\u12"}`,
		`{"Action":"output","Output":"ends in a backslash\`,
		`{"Action":"out\u0070ut","Output":"escaped action"}`,
		`{"Act\u0069on":"pass"}`,
	} {
		sameEvent(t, l, r)
		sameEvent(t, l, nil)
	}
}

func FuzzDecodeEvent(f *testing.F) {
	f.Add(`{"Action":"output","Test":"T","Output":"x \u003c\n"}`)
	f.Add(`{"Time":"2026-12-02T02:47:59Z","Action":"pass","Elapsed":0.5}`)
	f.Add(`{"Action":"attr","Key":"gdr.req","Value":"PP-08"}`)
	f.Fuzz(func(t *testing.T, line string) {
		sameEvent(t, line, newInterner().reader())
	})
}

// One string, once: the same text read again (another host's file read by
// the same reader) is one string.
func TestInternerSharesText(t *testing.T) {
	in := newInterner()
	a := in.reader()
	defer in.done(a)
	var x, y Event
	line := []byte(`{"Action":"output","Test":"TestPP08Bandwidth/rail0","Output":"=== RUN   TestPP08Bandwidth/rail0\n"}`)
	_, err := decodeEvent(line, a, &x, false)
	require.NoError(t, err)
	_, err = decodeEvent(append([]byte(nil), line...), a, &y, false)
	require.NoError(t, err)
	assert.Equal(t, x, y)
	assert.Same(t, unsafeData(x.Output), unsafeData(y.Output), "one copy of the text")
	assert.True(t, strings.HasPrefix(x.Output, "=== RUN"))
}

func unsafeData(s string) *byte { return unsafe.StringData(s) }

// A report's reading leaves out test2json's "=== ATTR" echo of each attr
// event (the attr event carries it); ReadEvents, which the lab's copies
// of a run use, keeps every line.
func TestReportReadingSkipsAttrEchoes(t *testing.T) {
	in := `{"Action":"attr","Package":"p","Test":"T","Key":"gdr.req","Value":"PP-08"}
{"Action":"output","Package":"p","Test":"T","Output":"=== ATTR  T gdr.req PP-08\n"}
{"Time":"2026-12-02T02:47:59Z","Action":"output","Package":"p","Test":"T","Output":"=== ATTR  T gdr.note café\n"}
{"Action":"output","Package":"p","Test":"T","Output":"    x_test.go:1: === ATTR is only framing at the start\n"}
{"Action":"pass","Package":"p","Test":"T"}
`
	all, err := ReadEvents(strings.NewReader(in))
	require.NoError(t, err)
	assert.Len(t, all, 5)
	evs, note, err := readEvents(strings.NewReader(in), "t.json", newInterner())
	require.NoError(t, err)
	assert.Empty(t, note)
	require.Len(t, evs, 3)
	assert.Equal(t, "attr", evs[0].Action)
	assert.Equal(t, "    x_test.go:1: === ATTR is only framing at the start\n", evs[1].Output)
	h := Build([]Run{{Host: Identity{Host: "h"}, Events: evs}}).Hosts[0]
	assert.Equal(t, "PP-08", h.Cases()[0].Req, "the attribute is there")
}
