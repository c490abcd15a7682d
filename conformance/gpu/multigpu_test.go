//go:build gpu

package gpu

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gdrconf/gdrconf/harness/cuda"
	"github.com/gdrconf/gdrconf/harness/membuf"
	"github.com/gdrconf/gdrconf/harness/numa"
	"github.com/gdrconf/gdrconf/harness/nvml"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/cpulist"
	"github.com/gdrconf/gdrconf/internal/multigpu"
	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/topo"
)

// Multi-GPU checks (GPU-12..15): what only shows with several GPUs busy.
// GPUs behind one PCIe switch uplink each pass a solo copy test and slow
// each other down when they copy at once (GPU-12/13); GPU<->GPU peer copies
// are what NCCL uses inside a node (GPU-14/15).

const (
	// concurrentMinOps: a GPU's concurrent rate needs at least this many
	// copies wholly inside the window in which all GPUs copied.
	concurrentMinOps = 3
	// peerBatch copies are queued per timed peer operation: 8 x 256 MiB
	// takes about 5 ms at NVLink 4 rates, long against the host's part.
	peerBatch = 8
	// peerDataSize is what GPU-14 moves each way to prove the data path.
	peerDataSize = 4 << 20
	// guard bytes after a destination stay poison unless a copy overruns.
	guard  = 4096
	poison = 0xa5
	// armWithin bounds a warm-up copy; stopWithin the end of a copy loop
	// after it is told to stop (one copy of 2 GiB at PCIe Gen3 is 0.2 s).
	armWithin  = time.Minute
	stopWithin = time.Minute
)

// bufSize is the size of each timed copy: copySize on a GPU; on the lab's
// emulated GPU, whose copies are CPU memcpy and whose rates are not judged,
// less, so that the unit tests that run these checks on it stay short.
func bufSize(dev cuda.Device) int {
	if dev.Emulated {
		return 16 << 20
	}
	return copySize
}

// multiGPU starts a multi-GPU check: the selected GPUs the CUDA driver
// sees, at least two; one is absent, saying which GPU and why only one.
func multiGPU(t *testing.T, id string) []cuda.Device {
	t.Helper()
	testenv.Req(t, id)
	d := cuda.Open(t)
	devs := cuda.GPUs(t, d) // absent without any GPU
	testenv.Attr(t, "gpu_count", len(devs))
	if len(devs) < 2 {
		all, err := d.Devices()
		if err != nil {
			testenv.Failf(t, cuda.InitRemedy(err), "listing GPUs: %v", err)
		}
		why := fmt.Sprintf("the CUDA driver sees %d GPU(s)", len(all))
		cfg := testenv.Config(t)
		var sel []string
		if cfg.GPU != "" {
			sel = append(sel, "GDR_GPU="+cfg.GPU)
		}
		if cfg.Rails != nil {
			sel = append(sel, "GDR_RAILS="+strings.Trim(strings.Join(strings.Fields(fmt.Sprint(cfg.Rails)), ","), "[]"))
		}
		if len(sel) > 0 {
			why += " and " + strings.Join(sel, " ") + " selects one"
		}
		testenv.Absent(t, "%s needs two or more GPUs: the selection has one, %s (%s); %s", id, devs[0].PCI, devs[0].Name, why)
	}
	return devs
}

// gpuName is "GPU 3 (0000:3b:00.0)" when the selection numbers the GPU,
// else its PCI address.
func gpuName(t testing.TB, dev cuda.Device) string {
	if g := cuda.GPUOf(t, dev); g != nil {
		return g.String()
	}
	return dev.PCI
}

// railAttrs records the rail facts of dev's rail (gdr.gpu, gdr.rail, ...).
func railAttrs(t *testing.T, dev cuda.Device) {
	t.Helper()
	for _, r := range testenv.Selection(t).Rails {
		if r.GPU != nil && r.GPU.PCI == dev.PCI {
			testenv.RailAttrs(t, r)
			return
		}
	}
	testenv.Attr(t, "gpu", dev.PCI)
}

func meanGBps(bytes int, spans []multigpu.Span) float64 {
	var total time.Duration
	for _, s := range spans {
		total += s.Duration()
	}
	return cuda.GBps(bytes*len(spans), total)
}

func bestGBps(bytes int, spans []multigpu.Span) float64 {
	var best float64
	for _, s := range spans {
		best = max(best, cuda.GBps(bytes, s.Duration()))
	}
	return best
}

// ---- GPU-12/13: every GPU copying at once ----

// hostCopier is one GPU's side of the concurrent copy check.
type hostCopier struct {
	dev    cuda.Device
	c      *cuda.Context
	m      *cuda.Mem
	h      *cuda.Pinned
	pinned string      // where the pinned buffer went (gdr.pinned_numa)
	local  cpulist.Set // the GPU's local CPUs, where its copies run
	cpus   string      // where its copies ran (gdr.copy_cpus)
	solo   float64
	op     time.Duration // one solo copy, mean
	lane   multigpu.Lane
}

func newHostCopiers(tb testing.TB, devs []cuda.Device, n int) []*hostCopier {
	tb.Helper()
	var out []*hostCopier
	for _, dev := range devs {
		c := cuda.Primary(tb, dev)
		m := cuda.Alloc(tb, c, n)
		h, place := cuda.HostAllocNear(tb, c, n)
		out = append(out, &hostCopier{dev: dev, c: c, m: m, h: h, pinned: place, local: cuda.LocalCPUs(tb, dev)})
	}
	return out
}

// concurrently runs every copier's loop at once, each on its GPU's CPUs,
// after a warm-up copy each: for window, or for l's bounds when window is 0.
// It returns each GPU's spans.
func concurrently(cs []*hostCopier, dir cuda.Direction, n int, window time.Duration, l cuda.Loop) ([][]multigpu.Span, error) {
	lanes := make([][]multigpu.Span, len(cs))
	err := multigpu.AtOnce(len(cs), window, armWithin, stopWithin, func(i int, arm func(), stop <-chan struct{}) error {
		g := cs[i]
		placed, err := numa.OnCPUs(g.local, func() error {
			if _, err := g.c.CopyLoop(dir, g.m, g.h, n, cuda.Loop{Reps: 1}); err != nil {
				return err
			}
			arm()
			ll := l
			if window > 0 {
				ll = cuda.Loop{Stop: stop, Limit: window + stopWithin}
			}
			var err error
			lanes[i], err = g.c.CopyLoop(dir, g.m, g.h, n, ll)
			return err
		})
		g.cpus = placed
		if err != nil {
			return fmt.Errorf("GPU %s: %w", g.dev.PCI, err)
		}
		return nil
	})
	return lanes, err
}

// measureSolo times each GPU's copies alone, one GPU after another, as
// GPU-09/10 do: the rate each is compared with.
func measureSolo(cs []*hostCopier, dir cuda.Direction, n int) error {
	for _, g := range cs {
		var spans []multigpu.Span
		placed, err := numa.OnCPUs(g.local, func() error {
			if _, err := g.c.CopyLoop(dir, g.m, g.h, n, cuda.Loop{Reps: 1}); err != nil { // warm-up
				return err
			}
			var err error
			spans, err = g.c.CopyLoop(dir, g.m, g.h, n, cuda.Loop{Reps: copyReps})
			return err
		})
		if err != nil {
			return fmt.Errorf("GPU %s alone: %w", g.dev.PCI, err)
		}
		g.cpus = placed
		g.solo = meanGBps(n, spans)
		var total time.Duration
		for _, s := range spans {
			total += s.Duration()
		}
		g.op = total / time.Duration(len(spans))
	}
	return nil
}

// sharers says which other selected GPUs share an upstream bridge with dev
// (topo.SharedUpstream), with how each of them fared: "switch upstream port
// 0000:01:00.0 with GPU 1 (0000:07:00.0) at 0.49 of its solo rate".
func sharers(t *testing.T, dev cuda.Device, cs []*hostCopier, fraction map[string]float64) string {
	t.Helper()
	ix := testenv.Selection(t).Index
	if ix.Device(dev.PCI) == nil {
		return "the GPU is not in sysfs (" + testenv.Root(t).Host(pci.DevicesDir) + "), so no PCIe tree names the GPUs it shares an uplink with"
	}
	var others []string
	for _, g := range cs {
		if g.dev.PCI != dev.PCI && ix.Device(g.dev.PCI) != nil {
			others = append(others, g.dev.PCI)
		}
	}
	shared, err := ix.SharedUpstream(dev.PCI, others)
	if err != nil {
		return "the PCIe tree does not say: " + err.Error()
	}
	if len(shared) == 0 {
		return "it shares no PCI bridge or host bridge with another selected GPU: the contention is upstream of PCIe (host memory bandwidth, the CPU interconnect) or in the GPU"
	}
	byWhere := map[string][]string{}
	var order []string
	for _, s := range shared {
		w := s.Where()
		if _, ok := byWhere[w]; !ok {
			order = append(order, w)
		}
		peer := s.Peer
		for _, g := range cs {
			if g.dev.PCI == s.Peer {
				peer = fmt.Sprintf("%s at %.2f of its solo rate", gpuName(t, g.dev), fraction[s.Peer])
			}
		}
		byWhere[w] = append(byWhere[w], peer)
	}
	var parts []string
	for _, w := range order {
		parts = append(parts, fmt.Sprintf("%s with %s", w, strings.Join(byWhere[w], ", ")))
	}
	return "it shares " + strings.Join(parts, "; ")
}

func concurrentCheck(t *testing.T, id string, dir cuda.Direction) {
	devs := multiGPU(t, id)
	copies(t, devs...)
	frac := testenv.Config(t).MinConcurrentFraction
	n := bufSize(devs[0])
	cs := newHostCopiers(t, devs, n)
	if err := measureSolo(cs, dir, n); err != nil {
		testenv.Failf(t, "check dmesg for Xid errors", "%v", err)
	}
	// Long enough for many copies of the slowest GPU inside the window.
	window := time.Second
	for _, g := range cs {
		window = max(window, 20*g.op)
	}
	lanes, err := concurrently(cs, dir, n, window, cuda.Loop{})
	if err != nil {
		testenv.Failf(t, "check dmesg for Xid errors", "%s copies on %d GPUs at once: %v", dir, len(cs), err)
	}
	w, err := multigpu.Overlap(lanes, int64(n), concurrentMinOps)
	if err != nil {
		testenv.Failf(t, "check dmesg for Xid errors; a GPU far slower than the others stretches its copies past the window", "%s copies on %d GPUs at once: %v", dir, len(cs), err)
	}
	var soloSum float64
	fraction := map[string]float64{}
	for i, g := range cs {
		g.lane = w.Lanes[i]
		soloSum += g.solo
		fraction[g.dev.PCI] = g.lane.GBps / g.solo
	}
	dirKey := map[cuda.Direction]string{cuda.HtoD: "h2d", cuda.DtoH: "d2h"}[dir]
	testenv.Attr(t, "copy_dir", dirKey)
	testenv.Attr(t, "copy_gbyte_s_aggregate", w.Aggregate())
	testenv.Attr(t, "copy_gbyte_s_solo_sum", soloSum)
	testenv.Attr(t, "window_ms", float64(w.Length())/float64(time.Millisecond))
	testenv.Attr(t, "size_bytes", n)
	testenv.Attr(t, "min_concurrent_fraction", frac)
	var lines []string
	for _, g := range cs {
		lines = append(lines, fmt.Sprintf("  %s: alone %.2f GB/s, together %.2f GB/s (%.2f; %d copies)", g.dev.PCI, g.solo, g.lane.GBps, fraction[g.dev.PCI], g.lane.Ops))
	}
	t.Logf("pinned %s %s copies on %d GPUs at once for %v: aggregate %.2f GB/s (the solo rates add up to %.2f)\n%s",
		dir, cuda.Size(n), len(cs), w.Length().Round(time.Millisecond), w.Aggregate(), soloSum, strings.Join(lines, "\n"))

	for _, g := range cs {
		t.Run(g.dev.PCI, func(t *testing.T) {
			testenv.Req(t, id)
			railAttrs(t, g.dev)
			testenv.Attr(t, "gpu_name", g.dev.Name)
			testenv.Attr(t, "mem", g.dev.MemLabel())
			testenv.Attr(t, "pinned_numa", g.pinned)
			cuda.CopyCPUsAttr(t, g.cpus)
			testenv.Attr(t, "copy_dir", dirKey)
			testenv.Attr(t, "copy_gbyte_s_solo", g.solo)
			testenv.Attr(t, "copy_gbyte_s", g.lane.GBps)
			testenv.Attr(t, "copy_count", g.lane.Ops)
			testenv.Attr(t, "concurrent_fraction", fraction[g.dev.PCI])
			testenv.Attr(t, "min_concurrent_fraction", frac)
			share := sharers(t, g.dev, cs, fraction)
			testenv.Attr(t, "shares_upstream", share)
			if g.dev.Emulated {
				testenv.Absent(t, "GPU %s is the lab's emulated GPU: its copies are CPU memcpy, which shares no PCIe uplink; %.2f of its solo rate with %d GPUs copying at once is reported, not judged",
					g.dev.PCI, fraction[g.dev.PCI], len(cs))
			}
			if fraction[g.dev.PCI] < frac {
				testenv.Failf(t, "GPUs behind one PCIe switch uplink share it: check the upstream port's link (lspci -vvv: LnkSta) and that each GPU has the uplink the platform is built with; check that pinned buffers sit on each GPU's NUMA node (gdr.pinned_numa) and that every memory channel is populated",
					"%s: pinned %s copies reach %.2f GB/s while all %d selected GPUs copy at once, %.2f of the %.2f GB/s it reaches alone, below GDR_MIN_CONCURRENT_FRACTION=%.2f; %s",
					gpuName(t, g.dev), dir, g.lane.GBps, len(cs), fraction[g.dev.PCI], g.solo, frac, share)
			}
		})
	}
}

func TestGPU12ConcurrentHtoD(t *testing.T) { concurrentCheck(t, "GPU-12", cuda.HtoD) }

func TestGPU13ConcurrentDtoH(t *testing.T) { concurrentCheck(t, "GPU-13", cuda.DtoH) }

// ---- GPU-14/15: GPU<->GPU peer to peer ----

// p2pLink is how two GPUs are joined, as far as the suite can tell.
type p2pLink struct {
	kind string // "NVLink", "PCIe" or "" (unknown)
	nv   nvml.NVLink
	path topo.Path
	// rate is the theoretical rate per direction (0 when unknown), how says
	// how it came about, why what is missing when it is unknown.
	rate float64
	how  string
	why  string
}

// linkOf finds the link between GPUs a and b: NVLink when NVML counts
// active links between them (or says they talk over NVLink), else PCIe when
// sysfs has both, with its path class; else unknown, saying what was missing.
func linkOf(t *testing.T, h *nvml.Handle, nvErr error, a, b cuda.Device) p2pLink {
	t.Helper()
	var l p2pLink
	var missing []string
	if h != nil {
		nv, err := h.NVLinkBetween(a.PCI, b.PCI)
		switch {
		case err != nil:
			missing = append(missing, "NVML: "+err.Error())
		case nv.Links() > 0 || nv.P2P == "OK":
			l.kind, l.nv = "NVLink", nv
			r, how, err := multigpu.NVLinkRate(nv.Links(), nv.Version)
			if err != nil {
				l.why = fmt.Sprintf("NVML reports NVLink between them (%s) but no rate follows: %v", nv, err)
			} else {
				l.rate, l.how = r, how
			}
			return l
		default:
			missing = append(missing, fmt.Sprintf("NVML: no active NVLink link between them (%s)", nv))
		}
	} else {
		missing = append(missing, "NVML: "+nvErr.Error())
	}
	ix := testenv.Selection(t).Index
	if ix.Device(a.PCI) == nil || ix.Device(b.PCI) == nil {
		missing = append(missing, fmt.Sprintf("PCIe: %s or %s is not in sysfs (%s)", a.PCI, b.PCI, testenv.Root(t).Host(pci.DevicesDir)))
		if a.Emulated {
			missing = append(missing, "the lab's emulated GPU emulates no link")
		}
		l.why = strings.Join(missing, "; ")
		return l
	}
	p, err := ix.Classify(a.PCI, b.PCI)
	if err != nil {
		l.why = strings.Join(append(missing, "PCIe: "+err.Error()), "; ")
		return l
	}
	l.kind, l.path = "PCIe", p
	// A peer copy crosses both GPUs' links: the slower one bounds it.
	var slow []string
	for _, d := range []cuda.Device{a, b} {
		want, err := ix.ExpectedLink(d.PCI)
		if err != nil {
			l.why = fmt.Sprintf("PCIe %s, but %v", p.Class, err)
			return l
		}
		r, err := pci.GBps(want.Speed, want.Width)
		if err != nil {
			l.why = fmt.Sprintf("PCIe %s, but GPU %s: %v", p.Class, d.PCI, err)
			return l
		}
		if l.rate == 0 || r < l.rate {
			l.rate = r
			slow = []string{fmt.Sprintf("%s %s x%d = %.2f GB/s", d.PCI, pci.Generation(want.Speed), want.Width, r)}
		}
	}
	l.how = fmt.Sprintf("PCIe %s, the slower GPU link: %s", p.Class, strings.Join(slow, ""))
	return l
}

// record writes the link's facts as attributes.
func (l p2pLink) record(t *testing.T) {
	t.Helper()
	kind := l.kind
	if kind == "" {
		kind = "unknown"
	}
	testenv.Attr(t, "p2p_link", kind)
	switch l.kind {
	case "NVLink":
		testenv.Attr(t, "nvlink_count", l.nv.Links())
		testenv.Attr(t, "nvlink_version", l.nv.Version)
		testenv.Attr(t, "nvlink_detail", l.nv.String())
	case "PCIe":
		testenv.Attr(t, "p2p_path", l.path.Class.String())
		testenv.Attr(t, "p2p_bridges", strings.Join(l.path.Bridges, " "))
	}
	if l.rate > 0 {
		testenv.Attr(t, "p2p_link_gbyte_s", l.rate)
		testenv.Attr(t, "p2p_link_source", l.how)
	}
	if l.why != "" {
		testenv.Attr(t, "p2p_link_note", l.why)
	}
}

// forEachPair runs check once per pair of selected GPUs, in a subtest named
// "<a>-<b>", with the pair's link found and recorded.
func forEachPair(t *testing.T, id string, check func(t *testing.T, a, b cuda.Device, link p2pLink, h *nvml.Handle)) {
	t.Helper()
	devs := multiGPU(t, id)
	h, nvErr := nvml.TryOpen(t)
	if nvErr != nil {
		t.Logf("NVML not available (%v): NVLink cannot be told from PCIe", nvErr)
	}
	for i, a := range devs {
		for _, b := range devs[i+1:] {
			t.Run(a.PCI+"-"+b.PCI, func(t *testing.T) {
				testenv.Req(t, id)
				railAttrs(t, a)
				testenv.Attr(t, "gpu_peer", b.PCI)
				testenv.Attr(t, "gpu_name", a.Name)
				testenv.Attr(t, "mem", a.MemLabel())
				link := linkOf(t, h, nvErr, a, b)
				link.record(t)
				check(t, a, b, link, h)
			})
		}
	}
}

// peerAccess asks cuDeviceCanAccessPeer both ways and records the answer.
func peerAccess(t *testing.T, a, b cuda.Device) (ab, ba bool) {
	t.Helper()
	var err error
	if ab, err = a.CanAccessPeer(b); err != nil {
		testenv.Failf(t, cuda.PeerRemedy(err), "%v", err)
	}
	if ba, err = b.CanAccessPeer(a); err != nil {
		testenv.Failf(t, cuda.PeerRemedy(err), "%v", err)
	}
	yes := map[bool]string{true: "yes", false: "no"}
	testenv.Attr(t, "peer_access", fmt.Sprintf("%s->%s %s, %s->%s %s", a.PCI, b.PCI, yes[ab], b.PCI, a.PCI, yes[ba]))
	return ab, ba
}

// enablePeers retains both primary contexts and enables peer access both
// ways for t (disabled again at its end where t enabled it).
func enablePeers(t *testing.T, a, b cuda.Device) (*cuda.Context, *cuda.Context) {
	t.Helper()
	ca, cb := cuda.Primary(t, a), cuda.Primary(t, b)
	now := []bool{cuda.EnablePeer(t, ca, cb), cuda.EnablePeer(t, cb, ca)}
	state := map[bool]string{true: "enabled by the suite", false: "already enabled"}
	testenv.Attr(t, "peer_access_enabled", fmt.Sprintf("%s->%s %s, %s->%s %s", a.PCI, b.PCI, state[now[0]], b.PCI, a.PCI, state[now[1]]))
	return ca, cb
}

// peerBuffers is a source on one GPU filled with a pattern and a poisoned
// destination on the other, with a guard after the copied bytes.
type peerBuffers struct {
	src, dst *cuda.Mem
	want     []byte
	n        int
}

func newPeerBuffers(t *testing.T, from, to *cuda.Context, n int, seed uint64) peerBuffers {
	t.Helper()
	p := peerBuffers{src: cuda.Alloc(t, from, n), dst: cuda.Alloc(t, to, n+guard), want: make([]byte, n), n: n}
	membuf.Pattern(p.want, seed)
	if err := p.src.Fill(p.want); err != nil {
		testenv.Failf(t, "check dmesg for Xid errors", "GPU %s: %v", from.Dev.PCI, err)
	}
	if err := to.Memset(p.dst.Addr(), poison, n+guard); err != nil {
		testenv.Failf(t, "check dmesg for Xid errors", "GPU %s: %v", to.Dev.PCI, err)
	}
	return p
}

// verify reads the destination back (a device-to-host copy) and compares it
// with the source's pattern; the guard after it must still be poison.
func (p peerBuffers) verify() error {
	got := make([]byte, p.n+64)
	if err := p.dst.ReadBack(got); err != nil {
		return err
	}
	if err := membuf.CompareCopy(got[:p.n], p.want, poison, "cuMemcpyPeer completed but no byte reached the peer's memory"); err != nil {
		return err
	}
	return membuf.Guard(got, p.n, poison)
}

func (p peerBuffers) dir() string {
	return fmt.Sprintf("%s -> %s", p.src.Context().Dev.PCI, p.dst.Context().Dev.PCI)
}

// noPeerAccess ends a pair that cannot reach each other: absent where the
// platform offers no peer access across CPU sockets (SYS), a failure
// elsewhere. NVML's P2P read status says why, where NVML is there.
func noPeerAccess(t *testing.T, a, b cuda.Device, ab, ba bool, link p2pLink, h *nvml.Handle) {
	t.Helper()
	status := "NVML not available"
	if h != nil {
		status, _ = h.P2PStatus(a.PCI, b.PCI, gonvml.P2P_CAPS_INDEX_READ)
	}
	testenv.Attr(t, "p2p_status", status)
	msg := fmt.Sprintf("%s and %s cannot reach each other's memory (cuDeviceCanAccessPeer %s->%s %v, %s->%s %v; NVML P2P read status %s)",
		gpuName(t, a), gpuName(t, b), a.PCI, b.PCI, ab, b.PCI, a.PCI, ba, status)
	if link.kind == "PCIe" && link.path.Class == topo.SYS {
		testenv.Absent(t, "%s: they sit on different CPU sockets (SYS), where most platforms offer no PCIe peer-to-peer; CUDA and NCCL copy through host memory there", msg)
	}
	testenv.Failf(t, cuda.PeerRemedy(&cuda.Error{Code: cuda.ErrPeerAccessUnsupported}), "%s", msg)
}

func TestGPU14PeerAccess(t *testing.T) {
	forEachPair(t, "GPU-14", func(t *testing.T, a, b cuda.Device, link p2pLink, h *nvml.Handle) {
		ab, ba := peerAccess(t, a, b)
		if !ab || !ba {
			noPeerAccess(t, a, b, ab, ba, link, h)
		}
		ca, cb := enablePeers(t, a, b)
		var errs []error
		for _, p := range []peerBuffers{newPeerBuffers(t, ca, cb, peerDataSize, 0x1400+1), newPeerBuffers(t, cb, ca, peerDataSize, 0x1400+2)} {
			if _, err := cuda.PeerCopyLoop(p.dst, p.src, p.n, 1, cuda.Loop{Reps: 1}); err != nil {
				testenv.Failf(t, cuda.PeerRemedy(err), "%s: %v", p.dir(), err)
			}
			if err := p.verify(); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", p.dir(), err))
			}
		}
		if err := errors.Join(errs...); err != nil {
			testenv.Failf(t, "check dmesg for Xid errors and NVLink/PCIe error counters (nvidia-smi nvlink -e; AER in dmesg); reset the GPUs",
				"%s of peer copied data: %v", cuda.Size(peerDataSize), strings.ReplaceAll(err.Error(), "\n", "; "))
		}
		testenv.Attr(t, "p2p_data", "intact both ways")
		t.Logf("%s <-> %s: peer access both ways, %s copied intact each way; link %s %s", a.PCI, b.PCI, cuda.Size(peerDataSize), orUnknown(link.kind), link.how+link.why)
	})
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// peerRates times the copy of p: a warm-up, then copyReps batches of
// peerBatch copies, on the source GPU's CPUs.
func peerRates(t *testing.T, p peerBuffers) (best, mean float64) {
	t.Helper()
	var spans []multigpu.Span
	_, err := numa.OnCPUs(cuda.LocalCPUs(t, p.src.Context().Dev), func() error {
		if _, err := cuda.PeerCopyLoop(p.dst, p.src, p.n, 1, cuda.Loop{Reps: 1}); err != nil {
			return err
		}
		var err error
		spans, err = cuda.PeerCopyLoop(p.dst, p.src, p.n, peerBatch, cuda.Loop{Reps: copyReps})
		return err
	})
	if err != nil {
		testenv.Failf(t, cuda.PeerRemedy(err), "%s: %v", p.dir(), err)
	}
	return bestGBps(peerBatch*p.n, spans), meanGBps(peerBatch*p.n, spans)
}

// bidirectional runs both copies at once and returns each direction's rate
// and their sum over the window in which both ran.
func bidirectional(t *testing.T, ps []peerBuffers, op time.Duration) (multigpu.Window, error) {
	t.Helper()
	window := max(500*time.Millisecond, 10*op)
	lanes := make([][]multigpu.Span, len(ps))
	local := make([]cpulist.Set, len(ps))
	for i, p := range ps {
		local[i] = cuda.LocalCPUs(t, p.src.Context().Dev)
	}
	err := multigpu.AtOnce(len(ps), window, armWithin, stopWithin, func(i int, arm func(), stop <-chan struct{}) error {
		p := ps[i]
		_, err := numa.OnCPUs(local[i], func() error {
			if _, err := cuda.PeerCopyLoop(p.dst, p.src, p.n, 1, cuda.Loop{Reps: 1}); err != nil {
				return err
			}
			arm()
			var err error
			lanes[i], err = cuda.PeerCopyLoop(p.dst, p.src, p.n, peerBatch, cuda.Loop{Stop: stop, Limit: window + stopWithin})
			return err
		})
		if err != nil {
			return fmt.Errorf("%s: %w", p.dir(), err)
		}
		return nil
	})
	if err != nil {
		testenv.Failf(t, cuda.PeerRemedy(err), "both directions at once: %v", err)
	}
	return multigpu.Overlap(lanes, int64(peerBatch*ps[0].n), 2)
}

func TestGPU15PeerBandwidth(t *testing.T) {
	cfg := testenv.Config(t)
	forEachPair(t, "GPU-15", func(t *testing.T, a, b cuda.Device, link p2pLink, h *nvml.Handle) {
		ab, ba := peerAccess(t, a, b)
		if !ab || !ba {
			testenv.Absent(t, "%s and %s have no peer access (cuDeviceCanAccessPeer %v/%v): GPU-14 judges that; a copy without it would time host staging, not the link", a.PCI, b.PCI, ab, ba)
		}
		ca, cb := enablePeers(t, a, b)
		copies(t, a, b)
		n := bufSize(a)
		ps := []peerBuffers{newPeerBuffers(t, ca, cb, n, 0x1500+1), newPeerBuffers(t, cb, ca, n, 0x1500+2)}
		best := make([]float64, 2)
		mean := make([]float64, 2)
		for i, p := range ps {
			best[i], mean[i] = peerRates(t, p)
		}
		testenv.Attr(t, "size_bytes", n)
		testenv.Attr(t, "batch_count", peerBatch)
		testenv.Attr(t, "p2p_gbyte_s", best[0])
		testenv.Attr(t, "p2p_gbyte_s_mean", mean[0])
		testenv.Attr(t, "p2p_gbyte_s_reverse", best[1])
		testenv.Attr(t, "p2p_gbyte_s_reverse_mean", mean[1])
		op := time.Duration(float64(peerBatch*n) / (min(mean[0], mean[1]) * 1e9) * float64(time.Second))
		w, bidirErr := bidirectional(t, ps, op)
		if bidirErr != nil {
			testenv.Attr(t, "p2p_bidir_note", bidirErr.Error())
			t.Logf("bidirectional rate not reported: %v", bidirErr)
		} else {
			testenv.Attr(t, "p2p_bidir_gbyte_s", w.Aggregate())
			testenv.Attr(t, "p2p_bidir_gbyte_s_forward", w.Lanes[0].GBps)
			testenv.Attr(t, "p2p_bidir_gbyte_s_reverse", w.Lanes[1].GBps)
		}
		// The data of the last timed copies, read back through the host.
		var errs []error
		for _, p := range ps {
			if err := p.verify(); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", p.dir(), err))
			}
		}
		if err := errors.Join(errs...); err != nil {
			testenv.Failf(t, "check dmesg for Xid errors and NVLink/PCIe error counters (nvidia-smi nvlink -e; AER in dmesg); reset the GPUs",
				"after the timed copies: %v", strings.ReplaceAll(err.Error(), "\n", "; "))
		}
		testenv.Attr(t, "p2p_data", "intact both ways")
		bidir := "not measured"
		if bidirErr == nil && len(w.Lanes) == 2 {
			bidir = fmt.Sprintf("%.2f GB/s (%.2f + %.2f)", w.Aggregate(), w.Lanes[0].GBps, w.Lanes[1].GBps)
		}
		t.Logf("%s: best %.2f GB/s (mean %.2f); %s: best %.2f GB/s (mean %.2f); both at once %s; %s x %d per timed batch; link %s: %s%s",
			ps[0].dir(), best[0], mean[0], ps[1].dir(), best[1], mean[1], bidir, cuda.Size(n), peerBatch, orUnknown(link.kind), link.how, link.why)

		var frac float64
		var name, remedy string
		switch link.kind {
		case "NVLink":
			frac, name = cfg.MinP2PNVLinkFraction, "GDR_MIN_P2P_NVLINK_FRACTION"
			remedy = "check that every NVLink link is up at full speed (nvidia-smi nvlink -s) and its error counters (nvidia-smi nvlink -e); on NVSwitch systems check nvidia-fabricmanager and the fabric state (nvidia-smi -q: Fabric); check for clock throttling (nvidia-smi -q -d PERFORMANCE)"
		case "PCIe":
			frac, name = cfg.MinP2PPCIeFraction, "GDR_MIN_P2P_PCIE_FRACTION"
			remedy = "check both GPUs' links (GPU-11; lspci -vvv: LnkSta), ACS on the switch ports between them (redirected P2P goes through the root complex), the IOMMU mode (TOPO-05) and BIOS PCIe P2P settings"
		}
		if a.Emulated {
			testenv.Absent(t, "%s is the lab's emulated GPU: its peer copies are CPU memcpy, and neither NVLink nor a PCIe path is emulated; the rates are reported, not judged", a.PCI)
		}
		if link.rate == 0 {
			testenv.Absent(t, "no floor for %s <-> %s: the link's theoretical rate is unknown (%s)", a.PCI, b.PCI, link.why)
		}
		floor := frac * link.rate
		testenv.Attr(t, "min_p2p_fraction", frac)
		testenv.Attr(t, "min_p2p_gbyte_s", floor)
		testenv.Attr(t, "p2p_fraction", min(best[0], best[1])/link.rate)
		var slow []string
		for i, p := range ps {
			if best[i] < floor {
				slow = append(slow, fmt.Sprintf("%s reaches %.2f GB/s (%.2f of it)", p.dir(), best[i], best[i]/link.rate))
			}
		}
		if len(slow) > 0 {
			sort.Strings(slow)
			testenv.Failf(t, remedy, "%s <-> %s over %s (%s): %s, below %s=%.2f (%.2f GB/s)",
				gpuName(t, a), gpuName(t, b), link.kind, link.how, strings.Join(slow, "; "), name, frac, floor)
		}
	})
}
