// Package report turns go test -json event streams (attr events included) of
// one host or many into the suite's qualification report: junit.xml,
// summary.txt (printed at the end of every run), summary.md, summary.json and
// a self-contained report.html, with one verdict: QUALIFIED, NOT QUALIFIED
// (n must requirements failed) or INCOMPLETE (n skipped, m not run); merged,
// NOT QUALIFIED (k of n hosts: the hosts). docs/reports.md, "Counts".
//
// A host's folder holds test.json (its events) and host.json (its identity,
// written on the host at report time by Collect); folders of many hosts merge
// by reading each (LoadDir). The model is one go-junit-report gtr.Package
// per host and area holding the package's own cases with their attributes
// (model.go); the JUnit output is this package's (junit.go).
package report

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Report file names (contract: pipelines read them).
const (
	SummaryText = "summary.txt"
	SummaryMD   = "summary.md"
	SummaryJSON = "summary.json"
	HTMLFile    = "report.html"
	// ExitCodeFile holds the verdict's exit status (ExitCode) and a newline,
	// for pipelines whose runner (make) cannot pass it through.
	ExitCodeFile = "exit-code"
	// DCGMFile is the DCGM-shaped diagnostic JSON (WriteDCGM).
	DCGMFile = "dcgm-diag.json"
)

// WriteAll writes junit.xml, summary.txt, summary.md, summary.json,
// report.html and exit-code into dir, and the DCGM-shaped JSON: dcgm-diag.json
// of one host, dcgm-diag/<host>.json of each of many.
func (r *Report) WriteAll(dir string) error { return r.write(dir, nil) }

// CompactReports are what a cluster round writes beside its compacted
// events (gdrreport -collect -compact): the summary the job's log prints
// and the verdict's code. The merge after the last round renders every
// format of every host from the events.
var CompactReports = []string{SummaryText, ExitCodeFile}

// WriteOnly writes the named files of WriteAll's (CompactReports, say) into
// dir, and nothing else.
func (r *Report) WriteOnly(dir string, names ...string) error {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	return r.write(dir, want)
}

// write writes WriteAll's files, or of them those in only.
func (r *Report) write(dir string, only map[string]bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if r.Time == "" {
		r.Time = time.Now().UTC().Format(time.RFC3339) // before the writers share r
	}
	writers := map[string]func(io.Writer) error{
		JUnitFile:   r.WriteJUnit,
		SummaryText: r.WriteText,
		SummaryMD:   r.WriteMarkdown,
		SummaryJSON: r.WriteJSON,
		HTMLFile:    r.WriteHTML,
		PromFile:    r.WritePrometheus,
		ActionsFile: r.WriteActions,
		ExitCodeFile: func(w io.Writer) error {
			_, err := fmt.Fprintf(w, "%d\n", r.ExitCode())
			return err
		},
	}
	dcgm := only == nil || only[DCGMFile]
	for name := range writers {
		if only != nil && !only[name] {
			delete(writers, name)
		}
	}
	// The writers only read r: a fleet's files are written side by side,
	// the DCGM-shaped documents (one per host) with them, each straight to
	// its file (a fleet's junit.xml is hundreds of MB: never held whole).
	errs := make(chan error, len(writers)+1)
	go func() {
		if !dcgm {
			errs <- nil
			return
		}
		errs <- r.writeDCGM(dir)
	}()
	for name, write := range writers {
		go func() {
			n, err := writeFile(filepath.Join(dir, name), write)
			if err != nil {
				errs <- fmt.Errorf("%s: %v", name, err)
				return
			}
			if n == 0 && name == ActionsFile { // nothing to act on: no file, and none left from before
				if err := os.Remove(filepath.Join(dir, name)); err != nil && !os.IsNotExist(err) {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	var first error
	for range len(writers) + 1 {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// writeFile writes path with write through a buffer and says how many
// bytes it wrote.
func writeFile(path string, write func(io.Writer) error) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	cw := &countWriter{w: f}
	bw := bufio.NewWriterSize(cw, 256<<10)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return cw.n, err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// SaveRun writes a host's run as a report folder (test.json and host.json)
// that LoadDir reads back: the lab keeps each VM's run this way.
func SaveRun(dir string, run Run) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var b bytes.Buffer
	if err := WriteEvents(&b, run.Events); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, EventsFile), b.Bytes(), 0o644); err != nil {
		return err
	}
	return WriteIdentity(dir, run.Host)
}
