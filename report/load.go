package report

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jstemmer/go-junit-report/v2/junit"

	"github.com/gdrconf/gdrconf/cluster/isolate"
	"github.com/gdrconf/gdrconf/internal/sharedfile"
)

// File names in a host's report folder.
const (
	EventsFile = sharedfile.EventsFile
	// EventsGzFile is a cluster round's events, compressed and bounded
	// (gdrreport -collect -compact); every reader reads it as test.json.
	EventsGzFile = sharedfile.EventsGzFile
	JUnitFile    = "junit.xml"
	// PartialEvents is test.json while the run writes it (dist/run.sh
	// renames it when the run ends), so a reader on another host never
	// takes half a run for a whole one.
	PartialEvents = sharedfile.EventsPartial
)

// LoadDir reads the runs under dir:
//   - a folder with host.json is one host (test.json's events, or
//     test.json.gz's, host.json's identity);
//   - else a folder whose subfolders hold hosts is many hosts (the lab's
//     reports/lab/{server,client,loopback}, or a cluster's copies); a
//     combined test.json beside them is not read again;
//   - else a folder with test.json is one host, named after the folder;
//   - else a folder with only junit.xml is a recording from before test.json
//     was kept: its cases become events (ReadJUnit);
//   - a cluster run's shared folder (IsCluster) is one run per host, its
//     rounds merged (LoadCluster adds the pair analysis).
//
// A folder that holds a report this package wrote (summary.json) and no
// events is output, not input, and is passed over.
func LoadDir(dir string) ([]Run, error) { return loadDir(dir, newInterner(), false) }

// loadDir is LoadDir with the events' strings interned in in; lazy leaves
// each host's test.json to be read when Build reaches the host (Run.read),
// so that a fleet's events are never all in memory at once.
func loadDir(dir string, in *interner, lazy bool) ([]Run, error) {
	has := func(name string) bool { return exists(filepath.Join(dir, name)) }
	if IsCluster(dir) {
		return loadClusterRuns(dir, "")
	}
	if has(HostFile) {
		r, err := loadHost(dir, in, lazy)
		if err != nil {
			return nil, err
		}
		return []Run{r}, nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var subs []string
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			subs = append(subs, filepath.Join(dir, e.Name()))
		}
	}
	// A fleet's folders are read side by side, kept in folder order.
	got := make([][]Run, len(subs))
	errs := make([]error, len(subs))
	parallel(len(subs), func(i int) {
		if isHostDir(subs[i], 0) {
			got[i], errs[i] = loadDir(subs[i], in, lazy)
		}
	})
	var runs []Run
	for i := range subs {
		if errs[i] != nil {
			return nil, errs[i]
		}
		runs = append(runs, got[i]...)
	}
	switch {
	case len(runs) > 0:
		return runs, nil
	case sharedfile.HasEvents(dir):
		r, err := loadHost(dir, in, lazy)
		if err != nil {
			return nil, err
		}
		return []Run{r}, nil
	case has(JUnitFile):
		r, err := loadJUnitDir(dir)
		if err != nil {
			return nil, err
		}
		return []Run{r}, nil
	}
	return nil, fmt.Errorf("%s: no %s, %s or %s, and no subfolder with them", dir, HostFile, EventsFile, JUnitFile)
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// isHostDir says whether dir holds a host's results, or folders that do.
func isHostDir(dir string, depth int) bool {
	in := func(n string) bool { return exists(filepath.Join(dir, n)) }
	if in(HostFile) || sharedfile.HasEvents(dir) || in(JUnitFile) && !in(SummaryJSON) {
		return true
	}
	if depth > 3 {
		return false
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.IsDir() && isHostDir(filepath.Join(dir, e.Name()), depth+1) {
			return true
		}
	}
	return false
}

// loadHost reads a host's folder, its events' strings interned in in;
// lazy: its test.json is opened to see that it is there and a file, and
// read when Build reaches the host.
func loadHost(dir string, in *interner, lazy bool) (Run, error) {
	run := Run{Source: dir}
	id, err := ReadIdentity(filepath.Join(dir, HostFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		id = Identity{Host: hostLabel(dir)}
	case err != nil:
		return run, err
	}
	run.Host = id
	if exists(filepath.Join(dir, SoakFile)) {
		run.soakDir = dir
	}
	f, err := sharedfile.OpenEvents(dir, nil)
	if errors.Is(err, fs.ErrNotExist) {
		if _, jerr := os.Stat(filepath.Join(dir, JUnitFile)); jerr == nil {
			r, err := loadJUnitDir(dir)
			r.Host, r.Source = id, dir
			return r, err
		}
		run.Errs = append(run.Errs, fmt.Sprintf("%s has no %s: the run left no results", dir, EventsFile))
		return run, nil
	}
	if err != nil {
		// Not a file to read (a FIFO, a device, a .gz that is no gzip):
		// the run's results are not there.
		run.Errs = append(run.Errs, err.Error())
		return run, nil
	}
	if f.Partial && run.Host.Stopped == "" {
		// dist/run.sh writes PartialEvents and renames it when the run
		// ends: a run that never ended left only that. One that a signal
		// stopped (Identity.Stopped) says so in its verdict instead.
		run.Errs = append(run.Errs, fmt.Sprintf("%s has only %s: the run did not end (the node stopped, or the run is still going); its events so far are judged", dir, PartialEvents))
	}
	if lazy {
		f.Close()
		run.read = func() ([]Event, []string, error) {
			f, err := sharedfile.OpenEvents(dir, nil)
			if err != nil {
				return nil, nil, err
			}
			defer f.Close()
			return readHostEvents(f, in)
		}
		return run, nil
	}
	defer f.Close()
	var notes []string
	run.Events, notes, err = readHostEvents(f, in)
	run.Errs = append(run.Errs, notes...)
	if err != nil {
		return run, err
	}
	return run, nil
}

// readHostEvents reads a host's opened events; notes say what the reading
// passed over and what a compressed file's damage cost.
func readHostEvents(f *sharedfile.Events, in *interner) ([]Event, []string, error) {
	evs, note, err := readEvents(f, f.Path, in)
	if err != nil {
		return evs, nil, fmt.Errorf("%s: %v", f.Path, err)
	}
	var notes []string
	if note != "" {
		notes = append(notes, note)
	}
	if d := f.Damage(); d != "" {
		notes = append(notes, d)
	}
	return evs, notes, nil
}

// hostLabel names a host folder without host.json: the folder's name, or its
// parent's when the folder is a generic "reports".
func hostLabel(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	b := filepath.Base(abs)
	if b == "reports" || b == "." {
		b = filepath.Base(filepath.Dir(abs))
	}
	return b
}

func loadJUnitDir(dir string) (Run, error) {
	f, err := sharedfile.Open(filepath.Join(dir, JUnitFile))
	if err != nil {
		return Run{}, err
	}
	defer f.Close()
	evs, err := ReadJUnit(f)
	if err != nil {
		return Run{}, fmt.Errorf("%s: %v", f.Name(), err)
	}
	id := Identity{Host: hostLabel(dir), Kind: "JUnit-only recording"}
	if b, err := os.ReadFile(filepath.Join(dir, "env.txt")); err == nil {
		// The recordings under fixtures/runs keep uname -a and nvidia-smi -L there.
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) > 2 && f[0] == "Linux" {
				id.Kernel = f[2]
			}
			if s, ok := strings.CutPrefix(l, "run rc="); ok {
				if n, err := strconv.Atoi(strings.TrimSpace(s)); err == nil {
					id.GoTestExit = &n
				}
			}
		}
	}
	return Run{Host: id, Events: evs, Source: dir}, nil
}

// ReadJUnit turns a JUnit file written by gotestsum (or by this package) back
// into go test -json events: each case's properties become attr events, its
// output output events, its result the final event. A file this package
// writes now keeps a case's properties and output in the block (caseMark)
// of the suite that holds it, one suite per case; files written before
// that hold every case block of an area in one suite; older files still,
// and gotestsum's, keep them in the case (properties, system-out, the
// result's body). Suites of one name are one package. Subtest structure
// comes back from the names. Host suffixes " [host]" are dropped.
func ReadJUnit(r io.Reader) ([]Event, error) {
	doc, err := ParseJUnit(r)
	if err != nil {
		return nil, err
	}
	type item struct {
		name string
		evs  []Event
	}
	type pkgItems struct {
		start Event
		items []item
	}
	byName := map[string]*pkgItems{}
	var order []string
	for _, s := range doc.Suites {
		pkg := s.Name // a package path, or our own <host>/<area>: the area is its last element either way
		p := byName[pkg]
		if p == nil {
			p = &pkgItems{start: Event{Action: "start", Package: pkg}}
			if t, ok := suiteTime(s.Timestamp); ok {
				p.start.Time = &t
			}
			byName[pkg] = p
			order = append(order, pkg)
		}
		var out string
		if s.SystemOut != nil {
			out = s.SystemOut.Data
		}
		blocks := caseBlocks(out)
		for _, c := range s.Cases {
			name := c.Name
			if i := strings.LastIndex(name, " ["); i > 0 && strings.HasSuffix(name, "]") {
				name = name[:i]
			}
			el, _ := strconv.ParseFloat(c.Time, 64)
			e := []Event{{Action: "run", Package: pkg, Test: name}}
			action := "pass"
			switch {
			case c.Failure != nil, c.Error != nil:
				action = "fail"
			case c.Skipped != nil && c.Skipped.Type == typeReportOnly:
				action = "fail" // the test failed; JUnit skips it so no build turns unstable
			case c.Skipped != nil:
				action = "skip"
			}
			if b, ok := blocks[c.Name]; ok && b.result != "" {
				action = b.result // a report-only failure is a JUnit skip; its block says it failed
			}
			props, lines := caseEvidence(c, blocks)
			for _, p := range props {
				e = append(e, Event{Action: "attr", Package: pkg, Test: name, Key: p.Name, Value: p.Value})
			}
			for _, l := range lines {
				if strings.HasPrefix(l, "=== ATTR ") {
					continue // gotestsum keeps these; the properties carry them
				}
				e = append(e, Event{Action: "output", Package: pkg, Test: name, Output: l + "\n"})
			}
			e = append(e, Event{Action: action, Package: pkg, Test: name, Elapsed: el})
			p.items = append(p.items, item{name, e})
		}
	}
	var evs []Event
	for _, pkg := range order {
		p := byName[pkg]
		// gotestsum lists a parent after its subtests; parents start first.
		sortParentsFirst(p.items, func(i int) string { return p.items[i].name })
		evs = append(evs, p.start)
		for _, it := range p.items {
			evs = append(evs, it.evs...)
		}
	}
	return evs, nil
}

// readBlock is one case's properties and output from its suite's system-out,
// and the go test result its resultMark line records ("" in files written
// before it).
type readBlock struct {
	props  []junit.Property
	out    []string
	result string
}

// caseBlocks reads the blocks of a suite's system-out by case name; the
// package's own output (before the first block in older files, after
// pkgMark in newer ones) is left out.
func caseBlocks(out string) map[string]*readBlock {
	blocks := map[string]*readBlock{}
	var cur *readBlock
	for _, l := range splitLines(out) {
		if name, ok := strings.CutPrefix(l, caseMark); ok {
			cur = &readBlock{}
			blocks[name] = cur
			continue
		}
		if strings.HasPrefix(l, pkgMark) {
			cur = nil
		}
		if cur == nil {
			continue
		}
		if r, ok := strings.CutPrefix(l, resultMark); ok && cur.result == "" && len(cur.props) == 0 && len(cur.out) == 0 {
			word, _, _ := strings.Cut(r, ":")
			switch Status(word) {
			case Pass, Fail, Skip:
				cur.result = word
				continue
			}
		}
		if kv, ok := strings.CutPrefix(l, propMark); ok && strings.HasSuffix(kv, "]]") {
			if k, v, ok := strings.Cut(strings.TrimSuffix(kv, "]]"), "="); ok {
				cur.props = append(cur.props, junit.Property{Name: k, Value: v})
				continue
			}
		}
		cur.out = append(cur.out, l)
	}
	return blocks
}

// caseEvidence is a case's properties and output: from its block in its
// suite's system-out (blocks: caseBlocks); where the block holds only the
// case's name and result, from its result's body, after the body's first
// blank line (this package writes a failure's, an error's and a host's
// skip's evidence there, once); with no block (older files, gotestsum's),
// the case's own properties and its result's body or output.
func caseEvidence(c JUnitCase, blocks map[string]*readBlock) ([]junit.Property, []string) {
	body := ""
	if c.SystemOut != nil {
		body = c.SystemOut.Data
	}
	for _, r := range []*junit.Result{c.Failure, c.Error, c.Skipped} {
		if r != nil {
			body = longer(r.Data, r.Message)
		}
	}
	b, ok := blocks[c.Name]
	switch {
	case !ok:
		return c.Props, splitLines(body)
	case len(b.props) > 0 || len(b.out) > 0:
		return b.props, b.out
	}
	return bodyEvidence(splitLines(body))
}

// bodyEvidence reads the properties and output from a result's body this
// package wrote: the message, the remedy and the part, a blank line, then
// property lines and output.
func bodyEvidence(lines []string) (props []junit.Property, out []string) {
	blank := slices.Index(lines, "")
	if blank < 0 {
		return nil, nil
	}
	for _, l := range lines[blank+1:] {
		if kv, isProp := strings.CutPrefix(l, propMark); isProp && strings.HasSuffix(kv, "]]") {
			if k, v, found := strings.Cut(strings.TrimSuffix(kv, "]]"), "="); found {
				props = append(props, junit.Property{Name: k, Value: v})
				continue
			}
		}
		out = append(out, l)
	}
	return props, out
}

// sortParentsFirst moves every test before the first of its subtests.
func sortParentsFirst[T any](items []T, name func(int) string) {
	for i := 0; i < len(items); i++ {
		for j := i + 1; j < len(items); j++ {
			if strings.HasPrefix(name(i), name(j)+"/") {
				it := items[j]
				copy(items[i+1:j+1], items[i:j])
				items[i] = it
			}
		}
	}
}

func longer(a, b string) string {
	if len(b) > len(a) {
		return b
	}
	return a
}

// Span is when the run's events say it started and ended; without event
// times (JUnit-only recordings) both are the identity's report time, and
// zero when that is absent too.
func (r Run) Span() (start, end time.Time) {
	evs := r.Events
	if evs == nil && r.read != nil {
		evs, _, _ = r.read() // a lazy run's (only hosts found twice need it)
	}
	for _, e := range evs {
		if e.Time == nil {
			continue
		}
		if start.IsZero() || e.Time.Before(start) {
			start = *e.Time
		}
		if e.Time.After(end) {
			end = *e.Time
		}
	}
	if start.IsZero() {
		start, _ = time.Parse(time.RFC3339, r.Host.Time)
		end = start
	}
	return start, end
}

// MergeRuns checks that runs can merge into one report without misleading:
// runs of one name must be runs of one host (the same machine-id, or for
// recordings without one the same addresses, kernel and GPUs, at different
// times), else it is an error naming both folders, since their
// rows, HTML ids and JUnit cases would collide. Of one host's runs the
// latest is kept as is and the earlier ones are marked Earlier and renamed
// with their start time, so both are shown and only the latest judges;
// that only with latest (the operator's word): else a host run twice is an
// error naming both folders.
func MergeRuns(runs []Run, latest bool) ([]Run, error) {
	out := append([]Run(nil), runs...)
	byName := map[string][]int{}
	var names []string
	for i, r := range out {
		if byName[r.Host.Host] == nil {
			names = append(names, r.Host.Host)
		}
		byName[r.Host.Host] = append(byName[r.Host.Host], i)
	}
	for _, name := range names {
		idx := byName[name]
		if len(idx) < 2 {
			continue
		}
		for a := 0; a < len(idx); a++ {
			for b := a + 1; b < len(idx); b++ {
				if why := notOneHost(out[idx[a]], out[idx[b]]); why != "" {
					return nil, fmt.Errorf("%d runs are named %q, among them %s and %s, which are not one host run twice (%s): "+
						"give each host its own name with %s=<name> when it runs (make conformance, dist/run.sh) or gdrreport -collect -host <name>, then merge again",
						len(idx), name, source(out[idx[a]]), source(out[idx[b]]), why, ReportHostEnv)
				}
			}
		}
		sort.SliceStable(idx, func(i, j int) bool {
			si, _ := out[idx[i]].Span()
			sj, _ := out[idx[j]].Span()
			return si.Before(sj)
		})
		if !latest {
			first, last := out[idx[0]], out[idx[len(idx)-1]]
			s0, _ := first.Span()
			s1, _ := last.Span()
			return nil, fmt.Errorf("host %q has %d runs in this merge, among them %s (started %s) and %s (started %s): one folder never replaces another's run unless told: "+
				"pass -latest to judge each host by its latest run (the earlier is shown apart), or merge the runs apart",
				name, len(idx), source(first), s0.UTC().Format(time.RFC3339), source(last), s1.UTC().Format(time.RFC3339))
		}
		out[idx[len(idx)-1]].Latest = true
		for _, i := range idx[:len(idx)-1] {
			start, _ := out[i].Span()
			out[i].Earlier = true
			out[i].Host.Host = fmt.Sprintf("%s (earlier run, started %s)", name, start.UTC().Format(time.RFC3339))
		}
	}
	return out, nil
}

// notOneHost says why runs a and b of one name cannot be one host's, or "".
func notOneHost(a, b Run) string {
	ma, mb := a.Host.MachineID, b.Host.MachineID
	switch {
	case ma == "" && mb == "":
		// Recorded before host.json kept the machine-id: one host when its
		// addresses, kernel and GPUs are the same (containers on a default
		// bridge share addresses, but run at once: see below).
		if len(a.Host.Addrs) == 0 || !sameList(a.Host.Addrs, b.Host.Addrs) || a.Host.Kernel != b.Host.Kernel || !sameList(a.Host.GPUs, b.Host.GPUs) {
			return "no machine_id in their host.json, and their addresses, kernel or GPUs differ or are not recorded"
		}
	case ma == "" || mb == "":
		return "one has no machine_id in its host.json"
	case ma != mb:
		return fmt.Sprintf("machine-id %s and %s", ma, mb)
	}
	sa, ea := a.Span()
	sb, eb := b.Span()
	switch {
	case sa.IsZero() || sb.IsZero():
		return "when they ran is not recorded, so which is the latest is not known"
	case sa.Equal(sb):
		return "the same start time: the same run copied twice?"
	case sa.Before(eb) && sb.Before(ea):
		return "they ran at the same time: a cloned machine-id?"
	}
	return ""
}

func sameList(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

func source(r Run) string {
	if r.Source == "" {
		return "(a cluster run's folder)"
	}
	return r.Source
}

// Options are how FromDirs reads and merges.
type Options struct {
	Isolate isolate.Options // a cluster folder's pair analysis
	// Run is the run to take from a cluster folder that holds several ("":
	// its only one).
	Run string
	// Latest: a host found twice (one machine run twice) is judged by its
	// latest run, the earlier shown apart (gdrreport -latest). Without it
	// such a merge is refused: a folder with a copied host.json must never
	// replace a host's real run unless the operator says so.
	Latest bool
}

// FromDirs builds the report of report folders as gdrreport does: each a
// host's folder, a folder of hosts' folders, or a cluster run's shared
// folder (its rounds of opt.Run, analysed with opt.Isolate); runs of one
// host merged as opt says. Several cluster folders merge only with
// opt.Latest (a first run and the reruns of its failed nodes): each host
// is judged by its latest run, and by the isolation of the run that is
// from (setClusters).
func FromDirs(dirs []string, opt Options) (*Report, error) {
	var runs []Run
	var parts []clusterSource
	from := map[int]int{} // a run's index -> its cluster part
	in := newInterner()
	for _, d := range dirs {
		if IsCluster(d) {
			if len(parts) > 0 && !opt.Latest {
				return nil, fmt.Errorf("more than one cluster folder (%s, %s): merge one cluster run at a time, or pass -latest to judge each node by its latest run (a rerun of the failed nodes beside the first run)", parts[0].Dir, d)
			}
			if len(parts) > 0 && opt.Run != "" {
				return nil, fmt.Errorf("-run %s names the run of one cluster folder, and %s and %s are two: give each run a folder of its own", opt.Run, parts[0].Dir, d)
			}
			rs, a, run, err := loadCluster(d, opt.Isolate, opt.Run)
			if err != nil {
				return nil, err
			}
			for i := range rs {
				from[len(runs)+i] = len(parts)
			}
			runs = append(runs, rs...)
			parts = append(parts, clusterSource{Dir: d, Run: run, a: a})
			continue
		}
		rs, err := loadDir(d, in, true)
		if err != nil {
			return nil, err
		}
		runs = append(runs, rs...)
	}
	runs, err := MergeRuns(runs, opt.Latest)
	if err != nil {
		return nil, err
	}
	// Cluster runs oldest first (by their hosts' earliest start; as given
	// where that is not recorded), and each host owned by the run its
	// judging run is from.
	start := make([]time.Time, len(parts))
	for i, r := range runs {
		if p, ok := from[i]; ok {
			if s, _ := r.Span(); !s.IsZero() && (start[p].IsZero() || s.Before(start[p])) {
				start[p] = s
			}
		}
	}
	order := make([]int, len(parts))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool {
		si, sj := start[order[i]], start[order[j]]
		return !si.IsZero() && !sj.IsZero() && si.Before(sj)
	})
	rank := make([]int, len(parts))
	sorted := make([]clusterSource, len(parts))
	for k, p := range order {
		rank[p], sorted[k] = k, parts[p]
	}
	owner := map[string]int{}
	for i, r := range runs {
		if p, ok := from[i]; ok && !r.Earlier {
			owner[r.Host.Host] = rank[p]
		}
	}
	r := Build(runs)
	if len(sorted) > 0 {
		r.setClusters(sorted, owner)
	}
	return r, nil
}

// suiteTime reads a suite's timestamp: Ant's form has no zone (this
// package writes UTC so), gotestsum writes RFC 3339 with one
// ("2026-12-01T13:28:00Z", "...+01:00"); a recording re-rendered must keep
// its own run's time, not the render's.
func suiteTime(s string) (time.Time, bool) {
	s = strings.TrimSpace(s)
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}
