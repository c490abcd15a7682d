// Causes: failed requirements grouped by what they say, on a host and across hosts.

package report

import (
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/gdrconf/gdrconf/cluster/hostlist"
	"github.com/gdrconf/gdrconf/internal/reqs"
)

// causeKey names the root cause of a skip or failure message: its leading
// "no <thing>" phrase (no RDMA device, no NVIDIA GPU, no CUDA driver), else
// its first clause. Messages of one cause differ in detail (which modules,
// which folder), so their keys, not their texts, are compared.
func causeKey(msg string) string {
	m := strings.TrimPrefix(msg, "GDR_STRICT=1: ")
	head := m
	if len(head) > 160 {
		head = head[:160]
	}
	if loc := noPhrase.FindStringSubmatchIndex(head); loc != nil {
		return "no " + head[loc[2]:loc[3]]
	}
	// A clause ends at ";" or at ": " (a colon inside a PCI address such
	// as 0000:3b:00.0 or a path does not end one).
	if loc := clauseEnd.FindStringIndex(m); loc != nil && loc[0] > 0 {
		m = m[:loc[0]]
	}
	return strings.TrimSpace(m)
}

var clauseEnd = regexp.MustCompile(`;|:(\s|$)`)

var noPhrase = regexp.MustCompile(`(?:^|: |, )no ((?:[A-Za-z0-9_.-]+ ){0,2}?[A-Za-z0-9_.-]+?)(?:\s*[:;,(]| in | under | on | for | is | was | and | loaded| found| so |$)`)

// causeOf is what groups a requirement's result with others of one cause:
// a not-run requirement's reason, else its message's cause key.
func causeOf(r *ReqResult) string {
	if r.Status == NotRun {
		return r.Reason // "not run: conformance/install is not in this run"
	}
	return causeKey(r.Reason)
}

// groupCauses puts requirements that failed or skipped for one cause under
// it (two or more requirements), failures first.
func groupCauses(rs []*ReqResult) []*Cause {
	by := map[string]*Cause{}
	var order []*Cause
	key := causeOf
	for _, r := range rs {
		if r.Status == Pass || r.Reason == "" {
			continue
		}
		k := string(r.Status) + "\x00" + key(r)
		c := by[k]
		if c == nil {
			c = &Cause{Key: key(r), Status: r.Status, Example: r.Reason}
			by[k] = c
			order = append(order, c)
		}
		c.Reqs = append(c.Reqs, r.ID)
		if len(r.Reason) > len(c.Example) {
			c.Example = r.Reason // the fullest wording says most
		}
		if c.Remedy == "" {
			c.Remedy = r.Remedy
		}
	}
	var out []*Cause
	for _, c := range order {
		if len(c.Reqs) < 2 {
			continue
		}
		out = append(out, c)
		for _, r := range rs {
			if r.Status != Pass && r.Reason != "" && string(r.Status)+"\x00"+key(r) == string(c.Status)+"\x00"+c.Key {
				r.Cause = c.Key
			}
		}
	}
	rank := map[Status]int{Fail: 0, Skip: 1, NotRun: 2, HostOnly: 3}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Status != out[j].Status {
			return rank[out[i].Status] < rank[out[j].Status]
		}
		return len(out[i].Reqs) > len(out[j].Reqs)
	})
	return out
}

// HostsCause is one cause that keeps hosts of a report from QUALIFIED,
// with the hosts it holds on and what to do: the answer to "why", given
// once for all hosts it applies to, before any table (report.html's top,
// summary.txt, summary.md, summary.json's fleet_causes).
type HostsCause struct {
	// Status is fail (it fails the hosts: a must requirement failed, or
	// the run failed outside any test), skip or not run (it leaves them
	// incomplete).
	Status Status `json:"status"`
	Key    string `json:"key"` // the cause as one host's shared causes name it ("no RDMA device")
	// Example is the fullest wording on ExampleHost; Differs says that
	// other hosts worded it otherwise (their own numbers or devices).
	Example     string   `json:"example"`
	ExampleHost string   `json:"example_host"`
	Differs     bool     `json:"wording_differs,omitempty"`
	Remedy      string   `json:"remedy,omitempty"`
	Reqs        []string `json:"requirements,omitempty"` // none: a failure outside any test
	Hosts       []string `json:"hosts"`
	// HostList is Hosts as one hostlist expression (node[0003,0100-0131]),
	// the form scontrol and sinfo take.
	HostList string   `json:"hostlist"`
	words    []string // ExampleHost's wordings of it
}

// causesListed is the most causes summary.txt and summary.md list; the
// rest are in report.html and summary.json.
const causesListed = 20

// reqList names the cause's requirements, or says it failed outside any test.
func (c *HostsCause) reqList() string {
	if len(c.Reqs) == 0 {
		return "outside any test"
	}
	return nameList(c.Reqs, 6)
}

// example is the cause's wording, naming its host when others differ.
func (c *HostsCause) example() string {
	if c.Differs {
		return "e.g. on " + c.ExampleHost + ": " + c.Example
	}
	return c.Example
}

// digitRun is what differs between hosts' wordings of one cause: values,
// PCI addresses, device and host numbers.
var digitRun = regexp.MustCompile(`[0-9]+`)

// hostsCauses groups the must requirements that kept the judged hosts from
// QUALIFIED, and their failures outside any test, by cause across hosts:
// the key causeOf gives (one host's shared causes use it), its digits
// masked so that one cause worded with each host's own values or devices
// is one. Failures first, then the causes that covered most hosts.
func hostsCauses(hs []*HostResult) []*HostsCause {
	by := map[string]*HostsCause{}
	var out []*HostsCause
	add := func(h *HostResult, st Status, key, example, remedy, req string) {
		k := string(st) + "\x00" + digitRun.ReplaceAllString(key, "#")
		c := by[k]
		if c == nil {
			c = &HostsCause{Status: st, Key: key, Example: example, ExampleHost: h.Identity.Host, Remedy: remedy}
			by[k] = c
			out = append(out, c)
		}
		if c.ExampleHost == h.Identity.Host {
			c.words = append(c.words, example)
			if len(example) > len(c.Example) {
				c.Example = example // the fullest wording on that host says most
			}
		} else if !slices.Contains(c.words, example) {
			c.Differs = true
		}
		if c.Remedy == "" {
			c.Remedy = remedy
		}
		if req != "" && !slices.Contains(c.Reqs, req) {
			c.Reqs = append(c.Reqs, req)
		}
		if n := len(c.Hosts); n == 0 || c.Hosts[n-1] != h.Identity.Host {
			c.Hosts = append(c.Hosts, h.Identity.Host)
		}
	}
	for _, h := range hs {
		if h.Earlier || h.Verdict.Verdict == Qualified {
			continue
		}
		for _, e := range h.Errors {
			add(h, Fail, causeKey(firstOf(e)), e, "", "")
		}
		for _, r := range h.Reqs {
			if r.Level == string(reqs.ReportOnly) || r.Status == Pass || r.Status == HostOnly {
				continue
			}
			add(h, r.Status, causeOf(r), r.Reason, r.Remedy, r.ID)
		}
	}
	order := map[string]int{}
	for i, rq := range reqs.All() {
		order[rq.ID] = i
	}
	for _, c := range out {
		c.HostList = hostlist.Compress(c.Hosts)
		sort.SliceStable(c.Reqs, func(i, j int) bool { return order[c.Reqs[i]] < order[c.Reqs[j]] })
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Status != out[j].Status {
			return statusRank[out[i].Status] < statusRank[out[j].Status]
		}
		return len(out[i].Hosts) > len(out[j].Hosts)
	})
	return out
}
