package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"time"
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
	var evs []Event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var e Event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			evs = append(evs, Event{Action: "output", Output: string(line) + "\n"})
			continue
		}
		evs = append(evs, e)
	}
	return evs, sc.Err()
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
