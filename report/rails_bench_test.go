package report

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// An 8-rail host's GPUs and NICs (an HGX H200's bus addresses; each NIC
// on its GPU's PCIe switch).
var (
	railGPUs = [8]string{"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0", "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"}
	railNICs = [8]string{"0000:19:00.0", "0000:2b:00.0", "0000:3b:00.0", "0000:5e:00.0", "0000:9b:00.0", "0000:ac:00.0", "0000:bb:00.0", "0000:dc:00.0"}
)

// recordedGPU is the one GPU of the H200 recordings.
const recordedGPU = "0000:00:06.0"

// railHost is the strict H200 recording (fixtures/runs/h200-structured-strict:
// one H200, no NIC, GDR_STRICT=1, 22 must requirements failed with their
// structured causes) as an 8-GPU, 8-NIC host would record it: every
// per-GPU subtest (<test>/0000:00:06.0) once per GPU and every per-rail
// subtest (<test>/rail0) once per rail, their gdr.gpu, gdr.gpu_index,
// gdr.rail and wording rewritten; and what a NIC per rail adds: under each
// rail of PP-08 the sizes the lab's emulated-GPU client measured
// (fixtures/runs/lab-emulated/client: WRITE, READ at 4 KiB, 64 KiB, 1 MiB
// and WRITE-BIDIR at 1 MiB) with gdr.nic mlx5_<rail>, the pair's role and
// peer (filled in per host by railFleet) and 400G numbers with a floor; and
// TOPO-01's 64 GPU x NIC pair cases with their PCIe chains (the host's
// tree). Every host is NOT QUALIFIED, as the recording is: each gets the
// page's full section, the heaviest case.
func railHost(t testing.TB) Run {
	strict, err := LoadDir(filepath.Join(runsDir, "h200-structured-strict"))
	require.NoError(t, err)
	lab, err := LoadDir(filepath.Join(runsDir, "lab-emulated", "client"))
	require.NoError(t, err)
	src := strict[0]
	var sizes []Event // the lab's PP-08 rail0 size cases, less the rail
	for _, e := range lab[0].Events {
		if strings.HasPrefix(e.Test, "TestPP08Bandwidth/rail0/") {
			sizes = append(sizes, e)
		}
	}
	require.NotEmpty(t, sizes)
	widen := func(e Event, k int) Event {
		r := strings.NewReplacer(recordedGPU, railGPUs[k], "/rail0", fmt.Sprintf("/rail%d", k), "rail 0", fmt.Sprintf("rail %d", k), "GPU 0 ", fmt.Sprintf("GPU %d ", k))
		e.Test, e.Output, e.Value = r.Replace(e.Test), r.Replace(e.Output), r.Replace(e.Value)
		if e.Action == "attr" && (e.Key == "gdr.rail" || e.Key == "gdr.gpu_index") {
			e.Value = strconv.Itoa(k)
		}
		return e
	}
	sub := func(name string) string {
		_, s, _ := strings.Cut(name, "/")
		first, _, _ := strings.Cut(s, "/")
		return first
	}
	var evs []Event
	var pkgPP, pkgTopo string
	for _, e := range src.Events {
		switch s := sub(e.Test); {
		case s == recordedGPU || s == "rail0":
			for k := range railGPUs {
				w := widen(e, k)
				if e.Test == "TestPP08Bandwidth/rail0" && (e.Action == "fail" || e.Action == "pass") {
					pkgPP = e.Package
					evs = append(evs, railSizes(sizes, e.Package, k)...)
				}
				evs = append(evs, w)
			}
			continue
		case e.Test == "TestTOPO01Inventory" && (e.Action == "fail" || e.Action == "pass"):
			pkgTopo = e.Package
			evs = append(evs, railPairs(e.Package)...)
		}
		evs = append(evs, e)
	}
	require.NotEmpty(t, pkgPP, "the recording's PP-08 rail")
	require.NotEmpty(t, pkgTopo, "the recording's TOPO-01")
	id := src.Host
	id.GPUs, id.NICs = nil, nil
	for k := range railGPUs {
		id.GPUs = append(id.GPUs, railGPUs[k]+" NVIDIA H200")
		id.NICs = append(id.NICs, fmt.Sprintf("mlx5_%d %s", k, railNICs[k]))
	}
	return Run{Host: id, Events: evs}
}

// railSizes are the lab's PP-08 size cases under rail k of pkg: NIC
// mlx5_k, 400G numbers (the lab's rxe measured kbit/s), the floor at 1 MiB.
func railSizes(sizes []Event, pkg string, k int) []Event {
	out := make([]Event, 0, len(sizes)+8)
	for _, e := range sizes {
		e.Package = pkg
		e.Test = strings.Replace(e.Test, "/rail0/", fmt.Sprintf("/rail%d/", k), 1)
		e.Output = strings.ReplaceAll(strings.ReplaceAll(e.Output, "/rail0/", fmt.Sprintf("/rail%d/", k)), "rxe0", fmt.Sprintf("mlx5_%d", k))
		e.Value = strings.ReplaceAll(e.Value, "rxe0", fmt.Sprintf("mlx5_%d", k))
		if e.Action == "attr" {
			switch e.Key {
			case "gdr.bw_gbit_s", "gdr.bw_gbps":
				v, _ := strconv.ParseFloat(e.Value, 64)
				e.Key, e.Value = "gdr.bw_gbit_s", strconv.FormatFloat(300+v*1000, 'f', 3, 64)
			case "gdr.rail":
				e.Value = strconv.Itoa(k)
			}
		}
		if e.Action == "run" {
			out = append(out, e)
			for _, kv := range [][2]string{{"gdr.nic", fmt.Sprintf("mlx5_%d", k)}, {"gdr.role", "client"}, {"gdr.peer", "peer"}} {
				out = append(out, Event{Action: "attr", Package: pkg, Test: e.Test, Key: kv[0], Value: kv[1]})
			}
			if strings.HasSuffix(e.Test, "/1048576") {
				out = append(out, Event{Action: "attr", Package: pkg, Test: e.Test, Key: "gdr.min_bw_gbit_s", Value: "333.333"},
					Event{Action: "attr", Package: pkg, Test: e.Test, Key: "gdr.threshold_source", Value: "floors.Wire: 400 Gb/s port, RoCE v2, MTU 4096"})
			}
			continue
		}
		out = append(out, e)
	}
	return out
}

// railPairs are TOPO-01's GPU x NIC cases of an 8-rail host: each GPU and
// its NIC under one PCIe switch (PIX), the others across the host (SYS).
func railPairs(pkg string) []Event {
	chain := func(k int, dev string) string {
		// Root port, the switch's upstream port, a downstream port per device.
		bus, _ := strconv.ParseUint(railGPUs[k][5:7], 16, 8)
		port := "00"
		if dev != railGPUs[k] {
			port = "01"
		}
		return fmt.Sprintf("0000:%02x:01.0 0000:%02x:00.0 0000:%02x:%s.0 %s", bus-3, bus-2, bus-1, port, dev)
	}
	var tests []tc
	for i, g := range railGPUs {
		for j := range railNICs {
			class := "PIX"
			if i != j {
				class = "SYS"
			}
			tests = append(tests, tc{name: fmt.Sprintf("TestTOPO01Inventory/%s-mlx5_%d", g, j), result: "pass",
				attrs: []string{"gdr.gpu", g, "gdr.nic", fmt.Sprintf("mlx5_%d", j), "gdr.nic_pci", railNICs[j], "gdr.path", class,
					"gdr.gpu_chain", chain(i, g), "gdr.nic_chain", chain(j, railNICs[j])}})
		}
	}
	return events(pkg, tests...)[1:] // not the package's start again
}

// railFleet is n railHosts, rail<i>: even hosts the servers, odd the
// clients of pairs (each client's peer the host before it), bandwidths
// spread a little.
func railFleet(t testing.TB, n int) []Run {
	base := railHost(t)
	addr := func(i int) string { return fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255+1) }
	runs := make([]Run, n)
	for i := range runs {
		role, peer := "server", addr(i+1)
		if i%2 == 1 {
			role, peer = "client", addr(i-1)+":18515"
		}
		scale := 0.9 + 0.2*float64((i*37)%101)/100
		evs := make([]Event, len(base.Events))
		for k, e := range base.Events {
			if e.Action == "attr" {
				switch e.Key {
				case "gdr.role":
					e.Value = role
				case "gdr.peer":
					e.Value = peer
				case "gdr.bw_gbit_s":
					v, _ := strconv.ParseFloat(e.Value, 64)
					e.Value = strconv.FormatFloat(v*scale, 'f', 3, 64)
				}
			}
			evs[k] = e
		}
		id := base.Host
		id.Host, id.Addrs, id.Role, id.Peer = fmt.Sprintf("rail%04d", i), []string{addr(i)}, role, peer
		runs[i] = Run{Host: id, Events: evs}
	}
	return runs
}

// h200Fleet is n copies of the strict H200 recording as it is (one GPU,
// no NIC): the fleet review measured, a recorded run replicated.
func h200Fleet(t testing.TB, n int) []Run {
	strict, err := LoadDir(filepath.Join(runsDir, "h200-structured-strict"))
	require.NoError(t, err)
	runs := make([]Run, n)
	for i := range runs {
		runs[i] = strict[0]
		runs[i].Host.Host = fmt.Sprintf("h200-%04d", i)
	}
	return runs
}

// benchFleetDir is the folder of fleet(n) as a merge reads it:
// GDR_BENCH_FLEET=<folder> keeps it there, under name, between runs
// (interleaved before/after binaries merge the same files); else a
// temporary folder.
func benchFleetDir(b *testing.B, name string, n int, fleet func(testing.TB, int) []Run) string {
	root := os.Getenv("GDR_BENCH_FLEET")
	if root == "" {
		return saveFleet(b, fleet(b, n))
	}
	dir := filepath.Join(root, fmt.Sprintf("%s-%d", name, n))
	stamp := dir + ".complete"
	if _, err := os.Stat(stamp); err == nil {
		return dir
	}
	for _, r := range fleet(b, n) {
		require.NoError(b, SaveRun(filepath.Join(dir, r.Host.Host), r))
	}
	require.NoError(b, os.WriteFile(stamp, nil, 0o644))
	return dir
}

// peakRSS is the process's peak resident set (VmHWM, /proc/self/status),
// in bytes; resetPeakRSS starts it again from what is resident now
// (proc(5), /proc/pid/clear_refs: 5).
func peakRSS(b *testing.B) float64 {
	f, err := os.Open("/proc/self/status")
	require.NoError(b, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			require.NoError(b, err)
			return kb * 1024
		}
	}
	b.Fatal("no VmHWM in /proc/self/status")
	return 0
}

func resetPeakRSS(b *testing.B) {
	runtime.GC()
	debug.FreeOSMemory()
	require.NoError(b, os.WriteFile("/proc/self/clear_refs", []byte("5"), 0))
}

// BenchmarkMerge1024Rails8 merges 1024 8-rail hosts (railHost: the strict
// H200 recording widened to 8 GPUs and 8 NICs, every host NOT QUALIFIED)
// as gdrreport does, reading every folder and writing every file; it
// reports the peak RSS of the merge alone and the sizes written:
//
//	go test -run XXX -bench Merge1024Rails8 -benchtime 1x -benchmem ./report/
func BenchmarkMerge1024Rails8(b *testing.B) {
	benchMerge(b, benchFleetDir(b, "rails8", 1024, railFleet))
}

// BenchmarkMerge1024H200 merges 1024 copies of the strict H200 recording
// as recorded (h200Fleet), as BenchmarkMerge1024Rails8 does.
func BenchmarkMerge1024H200(b *testing.B) {
	benchMerge(b, benchFleetDir(b, "h200", 1024, h200Fleet))
}

// benchMerge merges the fleet in in as gdrreport does and reports its peak
// RSS and the sizes written.
func benchMerge(b *testing.B, in string) {
	b.ReportAllocs()
	b.ResetTimer()
	b.StopTimer()
	var sizes map[string]int64
	var peak float64
	for i := 0; i < b.N; i++ {
		out := b.TempDir()
		resetPeakRSS(b)
		b.StartTimer()
		sizes = mergeFleet(b, in, out)
		b.StopTimer()
		peak = max(peak, peakRSS(b))
		require.NoError(b, os.RemoveAll(out))
	}
	b.ReportMetric(peak/(1<<20), "peak-RSS-MiB")
	for _, k := range []string{HTMLFile, SummaryMD, SummaryText, SummaryJSON, JUnitFile} {
		b.ReportMetric(float64(sizes[k])/(1<<20), k+"-MiB")
	}
}
