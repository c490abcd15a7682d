package report

import (
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/gdrconf/gdrconf/cluster"
	"github.com/gdrconf/gdrconf/cluster/isolate"
)

// A cluster run's shared folder (GDR_REPORTS of deploy/rounds.sh, see
// cluster) holds one folder per host and in it one per round:
// <root>/<host>/round-<k>/{plan.json,test.json,host.json}. Merged, each host
// is one run over all its rounds: a requirement fails on the host when it
// failed in any round. Its events keep their packages with the round in
// front (round-1/github.com/.../conformance/pingpong), so the area is still
// the last element and each round's tests stay apart.

var roundDir = regexp.MustCompile(`^round-(0|[1-9][0-9]{0,5})$`)

// IsCluster reports whether dir is a cluster run's shared folder: a host
// folder in it holds round-<k>/plan.json.
func IsCluster(dir string) bool {
	hosts, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, h := range hosts {
		if !h.IsDir() || strings.HasPrefix(h.Name(), ".") {
			continue
		}
		rounds, _ := os.ReadDir(filepath.Join(dir, h.Name()))
		for _, r := range rounds {
			if r.IsDir() && roundDir.MatchString(r.Name()) && exists(filepath.Join(dir, h.Name(), r.Name(), "plan.json")) {
				return true
			}
		}
	}
	return false
}

// roundOf returns "round-<k>" when a package name carries a cluster round.
func roundOf(pkg string) string {
	r, _, ok := strings.Cut(pkg, "/")
	if ok && roundDir.MatchString(r) {
		return r
	}
	return ""
}

// loadClusterRuns reads every host of a cluster folder, rounds merged.
func loadClusterRuns(dir string) ([]Run, error) {
	hosts, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var runs []Run
	for _, h := range hosts {
		if !h.IsDir() || strings.HasPrefix(h.Name(), ".") {
			continue
		}
		run, ok, err := loadHostRounds(filepath.Join(dir, h.Name()), h.Name())
		if err != nil {
			return nil, err
		}
		if ok {
			runs = append(runs, run)
		}
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("%s: no host folder with round-<k> folders", dir)
	}
	return runs, nil
}

// loadHostRounds merges a host's round folders into one run named host.
func loadHostRounds(dir, host string) (Run, bool, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return Run{}, false, err
	}
	type rd struct {
		k    int
		name string
	}
	var rounds []rd
	for _, e := range ents {
		if m := roundDir.FindStringSubmatch(e.Name()); e.IsDir() && m != nil {
			k, _ := strconv.Atoi(m[1])
			rounds = append(rounds, rd{k, e.Name()})
		}
	}
	if len(rounds) == 0 {
		return Run{}, false, nil
	}
	sort.Slice(rounds, func(i, j int) bool { return rounds[i].k < rounds[j].k })
	run := Run{Host: Identity{Host: host}}
	haveID := false
	for _, r := range rounds {
		sub := filepath.Join(dir, r.name)
		if !exists(filepath.Join(sub, EventsFile)) && !exists(filepath.Join(sub, HostFile)) {
			// An idle round, or one whose suite never ran: the pair analysis
			// counts a scheduled pair without results as failed.
			continue
		}
		one, err := loadHost(sub)
		if err != nil {
			return Run{}, false, err
		}
		if !haveID && one.Host.Host != "" {
			id := one.Host
			id.Host = host // the job's host list names it, as in the pairs
			id.Role, id.Peer = "", ""
			run.Host, haveID = id, true
		}
		if ex := one.Host.GoTestExit; ex != nil && (run.Host.GoTestExit == nil || *run.Host.GoTestExit == 0) {
			v := *ex
			run.Host.GoTestExit = &v
		}
		for _, e := range one.Events {
			if e.Package != "" {
				e.Package = r.name + "/" + e.Package
			} else {
				e.Package = r.name
			}
			if e.ImportPath != "" {
				e.ImportPath = r.name + "/" + e.ImportPath
			}
			run.Events = append(run.Events, e)
		}
		for _, s := range one.Errs {
			run.Errs = append(run.Errs, r.name+": "+s)
		}
	}
	return run, true, nil
}

// LoadCluster reads a cluster folder: one run per host (rounds merged) and
// the pair analysis of cluster/isolate over every round (pairs per rail,
// suspects, bad links), in the job's host order.
func LoadCluster(dir string, opt isolate.Options) ([]Run, *isolate.Analysis, error) {
	runs, err := loadClusterRuns(dir)
	if err != nil {
		return nil, nil, err
	}
	hosts, err := cluster.Hosts(dir)
	if err != nil {
		return nil, nil, err
	}
	results, _, err := cluster.Load(dir)
	if err != nil {
		return nil, nil, err
	}
	a := isolate.Analyze(hosts, results, opt)
	order := map[string]int{}
	for i, h := range a.Hosts {
		order[h] = i
	}
	sort.SliceStable(runs, func(i, j int) bool {
		oi, iok := order[runs[i].Host.Host]
		oj, jok := order[runs[j].Host.Host]
		if iok != jok {
			return iok
		}
		return oi < oj
	})
	return runs, a, nil
}

// SetCluster adds a cluster run's pairs and suspects to the report: the
// hosts' fabric states, the pair x rail heatmap and summary.json's pairs,
// suspects and links.
func (r *Report) SetCluster(a *isolate.Analysis) {
	verdicts := map[string]string{}
	for _, h := range r.Hosts {
		verdicts[h.Identity.Host] = h.Verdict.Verdict
	}
	s := a.Summary(verdicts)
	r.Cluster = &s
	r.rails = a.Rails
}

func (r *Report) fabric(host string) *isolate.Host {
	if r.Cluster == nil {
		return nil
	}
	for i := range r.Cluster.Hosts {
		if r.Cluster.Hosts[i].Host == host {
			return &r.Cluster.Hosts[i]
		}
	}
	return nil
}

// clusterText is summary.txt's cluster part.
func (r *Report) clusterText(b *strings.Builder) {
	c := r.Cluster
	if c == nil {
		return
	}
	rounds := map[int]bool{}
	for _, p := range c.Pairs {
		rounds[p.Round] = true
	}
	fmt.Fprintf(b, "\nCluster: %d pair results on %d rails in %d rounds; %d suspects, %d bad links\n", len(c.Pairs), len(r.rails), len(rounds), len(c.Suspects), len(c.Links))
	for _, s := range c.Suspects {
		fmt.Fprintf(b, "  %-8s %s rail %d: %s\n", strings.ToUpper(string(s.Verdict)), s.Host, s.Rail, s.Reason)
	}
	for _, l := range c.Links {
		fmt.Fprintf(b, "  %-8s %s-%s rail %d: %s\n", "LINK", l.A, l.B, l.Rail, l.Reason)
	}
	for _, h := range clearedButFailed(c) {
		fmt.Fprintf(b, "  %-8s %s\n", "NOTE", h)
	}
	var bad []string
	for _, p := range c.Pairs {
		if p.Status != isolate.Pass {
			bad = append(bad, fmt.Sprintf("round %d %s-%s rail %d %s %s Gbit/s", p.Round, p.A, p.B, p.Rail, p.Status, fmtNum(p.BWGbitS)))
		}
	}
	if len(bad) > 0 {
		fmt.Fprintf(b, "  pairs not passed: %s\n", strings.Join(bad, "; "))
	}
}

// clusterMarkdown is summary.md's cluster part.
func (r *Report) clusterMarkdown(b *strings.Builder) {
	c := r.Cluster
	if c == nil {
		return
	}
	fmt.Fprintf(b, "\n## Pairs\n\n| round | server | client | rail | status | Gbit/s |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, p := range c.Pairs {
		fmt.Fprintf(b, "| %d | %s | %s | %d | %s | %s |\n", p.Round, mdEscape(p.A), mdEscape(p.B), p.Rail, p.Status, fmtNum(p.BWGbitS))
	}
	fmt.Fprintf(b, "\n## Suspects\n\n")
	if len(c.Suspects) == 0 {
		b.WriteString("none\n")
	}
	for _, s := range c.Suspects {
		fmt.Fprintf(b, "- **%s rail %d** (%s): %s\n", mdEscape(s.Host), s.Rail, s.Verdict, mdEscape(s.Reason))
	}
	for _, l := range c.Links {
		fmt.Fprintf(b, "- **link %s-%s rail %d**: %s\n", mdEscape(l.A), mdEscape(l.B), l.Rail, mdEscape(l.Reason))
	}
	for _, h := range clearedButFailed(c) {
		fmt.Fprintf(b, "- note: %s\n", mdEscape(h))
	}
}

// clearedButFailed explains the hosts whose own verdict failed while the
// isolation cleared their fabric: a bad partner can fail the tests of a good
// host (a partner that stalls makes both ends' transfers time out), and an
// operator must not replace that host on its verdict alone.
func clearedButFailed(c *isolate.Summary) []string {
	var out []string
	for _, h := range c.Hosts {
		if h.Fabric == isolate.Cleared && strings.HasPrefix(h.Verdict, "NOT QUALIFIED") {
			out = append(out, fmt.Sprintf("%s is %s, but its fabric was cleared: every pair it failed in is explained by a partner found bad; "+
				"if its failures are pair tests only, re-run it with a known-good partner before acting on its verdict", h.Host, h.Verdict))
		}
	}
	return out
}

// railHeat is the pair x rail heatmap: one row per pair and round, one
// column per rail, coloured per rail from its slowest pair (red) to its
// fastest (green); failed and slow pairs are outlined.
func (r *Report) railHeat() (cols []string, rows []heatRow) {
	c := r.Cluster
	if c == nil || len(c.Pairs) == 0 {
		return nil, nil
	}
	lo, hi := map[int]float64{}, map[int]float64{}
	order, by := isolate.ByPair(c.Pairs)
	for _, p := range c.Pairs {
		if p.BWGbitS > 0 {
			if l, ok := lo[p.Rail]; !ok || p.BWGbitS < l {
				lo[p.Rail] = p.BWGbitS
			}
			hi[p.Rail] = max(hi[p.Rail], p.BWGbitS)
		}
	}
	for _, rl := range r.rails {
		cols = append(cols, fmt.Sprintf("rail %d", rl))
	}
	for _, k := range order {
		row := heatRow{Host: fmt.Sprintf("%s – %s (round %d)", k.A, k.B, k.Round)}
		for _, rl := range r.rails {
			p, ok := by[k][rl]
			if !ok {
				row.Cells = append(row.Cells, heatCell{Style: "background:#f6f8fa"})
				continue
			}
			f := 1.0
			if hi[rl] > lo[rl] {
				f = (p.BWGbitS - lo[rl]) / (hi[rl] - lo[rl])
			}
			cell := heatCell{Text: fmtNum(p.BWGbitS), Tip: fmt.Sprintf("%s-%s rail %d round %d: %s Gbit/s (%s) %s", k.A, k.B, rl, k.Round, fmtNum(p.BWGbitS), p.Status, p.Detail),
				Style: template.CSS(fmt.Sprintf("background:hsl(%d,65%%,78%%)", int(120*f)))}
			if p.BWGbitS == 0 {
				cell.Text = "–"
				cell.Style = "background:#f6f8fa"
			}
			if p.Status != isolate.Pass {
				cell.Style += ";outline:3px solid #cf222e"
				cell.Text += " ✗ " + string(p.Status)
			}
			row.Cells = append(row.Cells, cell)
		}
		rows = append(rows, row)
	}
	return cols, rows
}
