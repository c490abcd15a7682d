//go:build rdma

// Package rc connects reliable-connected (RC) queue pairs for a test: two
// ends in this process (loopback), or this host's end of a two-host run
// (GDR_ROLE/GDR_PEER), agreed with the peer over an out-of-band session
// (harness/oob). Each end opens the NIC, builds PD, CQs and QP, registers
// its buffer (host memory, or GPU memory through nvidia_peermem, dma-buf or
// both, as GDR_MR says), exchanges endpoints and brings the QP to RTS.
// Everything is released through t.Cleanup in reverse order, also when a
// test fails half-way.
//
// pingpong moves its traffic over these connections; memreg uses a
// loopback connection to move data through the GPU registrations it checks.
package rc

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gdrconf/gdrconf/harness/membuf"
	"github.com/gdrconf/gdrconf/harness/numa"
	"github.com/gdrconf/gdrconf/harness/oob"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/harness/verbs"
	"github.com/gdrconf/gdrconf/internal/budget"
	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/counters"
	"github.com/gdrconf/gdrconf/internal/cpulist"
	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/rails"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// Queue sizes: perftest's bandwidth tools keep 128 WRs outstanding.
const (
	QueueDepth = 256
	MaxInline  = 64
)

// Alloc makes a test's buffer of size bytes for rail r (its GPU, or host
// memory near its NIC), released through t.Cleanup; it may end the test (an
// absent GPU, say). r may be nil (no rail known). Call it from the test
// goroutine.
type Alloc func(t testing.TB, size int, r *rails.Rail) membuf.Buffer

// Options say what to connect. Every field but BufSize and Alloc has a
// working zero value.
type Options struct {
	// Rail is the rail to connect on (its NIC; its GPU for the buffer);
	// nil takes the primary rail (Probe).
	Rail *rails.Rail
	// Dev names the RDMA device instead of a rail (memreg's own NIC).
	Dev string
	// Session names the out-of-band session when one test connects
	// several times (""= the test's name).
	Session string
	// PortOffset is added to the out-of-band port (GDR_LISTEN, GDR_PEER)
	// so that rails connected at the same time do not share it: rail r
	// uses the base port + r.
	PortOffset int
	// BufSize is the size of each end's buffer.
	BufSize int
	// Alloc makes the buffer; nil means page-aligned host memory.
	Alloc Alloc
	// Skip, when set, is a reason this host cannot run the test that is
	// only known here (no GPU for a GPU half, say): it is offered to the
	// peer in the agreement, so both hosts skip with the same reason
	// instead of one waiting for GDR_TIMEOUT.
	Skip string
	// Info are settings both hosts must have the same (GDR_ITERS, sizes):
	// a difference fails the test on both, naming the setting.
	Info map[string]string
	// Caps are capabilities offered in the out-of-band hello.
	Caps []string
	// Loopback connects two ends in this process whatever GDR_ROLE says
	// (memreg moves data through one NIC on one host).
	Loopback bool
	// MR overrides GDR_MR for GPU memory ("" keeps GDR_MR).
	MR config.MRPath
	// QPs is how many queue pairs to connect (0 or 1: one).
	QPs int
}

// End is one side of a connection.
type End struct {
	T    testing.TB
	Cfg  config.Config
	Root *hostfs.Root
	Role string // server or client
	Sess *oob.Session
	Buf  membuf.Buffer

	Dev string
	// Rail is the rail the connection serves (nil for Options.Dev or a
	// host without one): its PCIe path bounds the bandwidth floors.
	Rail     *rails.Rail
	Software bool   // rxe/siw: no PCI device, fictional port rate
	SoftWhy  string // the driver or parent netdev, for messages
	Ctx      *verbs.Context
	Port     verbs.PortAttr
	GID      rdmadev.GID
	sysDev   *rdmadev.Device // the NIC as sysfs shows it
	// CPUs are the NIC's local CPUs (local_cpulist): latency and bandwidth
	// loops poll the CQ there (OnNICCPUs), and the queues are created there.
	CPUs cpulist.Set
	// Node is the NIC's NUMA node (-1 unknown): its queues' memory is
	// preferred there.
	Node     int
	PD       *verbs.PD
	SCQ, RCQ *verbs.CQ
	QP       *verbs.QP // QPs[0]
	// QPs are the connection's queue pairs (GDR_QPS for bandwidth runs,
	// else one), QP i connected to the peer's QP i; SCQs[i] is QP i's send
	// CQ, so each can be polled on its own thread.
	QPs  []*verbs.QP
	SCQs []*verbs.CQ
	// MRs are the buffer's registrations, preferred first: one for host
	// memory; for GPU memory one per working path of GDR_MR.
	MRs     []*verbs.MR
	MRNotes []string // why a path was not used (auto), for gdr.mr_path_notes
	// RdAtom is the RDMA READ depth this end may use as initiator.
	RdAtom   int
	mrPolicy config.MRPath
	loopback bool // both ends in this process
	nQPs     int

	Peer      oob.Endpoint
	PeerMRs   []oob.RemoteMR // the peer's registrations, preferred first
	PeerAgree oob.Agree
	Seed      uint64 // the pattern seed agreed for this test
	PathMTU   int
	// GRH is whether (and why) the address vectors carry a GRH: the
	// wire's framing counts its 40 bytes on InfiniBand (WireFacts).
	GRH verbs.GRH

	// budget bounds every wait of the test (its binary's deadline).
	budget budget.Budget
	// counters0 is the port's counters when the QP reached RTS, so a stall
	// can say what the NIC saw since (retransmits, sequence errors).
	counters0   *counters.Snapshot
	countersErr error // why counters0 is nil

	mu    sync.Mutex
	attrs [][2]any
}

// Attr records a fact for the test; Report writes them (Each runs ends on
// several goroutines, and t.Attr belongs to the test goroutine).
func (e *End) Attr(k string, v any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.attrs = append(e.attrs, [2]any{k, v})
}

// Loopback reports whether both ends are in this process (one host).
func (e *End) Loopback() bool { return e.loopback }

// Host reports whether the buffer is host memory the CPU may poll.
func (e *End) Host() bool { return e.Buf.Kind() == membuf.Host }

// MR is the preferred registration (latency and bandwidth run on it).
func (e *End) MR() *verbs.MR { return e.MRs[0] }

// Remote is the peer's preferred registration.
func (e *End) Remote() oob.RemoteMR { return e.PeerMRs[0] }

// Rounds is how many passes a data check makes so that every registration
// of both ends carries data at least once: pass r uses Round(r).
func (e *End) Rounds() int { return max(len(e.MRs), len(e.PeerMRs)) }

// Round is pass r's pair of registrations (local, remote).
func (e *End) Round(r int) (*verbs.MR, oob.RemoteMR) {
	return e.MRs[r%len(e.MRs)], e.PeerMRs[r%len(e.PeerMRs)]
}

// PeerRole is the other end's role.
func (e *End) PeerRole() string {
	if e.Role == "server" {
		return "client"
	}
	return "server"
}

// Connect opens the out-of-band session(s), agrees with the peer to run or
// to skip, sets up the verbs objects on a buffer of o.BufSize bytes and
// brings the QPs to RTS. Loopback returns [server, client]; two hosts return
// this host's end. It ends the test on any problem, with the cause.
func Connect(t *testing.T, o Options) []*End {
	t.Helper()
	cfg := testenv.Config(t)
	root := testenv.Root(t)
	bud := Budget(t)
	if err := bud.Start(t.Name(), time.Now()); err != nil {
		notJudged(t, err)
	}
	// stop is why this host cannot run the test: absent (a skip both
	// hosts agree on) or fell short (a failure the peer is told of).
	dev, rail := o.Dev, o.Rail
	var stop *verdict.Finding
	switch {
	case dev != "":
	case rail != nil:
		stop = checkRail(t, rail)
	default:
		rail, stop = Probe(t)
	}
	if dev == "" && rail != nil && rail.NIC != nil {
		dev = rail.NIC.Name
	}
	if o.Skip != "" && stop == nil {
		stop = verdict.Absentf("", "%s", o.Skip)
	}
	// The port as it is now, before any wait on the peer: one that went
	// DOWN since the selection read it is the cause to name, not the
	// connect that would time out behind it.
	wait := cfg.Timeout
	if dev != "" && stop == nil {
		if p := portProblem(root, dev, cfg.IBPort); p != "" {
			stop = verdict.Failf(portDownRemedy, "%s", p)
			// Still meet the peer (its out-of-band network may be another
			// one) so that it fails with this reason, but not for long.
			wait = min(wait, portDownWait)
		}
	}
	// What the agreement offers the peer: the reason to skip, or this
	// host's failure as a person reads it.
	var skip, fail string
	switch {
	case stop == nil:
	case stop.Kind() == verdict.Absent:
		skip = stop.Cause
	default:
		fail = stop.Line()
	}
	name := t.Name()
	if o.Session != "" {
		name = o.Session
	}
	opt := oob.Options{Test: name, Token: cfg.Token, Timeout: wait, Caps: append([]string{"pingpong/1"}, o.Caps...), Logf: t.Logf,
		Deadline: bud.End()}
	var ends []*End
	mrPolicy := cfg.MR
	if o.MR != "" {
		mrPolicy = o.MR
	}
	mk := func(role string, s *oob.Session) *End {
		return &End{T: t, Cfg: cfg, Root: root, Role: role, Sess: s, Dev: dev, Rail: rail, mrPolicy: mrPolicy, loopback: o.Loopback || cfg.Role == config.Loopback, nQPs: max(o.QPs, 1),
			budget: bud}
	}
	role := cfg.Role
	if o.Loopback {
		role = config.Loopback
	}
	if role != config.Loopback {
		// Who we are, and who the plan says the peer is: the handshake
		// refuses a proven peer that names another host.
		opt.Host, opt.PeerHost = HostName(cfg), cfg.PeerName
	}
	switch role {
	case config.Loopback:
		StopIf(t, stop)
		srv, cli := loopbackSessions(t, opt)
		ends = []*End{mk("server", srv), mk("client", cli)}
	case config.Server:
		ln, err := oob.Listen(offsetPort(cfg.Listen, o.PortOffset), opt)
		if err != nil {
			notJudged(t, err)
		}
		t.Cleanup(func() { ln.Close() })
		s, err := ln.Accept()
		remember(name, ln.Rejected())
		if err != nil {
			connectFailed(t, err, failing(stop))
		}
		t.Cleanup(func() { s.Close() })
		ends = []*End{mk("server", s)}
	case config.Client:
		s, err := oob.Dial(offsetPort(cfg.Peer, o.PortOffset), opt)
		if err != nil {
			connectFailed(t, err, failing(stop))
		}
		t.Cleanup(func() { s.Close() })
		ends = []*End{mk("client", s)}
	}

	// If this host stops the test before the agreement (a skip or failure
	// in Alloc), tell the peer instead of letting it time out.
	agreed := false
	t.Cleanup(func() {
		if !agreed {
			for _, e := range ends {
				e.Sess.Abort("failed", fmt.Sprintf("the %s stopped test %s during setup (skipped or failed there): see its log", e.Role, t.Name()))
			}
		}
	})
	if stop == nil {
		alloc := o.Alloc
		if alloc == nil {
			alloc = HostBuffer
		}
		for _, e := range ends {
			e.Buf = alloc(t, o.BufSize, rail)
		}
	}

	// Agree: the same settings and reason to skip on both sides.
	info := func(e *End) map[string]string {
		m := map[string]string{"fail": fail, "device": dev}
		for k, v := range o.Info {
			m[k] = v
		}
		if e.Buf != nil {
			m["mem"] = string(e.Buf.Kind())
		}
		return m
	}
	reasons := make([]string, len(ends))
	runs := make([]bool, len(ends))
	errs := Each(ends, func(e *End) error {
		peer, run, why, err := e.Sess.Agree(oob.Agree{Skip: skip, Info: info(e)})
		i := index(ends, e)
		e.PeerAgree, runs[i], reasons[i] = peer, run, why
		return err
	})
	agreed = true
	FailIf(t, ends, errs)
	if !runs[0] {
		if stop != nil && stop.Kind() == verdict.Absent && reasons[0] == skip {
			testenv.Fail(t, *stop) // this host's own reason, with its remedy
		}
		testenv.Absent(t, "", "%s", reasons[0])
	}
	for _, e := range ends {
		pi := e.PeerAgree.Info
		if pi["fail"] != "" {
			testenv.Failf(t, "", "the peer (%s) cannot run %s: %s", e.Sess.Peer(), t.Name(), pi["fail"])
		}
		StopIf(t, failing(stop))
		for k, v := range o.Info {
			if pi[k] != v {
				testenv.Failf(t, "set the same value on both", "%s differs between the hosts: %s has %s, the peer %s has %s",
					k, e.Role, v, e.Sess.Peer(), pi[k])
			}
		}
	}

	FailIf(t, ends, Each(ends, (*End).setup))
	Report(t, ends) // connection facts belong to the test that connected
	return ends
}

// failing is stop when it is a failure (not an absence), else nil.
func failing(stop *verdict.Finding) *verdict.Finding {
	if stop == nil || stop.Kind() == verdict.Absent {
		return nil
	}
	return stop
}

// loopbackSessions opens a session to ourselves over 127.0.0.1.
func loopbackSessions(t *testing.T, opt oob.Options) (srv, cli *oob.Session) {
	t.Helper()
	ln, err := oob.Listen("127.0.0.1:0", opt)
	if err != nil {
		notJudged(t, err)
	}
	t.Cleanup(func() { ln.Close() })
	var serr error
	done := make(chan struct{})
	go func() { defer close(done); srv, serr = ln.Accept() }()
	cli, cerr := oob.Dial(ln.Addr(), opt)
	<-done
	for _, s := range []*oob.Session{srv, cli} {
		if s != nil {
			t.Cleanup(func() { s.Close() })
		}
	}
	if err := errors.Join(serr, cerr); err != nil {
		testenv.NotJudgedf(t, "", "loopback out-of-band session over 127.0.0.1: %v", err)
	}
	return srv, cli
}

// offsetPort adds off to the port of host:port (validated by config).
func offsetPort(hp string, off int) string {
	if off == 0 {
		return hp
	}
	h, p, err := net.SplitHostPort(hp)
	if err != nil {
		return hp
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		return hp
	}
	return net.JoinHostPort(h, strconv.Itoa(n+off))
}

func index(ends []*End, e *End) int {
	for i, x := range ends {
		if x == e {
			return i
		}
	}
	return 0
}

// JoinInts formats sizes for Options.Info and reports.
func JoinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// Each runs fn for every end: in loopback the server end on its own
// goroutine (the two ends talk to each other), otherwise inline. An end
// whose fn fails tells its peer, so the peer fails with our reason at once.
func Each(ends []*End, fn func(*End) error) []error {
	errs := make([]error, len(ends))
	run := func(i int) {
		watched := ends[i].watchPort() // a link that flaps and is back by the verdict
		errs[i] = fn(ends[i])
		seen := watched()
		var te *verbs.TimeoutError
		var we *verbs.WCError
		if errors.As(errs[i], &te) || errors.As(errs[i], &we) {
			errs[i] = ends[i].stalled(errs[i], seen) // the NIC's counters and port state, not a guess
			// The NIC waited in vain: say who we waited for.
			errs[i] = fmt.Errorf("%w (peer %s, the %s end of %s: if it died or lost its link, see its log)",
				errs[i], ends[i].Sess.Peer(), ends[i].PeerRole(), ends[i].T.Name())
		}
		if errs[i] != nil && !errors.Is(errs[i], oob.ErrPeer) {
			ends[i].Sess.Abort("failed", fmt.Sprintf("%s: %v", ends[i].Role, errs[i]))
		}
	}
	var wg sync.WaitGroup
	for i := 1; i < len(ends); i++ {
		wg.Go(func() { run(i - 1) })
	}
	run(len(ends) - 1)
	wg.Wait()
	return errs
}

// FailIf ends the test when an end failed. With both ends here, the first
// cause is shown, not the peer's echo of it. It is not judged when every
// shown cause is a lost peer or a spent budget (lostPeer); otherwise the
// host fell short.
func FailIf(t testing.TB, ends []*End, errs []error) {
	t.Helper()
	var shown []int
	for i, err := range errs {
		if err == nil {
			continue
		}
		if len(ends) > 1 && errors.Is(err, oob.ErrPeer) {
			continue // the other end's own error is listed
		}
		shown = append(shown, i)
	}
	if len(shown) == 0 {
		for i, err := range errs {
			if err != nil {
				shown = append(shown, i)
			}
		}
	}
	if len(shown) > 0 {
		testenv.Fail(t, endsFailure(ends, errs, shown))
	}
}

// Report writes the ends' facts as attributes on t (loopback: the client's
// come last and win).
func Report(t testing.TB, ends []*End) {
	t.Helper()
	for _, e := range ends {
		e.mu.Lock()
		for _, kv := range e.attrs {
			testenv.Attr(t, kv[0].(string), kv[1])
		}
		e.attrs = nil
		e.mu.Unlock()
	}
}

func cleanup(t testing.TB, what string, c interface{ Close() error }) {
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			testenv.Errorf(t, "", "releasing %s: %v", what, err)
		}
	})
}

// setup opens the device and builds PD, CQs, QP and MRs, then exchanges
// endpoints and moves the QP RESET -> INIT -> RTR -> RTS. Every object is
// released by t.Cleanup in reverse order of creation.
func (e *End) setup() error {
	t, cfg := e.T, e.Cfg
	var err error
	if err := e.sysfsDevice(); err != nil {
		return err
	}
	if e.Ctx, err = verbs.Open(e.Dev); err != nil {
		return err
	}
	cleanup(t, "device context "+e.Dev, e.Ctx)
	if e.Port, err = e.Ctx.QueryPort(cfg.IBPort); err != nil {
		return err
	}
	if e.Port.State != verbs.PortActive {
		return fmt.Errorf("port %d of %s is %s, not ACTIVE: bring the link up (cable, switch port, `ip link set <netdev> up`; on InfiniBand a running subnet manager), or choose another port with GDR_IB_PORT",
			cfg.IBPort, e.Dev, e.Port.StateName)
	}
	if err := e.pickGID(); err != nil {
		return err
	}
	if e.PD, err = e.Ctx.AllocPD(); err != nil {
		return err
	}
	cleanup(t, "protection domain", e.PD)
	attr := e.Ctx.Attr()
	// CQ and QP limits are separate device attributes: a CQ deeper than
	// max_cqe, or a QP longer than max_qp_wr, is refused.
	want := max(QueueDepth, cfg.TxDepth+16) // room for GDR_TX_DEPTH and a few more
	cqDepth := min(want, max(attr.MaxCQE, 1))
	wrDepth := min(want, max(attr.MaxQPWR, 1), cqDepth)
	// Queue memory on the NIC's node: libmlx5 allocates and zeroes CQ, QP
	// and doorbell buffers on the creating thread, so they are created from
	// a thread on the NIC's CPUs with its node preferred (numa.Enter).
	placed, leave := numa.Enter(e.CPUs, e.Node)
	defer leave()
	if e.RCQ, err = e.Ctx.CreateCQ(cqDepth); err != nil {
		return err
	}
	cleanup(t, "receive CQ", e.RCQ)
	psns := make([]uint32, e.nQPs)
	for i := range e.nQPs {
		scq, err := e.Ctx.CreateCQ(cqDepth)
		if err != nil {
			return err
		}
		cleanup(t, fmt.Sprintf("send CQ %d", i), scq)
		qp, err := e.PD.CreateRCQP(scq, e.RCQ, verbs.QPCaps{SendWR: wrDepth, RecvWR: wrDepth, MaxInline: MaxInline}, e.Buf.Kind())
		if err != nil {
			return err
		}
		cleanup(t, fmt.Sprintf("queue pair %d", i), qp)
		// Every QP of an end has the same device and receive memory, so
		// the same handling; a QP that differs (mlx5dv refused on the
		// first) is named on its own.
		if i == 0 || qp.ScatterToCQE != e.QPs[0].ScatterToCQE {
			e.Attr("gdr.scatter_to_cqe", qp.ScatterToCQE)
			// Logged only where the suite changed the provider's
			// behaviour: on every other device the line would open each
			// test's output (and a failure's first line) with noise.
			if qp.ScatterToCQE == verbs.ScatterDV || qp.ScatterToCQE == verbs.ScatterEnv {
				t.Logf("%s QP %d on %s, receives in %s memory: scatter-to-CQE %s (%s)", e.Role, i, e.Dev, qp.RecvMem, qp.ScatterToCQE, qp.ScatterWhy)
			}
		}
		if err := qp.Init(cfg.IBPort, verbs.AccessRW); err != nil {
			return err
		}
		e.SCQs, e.QPs = append(e.SCQs, scq), append(e.QPs, qp)
		var psn [4]byte
		_, _ = rand.Read(psn[:])
		psns[i] = binary.BigEndian.Uint32(psn[:]) & 0xffffff
	}
	leave()
	e.Attr("queues_placed", placed)
	e.SCQ, e.QP = e.SCQs[0], e.QPs[0]
	if err := e.register(); err != nil {
		return err
	}
	mine := psns[0]
	mr := e.MR()
	gid16 := e.GID.Addr.To16()
	local := oob.Endpoint{LID: e.Port.LID, GID: gid16, GIDIndex: e.GID.Index, QPN: e.QP.Num, PSN: mine,
		RKey: mr.RKey, Addr: mr.Addr, Len: uint64(mr.Len), MTU: e.Port.ActiveMTU, LinkLayer: e.Port.LinkLayer,
		Mem: string(e.Buf.Kind()), GRHRequired: portGRH(e.Port)}
	for _, m := range e.MRs {
		local.MRs = append(local.MRs, oob.RemoteMR{Path: m.Path, RKey: m.RKey, Addr: m.Addr, Len: uint64(m.Len)})
	}
	class := oob.Class{TC: cfg.IBTC, SL: cfg.IBSL, TCFrom: cfg.IBTCFrom, SLFrom: cfg.IBSLFrom}
	local.SetClass(class)
	if e.nQPs > 1 {
		for i, qp := range e.QPs {
			local.QPNs, local.PSNs = append(local.QPNs, qp.Num), append(local.PSNs, psns[i])
		}
	}
	if e.Peer, err = e.Sess.ExchangeEndpoint(local); err != nil {
		return err
	}
	if e.Peer.LinkLayer != e.Port.LinkLayer {
		return fmt.Errorf("link layers differ: %s port is %s, the peer's %s: both hosts need the same fabric", e.Role, e.Port.LinkLayer, e.Peer.LinkLayer)
	}
	// Both hosts' traffic rides one class of the fabric, or the test fails
	// on both with the same message.
	if err := oob.AgreeClass(e.Role, class, e.Peer.Class()); err != nil {
		return err
	}
	grh, err := grhPlan(e.Port, [16]byte(gid16), e.Peer)
	if err != nil {
		return fmt.Errorf("peer %s: %w", e.Sess.Peer(), err)
	}
	e.GRH = grh
	e.PeerMRs = e.Peer.MRs
	if len(e.PeerMRs) == 0 { // a peer that sends one MR the old way
		e.PeerMRs = []oob.RemoteMR{{Path: e.Peer.Mem, RKey: e.Peer.RKey, Addr: e.Peer.Addr, Len: e.Peer.Len}}
	}
	for _, r := range e.PeerMRs {
		if r.Len < uint64(e.Buf.Len()) {
			return fmt.Errorf("the peer's %s registration has %d bytes, this test needs %d", r.Path, r.Len, e.Buf.Len())
		}
	}
	e.PathMTU = min(e.Port.ActiveMTU, e.Peer.MTU)

	// RDMA READ depths: as responder we accept max_qp_rd_atom; as initiator
	// we may have min(our max_qp_init_rd_atom, the peer's responder depth)
	// outstanding (asking RTS for more than max_qp_init_rd_atom is EINVAL).
	resp := min(max(attr.MaxQPRdAtom, 1), 16)
	peerResp, err := e.Sess.BarrierValue("rd_atom", 0, uint64(resp))
	if err != nil {
		return err
	}
	e.RdAtom = min(max(attr.MaxQPInitRdAtom, 1), int(peerResp), 16)
	// The pattern seed: the client's.
	var seed [8]byte
	_, _ = rand.Read(seed[:])
	mySeed := binary.BigEndian.Uint64(seed[:])
	peerSeed, err := e.Sess.BarrierValue("seed", 0, mySeed)
	if err != nil {
		return err
	}
	e.Seed = mySeed
	if e.Role == "server" {
		e.Seed = peerSeed
	}
	peerQPNs, peerPSNs := e.Peer.QPNs, e.Peer.PSNs
	if len(peerQPNs) == 0 {
		peerQPNs, peerPSNs = []uint32{e.Peer.QPN}, []uint32{e.Peer.PSN}
	}
	if len(peerQPNs) != len(e.QPs) {
		return fmt.Errorf("the peer %s connects %d queue pairs, this host %d: set the same GDR_QPS on both", e.Sess.Peer(), len(peerQPNs), len(e.QPs))
	}
	for i, qp := range e.QPs {
		r := verbs.Remote{QPN: peerQPNs[i], PSN: peerPSNs[i], LID: e.Peer.LID, GRH: grh,
			MTU: e.PathMTU, RdAtom: resp, SGIDIdx: e.GID.Index, SL: cfg.IBSL, TC: cfg.IBTC}
		copy(r.GID[:], e.Peer.GID)
		if err := qp.RTR(r); err != nil {
			return err
		}
		if err := qp.RTS(psns[i], e.RdAtom, cfg.IBTimeout); err != nil {
			return err
		}
	}
	// Both QPs are RTS before anyone sends.
	if err := e.Sess.Barrier("connected", 0); err != nil {
		return err
	}
	if err := e.markCounters(); err == nil {
		e.Attr("nic_counters", fmt.Sprintf("%d read at the connection (a stall reports their rise)", len(e.counters0.Values)))
	} else {
		e.Attr("nic_counters", "unreadable: "+err.Error())
	}
	e.Attr("nic", e.Dev)
	e.Attr("mem", membuf.Label(e.Buf))
	if a := membuf.GPUAlloc(e.Buf); a != "" {
		e.Attr("gpu_alloc", a)
	}
	e.Attr("peer_mem", e.Peer.Mem)
	e.Attr("mr_path", paths(e.MRs))
	if len(e.MRNotes) > 0 {
		e.Attr("mr_path_notes", strings.Join(e.MRNotes, "; "))
	}
	e.Attr("peer_mr_path", remotePaths(e.PeerMRs))
	e.Attr("path_mtu", e.PathMTU)
	e.Attr("link_layer", e.Port.LinkLayer)
	e.Attr("rd_atom", e.RdAtom)
	e.Attr("ib_tc", cfg.IBTC)
	e.Attr("ib_sl", cfg.IBSL)
	e.Attr("ib_class_source", fmt.Sprintf("traffic class from %s, service level from %s", cfg.IBTCFrom, cfg.IBSLFrom))
	// Why the address vectors carry a GRH; absent on plain InfiniBand.
	if grh.Use {
		e.Attr("grh", grh.Why)
	}
	if n := tcNote(grh); n != "" {
		e.Attr("ib_tc_note", n)
	}
	if !e.loopback {
		e.Attr("role", e.Role)
		// The peer's host name as the proven peer told it, which the
		// handshake held to the plan's (GDR_PEER_NAME) when a cluster
		// round names one (the isolation of bad nodes pairs results by
		// host); else its address, and the name it told beside it.
		if e.Cfg.PeerName != "" {
			e.Attr("peer", e.Sess.PeerHost)
			e.Attr("peer_addr", e.Sess.Peer())
		} else {
			e.Attr("peer", e.Sess.Peer())
			if h := e.Sess.PeerHost; h != "" {
				e.Attr("peer_host", h)
			}
		}
		e.Attr("oob_auth", e.Sess.Security())
		if n := e.Sess.Strays(); n > 0 {
			e.Attr("oob_strays", n)
		}
	} else {
		e.Attr("role", "loopback")
	}
	return nil
}

func paths(mrs []*verbs.MR) string {
	s := make([]string, len(mrs))
	for i, m := range mrs {
		s[i] = m.Path
	}
	return strings.Join(s, ",")
}

func remotePaths(mrs []oob.RemoteMR) string {
	s := make([]string, len(mrs))
	for i, m := range mrs {
		s[i] = m.Path
	}
	return strings.Join(s, ",")
}

// sysfsDevice finds the NIC in sysfs (internal/rdmadev, the suite's one
// reader of /sys/class/infiniband): the selection's view when it has the
// device, whose GID table is then read once per run (rxe's has 1024 entries,
// seconds under emulation).
func (e *End) sysfsDevice() error {
	e.Node = -1
	if n := testenv.Selection(e.T).NIC(e.Dev); n != nil && n.Dev != nil {
		e.sysDev, e.CPUs, e.Node = n.Dev, n.LocalCPUs, n.NUMA
	} else {
		d, err := rdmadev.Load(e.Root, e.Dev)
		if err != nil {
			return fmt.Errorf("RDMA device %s in sysfs: %w", e.Dev, err)
		}
		e.sysDev = d
	}
	e.Software = e.sysDev.Software
	if e.Software {
		e.SoftWhy = "software device on " + e.sysDev.Parent
		if e.sysDev.Driver != "" {
			e.SoftWhy = e.sysDev.Driver + " on " + e.sysDev.Parent
		}
	}
	return nil
}

// pickGID applies the suite's GID rule (rdmadev.PickGID: GDR_GID_INDEX, or
// GDR_GID_NETDEV's RoCE v2 GID, else NCCL_IB_GID_INDEX on a RoCE port,
// else RoCE v2 with an IPv4 address on an ACTIVE Ethernet port, else RoCE
// v2, else index 0).
func (e *End) pickGID() error {
	ll := ""
	if p := e.sysDev.Port(e.Cfg.IBPort); p != nil {
		ll = p.LinkLayer
	}
	index, note := e.Cfg.GIDIndexFor(ll)
	if note != "" {
		e.Attr("gid_index_note", note)
	}
	g, err := rdmadev.PickGIDAs(e.sysDev, e.Cfg.IBPort, index, e.Cfg.GIDIndexFrom, e.Cfg.GIDNetdev)
	if err != nil {
		return err
	}
	if len(g.Addr.To16()) != 16 {
		return fmt.Errorf("%s port %d: GID %d %q is not 16 bytes", e.Dev, e.Cfg.IBPort, g.Index, g.Addr)
	}
	// The table is sysfs's; the NIC must agree, or RTR fails later with a
	// cause that is far harder to read.
	raw, err := e.Ctx.QueryGID(e.Cfg.IBPort, g.Index)
	if err != nil {
		return fmt.Errorf("GID %d of %s port %d: %w", g.Index, e.Dev, e.Cfg.IBPort, err)
	}
	if !g.Addr.Equal(net.IP(raw[:])) {
		return fmt.Errorf("GID %d of %s port %d: sysfs says %s, ibv_query_gid %s: the table changed during the run (an address was added or removed); rerun, or set GDR_GID_INDEX",
			g.Index, e.Dev, e.Cfg.IBPort, g.Addr, net.IP(raw[:]))
	}
	e.GID = g
	switch {
	case e.Cfg.GIDNetdev != "":
		e.Attr("gid_choice", "GDR_GID_NETDEV="+e.Cfg.GIDNetdev)
	case index >= 0:
		// "GDR_GID_INDEX=3", "NCCL_IB_GID_INDEX=3 in /etc/nccl.conf"
		name, where, _ := strings.Cut(e.Cfg.GIDIndexFrom, " ")
		e.Attr("gid_choice", strings.TrimSpace(fmt.Sprintf("%s=%d %s", name, index, where)))
	default:
		e.Attr("gid_choice", "automatic")
	}
	return nil
}

// OnNICCPUs runs fn (a polling loop in C) on a CPU of the NIC's
// local_cpulist and records where it ran as gdr.poll_cpus.
// The loop is bounded by the test's budget (guard).
func (e *End) OnNICCPUs(fn func() error) error {
	placed, err := numa.OnCPUs(e.CPUs, func() error { return e.guard(fn) })
	e.Attr("poll_cpus", placed)
	return err
}

// WaitBudget bounds a wait on the peer while it moves n bytes: GDR_TIMEOUT
// plus the transfer at a pessimistic 5 MB/s (software RDMA under emulation),
// or what is left of the test's budget when that is less.
func (e *End) WaitBudget(n int64) time.Duration {
	d, _ := e.budget.Bound(e.Cfg.Timeout+time.Duration(float64(n)/5e6*float64(time.Second)), time.Now())
	return d
}

// RateGbps is the port's rate in Gb/s (0 when unknown).
func (e *End) RateGbps() float64 {
	if e.Port.RateGbps > 0 {
		return e.Port.RateGbps
	}
	if p := e.sysDev.Port(e.Cfg.IBPort); p != nil {
		return p.RateGbps
	}
	return 0
}

// HostBuffer is the default Alloc: page-aligned host memory on the NUMA
// node of rail r's NIC (the primary rail's when r is nil), where its DMA is
// cheapest, recorded as gdr.host_mem_numa.
func HostBuffer(t testing.TB, size int, r *rails.Rail) membuf.Buffer {
	t.Helper()
	if r == nil {
		r = testenv.Selection(t).Primary
	}
	node := -1
	if r != nil && r.NIC != nil {
		node = r.NIC.NUMA
	}
	b, place, err := membuf.NewHostOn(size, node)
	testenv.Attr(t, "host_mem_numa", place)
	if err != nil {
		testenv.Failf(t, "free memory or lower GDR_BW_SIZES", "host buffer of %d bytes: %v", size, err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			testenv.Errorf(t, "", "closing host buffer: %v", err)
		}
	})
	return b
}
