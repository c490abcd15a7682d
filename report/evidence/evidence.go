// Package evidence writes and verifies the signed evidence bundle of a
// qualification run: one tar.gz holding the report folder as it was written
// (reports, every host's raw go test -json stream and host.json with its
// inventory), thresholds.json (every bound a test judged against, with its
// source) and attestation.intoto.json: an in-toto Statement (in-toto
// attestation v1) whose subjects are every other member with its SHA-256,
// and whose predicate holds the verdict, the exit code, the suite versions
// and the SHA-256 of the binaries that ran, in a DSSE envelope signed with
// the operator's key (GDR_SIGN_KEY).
//
// Verify checks the signature with the buyer's copy of the public key, that
// every member's digest is the signed one (and that no member was added or
// removed), and that the verdict re-derives from the raw streams. A buyer
// can check the same with standard tools (README "Verifying an evidence
// bundle"): the envelope is plain DSSE, the statement plain in-toto.
package evidence

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/gdrconf/gdrconf/cluster/isolate"
	"github.com/gdrconf/gdrconf/report"
)

// Names inside the bundle.
const (
	ReportDir      = "report/" // the report folder's files
	RunsDir        = "runs/"   // a merge's input folders, runs/<n>-<name>/..., when they are not the report folder
	ThresholdsFile = "thresholds.json"
	EnvelopeFile   = "attestation.intoto.json"
	// PayloadType is DSSE's type for an in-toto statement.
	PayloadType = "application/vnd.in-toto+json"
	// PredicateType names this suite's predicate.
	PredicateType = "https://github.com/gdrconf/gdrconf/attestation/qualification/v1"
	// BundleFile is the bundle's name in a report folder.
	BundleFile = "evidence.tar.gz"
)

// Predicate is what the run claims.
type Predicate struct {
	Verdict  string `json:"verdict"`   // "NOT QUALIFIED (1 of 4 hosts: vm3)"
	ExitCode int    `json:"exit_code"` // gdrreport's
	// Flags are the verdict's flags, what a reader must know before trusting
	// it (mixed suite versions, peers that were not authenticated).
	Flags         []string          `json:"flags,omitempty"`
	Hosts         []Host            `json:"hosts"`    // each host's verdict and identity
	Renderer      string            `json:"renderer"` // gdrreport's suite version
	SuiteVersions []string          `json:"suite_versions"`
	Binaries      map[string]string `json:"binaries,omitempty"` // file name -> sha256 of what ran
	MinFraction   float64           `json:"pair_min_fraction,omitempty"`
	// Run is the run taken from a cluster folder that holds several ("" for
	// its only one), so verify takes the same.
	Run string `json:"run,omitempty"`
	// Latest: the signer had hosts run twice judged by their latest run;
	// both runs are in the bundle, so verify merges them the same way.
	Latest  bool   `json:"latest,omitempty"`
	Created string `json:"created"`
}

// Host is one host's line of the predicate.
type Host struct {
	Host      string `json:"host"`
	Verdict   string `json:"verdict"`
	MachineID string `json:"machine_id,omitempty"`
	Serial    string `json:"system_serial,omitempty"`
}

// Threshold is one bound a test judged against.
type Threshold struct {
	Host   string `json:"host"`
	Test   string `json:"test"`
	Key    string `json:"key"` // gdr.min_bw_gbit_s
	Value  string `json:"value"`
	Source string `json:"source,omitempty"`
}

// Options are what Create records beside the report folder.
type Options struct {
	Binaries    []string // files whose SHA-256 the predicate records (the test binaries, gdrreport)
	MinFraction float64  // the cluster analysis' GDR_PAIR_MIN_FRACTION, when a cluster folder is in the report
	Run         string   // the run of a cluster folder the report took (gdrreport -run)
	Latest      bool     // hosts run twice judged by their latest run (gdrreport -latest)
	Now         time.Time
}

// Create writes the bundle of the report folder dir to out, signed by s.
// inputs are the folders the report was made from; when they are dir
// itself (one host's run) the bundle holds dir, else it holds each input
// under runs/ as well, so that the verdict re-derives from them. Existing
// bundles are left out.
func Create(inputs []string, dir, out string, s dsse.SignerVerifier, opt Options) error {
	r, err := report.FromDirs(inputs, report.Options{Isolate: isolate.Options{MinFraction: opt.MinFraction}, Run: opt.Run, Latest: opt.Latest})
	if err != nil {
		return fmt.Errorf("evidence: %s: %w", strings.Join(inputs, " "), err)
	}
	return CreateFrom(r, inputs, dir, out, s, opt)
}

// CreateFrom is Create for a report already built from inputs (gdrreport
// has just written dir from it: loading a fleet's streams again would
// double the report's cost).
func CreateFrom(r *report.Report, inputs []string, dir, out string, s dsse.SignerVerifier, opt Options) error {
	members := map[string][]byte{}
	if err := addTree(members, ReportDir, dir); err != nil {
		return err
	}
	if !(len(inputs) == 1 && sameDir(inputs[0], dir)) {
		for i, in := range inputs {
			if err := addTree(members, fmt.Sprintf("%s%d-%s/", RunsDir, i+1, filepath.Base(filepath.Clean(in))), in); err != nil {
				return err
			}
		}
	}
	th, err := json.MarshalIndent(thresholds(r), "", "  ")
	if err != nil {
		return err
	}
	members[ThresholdsFile] = append(th, '\n')
	pred := predicateOf(r, opt)
	for _, b := range opt.Binaries {
		sum, err := fileSHA256(b)
		if err != nil {
			return fmt.Errorf("evidence: binary %s: %w", b, err)
		}
		if pred.Binaries == nil {
			pred.Binaries = map[string]string{}
		}
		pred.Binaries[filepath.Base(b)] = sum
	}
	stmt, err := statement(members, pred)
	if err != nil {
		return err
	}
	es, err := dsse.NewEnvelopeSigner(s)
	if err != nil {
		return err
	}
	env, err := es.SignPayload(context.Background(), PayloadType, stmt)
	if err != nil {
		return fmt.Errorf("evidence: signing: %w", err)
	}
	eb, err := json.MarshalIndent(env, "", "  ")
	if err != nil {
		return err
	}
	members[EnvelopeFile] = append(eb, '\n')
	return writeArchive(out, members, opt.Now)
}

// addTree adds the regular files under dir to members, named prefix + their
// slash path below dir.
func addTree(members map[string][]byte, prefix, dir string) error {
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() || d.Name() == BundleFile || strings.HasSuffix(d.Name(), BundleFile+".tmp") {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		members[prefix+filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		return fmt.Errorf("evidence: reading %s: %w", dir, err)
	}
	return nil
}

func sameDir(a, b string) bool {
	x, err1 := filepath.Abs(a)
	y, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && x == y
}

func predicateOf(r *report.Report, opt Options) Predicate {
	now := opt.Now
	if now.IsZero() {
		now = time.Now()
	}
	p := Predicate{Verdict: r.Verdict.Line, ExitCode: r.ExitCode(), Flags: r.Verdict.Flags, Renderer: r.Suite, SuiteVersions: r.Versions,
		MinFraction: opt.MinFraction, Run: opt.Run, Latest: opt.Latest, Created: now.UTC().Format(time.RFC3339)}
	for _, h := range r.Hosts {
		x := Host{Host: h.Identity.Host, Verdict: h.Verdict.Line, MachineID: h.Identity.MachineID}
		if inv := h.Identity.Inventory; inv != nil && inv.DMI != nil {
			x.Serial = inv.DMI.ProductSerial
		}
		p.Hosts = append(p.Hosts, x)
	}
	return p
}

// thresholds lists every bound the run's tests recorded: the key a failure
// names (gdr.threshold) or any gdr.min_*/gdr.max_* attribute, with the
// source the test gave.
func thresholds(r *report.Report) []Threshold {
	var out []Threshold
	for _, h := range r.Hosts {
		for _, c := range h.AllCases() {
			for k, v := range c.Own {
				if !strings.HasPrefix(k, "gdr.min_") && !strings.HasPrefix(k, "gdr.max_") {
					continue
				}
				out = append(out, Threshold{Host: h.Identity.Host, Test: c.Name, Key: k, Value: v, Source: c.Attrs["gdr.threshold_source"]})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Host != b.Host {
			return a.Host < b.Host
		}
		if a.Test != b.Test {
			return a.Test < b.Test
		}
		return a.Key < b.Key
	})
	return out
}

func statement(members map[string][]byte, pred Predicate) ([]byte, error) {
	names := make([]string, 0, len(members))
	for n := range members {
		names = append(names, n)
	}
	sort.Strings(names)
	st := &intoto.Statement{Type: intoto.StatementTypeUri, PredicateType: PredicateType}
	for _, n := range names {
		sum := sha256.Sum256(members[n])
		st.Subject = append(st.Subject, &intoto.ResourceDescriptor{Name: n, Digest: map[string]string{"sha256": hex.EncodeToString(sum[:])}})
	}
	pj, err := json.Marshal(pred)
	if err != nil {
		return nil, err
	}
	var pm map[string]any
	if err := json.Unmarshal(pj, &pm); err != nil {
		return nil, err
	}
	if st.Predicate, err = structpb.NewStruct(pm); err != nil {
		return nil, err
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("evidence: statement: %w", err)
	}
	return protojson.MarshalOptions{Multiline: true}.Marshal(st)
}

func writeArchive(out string, members map[string][]byte, now time.Time) error {
	if now.IsZero() {
		now = time.Now()
	}
	names := make([]string, 0, len(members))
	for n := range members {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, n := range names {
		b := members[n]
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(b)), ModTime: now, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return err
		}
		if _, err := tw.Write(b); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	tmp := out + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// maxMember bounds one member's size when reading a bundle (a fleet's
// merged report is a few hundred MiB at most).
const maxMember = 1 << 30

// maxBundle bounds what all members together may hold: they are read
// before the signature is checked, so a small archive that expands without
// end must stop here.
var maxBundle int64 = 2 << 30

// readArchive reads a bundle's members.
func readArchive(p string) (map[string][]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: not a gzip archive: %w", p, err)
	}
	tr := tar.NewReader(gz)
	out := map[string][]byte{}
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: archive damaged: %w", p, err)
		}
		if h.Typeflag != tar.TypeReg {
			return nil, fmt.Errorf("%s: member %q is not a regular file", p, h.Name)
		}
		clean := path.Clean(h.Name)
		if clean != h.Name || strings.HasPrefix(clean, "../") || strings.HasPrefix(clean, "/") {
			return nil, fmt.Errorf("%s: member name %q is not a plain relative path", p, h.Name)
		}
		if _, dup := out[h.Name]; dup {
			return nil, fmt.Errorf("%s: member %q twice", p, h.Name)
		}
		b, err := io.ReadAll(io.LimitReader(tr, maxMember+1))
		if err != nil {
			return nil, fmt.Errorf("%s: member %q: %w", p, h.Name, err)
		}
		if len(b) > maxMember {
			return nil, fmt.Errorf("%s: member %q is over %d bytes", p, h.Name, maxMember)
		}
		total += int64(len(b))
		if total > maxBundle {
			return nil, fmt.Errorf("%s: the members hold over %d bytes before the signature is checked (a 0.6 MB archive once took 1.2 GB): not read further", p, maxBundle)
		}
		out[h.Name] = b
	}
	if _, err := io.Copy(io.Discard, gz); err != nil {
		return nil, fmt.Errorf("%s: archive damaged: %w", p, err)
	}
	return out, nil
}

// inputOrder is the n of a runs/<n>-<name> folder.
func inputOrder(dir string) int {
	n := 0
	fmt.Sscanf(filepath.Base(dir), "%d-", &n)
	return n
}

// Result is what Verify established.
type Result struct {
	KeyID     string
	Predicate Predicate
	Members   int
	Rederived string // the verdict built again from the raw streams
}

// Verify checks bundle p against the public key pub: the signature, every
// member's digest, the member list, and that the verdict re-derives. The
// error names what does not hold.
func Verify(p string, pub crypto.PublicKey) (*Result, error) {
	members, err := readArchive(p)
	if err != nil {
		return nil, err
	}
	eb, ok := members[EnvelopeFile]
	if !ok {
		return nil, fmt.Errorf("%s: no %s: not a signed bundle", p, EnvelopeFile)
	}
	var env dsse.Envelope
	if err := json.Unmarshal(eb, &env); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", p, EnvelopeFile, err)
	}
	if env.PayloadType != PayloadType {
		return nil, fmt.Errorf("%s: payload type %q, want %q", p, env.PayloadType, PayloadType)
	}
	v, err := NewVerifier(pub)
	if err != nil {
		return nil, err
	}
	ev, err := dsse.NewEnvelopeVerifier(v)
	if err != nil {
		return nil, err
	}
	keys, payload, err := ev.VerifyAndDecode(context.Background(), &env)
	if err != nil {
		return nil, fmt.Errorf("%s: the signature does not verify with the given public key: %w (the statement was changed, or signed with another key)", p, err)
	}
	var st intoto.Statement
	if err := protojson.Unmarshal(payload, &st); err != nil {
		return nil, fmt.Errorf("%s: signed statement: %w", p, err)
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("%s: signed statement: %w", p, err)
	}
	if st.PredicateType != PredicateType {
		return nil, fmt.Errorf("%s: predicate type %q, want %q", p, st.PredicateType, PredicateType)
	}
	res := &Result{}
	if len(keys) > 0 {
		res.KeyID = keys[0].KeyID
	}
	pj, err := st.Predicate.MarshalJSON()
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(pj, &res.Predicate); err != nil {
		return nil, fmt.Errorf("%s: predicate: %w", p, err)
	}
	signed := map[string]string{}
	for _, s := range st.Subject {
		signed[s.GetName()] = s.GetDigest()["sha256"]
	}
	var problems []string
	names := make([]string, 0, len(members))
	for n := range members {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if n == EnvelopeFile {
			continue
		}
		want, ok := signed[n]
		if !ok {
			problems = append(problems, n+": in the archive but not in the signed statement (added)")
			continue
		}
		sum := sha256.Sum256(members[n])
		if got := hex.EncodeToString(sum[:]); got != want {
			problems = append(problems, fmt.Sprintf("%s: sha256 %s, the signed statement says %s (changed)", n, got, want))
		}
		delete(signed, n)
	}
	for n := range signed {
		problems = append(problems, n+": in the signed statement but not in the archive (removed)")
	}
	sort.Strings(problems)
	if len(problems) > 0 {
		return res, fmt.Errorf("%s: %s", p, strings.Join(problems, "; "))
	}
	res.Members = len(members) - 1
	// The verdict again, from the raw streams the bundle holds.
	tmp, err := os.MkdirTemp("", "gdr-evidence-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(tmp)
	// A merge's inputs (runs/<n>-<name>/) when the bundle has them, else
	// the report folder itself (one host's run).
	from, inputs := ReportDir, map[string]bool{}
	for n := range members {
		if rest, ok := strings.CutPrefix(n, RunsDir); ok {
			from = RunsDir
			if top, _, ok := strings.Cut(rest, "/"); ok {
				inputs[top] = true
			}
		}
	}
	for n, b := range members {
		rel, ok := strings.CutPrefix(n, from)
		if !ok {
			continue
		}
		dst := filepath.Join(tmp, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return res, err
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			return res, err
		}
	}
	dirs := []string{tmp}
	if from == RunsDir {
		dirs = nil
		for in := range inputs {
			dirs = append(dirs, filepath.Join(tmp, in))
		}
		sort.Slice(dirs, func(i, j int) bool { return inputOrder(dirs[i]) < inputOrder(dirs[j]) })
	}
	r, err := report.FromDirs(dirs, report.Options{Isolate: isolate.Options{MinFraction: res.Predicate.MinFraction}, Run: res.Predicate.Run, Latest: res.Predicate.Latest})
	if err != nil {
		return res, fmt.Errorf("%s: the raw streams do not load: %w", p, err)
	}
	res.Rederived = r.Verdict.Line
	if r.Verdict.Line != res.Predicate.Verdict || r.ExitCode() != res.Predicate.ExitCode {
		why := ""
		if r.Suite != res.Predicate.Renderer {
			why = fmt.Sprintf(" (re-derived by suite %s, signed by suite %s: if the verdict rules changed between them, verify with the signer's version)", r.Suite, res.Predicate.Renderer)
		}
		return res, fmt.Errorf("%s: the raw streams give %q (exit %d), the signed predicate says %q (exit %d)%s", p, r.Verdict.Line, r.ExitCode(), res.Predicate.Verdict, res.Predicate.ExitCode, why)
	}
	if problems := checkRendered(members, r, r.Suite == res.Predicate.Renderer); len(problems) > 0 {
		return res, fmt.Errorf("%s: the readable files do not say what the raw streams give: %s", p, strings.Join(problems, "; "))
	}
	return res, nil
}

// checkRendered compares what people and pipelines read in the bundle's
// report folder with the report re-derived from the raw streams: the
// verdict line of summary.txt, summary.md and report.html, summary.json's
// verdict, exit code and per-host verdicts, junit.xml's counts and the
// exit-code file; and, where the re-deriving suite is the signer's, all of
// summary.txt and summary.md. A file the bundle lacks is not checked (the
// signed member list says which there are); one it has must agree.
func checkRendered(members map[string][]byte, r *report.Report, sameSuite bool) []string {
	var problems []string
	bad := func(f, format string, a ...any) {
		problems = append(problems, f+": "+fmt.Sprintf(format, a...))
	}
	render := func(write func(*bytes.Buffer) error) string {
		var b bytes.Buffer
		if err := write(&b); err != nil {
			return "(" + err.Error() + ")"
		}
		return b.String()
	}
	if b, ok := members[ReportDir+report.SummaryText]; ok {
		want := render(func(w *bytes.Buffer) error { return r.WriteText(w) })
		got := string(b)
		if first(got) != first(want) {
			bad(report.SummaryText, "headline %q, the raw streams give %q", first(got), first(want))
		} else if sameSuite && got != want {
			bad(report.SummaryText, "differs from the report the raw streams give (line %d)", firstDiff(got, want))
		}
	}
	if b, ok := members[ReportDir+report.SummaryMD]; ok {
		want := render(func(w *bytes.Buffer) error { return r.WriteMarkdown(w) })
		got := string(b)
		if first(got) != first(want) {
			bad(report.SummaryMD, "headline %q, the raw streams give %q", first(got), first(want))
		} else if sameSuite && got != want {
			bad(report.SummaryMD, "differs from the report the raw streams give (line %d)", firstDiff(got, want))
		}
	}
	if b, ok := members[ReportDir+report.SummaryJSON]; ok {
		type hostV struct {
			Host    string `json:"host"`
			Verdict string `json:"verdict"`
		}
		var sj struct {
			V        string  `json:"verdict"`
			Line     string  `json:"line"`
			ExitCode *int    `json:"exit_code"`
			Hosts    []hostV `json:"hosts"`
		}
		if err := json.Unmarshal(b, &sj); err != nil {
			bad(report.SummaryJSON, "does not parse: %v", err)
		} else {
			if sj.Line != r.Verdict.Line || sj.V != r.Verdict.Verdict {
				bad(report.SummaryJSON, "verdict %q (%s), the raw streams give %q (%s)", sj.Line, sj.V, r.Verdict.Line, r.Verdict.Verdict)
			}
			if sj.ExitCode == nil || *sj.ExitCode != r.ExitCode() {
				bad(report.SummaryJSON, "exit_code is not %d", r.ExitCode())
			}
			want := map[string]string{}
			for _, h := range r.Hosts {
				want[h.Identity.Host] = h.Verdict.Verdict
			}
			for _, h := range sj.Hosts {
				if w, ok := want[h.Host]; !ok || w != h.Verdict {
					bad(report.SummaryJSON, "host %s is %q, the raw streams give %q", h.Host, h.Verdict, w)
				}
			}
			if len(sj.Hosts) > 0 && len(sj.Hosts) != len(want) {
				bad(report.SummaryJSON, "lists %d hosts, the raw streams %d", len(sj.Hosts), len(want))
			}
		}
	}
	if b, ok := members[ReportDir+report.HTMLFile]; ok {
		m := htmlVerdict.FindSubmatch(b)
		if m == nil {
			bad(report.HTMLFile, "no verdict line found")
		} else if got := html.UnescapeString(string(m[1])); got != r.Verdict.Line {
			bad(report.HTMLFile, "headline %q, the raw streams give %q", got, r.Verdict.Line)
		}
	}
	if b, ok := members[ReportDir+report.JUnitFile]; ok {
		got, err := report.ParseJUnit(bytes.NewReader(b))
		if err != nil {
			bad(report.JUnitFile, "does not parse: %v", err)
		} else if g, w := junitCounts(got), junitCounts(ownJUnit(r)); g != w {
			bad(report.JUnitFile, "tests/failures/errors/skipped %v, the raw streams give %v", g, w)
		}
	}
	if b, ok := members[ReportDir+report.ExitCodeFile]; ok {
		if got := strings.TrimSpace(string(b)); got != strconv.Itoa(r.ExitCode()) {
			bad(report.ExitCodeFile, "%q, the raw streams give %d", got, r.ExitCode())
		}
	}
	return problems
}

// htmlVerdict is report.html's headline (report.html.tmpl: the line in the
// div of id verdict).
var htmlVerdict = regexp.MustCompile(`id="verdict"><div class="line">([^<]*)</div>`)

func first(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// firstDiff is the 1-based number of the first line where a and b differ.
func firstDiff(a, b string) int {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < min(len(la), len(lb)); i++ {
		if la[i] != lb[i] {
			return i + 1
		}
	}
	return min(len(la), len(lb)) + 1
}

// ownJUnit is the JUnit file r writes, as ParseJUnit reads it.
func ownJUnit(r *report.Report) report.JUnit {
	var b bytes.Buffer
	if err := r.WriteJUnit(&b); err != nil {
		return report.JUnit{}
	}
	doc, _ := report.ParseJUnit(&b)
	return doc
}

// junitCounts sums a document's cases by result.
func junitCounts(doc report.JUnit) [4]int {
	var c [4]int
	for _, s := range doc.Suites {
		for _, tc := range s.Cases {
			c[0]++
			switch {
			case tc.Failure != nil:
				c[1]++
			case tc.Error != nil:
				c[2]++
			case tc.Skipped != nil:
				c[3]++
			}
		}
	}
	return c
}
