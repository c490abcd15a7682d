// Package report turns go test -json event streams (attr events included) of
// one host or many into the suite's qualification report: junit.xml,
// summary.txt (printed at the end of every run), summary.md, summary.json and
// a self-contained report.html, with one verdict: QUALIFIED, NOT QUALIFIED
// (n must requirements failed) or INCOMPLETE (n skipped, m not run); merged,
// NOT QUALIFIED (k of n hosts: the hosts). docs/reports.md, "Counts".
//
// A host's folder holds test.json (its events) and host.json (its identity,
// written on the host at report time by Collect); folders of many hosts merge
// by reading each (LoadDir). The model is go-junit-report's gtr (one
// gtr.Package per host and area) plus the tests' attributes, and the JUnit
// output uses its junit types (see Testcase for what they lack).
package report

import (
	"bytes"
	"fmt"
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
	writers := map[string]func(*bytes.Buffer) error{
		JUnitFile:   func(b *bytes.Buffer) error { return r.WriteJUnit(b) },
		SummaryText: func(b *bytes.Buffer) error { return r.WriteText(b) },
		SummaryMD:   func(b *bytes.Buffer) error { return r.WriteMarkdown(b) },
		SummaryJSON: func(b *bytes.Buffer) error { return r.WriteJSON(b) },
		HTMLFile:    func(b *bytes.Buffer) error { return r.WriteHTML(b) },
		PromFile:    func(b *bytes.Buffer) error { return r.WritePrometheus(b) },
		ActionsFile: func(b *bytes.Buffer) error { return r.WriteActions(b) },
		ExitCodeFile: func(b *bytes.Buffer) error {
			_, err := fmt.Fprintf(b, "%d\n", r.ExitCode())
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
	// the DCGM-shaped documents (one per host) with them.
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
			var b bytes.Buffer
			if err := write(&b); err != nil {
				errs <- fmt.Errorf("%s: %v", name, err)
				return
			}
			if b.Len() == 0 && name == ActionsFile { // nothing to act on: no file, and none left from before
				if err := os.Remove(filepath.Join(dir, name)); err != nil && !os.IsNotExist(err) {
					errs <- err
					return
				}
				errs <- nil
				return
			}
			errs <- os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644)
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
