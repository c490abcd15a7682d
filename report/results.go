// The report's model: verdicts, numbers, requirement and host results, the Report.

package report

import (
	"strings"

	"github.com/gdrconf/gdrconf/cluster/isolate"
	"github.com/gdrconf/gdrconf/internal/inventory"
)

// Verdict values (contract: pipelines compare these strings).
const (
	Qualified    = "QUALIFIED"
	NotQualified = "NOT QUALIFIED"
	Incomplete   = "INCOMPLETE"
)

// Verdict is the one-glance outcome of a host or of many.
type Verdict struct {
	Verdict string `json:"verdict"` // QUALIFIED, NOT QUALIFIED, INCOMPLETE
	Failed  int    `json:"failed"`  // must requirements (one host) that failed, or hosts (many) not qualified
	NotRun  int    `json:"not_run"` // must requirements (one host) skipped or not run, or hosts (many) incomplete
	Line    string `json:"line"`    // "NOT QUALIFIED (2 must requirements failed)", "NOT QUALIFIED (1 of 64 hosts: gpu17)"
	Advice  string `json:"advice,omitempty"`
	// Flags are what a merged verdict's reader must know before trusting
	// it (hosts that ran different suite versions), one sentence each.
	Flags []string `json:"flags,omitempty"`
	// NoTests: no test ran at all (one host), or on some host (many): the
	// run proves nothing, and exits 3 whatever GDR_STRICT says.
	NoTests bool `json:"no_tests,omitempty"`
}

// Number is one measurement or fact with its unit, as a test recorded it.
type Number struct {
	Device    string `json:"device,omitempty"` // subtest part of the name, or GPU/NIC
	Key       string `json:"key"`              // gdr.bw_gbit_s
	Value     string `json:"value"`
	Unit      string `json:"unit"`                // Gbit/s
	Threshold string `json:"threshold,omitempty"` // "floor 75.0 Gbit/s (75% of the 100 Gb/s port rate)"
	// Judged: the value a failure judged (the case's gdr.measured names it).
	Judged bool `json:"judged,omitempty"`
}

// String prints "93.10 Gbit/s (floor ...)", with the device in front.
func (n Number) String() string {
	s := n.Value
	if n.Unit != "" {
		if n.Unit == "%" {
			s += n.Unit
		} else {
			s += " " + n.Unit
		}
	}
	s = strings.TrimPrefix(n.Key, "gdr.") + " " + s
	if n.Device != "" {
		s = n.Device + ": " + s
	}
	if n.Threshold != "" {
		s += " (" + n.Threshold + ")"
	}
	return s
}

// ReqResult is one requirement on one host.
type ReqResult struct {
	ID     string   `json:"id"`
	Area   string   `json:"area"`
	Title  string   `json:"title"`
	Level  string   `json:"level"` // must, report-only
	Status Status   `json:"status"`
	Cases  int      `json:"cases"` // counted test cases (one per device)
	Passed int      `json:"passed"`
	Failed int      `json:"failed"`
	Skip   int      `json:"skipped"`
	Nums   []Number `json:"numbers,omitempty"`
	Reason string   `json:"reason,omitempty"` // first failure's cause (its gdr.cause) or skip reason
	Remedy string   `json:"remedy,omitempty"`
	// Outcome of a failed requirement: its first failed case's
	// (OutcomeFellShort or OutcomeNotJudged); "" unless Status is Fail.
	Outcome string   `json:"outcome,omitempty"`
	Cause   string   `json:"cause,omitempty"` // the shared cause it is grouped under
	Tests   []string `json:"tests,omitempty"` // the counted cases' names
	// Part is the part the first failed case points at, with its evidence.
	Part  *Part `json:"part,omitempty"`
	cases []*Case
}

// Cause is one root cause that several requirements share.
type Cause struct {
	Key     string   `json:"key"`    // "no RDMA device"
	Status  Status   `json:"status"` // fail or skip
	Example string   `json:"example"`
	Remedy  string   `json:"remedy,omitempty"`
	Reqs    []string `json:"requirements"`
}

// HostResult is one host's report.
type HostResult struct {
	Identity Identity     `json:"host"`
	Verdict  Verdict      `json:"verdict"`
	Reqs     []*ReqResult `json:"requirements"`
	Causes   []*Cause     `json:"shared_causes,omitempty"`
	Other    []OtherCase  `json:"other_tests,omitempty"` // tests with no requirement (lab's reference tools)
	Errors   []string     `json:"errors,omitempty"`      // failures outside any test
	// Earlier: a later run of this host is in the report (MergeRuns); this
	// one is shown but does not count in the merged verdict.
	Earlier bool `json:"earlier_run,omitempty"`
	// Latest: earlier runs of this host are in the report too; this one judges.
	Latest bool `json:"latest_run,omitempty"`
	// Soak is the host's soak run; nil when it ran none. summary.json
	// writes it (hostJSON), every other format only its line.
	Soak    *Soak    `json:"-"`
	runErrs []string // those of Errors that are not a package's (JUnit: "(run)" cases)
	pkgs    []*pkgRun
	cases   []*Case
}

// OtherCase is a counted test without a requirement ID.
type OtherCase struct {
	Name    string `json:"name"`
	Area    string `json:"area"`
	Status  Status `json:"status"`
	Message string `json:"message,omitempty"`
}

// Cases are the host's counted cases, in run order.
func (h *HostResult) Cases() []*Case {
	var out []*Case
	for _, c := range h.cases {
		if c.Counted {
			out = append(out, c)
		}
	}
	return out
}

// AllCases are every test and subtest of the host, counted or not.
func (h *HostResult) AllCases() []*Case { return h.cases }

// Report is the result over one host or many.
type Report struct {
	Verdict Verdict       `json:"verdict"`
	Hosts   []*HostResult `json:"hosts"`
	Suite   string        `json:"suite_version"` // the renderer's (gdrreport's) version
	// Versions are the suite versions the hosts ran (their host.json), each
	// once, in first-seen order.
	Versions []string `json:"suite_versions,omitempty"`
	Time     string   `json:"time"`
	// Drift lists the versions on which hosts part from the majority
	// (merges only; also a Flag each).
	Drift []inventory.Difference `json:"inventory_drift,omitempty"`
	// Cluster is a cluster run's pair analysis (SetCluster); nil otherwise.
	Cluster *isolate.Summary `json:"cluster,omitempty"`
	// Causes are why hosts are not QUALIFIED, each cause once with its
	// hosts (hostsCauses): what every format shows first.
	Causes []*HostsCause `json:"fleet_causes,omitempty"`
	// Findings are isolation's verdicts over Cluster (SetCluster).
	Findings *ClusterFindings `json:"-"`
	rails    []int
	// clusters are the cluster runs merged, oldest first: where the
	// rerun of the failed nodes goes (WriteActions).
	clusters []clusterSource
	// judgedBy is, where several cluster runs merge, the run whose
	// isolation judges each host.
	judgedBy map[string]string
}
