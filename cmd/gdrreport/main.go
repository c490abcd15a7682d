// Command gdrreport writes the suite's qualification report from go test
// -json results, prints summary.txt and exits with the verdict:
//
//	gdrreport -collect -go-exit $rc reports          # after a run on this host
//	gdrreport -collect -host h200-1 reports          # ... named h200-1, not by its hostname (or GDR_REPORT_HOST=h200-1)
//	gdrreport -collect -compact $GDR_ROUND_REPORTS    # a cluster round (dist/run.sh): test.json.gz, summary.txt, exit-code
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
	"regexp"
	"strings"

	"github.com/gdrconf/gdrconf/cluster"
	"github.com/gdrconf/gdrconf/cluster/isolate"
	"github.com/gdrconf/gdrconf/internal/sharedfile"
	"github.com/gdrconf/gdrconf/report"
	"github.com/gdrconf/gdrconf/report/evidence"
)

// stoppedSig is what -stopped takes: a signal's name as bash's trap names it.
var stoppedSig = regexp.MustCompile(`^SIG[A-Z0-9]{1,10}$`)

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
	if len(args) > 0 {
		switch args[0] {
		case "verify":
			return verify(args[1:])
		case "keygen":
			return keygen(args[1:])
		}
	}
	fs := flag.NewFlagSet("gdrreport", flag.ContinueOnError)
	out := fs.String("out", "", "folder to write the reports into (default: the one input folder)")
	collect := fs.Bool("collect", false, "the input is this host's fresh run: write its host.json (hostname, kernel, driver, GPUs, NICs, suite version, GDR_STRICT) first")
	stopped := fs.String("stopped", "", "with -collect: the signal that stopped the run before it ended (SIGTERM, SIGINT; dist/run.sh passes it): its cut tests are not judged, its verdict says it was stopped")
	goExit := fs.Int("go-exit", -1, "with -collect: go test's exit status, recorded in host.json (non-zero with no failed test fails the host)")
	quiet := fs.Bool("q", false, "do not print summary.txt")
	latest := fs.Bool("latest", false, "a host found twice (one machine run twice, e.g. a rerun of the failed nodes) is judged by its latest run, the earlier shown apart; without it such a merge is refused")
	runID := fs.String("run", "", "a cluster folder that holds several runs (a requeued job, a rerun on the same claim): the run to take, as its plan.json files name it")
	compact := fs.Bool("compact", false, "the one input folder is a cluster round on the shared folder (dist/run.sh passes it in a round): its test.json becomes test.json.gz (each test's attributes and results kept, at most 256 KiB of plain output in all), and of the reports only summary.txt and exit-code are written; the merge renders every format")
	hostName := fs.String("host", "", "with -collect: the name to report this host under, instead of its hostname (VMs and containers often share one, and a merge refuses two hosts of one name); GDR_REPORT_HOST does the same")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: gdrreport [-collect [-go-exit N] [-stopped SIG]] [-compact] [-out DIR] [-run ID] [-latest] DIR...\n       gdrreport verify -key PUB.pem BUNDLE\n       gdrreport keygen -out NAME   (writes NAME.pem and NAME.pub.pem)\n")
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
		if same(d, *out) && !sharedfile.HasEvents(d) && exists(filepath.Join(d, report.JUnitFile)) {
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
		if *stopped != "" {
			if !stoppedSig.MatchString(*stopped) {
				fmt.Fprintf(os.Stderr, "gdrreport: -stopped %q: want a signal's name (SIGTERM, SIGINT)\n", *stopped)
				return 2
			}
			id.Stopped = *stopped
		}
		if *hostName != "" {
			id.Rename(*hostName)
		}
		if err := report.WriteIdentity(dirs[0], id); err != nil {
			fmt.Fprintf(os.Stderr, "gdrreport: %v\n", err)
			return 2
		}
	}
	if *compact {
		if len(dirs) != 1 || !same(dirs[0], *out) {
			fmt.Fprintln(os.Stderr, "gdrreport: -compact takes one round's report folder, and writes into it")
			return 2
		}
		st, err := report.CompactDir(dirs[0])
		if err != nil {
			fmt.Fprintf(os.Stderr, "gdrreport: %v\n", err)
			return 2
		}
		if st.CutLines > 0 {
			fmt.Fprintf(os.Stderr, "gdrreport: %s: %d lines (%d bytes) of %d tests' plain output cut (at most %d KiB kept in a cluster round)\n",
				filepath.Join(dirs[0], report.EventsGzFile), st.CutLines, st.CutBytes, st.CutTests, report.CompactOutputBytes>>10)
		}
	}
	opt := isolate.Options{}
	for _, d := range dirs {
		if report.IsCluster(d) {
			cfg, err := cluster.ParseConfig(os.LookupEnv)
			if err != nil {
				fmt.Fprintf(os.Stderr, "gdrreport: %v\n", err)
				return 2
			}
			opt.MinFraction = cfg.MinFraction
		}
	}
	r, err := report.FromDirs(dirs, report.Options{Isolate: opt, Run: *runID, Latest: *latest})
	if err != nil {
		fmt.Fprintf(os.Stderr, "gdrreport: %v\n", err)
		return 2
	}
	write, files := r.WriteAll, []string{report.JUnitFile, report.SummaryText, report.SummaryMD, report.SummaryJSON, report.HTMLFile}
	if *compact {
		write = func(dir string) error { return r.WriteOnly(dir, report.CompactReports...) }
		files = []string{report.EventsGzFile, report.SummaryText}
	}
	if err := write(*out); err != nil {
		fmt.Fprintf(os.Stderr, "gdrreport: %v\n", err)
		return 2
	}
	if kp := os.Getenv(evidence.KeyEnv); kp != "" {
		if err := writeBundle(r, dirs, *out, kp, evidence.Options{MinFraction: opt.MinFraction, Run: *runID, Latest: *latest}); err != nil {
			fmt.Fprintf(os.Stderr, "gdrreport: evidence bundle: %v\n", err)
			return 2
		}
	}
	if !*quiet {
		b, _ := os.ReadFile(filepath.Join(*out, report.SummaryText))
		os.Stdout.Write(b)
		var names []string
		for _, n := range files {
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

// binariesEnv lists (':'-separated) the binaries whose SHA-256 the evidence
// bundle records; dist's run.sh sets it to its test binaries.
const binariesEnv = "GDR_EVIDENCE_BINARIES"

// writeBundle signs the report folder dir, made from inputs, into
// dir/evidence.tar.gz.
func writeBundle(r *report.Report, inputs []string, dir, keyPath string, opt evidence.Options) error {
	s, err := evidence.LoadSigner(keyPath)
	if err != nil {
		return err
	}
	var bins []string
	for _, b := range strings.Split(os.Getenv(binariesEnv), ":") {
		if b = strings.TrimSpace(b); b != "" {
			bins = append(bins, b)
		}
	}
	if self, err := os.Executable(); err == nil {
		bins = append(bins, self)
	}
	out := filepath.Join(dir, evidence.BundleFile)
	opt.Binaries = bins
	if err := evidence.CreateFrom(r, inputs, dir, out, s, opt); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "gdrreport: signed evidence bundle %s (%s=%s)\n", out, evidence.KeyEnv, keyPath)
	return nil
}

// verify checks a bundle: 0 verified, 1 not, 2 usage.
func verify(args []string) int {
	fs := flag.NewFlagSet("gdrreport verify", flag.ContinueOnError)
	key := fs.String("key", "", "the signer's public key (PEM); the buyer's own copy, never one from the bundle")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *key == "" || fs.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: gdrreport verify -key PUB.pem BUNDLE")
		return 2
	}
	pub, err := evidence.LoadPublicKey(*key)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gdrreport verify: %v\n", err)
		return 2
	}
	res, err := evidence.Verify(fs.Arg(0), pub)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gdrreport verify: NOT VERIFIED: %v\n", err)
		return 1
	}
	fmt.Printf("verified: %s\n  signed by key %s\n  %d members, each as signed\n  verdict %q, exit code %d, re-derived from the raw streams\n  created %s by suite %s\n",
		fs.Arg(0), res.KeyID, res.Members, res.Predicate.Verdict, res.Predicate.ExitCode, res.Predicate.Created, res.Predicate.Renderer)
	for n, sum := range res.Predicate.Binaries {
		fmt.Printf("  binary %s sha256 %s\n", n, sum)
	}
	return 0
}

// keygen writes an Ed25519 key pair for GDR_SIGN_KEY.
func keygen(args []string) int {
	fs := flag.NewFlagSet("gdrreport keygen", flag.ContinueOnError)
	out := fs.String("out", "", "file name prefix: writes PREFIX.pem (private, mode 0600) and PREFIX.pub.pem")
	if err := fs.Parse(args); err != nil || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: gdrreport keygen -out PREFIX")
		return 2
	}
	if err := evidence.GenerateKey(*out+".pem", *out+".pub.pem"); err != nil {
		fmt.Fprintf(os.Stderr, "gdrreport keygen: %v\n", err)
		return 2
	}
	fmt.Printf("wrote %s.pem (keep it; GDR_SIGN_KEY=%s.pem) and %s.pub.pem (give it to whoever verifies)\n", *out, *out, *out)
	return 0
}
