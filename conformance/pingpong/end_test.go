//go:build rdma

package pingpong

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gdrconf/gdrconf/harness/membuf"
	"github.com/gdrconf/gdrconf/harness/oob"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/harness/verbs"
	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/kmod"
	"github.com/gdrconf/gdrconf/internal/stats"
)

// Queue sizes: perftest's bandwidth tools keep 128 WRs outstanding.
const (
	queueDepth = 256
	txDepth    = 128
	cqMod      = 100 // ib_write_bw's default: one signaled WR per 100
	maxInline  = 64
)

// end is one side of a connection: in loopback both ends live in this
// process; with two hosts, each host has one.
type end struct {
	t    testing.TB
	cfg  config.Config
	root *hostfs.Root
	role string // server or client
	sess *oob.Session
	buf  membuf.Buffer

	dev      string
	software bool
	swWhy    string
	ctx      *verbs.Context
	port     verbs.PortAttr
	gid      verbs.GIDEntry
	pd       *verbs.PD
	scq, rcq *verbs.CQ
	qp       *verbs.QP
	mr       *verbs.MR
	psn      uint32
	rdAtom   int

	peer      oob.Endpoint
	peerAgree oob.Agree
	seed      uint64 // pattern seed agreed for this test
	pathMTU   int

	mu    sync.Mutex
	attrs [][2]any
}

func (e *end) attr(k string, v any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.attrs = append(e.attrs, [2]any{k, v})
}

// host reports whether the buffer can be polled from the CPU.
func (e *end) host() bool { return e.buf.Kind() == membuf.Host }

// probe finds the RDMA device this host uses; skip says what is absent and
// where we looked, fail what is present but wrong.
func probe(cfg config.Config, root *hostfs.Root) (dev, skip, fail string) {
	devs, err := verbs.SysDevices(root)
	if err != nil {
		return "", "", fmt.Sprintf("reading %s: %v", root.Host(verbs.ClassDir), err)
	}
	if len(devs) == 0 {
		state := "is empty"
		if !root.Exists(verbs.ClassDir) {
			state = "does not exist (no RDMA support in this kernel)"
		}
		hint := "load the NIC's RDMA driver (mlx5_ib, irdma, bnxt_re, ...) or create a Soft-RoCE device (rdma link add rxe0 type rxe netdev <if>)"
		mods := "kernel modules unknown"
		if km, err := kmod.New(root); err != nil {
			mods += " (" + err.Error() + ")"
		} else {
			mods = km.Summary(kmod.RDMA)
			if !km.Has("ib_core") {
				hint = "ib_core is not loaded: install rdma-core / MLNX_OFED and load the NIC's RDMA driver"
			}
		}
		return "", fmt.Sprintf("no RDMA device: %s %s; RDMA kernel modules %s; %s",
			root.Host(verbs.ClassDir), state, mods, hint), ""
	}
	if err := verbs.Load(); err != nil {
		return "", err.Error(), ""
	}
	if cfg.RDMADevice != "" {
		if !slices.Contains(devs, cfg.RDMADevice) {
			return "", "", fmt.Sprintf("GDR_RDMA_DEVICE=%s is not in %s (it lists %s): set GDR_RDMA_DEVICE to one of those",
				cfg.RDMADevice, root.Host(verbs.ClassDir), strings.Join(devs, ", "))
		}
		return cfg.RDMADevice, "", ""
	}
	return devs[0], "", ""
}

// extraSkip holds, per test, a reason to skip that connect offers the peer
// in the agreement (set by skipAlso in gpu builds).
var extraSkip sync.Map

// connect opens the out-of-band session(s), agrees with the peer to run or to
// skip, sets up the verbs objects on a buffer of bufSize bytes and brings the
// QPs to RTS. Loopback returns [server, client]; two hosts return this host's end.
func connect(t *testing.T, bufSize int) []*end {
	t.Helper()
	cfg := testenv.Config(t)
	root := testenv.Root(t)
	dev, skip, fail := probe(cfg, root)
	if extra, ok := extraSkip.Load(t); ok && skip == "" && fail == "" {
		skip = extra.(string)
	}

	opt := oob.Options{Test: t.Name(), Token: cfg.Token, Timeout: cfg.Timeout, Caps: []string{"pingpong/1"}, Logf: t.Logf}
	var ends []*end
	switch cfg.Role {
	case config.Loopback:
		if skip != "" {
			testenv.Absent(t, "%s", skip)
		}
		if fail != "" {
			testenv.Failf(t, "fix the configuration", "%s", fail)
		}
		ln, err := oob.Listen("127.0.0.1:0", opt)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		var srv *oob.Session
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
			t.Fatalf("loopback out-of-band session over 127.0.0.1: %v", err)
		}
		ends = []*end{{t: t, cfg: cfg, root: root, role: "server", sess: srv, dev: dev}, {t: t, cfg: cfg, root: root, role: "client", sess: cli, dev: dev}}
	case config.Server:
		ln, err := oob.Listen(cfg.Listen, opt)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		ends = []*end{{t: t, cfg: cfg, root: root, role: "server", sess: s, dev: dev}}
	case config.Client:
		s, err := oob.Dial(cfg.Peer, opt)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		ends = []*end{{t: t, cfg: cfg, root: root, role: "client", sess: s, dev: dev}}
	}

	// If this host stops the test before the agreement (a skip or failure
	// in newBuffer), tell the peer instead of letting it time out.
	agreed := false
	t.Cleanup(func() {
		if !agreed {
			for _, e := range ends {
				e.sess.Abort("failed", fmt.Sprintf("the %s stopped test %s during setup (skipped or failed there): see its log", e.role, t.Name()))
			}
		}
	})
	if skip == "" && fail == "" {
		for _, e := range ends {
			e.buf = newBuffer(t, bufSize)
		}
	}

	// Agree: same iterations, sizes and reason to skip on both sides.
	info := func(e *end) map[string]string {
		m := map[string]string{"fail": fail, "iters": strconv.Itoa(cfg.Iters), "bw_sizes": joinInts(cfg.BWSizes), "device": dev}
		if e.buf != nil {
			m["mem"] = string(e.buf.Kind())
		}
		return m
	}
	reasons := make([]string, len(ends))
	runs := make([]bool, len(ends))
	errs := each(ends, func(e *end) error {
		peer, run, why, err := e.sess.Agree(oob.Agree{Skip: skip, Info: info(e)})
		e.peerAgree, runs[idx(ends, e)], reasons[idx(ends, e)] = peer, run, why
		return err
	})
	agreed = true
	failIf(t, ends, errs)
	if !runs[0] {
		testenv.Absent(t, "%s", reasons[0])
	}
	for _, e := range ends {
		pi := e.peerAgree.Info
		if pi["fail"] != "" {
			t.Fatalf("the peer (%s) cannot run %s: %s", e.sess.Peer(), t.Name(), pi["fail"])
		}
		if fail != "" {
			testenv.Failf(t, "fix the configuration", "%s", fail)
		}
		for _, k := range []string{"iters", "bw_sizes"} {
			if pi[k] != info(e)[k] {
				t.Fatalf("GDR_%s differs between the hosts: %s has %s, the peer %s has %s; set the same value on both",
					strings.ToUpper(k), e.role, info(e)[k], e.sess.Peer(), pi[k])
			}
		}
	}

	failIf(t, ends, each(ends, (*end).setup))
	report(t, ends) // connection facts belong to the test that connected
	return ends
}

func idx(ends []*end, e *end) int {
	for i, x := range ends {
		if x == e {
			return i
		}
	}
	return 0
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// each runs fn for every end: in loopback the server end on its own
// goroutine (the two ends talk to each other), otherwise inline. An end
// whose fn fails tells its peer, so the peer fails with our reason at once.
func each(ends []*end, fn func(*end) error) []error {
	errs := make([]error, len(ends))
	run := func(i int) {
		errs[i] = fn(ends[i])
		var te *verbs.TimeoutError
		var we *verbs.WCError
		if errors.As(errs[i], &te) || errors.As(errs[i], &we) {
			// The NIC waited in vain: say who we waited for.
			errs[i] = fmt.Errorf("%w (peer %s, the %s end of %s: if it died or lost its link, see its log)",
				errs[i], ends[i].sess.Peer(), map[string]string{"server": "client", "client": "server"}[ends[i].role], ends[i].t.Name())
		}
		if errs[i] != nil && !errors.Is(errs[i], oob.ErrPeer) {
			ends[i].sess.Abort("failed", fmt.Sprintf("%s: %v", ends[i].role, errs[i]))
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

// failIf ends the test when an end failed. With both ends here, the first
// cause is shown, not the peer's echo of it.
func failIf(t testing.TB, ends []*end, errs []error) {
	t.Helper()
	var msgs []string
	for i, err := range errs {
		if err == nil {
			continue
		}
		if len(ends) > 1 && errors.Is(err, oob.ErrPeer) {
			continue // the other end's own error is listed
		}
		msgs = append(msgs, fmt.Sprintf("%s: %v", ends[i].role, err))
	}
	if len(msgs) == 0 {
		for i, err := range errs {
			if err != nil {
				msgs = append(msgs, fmt.Sprintf("%s: %v", ends[i].role, err))
			}
		}
	}
	if len(msgs) > 0 {
		t.Fatal(strings.Join(msgs, "\n"))
	}
}

// report writes the ends' facts as attributes (loopback: the client's win).
func report(t testing.TB, ends []*end) {
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
			t.Errorf("releasing %s: %v", what, err)
		}
	})
}

// setup opens the device and builds PD, CQs, QP and MR, then exchanges
// endpoints and moves the QP RESET -> INIT -> RTR -> RTS. Every object is
// released by t.Cleanup in reverse order of creation.
func (e *end) setup() error {
	t, cfg := e.t, e.cfg
	var err error
	e.software, e.swWhy = verbs.IsSoftware(e.root, e.dev)
	if e.ctx, err = verbs.Open(e.dev); err != nil {
		return err
	}
	cleanup(t, "device context "+e.dev, e.ctx)
	if e.port, err = e.ctx.QueryPort(cfg.IBPort); err != nil {
		return err
	}
	if e.port.State != verbs.PortActive {
		return fmt.Errorf("port %d of %s is %s, not ACTIVE: bring the link up (cable, switch port, `ip link set <netdev> up`; on InfiniBand a running subnet manager), or choose another port with GDR_IB_PORT",
			cfg.IBPort, e.dev, e.port.StateName)
	}
	if err := e.pickGID(); err != nil {
		return err
	}
	if e.pd, err = e.ctx.AllocPD(); err != nil {
		return err
	}
	cleanup(t, "protection domain", e.pd)
	depth := min(queueDepth, max(e.ctx.Attr().MaxQPWR, 1))
	if e.scq, err = e.ctx.CreateCQ(depth); err != nil {
		return err
	}
	cleanup(t, "send CQ", e.scq)
	if e.rcq, err = e.ctx.CreateCQ(depth); err != nil {
		return err
	}
	cleanup(t, "receive CQ", e.rcq)
	if e.qp, err = e.pd.CreateRCQP(e.scq, e.rcq, verbs.QPCaps{SendWR: depth, RecvWR: depth, MaxInline: maxInline}); err != nil {
		return err
	}
	cleanup(t, "queue pair", e.qp)
	if e.mr, err = e.pd.RegMR(e.buf.Addr(), e.buf.Len(), verbs.AccessRW); err != nil {
		return fmt.Errorf("registering the %s buffer: %w", e.buf.Kind(), err)
	}
	cleanup(t, "memory region", e.mr)
	if err := e.qp.Init(cfg.IBPort, verbs.AccessRW); err != nil {
		return err
	}
	e.rdAtom = min(max(e.ctx.Attr().MaxQPRdAtom, 1), 16)

	var psn [4]byte
	_, _ = rand.Read(psn[:])
	e.psn = binary.BigEndian.Uint32(psn[:]) & 0xffffff
	local := oob.Endpoint{LID: e.port.LID, GID: e.gid.GID[:], GIDIndex: e.gid.Index, QPN: e.qp.Num, PSN: e.psn,
		RKey: e.mr.RKey, Addr: e.mr.Addr, Len: uint64(e.mr.Len), MTU: e.port.ActiveMTU, LinkLayer: e.port.LinkLayer,
		Mem: string(e.buf.Kind())}
	if e.peer, err = e.sess.ExchangeEndpoint(local); err != nil {
		return err
	}
	if e.peer.LinkLayer != e.port.LinkLayer {
		return fmt.Errorf("link layers differ: %s port is %s, the peer's %s: both hosts need the same fabric", e.role, e.port.LinkLayer, e.peer.LinkLayer)
	}
	if e.peer.Len < uint64(e.buf.Len()) {
		return fmt.Errorf("the peer's buffer has %d bytes, this test needs %d", e.peer.Len, e.buf.Len())
	}
	e.pathMTU = min(e.port.ActiveMTU, e.peer.MTU)
	// Exchange the RDMA READ depth and the pattern seed: take the smaller
	// depth; the client's seed.
	var seed [8]byte
	_, _ = rand.Read(seed[:])
	mine := binary.BigEndian.Uint64(seed[:])
	peerRd, err := e.sess.BarrierValue("rd_atom", 0, uint64(e.rdAtom))
	if err != nil {
		return err
	}
	e.rdAtom = min(e.rdAtom, int(peerRd))
	peerSeed, err := e.sess.BarrierValue("seed", 0, mine)
	if err != nil {
		return err
	}
	e.seed = mine
	if e.role == "server" {
		e.seed = peerSeed
	}
	r := verbs.Remote{QPN: e.peer.QPN, PSN: e.peer.PSN, LID: e.peer.LID, UseGRH: e.port.LinkLayer == "Ethernet",
		MTU: e.pathMTU, RdAtom: e.rdAtom, SGIDIdx: e.gid.Index}
	copy(r.GID[:], e.peer.GID)
	if err := e.qp.RTR(r); err != nil {
		return err
	}
	if err := e.qp.RTS(e.psn, e.rdAtom); err != nil {
		return err
	}
	// Both QPs are RTS before anyone sends.
	if err := e.sess.Barrier("connected", 0); err != nil {
		return err
	}
	e.attr("nic", e.dev)
	e.attr("mem", string(e.buf.Kind()))
	e.attr("peer_mem", e.peer.Mem)
	e.attr("path_mtu", e.pathMTU)
	e.attr("link_layer", e.port.LinkLayer)
	if e.cfg.Role != config.Loopback {
		e.attr("role", e.role)
		e.attr("peer", e.sess.Peer())
		e.attr("oob_auth", e.sess.Security())
	} else {
		e.attr("role", "loopback")
	}
	return nil
}

// gidTables caches each port's GID table for the run: reading a large table
// (rxe has 1024 entries) through sysfs takes seconds under emulation.
var gidTables sync.Map // "root|dev|port" -> []verbs.GIDEntry

func (e *end) gidTable() []verbs.GIDEntry {
	key := fmt.Sprintf("%s|%s|%d", e.root.Dir(), e.dev, e.cfg.IBPort)
	if v, ok := gidTables.Load(key); ok {
		return v.([]verbs.GIDEntry)
	}
	gids, err := verbs.GIDTable(e.root, e.dev, e.cfg.IBPort)
	if err != nil {
		return nil // sysfs unreadable: the caller asks verbs
	}
	gidTables.Store(key, gids)
	return gids
}

func (e *end) pickGID() error {
	gids := e.gidTable()
	if e.cfg.GIDIndex >= 0 {
		for _, g := range gids {
			if g.Index == e.cfg.GIDIndex {
				e.gid = g
				return nil
			}
		}
		raw, err := e.ctx.QueryGID(e.cfg.IBPort, e.cfg.GIDIndex)
		if err != nil {
			return fmt.Errorf("GDR_GID_INDEX=%d: %w", e.cfg.GIDIndex, err)
		}
		if raw == ([16]byte{}) {
			return fmt.Errorf("GDR_GID_INDEX=%d: GID %d of %s port %d is empty: pick a populated index (show_gids, or /sys/class/infiniband/%s/ports/%d/gids)",
				e.cfg.GIDIndex, e.cfg.GIDIndex, e.dev, e.cfg.IBPort, e.dev, e.cfg.IBPort)
		}
		e.gid = verbs.GIDEntry{Index: e.cfg.GIDIndex, GID: raw}
		return nil
	}
	if len(gids) == 0 {
		raw, err := e.ctx.QueryGID(e.cfg.IBPort, 0)
		if err != nil {
			return err
		}
		gids = []verbs.GIDEntry{{Index: 0, GID: raw}}
	}
	g, err := verbs.PickGID(gids, e.port.LinkLayer)
	if err != nil {
		return fmt.Errorf("%s port %d: %w", e.dev, e.cfg.IBPort, err)
	}
	e.gid = g
	return nil
}

// fillPoison sets the first n bytes of the buffer to poison.
// fillPattern writes the sending side's pattern for seed to the first size bytes.
func (e *end) fillPattern(size int, seed uint64) error {
	p := make([]byte, size)
	membuf.Pattern(p, seed)
	return e.buf.Fill(p)
}

func (e *end) fillPoison(n int, poison byte) error {
	p := make([]byte, n)
	for i := range p {
		p[i] = poison
	}
	return e.buf.Fill(p)
}

// settle makes both sides return the receiving side's verdict.
func (e *end) settle(name string, checker bool, local error) error {
	r := oob.Result{Name: name, OK: true}
	if checker && local != nil {
		r.OK, r.Msg = false, local.Error()
	}
	peer, err := e.sess.ExchangeResult(r)
	if err != nil {
		return err
	}
	if checker {
		return local
	}
	if !peer.OK {
		return fmt.Errorf("the receiving side (%s) found: %s", e.sess.Peer(), peer.Msg)
	}
	return nil
}

// waitBudget bounds a wait on the peer while it moves n bytes: GDR_TIMEOUT
// plus the transfer at a pessimistic 5 MB/s (software RDMA under emulation).
func (e *end) waitBudget(n int64) time.Duration {
	return e.cfg.Timeout + time.Duration(float64(n)/5e6*float64(time.Second))
}

// threshold rules, documented in README: on hardware NICs, bandwidth at the
// largest size >= bwFraction of the port rate, and small-WRITE p50 latency
// <= defaultMaxLatUS; software devices (rxe, siw) get none.
const (
	bwFraction      = 0.75
	defaultMaxLatUS = 10.0
)

func (e *end) rateGbps() float64 {
	if e.port.RateGbps > 0 {
		return e.port.RateGbps
	}
	if s, err := verbs.PortRate(e.root, e.dev, e.cfg.IBPort); err == nil {
		if r, err := stats.ParseRate(s); err == nil {
			return r
		}
	}
	return 0
}

type oobResult = oob.Result
