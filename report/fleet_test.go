package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/report/junitcheck"
)

// Budgets of a merge at fleet size (issue 18).
const (
	fleetMergeBudget = 5 * time.Second
	fleetHTMLBudget  = 15 << 20
	// summary.md must fit a GitHub/GitLab comment (one host) and a GitHub
	// step summary (merged).
	mdHostBudget   = 65536
	mdMergedBudget = 1 << 20
)

// plantedFail makes a host's PP-08 WRITE at its largest size (the last one
// it ran) fail with a slow number: the planted failures a fleet merge must
// put first.
func plantedFail(evs []Event) []Event {
	out := make([]Event, 0, len(evs)+1)
	target := ""
	for _, e := range evs {
		if e.Action == "attr" && (e.Key == "gdr.bw_gbit_s" || e.Key == "gdr.bw_gbps") && strings.Contains(e.Test, "/WRITE/") {
			target = e.Test
		}
	}
	for _, e := range evs {
		if e.Test == target && target != "" {
			switch {
			case e.Action == "attr" && (e.Key == "gdr.bw_gbit_s" || e.Key == "gdr.bw_gbps"):
				e.Value = "0.004"
			case e.Action == "pass":
				out = append(out, Event{Action: "output", Package: e.Package, Test: e.Test,
					Output: "    pingpong_test.go:1: RDMA WRITE reaches 0.004 Gbit/s, below the floor; remedy: check the NIC's link and cable (planted)\n"})
				e.Action = "fail"
			}
		}
		out = append(out, e)
	}
	return out
}

// fleetRuns makes n hosts out of recorded ones: pairs of the lab's client
// and server (their addresses rewritten so that each client's peer is its
// own server; bandwidths spread a little), with every fourth pair of hosts the H200
// recording; hosts whose index is in failing get a planted failure.
func fleetRuns(t testing.TB, n int, failing ...int) []Run {
	lab, err := LoadDir(filepath.Join(runsDir, "lab-pingpong"))
	require.NoError(t, err)
	by := map[string]Run{}
	for _, r := range lab {
		by[r.Host.Host] = r
	}
	h200, err := LoadDir(filepath.Join(runsDir, "h200-dist"))
	require.NoError(t, err)
	client, server := by["client"], by["server"]
	require.NotEmpty(t, client.Events)
	require.NotEmpty(t, server.Events)
	bad := map[int]bool{}
	for _, f := range failing {
		bad[f] = true
	}
	addr := func(i int) string { return fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255+1) }
	var runs []Run
	for i := 0; i < n; i++ {
		var src Run
		switch {
		case (i/2)%4 == 3:
			src = h200[0]
		case i%2 == 0:
			src = server
		default:
			src = client
		}
		self, peer := addr(i), addr(i-1)
		if src.Host.Host == "server" {
			peer = addr(i + 1)
		}
		scale := 0.9 + 0.2*float64((i*37)%101)/100
		evs := make([]Event, len(src.Events))
		for k, e := range src.Events {
			if e.Action == "attr" {
				switch {
				case e.Key == "gdr.peer":
					e.Value = strings.NewReplacer("198.18.0.1", peer, "198.18.0.2", peer, "198.18.0.3", peer).Replace(e.Value)
				case e.Key == "gdr.bw_gbit_s" || e.Key == "gdr.bw_gbps" || e.Key == "gdr.copy_gbyte_s":
					if v, err := strconv.ParseFloat(e.Value, 64); err == nil {
						e.Value = strconv.FormatFloat(v*scale, 'f', 3, 64)
					}
				}
			}
			evs[k] = e
		}
		if bad[i] {
			evs = plantedFail(evs)
		}
		id := src.Host
		id.Host, id.Addrs, id.Peer = fmt.Sprintf("node%04d", i), []string{self}, peer
		runs = append(runs, Run{Host: id, Events: evs, Errs: src.Errs})
	}
	return runs
}

// saveFleet writes runs as a folder of host folders, as a merge reads them.
func saveFleet(t testing.TB, runs []Run) string {
	dir := t.TempDir()
	for _, r := range runs {
		require.NoError(t, SaveRun(filepath.Join(dir, r.Host.Host), r))
	}
	return dir
}

// fleetFailing are the hosts with planted failures in the benchmark's fleet.
var fleetFailing = []int{3, 100, 509, 1000}

// mergeFleet is what `gdrreport` does for a fleet: read every folder,
// build, write every file (FromDirs, WriteAll). It returns the sizes written.
func mergeFleet(t testing.TB, in, out string) map[string]int64 {
	r, err := FromDirs([]string{in}, Options{})
	require.NoError(t, err)
	require.NoError(t, r.WriteAll(out))
	sizes := map[string]int64{}
	ents, err := os.ReadDir(out)
	require.NoError(t, err)
	for _, e := range ents {
		fi, err := e.Info()
		require.NoError(t, err)
		sizes[e.Name()] = fi.Size()
	}
	return sizes
}

// BenchmarkMerge1024 merges 1024 hosts made from recorded ones with four
// planted failures: go test -bench Merge1024 -benchtime 1x ./report/
func BenchmarkMerge1024(b *testing.B) {
	in := saveFleet(b, fleetRuns(b, 1024, fleetFailing...))
	b.ResetTimer()
	var sizes map[string]int64
	for i := 0; i < b.N; i++ {
		sizes = mergeFleet(b, in, b.TempDir())
	}
	b.StopTimer()
	for _, k := range []string{HTMLFile, SummaryMD, SummaryText, SummaryJSON, JUnitFile} {
		b.ReportMetric(float64(sizes[k]), k+"_bytes")
	}
}

// A 1024-host merge stays within its budgets of time and size, and its
// headline names the hosts that failed.
func TestFleetMergeBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("a 1024-host merge (-short skips it)")
	}
	in := saveFleet(t, fleetRuns(t, 1024, fleetFailing...))
	out := t.TempDir()
	start := time.Now()
	sizes := mergeFleet(t, in, out)
	took := time.Since(start)
	t.Logf("1024 hosts merged in %v; report.html %d bytes, summary.md %d, summary.txt %d, summary.json %d, junit.xml %d",
		took, sizes[HTMLFile], sizes[SummaryMD], sizes[SummaryText], sizes[SummaryJSON], sizes[JUnitFile])
	assert.Less(t, sizes[HTMLFile], int64(fleetHTMLBudget), "report.html of 1024 hosts")
	assert.Less(t, sizes[SummaryMD], int64(mdMergedBudget), "summary.md of 1024 hosts")
	if os.Getenv("GDR_TIME_BUDGET") == "1" {
		// Time depends on the machine and its load: asserted only when asked.
		assert.Less(t, took, fleetMergeBudget)
	}
	// The fleet's junit.xml (passed cases without their log, skips without
	// their evidence) is still what both schemas and GitLab take.
	x, err := os.ReadFile(filepath.Join(out, JUnitFile))
	require.NoError(t, err)
	t.Run("schemas", func(t *testing.T) {
		problems, err := junitcheck.Check(x)
		require.NoError(t, err)
		assert.Empty(t, problems)
	})
	failed := 0
	for _, su := range parseJUnit(t, x).Suites {
		for _, c := range su.Cases {
			status, shown, isText := gitlabShown(c)
			require.True(t, isText, "case %q reaches GitLab as a hash", c.Name)
			if c.Failure != nil {
				failed++
				assert.True(t, strings.HasPrefix(shown, c.Failure.Message+"\n"), "%s %q: GitLab shows the reason first", status, c.Name)
			}
		}
	}
	assert.Equal(t, len(fleetFailing), failed, "one failed case per planted failure")
	txt, err := os.ReadFile(filepath.Join(out, SummaryText))
	require.NoError(t, err)
	first := strings.SplitN(string(txt), "\n", 2)[0]
	for _, f := range fleetFailing {
		assert.Contains(t, first, fmt.Sprintf("node%04d", f), "the headline names the failing hosts")
	}
}

// A 64-host merge with planted failures: the headline names them (ten,
// then a count), failures come first in every table, requirements are
// counted across hosts, the merged total is summary.txt's last line, and
// summary.json keeps its keys and adds the counts.
func TestFleetSummaries(t *testing.T) {
	failing := []int{5, 40}
	r := Build(fleetRuns(t, 64, failing...))
	assert.Equal(t, "NOT QUALIFIED (2 of 64 hosts: node0005, node0040)", r.Verdict.Line)
	var txt, md, js bytes.Buffer
	require.NoError(t, r.WriteText(&txt))
	require.NoError(t, r.WriteMarkdown(&md))
	require.NoError(t, r.WriteJSON(&js))
	lines := strings.Split(strings.TrimSpace(txt.String()), "\n")
	assert.Regexp(t, `^total over 64 hosts: 2 NOT QUALIFIED, 62 INCOMPLETE, 0 QUALIFIED; must requirements \(summed over hosts\): \d+ passed, 2 failed,`, lines[len(lines)-1])
	// The host table starts with the failed hosts.
	i := strings.Index(txt.String(), "\nhost ")
	require.Positive(t, i)
	rows := strings.Split(txt.String()[i+1:], "\n")
	assert.True(t, strings.HasPrefix(rows[1], "node0005 "), rows[1])
	assert.True(t, strings.HasPrefix(rows[2], "node0040 "), rows[2])
	assert.Contains(t, txt.String(), "  must         PP-08 46/64 passed, 2 failed, 16 skipped (node0005, node0040)\n")
	// Across hosts, the failed requirement comes first.
	counts := r.ReqCounts()
	assert.Equal(t, "PP-08", counts[0].ID)
	assert.Equal(t, []string{"node0005", "node0040"}, counts[0].FailedOn)
	// Each failed host's requirements start with the failure.
	assert.Regexp(t, `== node0005: NOT QUALIFIED \(1 must requirement failed\)\n(?s:.*?)Requirements:\n  PP-08    FAIL `, txt.String())
	assert.Contains(t, md.String(), "| PP-08 | must | 46/64 | 2 | 16 | 0 | node0005, node0040 |")
	assert.Less(t, md.Len(), mdMergedBudget)
	var sum struct {
		Verdict, Line string
		Failed        int
		Hosts         []struct {
			Host, Verdict string
			Counts        countsJSON
		}
		FailedHosts []string   `json:"failed_hosts"`
		ReqCounts   []ReqCount `json:"requirement_counts"`
		Counts      countsJSON
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &sum))
	assert.Equal(t, NotQualified, sum.Verdict)
	assert.Equal(t, 2, sum.Failed, "merged: failed counts hosts")
	assert.Equal(t, []string{"node0005", "node0040"}, sum.FailedHosts)
	assert.Equal(t, 2, sum.Counts.Must.Failed)
	assert.Equal(t, "PP-08", sum.ReqCounts[0].ID)
	assert.Equal(t, 2, sum.ReqCounts[0].Failed)
	assert.Equal(t, 1, sum.Hosts[5].Counts.Must.Failed)

	// More than ten failed hosts: ten named, the rest counted.
	many := []int{}
	for i := 0; i < 13; i++ {
		many = append(many, i*4)
	}
	r = Build(fleetRuns(t, 64, many...))
	assert.Equal(t, "NOT QUALIFIED (13 of 64 hosts: node0000, node0004, node0008, node0012, node0016, node0020, node0024, node0028, node0032, node0036 and 3 more)", r.Verdict.Line)
}

// summary.md stays within a CI comment for every recorded host, and within
// a step summary for a merge far larger than fits; what it leaves out it
// says is in report.html.
func TestMarkdownBudget(t *testing.T) {
	ents, err := os.ReadDir(runsDir)
	require.NoError(t, err)
	for _, e := range ents {
		runs, err := LoadDir(filepath.Join(runsDir, e.Name()))
		require.NoError(t, err)
		for _, run := range runs {
			var md bytes.Buffer
			require.NoError(t, Build([]Run{run}).WriteMarkdown(&md))
			assert.Less(t, md.Len(), mdHostBudget, "%s/%s", e.Name(), run.Host.Host)
		}
	}
	// Every host failed: the per-host sections do not all fit.
	var failing []int
	for i := 0; i < 1024; i++ {
		failing = append(failing, i)
	}
	var md bytes.Buffer
	require.NoError(t, Build(fleetRuns(t, 1024, failing...)).WriteMarkdown(&md))
	assert.Less(t, md.Len(), mdMergedBudget)
	assert.Contains(t, md.String(), "the remaining hosts and rows are in report.html")
	// One host whose rows overflow: the note, within budget.
	m := &mdWriter{limit: 100}
	assert.True(t, m.add(strings.Repeat("x", 60)))
	assert.False(t, m.add(strings.Repeat("y", 60)))
	assert.False(t, m.add("z"), "nothing is added after a part that did not fit")
}

// A pair failed on its server's side stays failed when its client, read
// after it, passed; the pair list puts it first.
func TestFleetPairFailureFirst(t *testing.T) {
	r := Build(fleetRuns(t, 100, 40)) // node0040 is a server; 38 pairs
	pairs := Pairs(r.Hosts)
	var got []PairBW
	for _, p := range pairs {
		if p.Status == Fail {
			got = append(got, p)
		}
	}
	require.Len(t, got, 1)
	assert.Equal(t, "node0040", got[0].Server)
	_, grid, list := heatmap(pairs)
	assert.Nil(t, grid, "38 servers: a list, not a grid")
	require.NotEmpty(t, list)
	assert.Equal(t, "node0041", list[0].Client)
	assert.Contains(t, string(list[0].Style), "outline")
}

// Above ten hosts the charts are distributions naming the failed hosts;
// at five, one line per host and operation, no colour used twice.
func TestFleetCharts(t *testing.T) {
	r := Build(fleetRuns(t, 64, 5, 41))
	bw := BandwidthSVG(r.Hosts)
	assert.Contains(t, bw, `class="chart dist"`)
	assert.Regexp(t, `<text class="outliers"[^>]*><title>node0005 0\.004, node0041 0\.004</title>`, bw)
	assert.Equal(t, 6, strings.Count(bw, `class="dist-row"`), "WRITE and READ at three sizes")
	cp := CopySVG(r.Hosts)
	assert.Contains(t, cp, `class="chart dist"`)
	assert.Contains(t, cp, "H2D, 63.0 GB/s link")

	small := Build(fleetRuns(t, 5))
	bw = BandwidthSVG(small.Hosts)
	assert.NotContains(t, bw, "dist")
	colours := regexp.MustCompile(`<polyline fill="none" stroke="(#[0-9a-f]+)"`).FindAllStringSubmatch(bw, -1)
	require.Len(t, colours, 10, "five hosts, WRITE and READ")
	seen := map[string]bool{}
	for _, c := range colours {
		assert.False(t, seen[c[1]], "colour %s used twice", c[1])
		seen[c[1]] = true
	}
}

// The heatmap colours against the floor: a pair at its floor is green
// however slow the others are; one below it is red, not green.
func TestHeatColoursAgainstFloor(t *testing.T) {
	ok := heatStyle(PairBW{Gbits: 300, Floor: 300, Status: Pass})
	slow := heatStyle(PairBW{Gbits: 30, Floor: 300, Status: Fail})
	none := heatStyle(PairBW{Gbits: 0.05, Status: Pass})
	assert.Contains(t, string(ok), "hsl(120,")
	assert.Contains(t, string(slow), "hsl(3,")
	assert.Contains(t, string(slow), "outline")
	assert.Contains(t, string(none), "hsl(210,")
}

// The causes across hosts: each once, with its hosts as a hostlist and
// what to do, failures first, and the same in every format: report.html
// puts them before any table, summary.txt and summary.md before the host
// table, summary.json as fleet_causes.
func TestFleetCauses(t *testing.T) {
	strict, err := LoadDir(filepath.Join(runsDir, "h200-structured-strict"))
	require.NoError(t, err)
	runs := fleetRuns(t, 64, 5, 40)
	for i := 0; i < 37; i++ {
		// 37 hosts of the strict H200 run: one cause (no RDMA device) fails them all.
		r := strict[0]
		r.Host.Host = fmt.Sprintf("gpu%03d", 100+i)
		runs = append(runs, r)
	}
	// Three hosts recorded with findings: GPU-09 fell short, its remedy a fact.
	for i := range 3 {
		runs = append(runs, gpuHost(fmt.Sprintf("gdr%03d", 200+i)))
	}
	r := Build(runs)
	require.NotEmpty(t, r.Causes)
	first := r.Causes[0]
	assert.Equal(t, Fail, first.Status)
	assert.Equal(t, "no RDMA device", first.Key)
	assert.Len(t, first.Hosts, 37)
	assert.Equal(t, "gpu[100-136]", first.HostList)
	assert.Contains(t, first.Reqs, "INST-12")
	// The H200 recording predates findings: its remedy is in its text and
	// none is guessed from English (the one Finding type).
	assert.Empty(t, first.Remedy)
	assert.Contains(t, first.Example, "load the NIC's RDMA driver")
	assert.False(t, first.Differs, "one recording, one wording")
	var planted *HostsCause
	lastFail := -1
	for i, c := range r.Causes {
		if c.Status == Fail {
			assert.Equal(t, i, lastFail+1, "failures first")
			lastFail = i
		}
		if slices.Equal(c.Reqs, []string{"PP-08"}) && c.Status == Fail {
			planted = c
		}
	}
	require.NotNil(t, planted, "the planted PP-08 failures are one cause")
	assert.Equal(t, "node[0005,0040]", planted.HostList)
	assert.Contains(t, planted.Example, "remedy: check the NIC's link and cable (planted)")
	var gpu09 *HostsCause
	for _, c := range r.Causes {
		if slices.Equal(c.Reqs, []string{"GPU-09"}) {
			gpu09 = c
		}
	}
	require.NotNil(t, gpu09, "the recorded GPU-09 shortfalls are one cause")
	assert.Equal(t, "gdr[200-202]", gpu09.HostList)
	assert.Equal(t, "check the GPU link (GPU-11)", gpu09.Remedy, "a recorded remedy travels to the fleet's causes")
	// Each not-qualified host is under a cause; no qualified host is.
	under := map[string]bool{}
	for _, c := range r.Causes {
		for _, h := range c.Hosts {
			under[h] = true
		}
	}
	for _, h := range r.Hosts {
		assert.Equal(t, h.Verdict.Verdict != Qualified, under[h.Identity.Host], h.Identity.Host)
	}

	var txt, md, js, page bytes.Buffer
	require.NoError(t, r.WriteText(&txt))
	require.NoError(t, r.WriteMarkdown(&md))
	require.NoError(t, r.WriteJSON(&js))
	require.NoError(t, r.WriteHTML(&page))
	assert.Regexp(t, `\nWhy, each cause once with its hosts .*\n  37 hosts   FAIL     INST-12, INST-13, TOPO-01, TOPO-02, TOPO-03, MREG-01 and 11 more: no RDMA device\n\s+GDR_STRICT=1: no RDMA device: .*\n\s+on gpu\[100-136\]\n`, txt.String())
	assert.Regexp(t, `\n\s+3 hosts\s+FAIL\s+GPU-09: .*\n(?:.*\n)?\s+remedy: check the GPU link \(GPU-11\)\n\s+on gdr\[200-202\]\n`, txt.String())
	assert.Less(t, strings.Index(txt.String(), "\nWhy, each cause"), strings.Index(txt.String(), "\nhost "), "summary.txt: causes before the host table")
	assert.Contains(t, md.String(), "| 37 | ❌ FAIL | INST-12, INST-13, TOPO-01, TOPO-02, TOPO-03, MREG-01 and 11 more | no RDMA device |")
	assert.Contains(t, md.String(), "| check the GPU link (GPU-11) | gdr[200-202] |")
	assert.Less(t, strings.Index(md.String(), "## Why"), strings.Index(md.String(), "## Requirements across hosts"))
	var sum struct {
		Causes []HostsCause `json:"fleet_causes"`
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &sum))
	require.Len(t, sum.Causes, len(r.Causes))
	assert.Equal(t, "gpu[100-136]", sum.Causes[0].HostList)
	assert.Len(t, sum.Causes[0].Hosts, 37)
	html := page.String()
	i, m := strings.Index(html, `<section id="causes">`), strings.Index(html, `id="matrix"`)
	require.Positive(t, i)
	assert.Less(t, i, m, "report.html: causes before any table")
	assert.NotContains(t, html[:i], "<table", "no table above the causes")
	assert.Contains(t, html[i:m], `<span class="k">37 hosts · FAIL · INST-12, INST-13, TOPO-01, TOPO-02, TOPO-03, MREG-01 and 11 more</span> — no RDMA device`)
	assert.Contains(t, html[i:m], `>on gpu[100-136]</div>`)
}

// A fleet's summary.json is written a host at a time: byte for byte what
// encoding/json writes for the whole object.
func TestFleetJSONStreamed(t *testing.T) {
	r := Build(fleetRuns(t, 16, 3))
	require.True(t, r.Fleet())
	var streamed bytes.Buffer
	require.NoError(t, r.WriteJSON(&streamed))
	var obj map[string]any
	require.NoError(t, json.Unmarshal(streamed.Bytes(), &obj))
	assert.Len(t, obj["hosts"], 16)
	var whole bytes.Buffer
	enc := json.NewEncoder(&whole)
	enc.SetEscapeHTML(false)
	var raw map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(streamed.Bytes(), &raw))
	require.NoError(t, enc.Encode(raw))
	assert.Equal(t, whole.String(), streamed.String())
	for _, c := range []map[string]any{{}, {"hosts": []int{}}, {"a": 1, "hosts": []int{1, 2}, "z": "<&>"}} {
		var a, b bytes.Buffer
		require.NoError(t, writeJSONObject(&a, c, "hosts"))
		e := json.NewEncoder(&b)
		e.SetEscapeHTML(false)
		require.NoError(t, e.Encode(c))
		assert.Equal(t, b.String(), a.String())
	}
}
