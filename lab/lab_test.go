package lab

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/dmi"
	"github.com/gdrconf/gdrconf/internal/inventory"
	"github.com/gdrconf/gdrconf/report"
)

func TestRecordsRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	rw := NewRecordWriter(&buf)
	st := Step{ID: "2h:conformance/pingpong", Host: "server", Pkg: "conformance/pingpong", Kind: "gotest"}
	require.NoError(t, rw.Write(RecBegin, st.ID, mustJSON(st)))
	big := bytes.Repeat([]byte("x\r\n\x00\xff"), 2000) // bigger than one chunk, tty-hostile bytes
	_, err := rw.StepOutput(st.ID).Write(big)
	require.NoError(t, err)
	buf.WriteString("[   12.3] kernel noise GDRLAB\r\n")
	require.NoError(t, rw.Write(RecEnd, st.ID, mustJSON(StepEnd{RC: 1, Err: "boom"})))
	require.NoError(t, rw.Write(RecLog, "-", []byte("hello")))
	buf.WriteString("GDRLAB D " + st.ID + " !!!notbase64\n") // torn line of a killed VM
	require.NoError(t, rw.Write(RecIdentity, "-", mustJSON(report.Identity{Host: "(none)", Kernel: "6.1.0-57-amd64",
		Inventory: &inventory.Host{NICs: []inventory.NIC{{Name: "rxe0", NodeGUID: "5054:00ff:fe12:3401"}}}})))
	require.NoError(t, rw.Write(RecDone, "-", nil))
	assert.Error(t, rw.Write(RecLog, "has blank", nil))

	res, err := ParseRecords(strings.NewReader(strings.ReplaceAll(buf.String(), "\n", "\r\n")))
	require.NoError(t, err)
	require.Len(t, res.Steps, 1)
	sr := res.Step(st.ID)
	require.NotNil(t, sr)
	assert.Equal(t, st, sr.Step)
	assert.Equal(t, big, sr.Output)
	require.NotNil(t, sr.End)
	assert.Equal(t, 1, sr.End.RC)
	assert.Equal(t, []string{"hello"}, res.Log)
	assert.True(t, res.Done)
	assert.Nil(t, res.Step("other"))
	require.NotNil(t, res.Identity)
	assert.Equal(t, "5054:00ff:fe12:3401", res.Identity.Inventory.NICs[0].NodeGUID)
}

// A VM's own identity (what its agent collected) is the report's, under
// the lab's labels; loopback, which runs in the server VM, gets the
// server VM's; a host whose VM sent none keeps the lab's labels only.
func TestRunsIdentityFromVM(t *testing.T) {
	suites := sampleSuites()
	for _, s := range suites {
		s.VM = "server"
	}
	suites = append(suites, &Suite{Host: "client", Pkg: PingpongPkg, Role: "client", VM: "client"})
	vm := &report.Identity{Host: "(none)", Kernel: "6.1.0-99-amd64", Role: "x", Peer: "y", Addrs: []string{"10.0.0.9"},
		NICs: []string{"rxe0 (software, eth0)"}, Inventory: &inventory.Host{DMI: &dmi.Info{Product: "Standard PC (i440FX + PIIX, 1996)"}}}
	runs := Runs(suites, "6.1.0-57-amd64", map[string]*report.Identity{"server": vm})
	require.Len(t, runs, 3)
	srv, lo, cl := runs[0].Host, runs[1].Host, runs[2].Host
	assert.Equal(t, "server", srv.Host)
	assert.Equal(t, "server", srv.Role)
	assert.Equal(t, []string{ServerIP}, srv.Addrs, "the lab's address, not what the agent saw")
	assert.Empty(t, srv.Peer)
	assert.Equal(t, "6.1.0-99-amd64", srv.Kernel, "the VM's own uname")
	assert.Contains(t, srv.Kind, "not hardware evidence")
	require.NotNil(t, srv.Inventory)
	assert.Equal(t, "Standard PC (i440FX + PIIX, 1996)", srv.Inventory.DMI.Product)
	assert.Equal(t, "loopback", lo.Host)
	assert.Equal(t, []string{"rxe0 (software, eth0)"}, lo.NICs)
	assert.Equal(t, "client", cl.Host)
	assert.Nil(t, cl.Inventory, "no identity from the client VM")
	assert.Equal(t, "6.1.0-57-amd64", cl.Kernel)
	assert.Equal(t, "x", vm.Role, "the agent's identity is not changed")
}

func ev(action, test, out string) Event { return Event{Action: action, Test: test, Output: out} }

func sampleSuites() []*Suite {
	pp := &Suite{Host: "server", Pkg: PingpongPkg, Role: "server", Events: []Event{
		ev("run", "TestPP03Write", ""), ev("output", "TestPP03Write", "=== RUN   TestPP03Write\n"),
		{Action: "attr", Test: "TestPP03Write", Key: "gdr.req", Value: "PP-03"},
		{Action: "attr", Test: "TestPP03Write", Key: "gdr.nic", Value: "rxe0"},
		{Action: "pass", Test: "TestPP03Write", Elapsed: 1.5},
		ev("run", "TestPP05Read", ""),
		{Action: "attr", Test: "TestPP05Read", Key: "gdr.cause", Value: "peer 198.18.0.2 vanished"},
		{Action: "attr", Test: "TestPP05Read", Key: "gdr.remedy", Value: "check the peer"},
		ev("output", "TestPP05Read", "    x_test.go:1: peer 198.18.0.2 vanished; remedy: check the peer\n"),
		{Action: "fail", Test: "TestPP05Read", Elapsed: 2},
		ev("run", "TestSend", ""), ev("output", "TestSend", "    x_test.go:2: no RDMA device\n"), ev("skip", "TestSend", ""),
		ev("run", "TestHang", ""),
		ev("output", "", "FAIL\n"),
	}}
	lo := &Suite{Host: "loopback", Pkg: "conformance/install", Role: "loopback", StepErr: "did not run: its VM died"}
	return []*Suite{pp, lo}
}

// The lab's JUnit is the report package's, over its hosts: suites
// <host>/<area> with hostname set, host-qualified case names, the failure
// message the cause, a step that failed outside any test as an error case.
func TestJUnit(t *testing.T) {
	var buf bytes.Buffer
	runs := Runs(sampleSuites(), "6.1.0-57-amd64", nil)
	require.Len(t, runs, 2)
	assert.Equal(t, []string{ServerIP}, runs[0].Host.Addrs)
	require.NoError(t, report.Build(runs).WriteJUnit(&buf))
	doc, err := report.ParseJUnit(bytes.NewReader(buf.Bytes()))
	require.NoError(t, err, buf.String())
	for _, s := range doc.Suites {
		if s.Name == "server/pingpong" {
			assert.Equal(t, "server", s.Hostname)
		}
	}
	cases := doc.Cases("server/pingpong")
	require.GreaterOrEqual(t, len(cases), 4)
	assert.Equal(t, "TestPP03Write [server]", cases[0].Name)
	require.NotNil(t, cases[1].Failure)
	assert.True(t, strings.HasSuffix(cases[1].Failure.Message, " on server: peer 198.18.0.2 vanished"), cases[1].Failure.Message)
	assert.Contains(t, cases[1].Failure.Data, "remedy: check the peer")
	assert.NotNil(t, cases[2].Skipped)
	require.NotNil(t, cases[3].Error, "a test that never finished: an error of the run, not the hardware's")
	assert.Equal(t, "did_not_finish", cases[3].Error.Type)
	lo := doc.Cases("loopback/run")
	require.Len(t, lo, 1)
	require.NotNil(t, lo[0].Error, "a step that failed outside any test was not judged")
	assert.Equal(t, "loopback/conformance/install: did not run: its VM died", lo[0].Error.Message)
}

func TestSummaryAndVerdict(t *testing.T) {
	suites := sampleSuites()
	var buf bytes.Buffer
	Summary(&buf, suites)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 4)
	assert.Equal(t, []string{"server", "conformance/pingpong", "1", "2", "1"}, strings.Fields(lines[1]))
	assert.Equal(t, []string{"loopback", "conformance/install", "0", "1", "0"}, strings.Fields(lines[2]))
	assert.Equal(t, []string{"total", "1", "3", "1"}, strings.Fields(lines[3]))

	pr := Verdict(suites, []string{PingpongPkg})
	joined := strings.Join(pr, "\n")
	assert.Contains(t, joined, "server/conformance/pingpong: TestPP05Read failed: x_test.go:1: peer 198.18.0.2 vanished")
	assert.Contains(t, joined, "TestSend was skipped, but the lab must run it")
	assert.Contains(t, joined, "TestHang did not finish")
	assert.Contains(t, joined, "loopback/conformance/install: did not run")
	assert.NotContains(t, strings.Join(Verdict(suites, nil), "\n"), "skipped", "skips elsewhere are fine")

	ok := &Suite{Host: "client", Pkg: PingpongPkg, Events: []Event{ev("run", "TestA", ""), ev("pass", "TestA", "")}}
	assert.Empty(t, Verdict([]*Suite{ok}, []string{PingpongPkg}))
}

// A GPU-only requirement (PP-09) skipped for want of a GPU passes the lab
// and is named in the NOTE; skipped for another reason, or any other
// requirement skipped, still fails it.
func TestVerdictGPUOnlySkip(t *testing.T) {
	skip := func(test, req, why string) []Event {
		return []Event{ev("run", test, ""),
			{Action: "attr", Test: test, Key: "gdr.req", Value: req},
			{Action: "attr", Test: test, Key: "gdr.skip", Value: why},
			ev("output", test, "    x_test.go:3: "+why+"\n"), ev("skip", test, "")}
	}
	noCUDA := "no CUDA driver: libcuda.so.1 does not open (cannot open shared object file); install the driver"
	pass := []Event{ev("run", "TestA", ""), ev("pass", "TestA", "")}
	gpu := &Suite{Host: "client", Pkg: PingpongPkg, Events: append(slices.Clone(pass), skip("TestPP09HostVsGPU", "PP-09", noCUDA)...)}
	assert.Empty(t, Verdict([]*Suite{gpu}, []string{PingpongPkg}))
	notes := GPUSkips([]*Suite{gpu}, []string{PingpongPkg})
	require.Len(t, notes, 1)
	assert.Contains(t, notes[0], "client/conformance/pingpong: TestPP09HostVsGPU (PP-09) skipped: the VMs have no GPU")
	assert.Contains(t, notes[0], "libcuda.so.1")
	noGPU := &Suite{Host: "server", Pkg: PingpongPkg, Events: skip("TestPP09HostVsGPU", "PP-09", "no GPU: cuDeviceGetCount is 0")}
	assert.Empty(t, Verdict([]*Suite{noGPU}, []string{PingpongPkg}))

	// PP-09 skipped because RDMA is missing is a lab bug, not a missing GPU.
	noRDMA := &Suite{Host: "server", Pkg: PingpongPkg, Events: skip("TestPP09HostVsGPU", "PP-09", "no RDMA device: /sys/class/infiniband is empty")}
	assert.Contains(t, strings.Join(Verdict([]*Suite{noRDMA}, []string{PingpongPkg}), "\n"), "TestPP09HostVsGPU was skipped, but the lab must run it")
	assert.Empty(t, GPUSkips([]*Suite{noRDMA}, []string{PingpongPkg}))
	// A requirement not in the GPU-only list fails even when the skip names libcuda.
	other := &Suite{Host: "server", Pkg: PingpongPkg, Events: skip("TestPP03Write", "PP-03", noCUDA)}
	assert.Contains(t, strings.Join(Verdict([]*Suite{other}, []string{PingpongPkg}), "\n"), "TestPP03Write was skipped, but the lab must run it")
	assert.Empty(t, GPUSkips([]*Suite{other}, []string{PingpongPkg}))
	// Outside the mustRun packages nothing is noted.
	assert.Empty(t, GPUSkips([]*Suite{gpu}, nil))

	// A cuMemCreate case (gdr.gpu_alloc) of any requirement is GPU-only: it
	// skips without a GPU, and in the host-memory run.
	vmm := func(why string) *Suite {
		evs := skip("TestPP04WriteImm/cuMemCreate/rail0", "PP-04", why)
		evs = slices.Insert(evs, 1, Event{Action: "attr", Test: "TestPP04WriteImm/cuMemCreate/rail0", Key: "gdr.gpu_alloc", Value: "cuMemCreate"})
		return &Suite{Host: "server-hostmem", Pkg: PingpongPkg, Events: evs}
	}
	hostmem := vmm("GDR_MEM=host: the cuMemCreate case moves data through GPU memory")
	assert.Empty(t, Verdict([]*Suite{hostmem}, []string{PingpongPkg}))
	notes = GPUSkips([]*Suite{hostmem}, []string{PingpongPkg})
	require.Len(t, notes, 1)
	assert.Contains(t, notes[0], "TestPP04WriteImm/cuMemCreate/rail0 (PP-04) skipped: this run is on host memory")
	assert.Empty(t, Verdict([]*Suite{vmm(noCUDA)}, []string{PingpongPkg}))
	assert.Contains(t, strings.Join(Verdict([]*Suite{vmm("no RDMA device: /sys/class/infiniband is empty")}, []string{PingpongPkg}), "\n"),
		"was skipped, but the lab must run it", "a cuMemCreate case skipped for want of RDMA is not excused")
	// GDR_MEM=host excuses only a GPU case.
	plainHost := &Suite{Host: "server", Pkg: PingpongPkg, Events: skip("TestPP04WriteImm/rail0", "PP-04", "GDR_MEM=host: whatever")}
	assert.Contains(t, strings.Join(Verdict([]*Suite{plainHost}, []string{PingpongPkg}), "\n"), "was skipped, but the lab must run it")
}

const perftestBW = `
---------------------------------------------------------------------------------------
                    RDMA_Write BW Test
 Number of qps   : 1		Transport type : IB
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 65536      200              0.29               0.28   		   0.000534
---------------------------------------------------------------------------------------
`

const perftestLat = `
 #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] 
 2       200          3990.12        24010.55     4000.31           4100.00        12.5         8000.25                24010.55  
`

func TestPerftestParsers(t *testing.T) {
	v, err := ParsePerftestBW(perftestBW, 65536)
	require.NoError(t, err)
	assert.InDelta(t, 0.28, v, 1e-9)
	mb := strings.ReplaceAll(strings.ReplaceAll(perftestBW, "Gb/sec", "MB/sec"), "0.28", "33.50")
	v, err = ParsePerftestBW(mb, 65536)
	require.NoError(t, err)
	assert.InDelta(t, 33.5*1048576*8/1e9, v, 1e-9, "MB/sec is MiB/s")
	_, err = ParsePerftestBW(perftestBW, 1048576)
	assert.ErrorContains(t, err, "no result line for 1048576 bytes")
	typ, p99, err := ParsePerftestLat(perftestLat, 2)
	require.NoError(t, err)
	assert.InDelta(t, 4000.31, typ, 1e-9)
	assert.InDelta(t, 8000.25, p99, 1e-9)
	_, _, err = ParsePerftestLat("Couldn't connect to 198.18.0.1:18515", 2)
	assert.Error(t, err)
}
