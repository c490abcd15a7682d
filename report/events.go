package report

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"time"

	"github.com/gdrconf/gdrconf/internal/sharedfile"
)

// Event is one `go test -json` (test2json) event, attr events included.
type Event struct {
	Time    *time.Time `json:",omitempty"`
	Action  string
	Package string  `json:",omitempty"`
	Test    string  `json:",omitempty"`
	Elapsed float64 `json:",omitempty"`
	Output  string  `json:",omitempty"`
	Key     string  `json:",omitempty"`
	Value   string  `json:",omitempty"`
	// ImportPath names the package of build-output and build-fail events.
	ImportPath string `json:",omitempty"`
}

// ReadEvents reads newline-separated JSON events. A line that is not an
// event (a crash message, a shell's complaint) is kept as package output,
// so nothing a run printed is lost.
func ReadEvents(r io.Reader) ([]Event, error) {
	evs, _, err := readEvents(r, "", nil)
	return evs, err
}

// readEvents is ReadEvents that also says what it passed over in name
// (sharedfile.Stats.Note): lines too long to keep, and a last line cut
// short that is no event (a node that died mid-write, a straggler still
// writing), which is dropped rather than kept as output. With an interner
// (a report's reading: in not nil) its strings are interned, and the
// "=== ATTR" output lines test2json echoes for each attr event are left out
// unread: the attr events carry the same (a third of a test.json's lines);
// ReadEvents (nil) keeps every line, for the lab's copies of a run.
func readEvents(r io.Reader, name string, in *interner) ([]Event, string, error) {
	var evs []Event
	if f, ok := r.(interface{ Stat() (os.FileInfo, error) }); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			// Lines run 150 to 300 bytes: room for them at once, not grown
			// by doubling (a host has thousands).
			evs = make([]Event, 0, min(fi.Size()/220, 1<<20))
		}
	}
	lost := false
	rd := in.reader()
	defer in.done(rd)
	st, err := sharedfile.Lines(r, sharedfile.MaxLine, func(line []byte, cut bool) error {
		if len(bytes.TrimSpace(line)) == 0 {
			return nil
		}
		var e Event
		skip, err := decodeEvent(line, rd, &e, in != nil && !cut)
		if skip {
			return nil
		}
		if err != nil || e.Action == "" {
			if cut && bytes.HasPrefix(bytes.TrimSpace(line), []byte("{")) {
				lost = true // half an event
				return nil
			}
			evs = append(evs, Event{Action: "output", Output: visible(string(line)) + "\n"})
			return nil
		}
		// What the tests printed and named reaches every format as text
		// (decodeEvent makes it visible).
		evs = append(evs, e)
		return nil
	})
	return evs, st.Note(name, lost), err
}

// WriteEvents writes events as go test -json lines.
func WriteEvents(w io.Writer, evs []Event) error {
	enc := json.NewEncoder(w)
	for _, e := range evs {
		if err := enc.Encode(e); err != nil {
			return err
		}
	}
	return nil
}
