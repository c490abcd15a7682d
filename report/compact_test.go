package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/cluster"
	"github.com/gdrconf/gdrconf/internal/sharedfile"
)

// eightRails constructs an 8-rail host round from the lab's recording of a
// paired host's whole suite (fixtures/runs/lab-emulated/client: one rail,
// one GPU): every subtest of a rail (".../rail0") or of a GPU
// (".../0000:3b:00.0") becomes eight, the rail or GPU in its name,
// attributes and output replaced; everything else stays once. With
// pairedOnly it keeps the pingpong package alone, as the rounds after a
// host's first run it (GDR_PAIRED_ONLY).
func eightRails(t *testing.T, pairedOnly bool) []byte {
	t.Helper()
	raw, err := os.ReadFile("../fixtures/runs/lab-emulated/client/test.json")
	require.NoError(t, err)
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var e Event
		require.NoError(t, json.Unmarshal([]byte(l), &e))
		if pairedOnly && !strings.HasSuffix(e.Package, "/pingpong") {
			continue
		}
		perDevice := strings.Contains(e.Test, "/rail0") || strings.Contains(e.Test, "/0000:3b:00.0")
		if !perDevice {
			require.NoError(t, enc.Encode(e))
			continue
		}
		for n := range 8 {
			c := e
			sub := func(s string) string {
				s = strings.ReplaceAll(s, "rail0", fmt.Sprintf("rail%d", n))
				s = strings.ReplaceAll(s, "rxe0", fmt.Sprintf("mlx5_%d", n))
				return strings.ReplaceAll(s, "0000:3b:00.0", fmt.Sprintf("0000:%02x:00.0", 0x3b+n))
			}
			c.Test, c.Output, c.Value = sub(c.Test), sub(c.Output), sub(c.Value)
			if c.Key == "gdr.rail" {
				c.Value = fmt.Sprint(n)
			}
			require.NoError(t, enc.Encode(c))
		}
	}
	return out.Bytes()
}

func folderBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range ents {
		fi, err := e.Info()
		require.NoError(t, err)
		n += fi.Size()
	}
	return n
}

// hostRound writes a round's folder as dist/run.sh leaves it: the events
// and host.json, then gdrreport -collect's reports (all of them, or with
// -compact test.json.gz, summary.txt and exit-code).
func hostRound(t *testing.T, events []byte, compact bool) (string, CompactStats) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, EventsFile), events, 0o644))
	b, err := os.ReadFile("../fixtures/runs/lab-emulated/client/host.json")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, HostFile), b, 0o644))
	var st CompactStats
	if compact {
		st, err = CompactDir(dir)
		require.NoError(t, err)
	}
	r, err := FromDirs([]string{dir}, Options{})
	require.NoError(t, err)
	if compact {
		require.NoError(t, r.WriteOnly(dir, CompactReports...))
	} else {
		require.NoError(t, r.WriteAll(dir))
	}
	return dir, st
}

// Bounds a host round stays under on the shared folder (docs/reports.md,
// "A cluster round on the shared folder"; deploy/k8s/reports-pvc.yaml is
// sized from them).
const (
	// roundBoundFirst is a host's first round (the whole suite), 8 rails.
	roundBoundFirst = 96 << 10
	// roundBoundPaired is each round after it (pingpong only), 8 rails.
	roundBoundPaired = 64 << 10
)

// An 8-rail host round, compacted, stays under the documented bound, and
// reads back as the same run: every test with the same result, the same
// attributes, the same verdict.
func TestCompactRoundBound(t *testing.T) {
	for _, tc := range []struct {
		name       string
		pairedOnly bool
		bound      int64
	}{{"first round (whole suite)", false, roundBoundFirst}, {"later round (pingpong)", true, roundBoundPaired}} {
		ev := eightRails(t, tc.pairedOnly)
		before, _ := hostRound(t, ev, false)
		after, st := hostRound(t, ev, true)
		b, a := folderBytes(t, before), folderBytes(t, after)
		t.Logf("8-rail %s: test.json %d B, folder %d B as today; compact: test.json.gz %d B, folder %d B (%.1fx); plain output %d B, cut %d B",
			tc.name, len(ev), b, st.GzBytes, a, float64(b)/float64(a), st.OutputBytes, st.CutBytes)
		assert.LessOrEqual(t, a, tc.bound, "%s: the compacted round's folder", tc.name)
		assert.Zero(t, st.CutBytes, "the suite's own output is never cut")
		assert.NoFileExists(t, filepath.Join(after, EventsFile))
		for _, f := range []string{JUnitFile, HTMLFile, SummaryJSON, SummaryMD, DCGMFile} {
			assert.NoFileExists(t, filepath.Join(after, f), "the merge renders %s; a round keeps summary.txt", f)
		}
		x, err := FromDirs([]string{before}, Options{})
		require.NoError(t, err)
		y, err := FromDirs([]string{after}, Options{})
		require.NoError(t, err)
		assert.Equal(t, x.Verdict, y.Verdict)
		xc, yc := x.Hosts[0].AllCases(), y.Hosts[0].AllCases()
		require.Equal(t, len(xc), len(yc))
		for i := range xc {
			assert.Equal(t, xc[i].Name, yc[i].Name)
			assert.Equal(t, xc[i].Status(), yc[i].Status(), xc[i].Name)
			assert.Equal(t, xc[i].Attrs, yc[i].Attrs, xc[i].Name)
		}
	}

	// The H200 recording (one GPU, no NIC), for scale: a round's folder as
	// it is today and compacted.
	raw, err := os.ReadFile("../fixtures/runs/h200-dist/test.json")
	require.NoError(t, err)
	before, _ := hostRound(t, raw, false)
	after, st := hostRound(t, raw, true)
	t.Logf("H200 recording: test.json %d B, folder %d B as today; compact: test.json.gz %d B, folder %d B", len(raw), folderBytes(t, before), st.GzBytes, folderBytes(t, after))
}

// A round that printed more than the bound keeps every attribute and
// result, each test's first and last lines and a note of the cut; a test
// that printed little keeps all of it.
func TestCompactCutsOnlyTheLoudest(t *testing.T) {
	pkg := "x/conformance/pingpong"
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	emit := func(e Event) { require.NoError(t, enc.Encode(e)) }
	emit(Event{Action: "run", Package: pkg, Test: "TestQuiet"})
	emit(Event{Action: "attr", Package: pkg, Test: "TestQuiet", Key: "gdr.req", Value: "PP-01"})
	emit(Event{Action: "output", Package: pkg, Test: "TestQuiet", Output: "    quiet_test.go:1: one line\n"})
	emit(Event{Action: "pass", Package: pkg, Test: "TestQuiet"})
	emit(Event{Action: "run", Package: pkg, Test: "TestLoud"})
	emit(Event{Action: "output", Package: pkg, Test: "TestLoud", Output: "=== RUN   TestLoud\n"})
	emit(Event{Action: "attr", Package: pkg, Test: "TestLoud", Key: "gdr.req", Value: "PP-02"})
	for i := range 20000 {
		emit(Event{Action: "output", Package: pkg, Test: "TestLoud", Output: fmt.Sprintf("    loud_test.go:7: line %d of a runaway tool\n", i)})
	}
	emit(Event{Action: "attr", Package: pkg, Test: "TestLoud", Key: "gdr.cause", Value: "the tool never stopped"})
	emit(Event{Action: "fail", Package: pkg, Test: "TestLoud"})
	emit(Event{Action: "output", Package: pkg, Output: "FAIL\n"})
	emit(Event{Action: "fail", Package: pkg})

	var out bytes.Buffer
	st, err := CompactEvents(bytes.NewReader(in.Bytes()), &out, 64<<10)
	require.NoError(t, err)
	assert.Equal(t, 1, st.CutTests)
	assert.Greater(t, st.CutLines, 18000)
	s := out.String()
	assert.Less(t, out.Len(), 72<<10, "the plain output kept is within the bound")
	assert.Contains(t, s, "one line", "the quiet test keeps its line")
	assert.Contains(t, s, "line 0 of a runaway tool", "the first lines")
	assert.Contains(t, s, "line 19999 of a runaway tool", "the last lines")
	assert.NotContains(t, s, "line 10000 of")
	assert.Contains(t, s, "of this test's output cut here: a cluster round keeps 64 KiB of plain output in all")
	assert.Contains(t, s, `"Output":"=== RUN   TestLoud\n"`)
	assert.Contains(t, s, "the tool never stopped", "attributes are kept")

	evs, err := ReadEvents(&out)
	require.NoError(t, err)
	r := Build([]Run{{Host: Identity{Host: "h"}, Events: evs}})
	for _, c := range r.Hosts[0].AllCases() {
		switch c.Name {
		case "TestLoud":
			assert.Equal(t, Fail, c.Status())
			assert.Equal(t, "the tool never stopped", c.Attrs["gdr.cause"])
		case "TestQuiet":
			assert.Equal(t, Pass, c.Status())
		}
	}

	// Below the bound nothing changes, byte for byte.
	out.Reset()
	st, err = CompactEvents(bytes.NewReader(in.Bytes()), &out, 16<<20)
	require.NoError(t, err)
	assert.Zero(t, st.CutLines)
	assert.Equal(t, in.String(), out.String())
}

// A report folder holding only test.json.gz reads as test.json did; a
// damaged one is named on its host, which it fails, and stops no merge.
func TestCompressedEventsReadAsPlain(t *testing.T) {
	fleet := t.TempDir()
	hostDir(t, fleet, "plain", oneTest)
	d := hostDir(t, fleet, "packed", oneTest)
	_, err := CompactDir(d)
	require.NoError(t, err)
	assert.FileExists(t, filepath.Join(d, EventsGzFile))
	d = hostDir(t, fleet, "foreign", "")
	require.NoError(t, os.WriteFile(filepath.Join(d, EventsGzFile), []byte(oneTest), 0o644))
	r, err := FromDirs([]string{fleet}, Options{})
	require.NoError(t, err)
	by := map[string]*HostResult{}
	for _, h := range r.Hosts {
		by[h.Identity.Host] = h
	}
	require.Contains(t, by, "packed")
	assert.Equal(t, by["plain"].Verdict, by["packed"].Verdict)
	assert.Empty(t, by["packed"].Errors)
	assert.Contains(t, strings.Join(by["foreign"].Errors, " | "), filepath.Join("foreign", sharedfile.EventsGzFile)+" is not a gzip stream")
	assert.Equal(t, NotQualified, by["foreign"].Verdict.Verdict)
}

// The claim a 1024-node, 8-rail run needs (deploy/k8s/reports-pvc.yaml,
// docs/reports.md): every host's rounds, compacted (its first round and at
// most four after it: an odd ring's three rounds and two repair rounds),
// and the merged report over them, whose size per host is measured on a
// 12-host ring of constructed 8-rail rounds (above 10 hosts the merge
// writes a fleet's lean formats, as it does for 1024).
func TestClaimFor1024Nodes(t *testing.T) {
	root := t.TempDir()
	first, later := eightRails(t, false), eightRails(t, true)
	var hosts []string
	for i := range 12 {
		hosts = append(hosts, fmt.Sprintf("n%02d", i+1))
	}
	id, err := os.ReadFile("../fixtures/runs/lab-emulated/client/host.json")
	require.NoError(t, err)
	var rounds int64
	for k := range 2 {
		for i, me := range hosts {
			peer, role := hosts[(i+1)%len(hosts)], "server"
			if (i+k)%2 == 1 {
				peer, role = hosts[(i+len(hosts)-1)%len(hosts)], "client"
			}
			require.NoError(t, cluster.WritePlan(root, cluster.Plan{Round: k, Host: me, Index: i, Hosts: len(hosts), Role: role, Peer: peer, Pairing: "ring", Job: "slurm/c/1", Run: "slurm/c/1"}))
			dir := cluster.RoundDir(root, me, k)
			ev := first
			if k > 0 {
				ev = later
			}
			require.NoError(t, os.WriteFile(filepath.Join(dir, EventsFile), ev, 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(dir, HostFile), bytes.Replace(id, []byte(`"client"`), []byte(`"`+me+`"`), 1), 0o644))
			_, err := CompactDir(dir)
			require.NoError(t, err)
			rounds += folderBytes(t, dir)
		}
	}
	r, err := FromDirs([]string{root}, Options{})
	require.NoError(t, err)
	out := filepath.Join(root, "report")
	require.NoError(t, r.WriteAll(out))
	var merged int64
	require.NoError(t, filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			fi, err := d.Info()
			if err == nil {
				merged += fi.Size()
			}
		}
		return err
	}))
	perHost := merged / int64(len(hosts))
	need := int64(1024) * (roundBoundFirst + 4*roundBoundPaired + perHost*5/2) // merged over 5 rounds: the first and 4 of 2.5x the pingpong share
	t.Logf("%d hosts x 2 rounds: rounds %d B (%d B a host round); merged report %d B (%d B a host); 1024 nodes need %.2f GiB", len(hosts), rounds, rounds/int64(2*len(hosts)), merged, perHost, float64(need)/(1<<30))

	pvc, err := os.ReadFile("../deploy/k8s/reports-pvc.yaml")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^\s+storage:\s+(\d+)Gi\s*$`).FindSubmatch(pvc)
	require.NotNil(t, m, "reports-pvc.yaml requests storage in Gi")
	var gi int64
	fmt.Sscan(string(m[1]), &gi)
	assert.GreaterOrEqual(t, gi<<30, need, "the claim holds a 1024-node run and its merged report")
}
