package lab

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// BenchRow is one metric measured by our harness and by perftest.
type BenchRow struct {
	Metric   string  `json:"metric"`
	Unit     string  `json:"unit"`
	Ours     float64 `json:"ours"`     // 0: not measured
	Perftest float64 `json:"perftest"` // 0: not measured
	Ratio    float64 `json:"ratio"`    // ours/perftest, 0 when either is missing
	Target   string  `json:"target"`   // ">= 0.95" or "<= 1.05"
	Met      bool    `json:"met"`
	OursFrom string  `json:"ours_from,omitempty"` // test and attr the value came from
}

// ParsePerftestBW returns the average bandwidth of ib_write_bw's result
// line for size in Gb/s (10^9 bit/s, like gdr.bw_gbps). perftest's
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

// findAttr returns the first test whose name matches and carries attr key.
func findAttr(suites []*Suite, match func(name string) bool, key string) (float64, string) {
	for _, host := range []string{"client", "server"} {
		for _, s := range suites {
			if s.Host != host || s.Pkg != PingpongPkg {
				continue
			}
			for _, t := range s.Tests() {
				v, ok := t.Attrs[key]
				if !ok || !match(t.Name) {
					continue
				}
				if f, err := strconv.ParseFloat(v, 64); err == nil {
					return f, fmt.Sprintf("%s %s %s", s.Name(), t.Name, key)
				}
			}
		}
	}
	return 0, ""
}

// BenchRows compares our tests' attrs with perftest's outputs (client side).
func BenchRows(suites []*Suite, perftest map[string]string) ([]BenchRow, []string) {
	var rows []BenchRow
	var problems []string
	isWrite := func(n string) bool {
		return strings.Contains(strings.ToUpper(n), "WRITE") && !strings.Contains(strings.ToUpper(n), "IMM")
	}
	for _, size := range []int{65536, 1048576} {
		row := BenchRow{Metric: fmt.Sprintf("write_bw_%d", size), Unit: "Gb/s", Target: ">= 0.95"}
		row.Ours, row.OursFrom = findAttr(suites, func(n string) bool {
			return isWrite(n) && strings.Contains(n, "Bandwidth") && strings.HasSuffix(n, "/"+strconv.Itoa(size))
		}, "gdr.bw_gbit_s")
		v, err := ParsePerftestBW(perftest[fmt.Sprintf("ib_write_bw-%d", size)], size)
		if err != nil {
			problems = append(problems, err.Error())
		}
		row.Perftest = v
		rows = append(rows, row)
	}
	lat := func(n string) bool {
		return isWrite(n) && strings.Contains(n, "Latency") && (strings.HasSuffix(n, "/2") || !strings.ContainsAny(n[strings.LastIndex(n, "/")+1:], "0123456789"))
	}
	typ, p99, err := ParsePerftestLat(perftest["ib_write_lat-2"], 2)
	if err != nil {
		problems = append(problems, err.Error())
	}
	r50 := BenchRow{Metric: "write_lat_2_p50", Unit: "us", Target: "<= 1.05", Perftest: typ}
	r50.Ours, r50.OursFrom = findAttr(suites, lat, "gdr.lat_us_p50")
	r99 := BenchRow{Metric: "write_lat_2_p99", Unit: "us", Target: "<= 1.05", Perftest: p99}
	r99.Ours, r99.OursFrom = findAttr(suites, lat, "gdr.lat_us_p99")
	rows = append(rows, r50, r99)
	for i := range rows {
		r := &rows[i]
		if r.Ours > 0 && r.Perftest > 0 {
			r.Ratio = r.Ours / r.Perftest
			if strings.HasPrefix(r.Target, ">=") {
				r.Met = r.Ratio >= 0.95
			} else {
				r.Met = r.Ratio <= 1.05
			}
		}
		if r.Ours == 0 {
			problems = append(problems, fmt.Sprintf("%s: our harness reported no value (no %s test with the attr)", r.Metric, PingpongPkg))
		}
	}
	return rows, problems
}

// BenchTable prints metric, ours, perftest, ratio, target.
func BenchTable(w io.Writer, rows []BenchRow) {
	fmt.Fprintf(w, "%-18s %-5s %12s %12s %8s  %s\n", "metric", "unit", "ours", "perftest", "ratio", "target")
	for _, r := range rows {
		num := func(v float64) string {
			if v == 0 {
				return "-"
			}
			return strconv.FormatFloat(v, 'f', 4, 64)
		}
		ratio := "-"
		if r.Ratio > 0 {
			ratio = strconv.FormatFloat(r.Ratio, 'f', 3, 64)
			if !r.Met {
				ratio += " (miss)"
			}
		}
		fmt.Fprintf(w, "%-18s %-5s %12s %12s %8s  %s\n", r.Metric, r.Unit, num(r.Ours), num(r.Perftest), ratio, r.Target)
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
			perftest[t.Name] = t.Output.String()
		}
	}
	rows, problems := BenchRows(suites, perftest)
	doc := map[string]any{"iters": r.o.Iters, "lab": "two qemu TCG VMs, Soft-RoCE rxe0, socket network on 127.0.0.1", "rows": rows, "problems": problems}
	b, _ := json.MarshalIndent(doc, "", "  ")
	if err := os.WriteFile(filepath.Join(r.o.ReportDir, "bench.json"), b, 0o644); err != nil {
		return err
	}
	fmt.Fprintln(r.o.Out)
	BenchTable(r.o.Out, rows)
	fmt.Fprintf(r.o.Out, "bench: %s\n", filepath.Join(r.o.ReportDir, "bench.json"))
	for _, p := range problems {
		fmt.Fprintf(r.o.Out, "bench: %s\n", p)
	}
	if pr := Verdict(suites, nil); len(pr) > 0 {
		return fmt.Errorf("bench: %d runs failed: %s", len(pr), strings.Join(pr, "; "))
	}
	return nil
}
