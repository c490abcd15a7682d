// The summary as JSON for programs (summary.json).

package report

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"reflect"
	"slices"

	"github.com/gdrconf/gdrconf/cluster/isolate"
)

// hostJSON is one host in summary.json.
type hostJSON struct {
	Host     string       `json:"host"`
	Verdict  string       `json:"verdict"`
	Line     string       `json:"line"`
	Advice   string       `json:"advice"`
	Failed   int          `json:"failed"`
	NotRun   int          `json:"not_run"`
	Identity Identity     `json:"identity"`
	Reqs     []*ReqResult `json:"requirements"`
	Causes   []*Cause     `json:"shared_causes,omitempty"`
	Errors   []string     `json:"errors,omitempty"`
	Other    []OtherCase  `json:"other_tests,omitempty"`
	Earlier  bool         `json:"earlier_run,omitempty"` // superseded by a later run of the host: not in the verdict
	// A cluster run's: the host's fabric state (cluster/isolate), the
	// rails found bad on it, and its liveness where its run did not
	// finish ("did not start", "stopped in round <k>"; docs/clusters.md).
	Fabric   isolate.State `json:"fabric,omitempty"`
	BadRails []int         `json:"bad_rails,omitempty"`
	Liveness string        `json:"liveness,omitempty"`
	// NVLinkDomain: the NVLink domain the host published at the start
	// barrier, which the planner paired across; absent where it had none.
	NVLinkDomain string     `json:"nvlink_domain,omitempty"`
	Counts       countsJSON `json:"counts"`
	// Soak is the host's soak run, its series downsampled; absent when it
	// ran none.
	Soak *Soak `json:"soak,omitempty"`
}

// countsJSON is summary.json's "counts": requirements by outcome, must and
// report-only apart, and the counted test cases.
type countsJSON struct {
	Must       Tally `json:"must"`
	ReportOnly Tally `json:"report_only"`
	Cases      int   `json:"cases"`
}

// WriteJSON writes summary.json. Always: verdict, line, hosts (each with host,
// verdict and requirements, each requirement with id and status). One host:
// also host (its identity), requirements and shared_causes at the top.
func (r *Report) WriteJSON(w io.Writer) error {
	out := map[string]any{
		"verdict": r.Verdict.Verdict, "line": r.Verdict.Line, "advice": r.Verdict.Advice,
		"failed": r.Verdict.Failed, "not_run": r.Verdict.NotRun, "suite_version": r.Suite,
		"suite_versions": r.Versions, "exit_code": r.ExitCode(),
	}
	if len(r.Verdict.Flags) > 0 {
		out["flags"] = r.Verdict.Flags
	}
	if len(r.Drift) > 0 {
		out["inventory_drift"] = r.Drift
	}
	var hosts []hostJSON
	for _, h := range r.Hosts {
		hj := hostJSON{Host: h.Identity.Host, Verdict: h.Verdict.Verdict, Line: h.Verdict.Line, Advice: h.Verdict.Advice,
			Failed: h.Verdict.Failed, NotRun: h.Verdict.NotRun, Identity: h.Identity, Reqs: h.Reqs, Causes: h.Causes, Errors: h.Errors, Other: h.Other, Earlier: h.Earlier, Soak: h.Soak}
		c := h.Counts()
		hj.Counts = countsJSON{Must: c.Must, ReportOnly: c.ReportOnly, Cases: c.Cases}
		if f := r.fabric(h.Identity.Host); f != nil {
			hj.Fabric, hj.BadRails, hj.Liveness, hj.NVLinkDomain = f.Fabric, f.BadRails, f.Liveness, f.NVLinkDomain
		}
		hosts = append(hosts, hj)
	}
	out["hosts"] = hosts
	if c := r.Cluster; c != nil {
		// Cluster runs (contract): pairs (a, b, rail, status, bw_gbit_s),
		// suspects (host, rail), links.
		out["pairs"], out["suspects"], out["links"] = c.Pairs, c.Suspects, c.Links
		out["cluster"] = r.Findings // isolation's verdict: suspects (host, rail, part, evidence), cleared
	}
	if len(r.Hosts) > 1 {
		// Merged (added keys): the hosts not qualified and incomplete, each
		// requirement across hosts, and the counts summed over hosts.
		var failed, incomplete []string
		for _, h := range r.Hosts {
			switch h.Verdict.Verdict {
			case NotQualified:
				failed = append(failed, h.Identity.Host)
			case Incomplete:
				incomplete = append(incomplete, h.Identity.Host)
			}
		}
		t := r.fleetTally()
		out["failed_hosts"], out["incomplete_hosts"] = failed, incomplete
		out["requirement_counts"] = r.ReqCounts()
		out["fleet_causes"] = r.Causes
		out["counts"] = countsJSON{Must: t.Must, ReportOnly: t.ReportOnly, Cases: t.Cases}
	}
	if len(r.Hosts) == 1 {
		h := r.Hosts[0]
		out["counts"] = hosts[0].Counts
		out["host"] = h.Identity
		out["requirements"] = h.Reqs
		out["shared_causes"] = h.Causes
		out["errors"] = h.Errors
		if h.Soak != nil {
			out["soak"] = h.Soak
		}
	}
	if r.Fleet() {
		// A fleet's is tens of MB: not indented (that cost a second), and
		// written a host at a time, never held whole.
		return writeJSONObject(w, out, "hosts")
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(out)
}

// writeJSONObject writes obj as encoding/json writes it unindented (keys
// sorted, HTML not escaped, a newline after), the slice under key list one
// element at a time.
func writeJSONObject(w io.Writer, obj map[string]any, list string) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	put := func(v any) error {
		buf.Reset()
		if err := enc.Encode(v); err != nil {
			return err
		}
		_, err := w.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
		return err
	}
	keys := slices.Sorted(maps.Keys(obj))
	for i, k := range keys {
		sep := ","
		if i == 0 {
			sep = "{"
		}
		if _, err := io.WriteString(w, sep); err != nil {
			return err
		}
		if err := put(k); err != nil {
			return err
		}
		if _, err := io.WriteString(w, ":"); err != nil {
			return err
		}
		v := reflect.ValueOf(obj[k])
		if k != list || v.Kind() != reflect.Slice || v.IsNil() {
			if err := put(obj[k]); err != nil {
				return err
			}
			continue
		}
		for j := 0; j < v.Len(); j++ {
			sep := ","
			if j == 0 {
				sep = "["
			}
			if _, err := io.WriteString(w, sep); err != nil {
				return err
			}
			if err := put(v.Index(j).Interface()); err != nil {
				return err
			}
		}
		if v.Len() == 0 {
			if _, err := io.WriteString(w, "["); err != nil {
				return err
			}
		}
		if _, err := io.WriteString(w, "]"); err != nil {
			return err
		}
	}
	if len(keys) == 0 {
		_, err := io.WriteString(w, "{}\n")
		return err
	}
	_, err := io.WriteString(w, "}\n")
	return err
}
