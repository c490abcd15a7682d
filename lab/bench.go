package lab

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The bench measures the harness, not the machine: ours and perftest run
// in the same VMs, one right after the other, BenchPairs times per metric,
// and each pair gives one ratio. Whatever else the host does slows both
// runs of a pair alike, so the median of the pairwise ratios says how our
// method compares with perftest's even on a loaded machine, where a
// comparison of one run each (the old bench) swung from 0.32 to 1.08.
// Pairs alternate their order (ours first in even rounds, perftest first
// in odd ones), so a load that grows or fades during a pair favours
// neither tool, and their number is even: the first run after a change of
// metric was slower in the lab (2026-12-01: pairs with ours first gave
// 0.76-0.80 at 64 KiB, pairs with perftest first 0.96-1.09), and with five
// pairs three of one order decided the median. Each metric now has its
// pairs back to back after one untimed warm-up run of each tool.

// BenchPairs is how many (ours, perftest) pairs each metric gets: even, so
// that as many pairs start with ours as with perftest.
const BenchPairs = 6

// benchMetric is one measured quantity group: one run of each tool gives
// every row of the group (latency: p50 and p99 of the same runs).
type benchMetric struct {
	id     string // step-ID part: write_bw_65536, write_lat_2
	size   int
	lat    bool
	iters  int
	oursRe string // -test.run for our pingpong binary
}

// Latency runs are capped at benchLatIters round trips: under TCG one takes
// about 44 ms between the VMs (much more on a loaded host), and 2 x
// (BenchPairs + 1) runs of every metric must fit the lab deadline. Bandwidth runs
// move benchBWBytes each, at least benchMinBWIters messages (the lab's rxe
// does 5-35 MB/s depending on the host's load).
const (
	benchLatIters   = 500
	benchBWBytes    = 64 << 20
	benchMinBWIters = 64
)

func benchMetrics(iters int) []benchMetric {
	var ms []benchMetric
	for _, size := range []int{65536, 1048576} {
		n := min(iters, max(benchMinBWIters, benchBWBytes/size))
		ms = append(ms, benchMetric{id: fmt.Sprintf("write_bw_%d", size), size: size, iters: n,
			oursRe: fmt.Sprintf("^TestPP08Bandwidth$//^WRITE$/^%d$", size)}) // any rail; not WRITE-BIDIR
	}
	ms = append(ms, benchMetric{id: "write_lat_2", size: 2, lat: true, iters: min(iters, benchLatIters),
		oursRe: "^TestPP07Latency$//^WRITE$"})
	return ms
}

// benchStepID names a step of the plan: b<round>:<tool>:<metric>.
func benchStepID(round int, tool, metric string) string {
	return fmt.Sprintf("b%d:%s:%s", round, tool, metric)
}

// benchPlan adds the interleaved steps to both jobs (ModeBench): metric by
// metric, one warm-up run of each tool (not counted: the first run after a
// change of message size is slower, whichever tool it is), then BenchPairs
// pairs, the order alternating.
func (r *runner) benchPlan(pp *testPkg, server, client *Job) {
	o := r.o
	if pp == nil {
		r.logf("NOTE: no %s test binary: the bench measures perftest only and has no ratios", PingpongPkg)
	}
	for _, m := range benchMetrics(o.Iters) {
		ours := func(id string) {
			if pp == nil {
				return
			}
			st := Step{ID: id, Pkg: PingpongPkg + "@" + id, Kind: "gotest", Timeout: o.StepTimeout}
			// perftest uses host memory; the step's own GDR_ITERS and
			// GDR_BW_ITERS come after testEnv's and win.
			env := []string{"GDR_MEM=host", fmt.Sprintf("GDR_ITERS=%d", m.iters)}
			if !m.lat {
				env = append(env, fmt.Sprintf("GDR_BW_ITERS=%d", m.iters), fmt.Sprintf("GDR_BW_SIZES=%d", m.size))
			}
			pair(server, client, st, r.gotestArgv(*pp, m.oursRe), r.gotestArgv(*pp, m.oursRe),
				append(r.testEnv("server"), env...), append(r.testEnv("client"), env...))
		}
		theirs := func(id string) {
			st := Step{ID: id, Pkg: "perftest", Kind: "tool", Timeout: 3 * time.Minute}
			argv := writeBW(m.size, m.iters)
			if m.lat {
				argv = writeLat(m.size, m.iters)
			}
			pair(server, client, st, argv, append(append([]string(nil), argv...), ServerIP), nil, nil)
		}
		ours(benchWarmID("ours", m.id))
		theirs(benchWarmID("perftest", m.id))
		for round := 0; round < BenchPairs; round++ {
			if round%2 == 0 {
				ours(benchStepID(round, "ours", m.id))
				theirs(benchStepID(round, "perftest", m.id))
			} else {
				theirs(benchStepID(round, "perftest", m.id))
				ours(benchStepID(round, "ours", m.id))
			}
		}
	}
}

// benchWarmID names a metric's warm-up run.
func benchWarmID(tool, metric string) string { return "warm:" + tool + ":" + metric }

// ParsePerftestBW returns the average bandwidth of ib_write_bw's result
// line for size in Gb/s (10^9 bit/s, like gdr.bw_gbit_s). perftest's
// "MB/sec" is MiB/s (its format factor is 0x100000); output made with
// --report_gbits ("Gb/sec" header) is taken as it is.
func ParsePerftestBW(out string, size int) (float64, error) {
	v, err := perftestColumn(out, size, 3, "ib_write_bw")
	if err != nil || strings.Contains(out, "[Gb/sec]") {
		return v, err
	}
	return v * (1 << 20) * 8 / 1e9, nil
}

// ParsePerftestLat returns t_typical (the median) and the 99% percentile
// of ib_write_lat's result line for size, in microseconds.
func ParsePerftestLat(out string, size int) (typical, p99 float64, err error) {
	if typical, err = perftestColumn(out, size, 4, "ib_write_lat"); err != nil {
		return 0, 0, err
	}
	p99, err = perftestColumn(out, size, 7, "ib_write_lat")
	return typical, p99, err
}

// perftestColumn finds the result line (after the "#bytes" header) whose
// first field is size and returns column col.
func perftestColumn(out string, size, col int, tool string) (float64, error) {
	header := false
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) > 0 && f[0] == "#bytes" {
			header = true
			continue
		}
		if !header || len(f) <= col || f[0] != strconv.Itoa(size) {
			continue
		}
		v, err := strconv.ParseFloat(f[col], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: result column %d %q is not a number", tool, col, f[col])
		}
		return v, nil
	}
	return 0, fmt.Errorf("%s: no result line for %d bytes in its output", tool, size)
}

// BenchPair is one (ours, perftest) pair of runs.
type BenchPair struct {
	Round    int     `json:"round"`
	First    string  `json:"first"` // "ours" or "perftest": which ran first
	Ours     float64 `json:"ours"`
	Perftest float64 `json:"perftest"`
	Ratio    float64 `json:"ratio"` // ours/perftest
}

// BenchRow is one metric: the median of the pairwise ratios with their
// range, and the medians of each tool's values for reference.
type BenchRow struct {
	Metric   string      `json:"metric"`
	Unit     string      `json:"unit"`
	Iters    int         `json:"iters"`
	Ours     float64     `json:"ours"`      // median of our runs; 0: not measured
	Perftest float64     `json:"perftest"`  // median of perftest's runs
	Ratio    float64     `json:"ratio"`     // median of the pairwise ratios ours/perftest; 0 when no pair is complete
	RatioMin float64     `json:"ratio_min"` // smallest pairwise ratio
	RatioMax float64     `json:"ratio_max"` // largest pairwise ratio
	N        int         `json:"pairs"`     // complete pairs
	Target   string      `json:"target"`    // ">= 0.95" or "<= 1.05"
	Met      bool        `json:"met"`       // the median meets the target with BenchPairs complete pairs
	Pairs    []BenchPair `json:"runs"`
	OursFrom string      `json:"ours_from,omitempty"` // test and attr the values came from
}

// median of vs (not modified); 0 for none.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// oursValue returns an attr of our client-side run of step id (server as a
// fallback), from the first test whose name matches.
func oursValue(suites []*Suite, id string, match func(string) bool, key string) (float64, string) {
	for _, host := range []string{"client", "server"} {
		for _, s := range suites {
			if s.Host != host || s.Pkg != PingpongPkg+"@"+id {
				continue
			}
			for _, t := range s.Tests() {
				v, ok := t.Own[key]
				if !ok || !match(t.Name) {
					continue
				}
				if f, err := strconv.ParseFloat(v, 64); err == nil && f > 0 {
					return f, fmt.Sprintf("%s %s", t.Name, key)
				}
			}
		}
	}
	return 0, ""
}

func isWrite(n string) bool {
	u := strings.ToUpper(n)
	return strings.Contains(u, "WRITE") && !strings.Contains(u, "IMM")
}

// BenchRows pairs our runs with perftest's: suites are the lab's, perftest
// maps a step ID to the client's perftest output.
func BenchRows(suites []*Suite, perftest map[string]string, iters int) ([]BenchRow, []string) {
	var rows []BenchRow
	var problems []string
	for _, m := range benchMetrics(iters) {
		type sub struct {
			row   BenchRow
			ours  func(id string) (float64, string)
			their func(out string) (float64, error)
		}
		var subs []*sub
		if m.lat {
			for _, q := range []string{"p50", "p99"} {
				q := q
				match := func(n string) bool { return isWrite(n) && strings.Contains(n, "Latency") }
				subs = append(subs, &sub{
					row:  BenchRow{Metric: m.id + "_" + q, Unit: "us", Target: "<= 1.05", Iters: m.iters},
					ours: func(id string) (float64, string) { return oursValue(suites, id, match, "gdr.lat_us_"+q) },
					their: func(out string) (float64, error) {
						typ, p99, err := ParsePerftestLat(out, m.size)
						if q == "p50" {
							return typ, err
						}
						return p99, err
					},
				})
			}
		} else {
			size := strconv.Itoa(m.size)
			match := func(n string) bool {
				return isWrite(n) && strings.Contains(n, "Bandwidth") && strings.HasSuffix(n, "/"+size)
			}
			subs = append(subs, &sub{
				row:   BenchRow{Metric: m.id, Unit: "Gb/s", Target: ">= 0.95", Iters: m.iters},
				ours:  func(id string) (float64, string) { return oursValue(suites, id, match, "gdr.bw_gbit_s") },
				their: func(out string) (float64, error) { return ParsePerftestBW(out, m.size) },
			})
		}
		for _, s := range subs {
			var ours, theirs, ratios []float64
			for round := 0; round < BenchPairs; round++ {
				first := "ours"
				if round%2 == 1 {
					first = "perftest"
				}
				o, from := s.ours(benchStepID(round, "ours", m.id))
				if from != "" && s.row.OursFrom == "" {
					s.row.OursFrom = from
				}
				pid := benchStepID(round, "perftest", m.id)
				p, err := s.their(perftest[pid])
				if err != nil {
					problems = append(problems, fmt.Sprintf("%s round %d: %s (step %s): %v", s.row.Metric, round, "perftest", pid, err))
				}
				if o == 0 {
					problems = append(problems, fmt.Sprintf("%s round %d: our harness reported no value (step %s)", s.row.Metric, round, benchStepID(round, "ours", m.id)))
				}
				bp := BenchPair{Round: round, First: first, Ours: o, Perftest: p}
				if o > 0 {
					ours = append(ours, o)
				}
				if p > 0 {
					theirs = append(theirs, p)
				}
				if o > 0 && p > 0 {
					bp.Ratio = o / p
					ratios = append(ratios, bp.Ratio)
				}
				s.row.Pairs = append(s.row.Pairs, bp)
			}
			r := &s.row
			r.Ours, r.Perftest, r.N = median(ours), median(theirs), len(ratios)
			if r.N > 0 {
				r.Ratio = median(ratios)
				r.RatioMin, r.RatioMax = ratios[0], ratios[0]
				for _, x := range ratios {
					r.RatioMin, r.RatioMax = min(r.RatioMin, x), max(r.RatioMax, x)
				}
				if strings.HasPrefix(r.Target, ">=") {
					r.Met = r.Ratio >= 0.95
				} else {
					r.Met = r.Ratio <= 1.05
				}
			}
			if r.N < BenchPairs {
				r.Met = false
				problems = append(problems, fmt.Sprintf("%s: %d of %d pairs complete", r.Metric, r.N, BenchPairs))
			}
			rows = append(rows, *r)
		}
	}
	return rows, problems
}

// BenchTable prints metric, medians, median ratio with its range, pairs, target.
func BenchTable(w io.Writer, rows []BenchRow) {
	fmt.Fprintf(w, "%-18s %-5s %6s %12s %12s %8s  %-15s %5s  %s\n", "metric", "unit", "iters", "ours", "perftest", "ratio", "min..max", "pairs", "target")
	for _, r := range rows {
		num := func(v float64) string {
			if v == 0 {
				return "-"
			}
			return strconv.FormatFloat(v, 'f', 4, 64)
		}
		ratio, rng := "-", "-"
		if r.N > 0 {
			ratio = strconv.FormatFloat(r.Ratio, 'f', 3, 64)
			rng = fmt.Sprintf("%.3f..%.3f", r.RatioMin, r.RatioMax)
		}
		met := ""
		if !r.Met {
			met = " (miss)"
		}
		fmt.Fprintf(w, "%-18s %-5s %6d %12s %12s %8s  %-15s %5d  %s%s\n", r.Metric, r.Unit, r.Iters, num(r.Ours), num(r.Perftest), ratio, rng, r.N, r.Target, met)
	}
}

// bench writes bench.json and prints the comparison table.
func (r *runner) bench(suites []*Suite) error {
	perftest := map[string]string{}
	for _, s := range suites {
		if s.Host != "client" || s.Pkg != "perftest" {
			continue
		}
		for _, t := range s.Tests() {
			perftest[t.Name] = output(t)
		}
	}
	rows, problems := BenchRows(suites, perftest, r.o.Iters)
	doc := map[string]any{
		"lab":    "two qemu TCG VMs, Soft-RoCE rxe0, socket network on 127.0.0.1",
		"method": fmt.Sprintf("ours and perftest interleaved in the same VMs, metric by metric: one untimed warm-up run of each, then %d pairs back to back, order alternating; ratio = median of the pairwise ratios ours/perftest", BenchPairs),
		"iters":  r.o.Iters, "rows": rows, "problems": problems,
	}
	b, _ := json.MarshalIndent(doc, "", "  ")
	if err := os.WriteFile(filepath.Join(r.o.ReportDir, "bench.json"), b, 0o644); err != nil {
		return err
	}
	fmt.Fprintln(r.o.Out)
	BenchTable(r.o.Out, rows)
	fmt.Fprintf(r.o.Out, "bench: %s (%d pairs per metric, interleaved)\n", filepath.Join(r.o.ReportDir, "bench.json"), BenchPairs)
	for _, p := range problems {
		fmt.Fprintf(r.o.Out, "bench: %s\n", p)
	}
	if pr := Verdict(suites, nil); len(pr) > 0 {
		return fmt.Errorf("bench: %d runs failed: %s", len(pr), strings.Join(pr, "; "))
	}
	return nil
}
