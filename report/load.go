package report

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// File names in a host's report folder.
const (
	EventsFile = "test.json"
	JUnitFile  = "junit.xml"
)

// LoadDir reads the runs under dir:
//   - a folder with host.json is one host (test.json's events, host.json's
//     identity);
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
func LoadDir(dir string) ([]Run, error) {
	has := func(name string) bool { return exists(filepath.Join(dir, name)) }
	if IsCluster(dir) {
		return loadClusterRuns(dir)
	}
	if has(HostFile) {
		r, err := loadHost(dir)
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
			got[i], errs[i] = LoadDir(subs[i])
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
	case has(EventsFile):
		r, err := loadHost(dir)
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
	if in(HostFile) || in(EventsFile) || in(JUnitFile) && !in(SummaryJSON) {
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

func loadHost(dir string) (Run, error) {
	var run Run
	id, err := ReadIdentity(filepath.Join(dir, HostFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		id = Identity{Host: hostLabel(dir)}
	case err != nil:
		return run, err
	}
	run.Host = id
	f, err := os.Open(filepath.Join(dir, EventsFile))
	if errors.Is(err, fs.ErrNotExist) {
		if _, jerr := os.Stat(filepath.Join(dir, JUnitFile)); jerr == nil {
			r, err := loadJUnitDir(dir)
			r.Host = id
			return r, err
		}
		run.Errs = append(run.Errs, fmt.Sprintf("%s has no %s: the run left no results", dir, EventsFile))
		return run, nil
	}
	if err != nil {
		return run, err
	}
	defer f.Close()
	run.Events, err = ReadEvents(f)
	if err != nil {
		return run, fmt.Errorf("%s: %v", f.Name(), err)
	}
	return run, nil
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
	f, err := os.Open(filepath.Join(dir, JUnitFile))
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
	return Run{Host: id, Events: evs}, nil
}

// ReadJUnit turns a JUnit file written by gotestsum (or by this package) back
// into go test -json events: each case's properties become attr events, its
// body output events, its result the final event. Subtest structure comes
// back from the names. Host suffixes " [host]" are dropped.
func ReadJUnit(r io.Reader) ([]Event, error) {
	doc, err := ParseJUnit(r)
	if err != nil {
		return nil, err
	}
	var evs []Event
	for _, s := range doc.Suites {
		pkg := s.Name // a package path, or our own <host>/<area>: the area is its last element either way
		type item struct {
			name string
			evs  []Event
		}
		var items []item
		for _, c := range s.Cases {
			name := c.Name
			if i := strings.LastIndex(name, " ["); i > 0 && strings.HasSuffix(name, "]") {
				name = name[:i]
			}
			el, _ := strconv.ParseFloat(c.Time, 64)
			e := []Event{{Action: "run", Package: pkg, Test: name}}
			for _, p := range c.Props {
				e = append(e, Event{Action: "attr", Package: pkg, Test: name, Key: p.Name, Value: p.Value})
			}
			body, action := c.Out, "pass"
			switch {
			case c.Failure != nil:
				body, action = longer(c.Failure.Body, c.Failure.Message), "fail"
			case c.Error != nil:
				body, action = longer(c.Error.Body, c.Error.Message), "fail"
			case c.Skipped != nil:
				body, action = longer(c.Skipped.Body, c.Skipped.Message), "skip"
			}
			for _, l := range splitLines(body) {
				if strings.HasPrefix(l, "=== ATTR ") {
					continue // gotestsum keeps these; the properties carry them
				}
				e = append(e, Event{Action: "output", Package: pkg, Test: name, Output: l + "\n"})
			}
			e = append(e, Event{Action: action, Package: pkg, Test: name, Elapsed: el})
			items = append(items, item{name, e})
		}
		// gotestsum lists a parent after its subtests; parents start first.
		sortParentsFirst(items, func(i int) string { return items[i].name })
		evs = append(evs, Event{Action: "start", Package: pkg})
		for _, it := range items {
			evs = append(evs, it.evs...)
		}
	}
	return evs, nil
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
