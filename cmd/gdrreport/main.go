// Command gdrreport writes the suite's qualification report from go test
// -json results, prints summary.txt and exits with the verdict:
//
//	gdrreport -collect -go-exit $rc reports          # after a run on this host
//	gdrreport -collect -host h200-1 reports          # ... named h200-1, not by its hostname (or GDR_REPORT_HOST=h200-1)
//	gdrreport -out merged hostA/reports hostB/reports reports/lab   # many hosts
//	gdrreport -out reports/cluster /shared/gdr       # a cluster run's GDR_REPORTS: rounds, pairs, suspects
//
// Exit status: 0 QUALIFIED (and INCOMPLETE without GDR_STRICT=1), 1 NOT
// QUALIFIED, 2 the report could not be made, 3 INCOMPLETE under GDR_STRICT=1.
// The verdict's code is also written as the report folder's exit-code file
// and summary.json's exit_code, and to $GDR_EXIT_CODE_FILE when set: make
// turns every failed recipe into its own 2, so build/verdict.sh runs make
// with that file and exits with the code in it.
// A cluster folder's isolation findings are part of the verdict: a host,
// rail or link found bad exits 1, a part not isolated yet is INCOMPLETE.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gdrconf/gdrconf/cluster"
	"github.com/gdrconf/gdrconf/cluster/isolate"
	"github.com/gdrconf/gdrconf/report"
)

func main() {
	code := run(os.Args[1:])
	if p := os.Getenv(exitCodeEnv); p != "" {
		// Written on every exit, 2 included, so the wrapper never reads a stale code.
		if err := os.WriteFile(p, []byte(fmt.Sprintf("%d\n", code)), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "gdrreport: %s=%s: %v\n", exitCodeEnv, p, err)
		}
	}
	os.Exit(code)
}

// exitCodeEnv names a file that gets gdrreport's exit status (build/verdict.sh).
const exitCodeEnv = "GDR_EXIT_CODE_FILE"

func run(args []string) int {
	fs := flag.NewFlagSet("gdrreport", flag.ContinueOnError)
	out := fs.String("out", "", "folder to write the reports into (default: the one input folder)")
	collect := fs.Bool("collect", false, "the input is this host's fresh run: write its host.json (hostname, kernel, driver, GPUs, NICs, suite version, GDR_STRICT) first")
	goExit := fs.Int("go-exit", -1, "with -collect: go test's exit status, recorded in host.json (non-zero with no failed test fails the host)")
	quiet := fs.Bool("q", false, "do not print summary.txt")
	hostName := fs.String("host", "", "with -collect: the name to report this host under, instead of its hostname (VMs and containers often share one, and a merge refuses two hosts of one name); GDR_REPORT_HOST does the same")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: gdrreport [-collect [-go-exit N]] [-out DIR] DIR...\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	dirs := fs.Args()
	if len(dirs) == 0 {
		fs.Usage()
		return 2
	}
	if *out == "" {
		if len(dirs) > 1 {
			fmt.Fprintln(os.Stderr, "gdrreport: -out is needed with more than one input folder")
			return 2
		}
		*out = dirs[0]
	}
	for _, d := range dirs {
		if same(d, *out) && !exists(filepath.Join(d, report.EventsFile)) && exists(filepath.Join(d, report.JUnitFile)) {
			fmt.Fprintf(os.Stderr, "gdrreport: %s holds only a JUnit recording; writing the report there would overwrite it: give -out\n", d)
			return 2
		}
	}
	if *collect {
		if len(dirs) != 1 {
			fmt.Fprintln(os.Stderr, "gdrreport: -collect takes this host's one report folder")
			return 2
		}
		id := report.Collect()
		if *goExit >= 0 {
			id.GoTestExit = goExit
		}
		if *hostName != "" {
			id.Host = *hostName
		}
		if err := report.WriteIdentity(dirs[0], id); err != nil {
			fmt.Fprintf(os.Stderr, "gdrreport: %v\n", err)
			return 2
		}
	}
	var runs []report.Run
	var analysis *isolate.Analysis
	for _, d := range dirs {
		if report.IsCluster(d) {
			// A cluster run's shared folder: its rounds, and the pairs,
			// suspects and bad links over them.
			if analysis != nil {
				fmt.Fprintln(os.Stderr, "gdrreport: more than one cluster folder: merge one cluster run at a time")
				return 2
			}
			cfg, err := cluster.ParseConfig(os.LookupEnv)
			if err != nil {
				fmt.Fprintf(os.Stderr, "gdrreport: %v\n", err)
				return 2
			}
			rs, a, err := report.LoadCluster(d, isolate.Options{MinFraction: cfg.MinFraction})
			if err != nil {
				fmt.Fprintf(os.Stderr, "gdrreport: %v\n", err)
				return 2
			}
			runs, analysis = append(runs, rs...), a
			continue
		}
		rs, err := report.LoadDir(d)
		if err != nil {
			fmt.Fprintf(os.Stderr, "gdrreport: %v\n", err)
			return 2
		}
		runs = append(runs, rs...)
	}
	runs, err := report.MergeRuns(runs)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gdrreport: %v\n", err)
		return 2
	}
	r := report.Build(runs)
	if analysis != nil {
		r.SetCluster(analysis)
	}
	if err := r.WriteAll(*out); err != nil {
		fmt.Fprintf(os.Stderr, "gdrreport: %v\n", err)
		return 2
	}
	if !*quiet {
		b, _ := os.ReadFile(filepath.Join(*out, report.SummaryText))
		os.Stdout.Write(b)
		var names []string
		for _, n := range []string{report.JUnitFile, report.SummaryText, report.SummaryMD, report.SummaryJSON, report.HTMLFile} {
			names = append(names, filepath.Join(*out, n))
		}
		fmt.Printf("\nreports: %s\n", strings.Join(names, " "))
	}
	return r.ExitCode()
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func same(a, b string) bool {
	x, err1 := filepath.Abs(a)
	y, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && x == y
}
