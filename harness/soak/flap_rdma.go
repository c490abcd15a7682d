//go:build rdma

package soak

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gdrconf/gdrconf/harness/oob"
	"github.com/gdrconf/gdrconf/harness/rc"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/harness/traffic"
	"github.com/gdrconf/gdrconf/harness/verbs"
	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/optics"
	"github.com/gdrconf/gdrconf/internal/rails"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
	model "github.com/gdrconf/gdrconf/internal/soak"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// RunFlap runs the link-flap guard on every rail both hosts have (loopback:
// this host's), one rail at a time: the WRITE rate at the largest
// GDR_BW_SIZES size and mlxlink's BERs, a retrain of the port by the
// client end (ChooseRetrainer; in loopback this host), both ends following
// their port until it is ACTIVE again, and the rate and BERs after it on
// the same connection (an RC QP with nothing in flight outlives a link
// that goes down and up). Each host records its own port's recovery with
// the client's rates.
func RunFlap(t *testing.T, within time.Duration) *Flap {
	cfg := testenv.Config(t)
	root := testenv.Root(t)
	run, why := planRails(t)
	if len(run) == 0 {
		return &Flap{Absent: verdict.Absentf("run the guard on a host with an RDMA NIC on a rail", "%s", why)}
	}
	size := traffic.MaxSize(cfg.BWSizes)
	info := rc.Settings(cfg)
	info["GDR_SOAK_FLAP"] = "1"
	sel := testenv.Selection(t)
	out := &Flap{}
	noWay := 0
	for _, r := range run {
		ends := rc.Connect(t, rc.Options{Rail: r, BufSize: 2 * size, Alloc: railAlloc, Info: info,
			Session: "flap/" + r.Name(), PortOffset: 1 + max(r.Index, 0)})
		g := &guard{root: root, r: r, ends: ends, size: size, within: within, rail: seriesRail(sel, r, ends[0])}
		rt, why, none := g.run()
		switch {
		case rt != nil:
			out.Retrains = append(out.Retrains, *rt)
		case none:
			noWay++
			out.NotJudged = append(out.NotJudged, why)
		default:
			out.NotJudged = append(out.NotJudged, why)
		}
	}
	if noWay == len(run) {
		out.Absent = verdict.Absentf("install NVIDIA MFT (mlxlink) or mstflint (mstlink), or run the guard where the rails are RoCE ports with a netdev",
			"no rail's port can be retrained here: %s", strings.Join(out.NotJudged, "; "))
	}
	return out
}

// leaveGrace is how long a port still ACTIVE after its retrain returned
// is watched for going down before it counts as never having left.
const leaveGrace = 3 * time.Second

type guard struct {
	root   *hostfs.Root
	r      *rails.Rail
	ends   []*rc.End
	size   int
	within time.Duration
	rail   model.Rail
}

// What one end learned in the guard's steps.
type endFlap struct {
	watch  WatchResult
	method string // as the client ran it
	none   string // why the client could not retrain
	before *float64
	after  *float64
	at     time.Time
	err    error
}

func (g *guard) spec() traffic.BWSpec {
	return traffic.BWSpec{Op: verbs.OpWrite, Name: "WRITE", Size: g.size, Largest: true}
}

// run is the guard on one rail: this host's Retrain, or why there is none
// (none: the client had no way to retrain the port).
func (g *guard) run() (rt *model.Retrain, why string, none bool) {
	name := g.r.Name() + " " + g.r.NIC.Name
	res, err := g.best()
	if err != nil {
		return nil, fmt.Sprintf("%s: the WRITE rate before the retrain could not be measured: %v", name, err), false
	}
	state := make([]*endFlap, len(g.ends))
	for i := range g.ends {
		state[i] = &endFlap{}
	}
	linkBefore := g.link() // once: both ends of a loopback are one NIC
	var mu sync.Mutex
	idx := map[*rc.End]int{}
	for i, e := range g.ends {
		idx[e] = i
	}
	// Step 1: the client retrains; every end follows its own port while
	// it waits for the client's word (a longer wait than GDR_TIMEOUT: the
	// port may take up to within to come back).
	errs := rc.Each(g.ends, func(e *rc.End) error {
		st := state[idx[e]]
		restore := e.Sess.Within(g.within + 2*stepTimeout + flapDown + 30*time.Second)
		defer restore()
		w := PortWatch{State: func() (string, error) { return rdmadev.PortState(g.root, g.rail.Device, g.rail.Port) }, Grace: leaveGrace}
		st.at = time.Now()
		done := make(chan struct{})
		watched := make(chan WatchResult, 1)
		go func() { watched <- w.Follow(st.at, done, g.within) }()
		var mine oob.Result
		if e.Role == "client" {
			rtr, why := ChooseRetrainer(g.r.NIC, func(n string) string { p, _ := hostfs.LookTool(n); return p })
			switch {
			case rtr == nil:
				st.none = why
				mine = oob.Result{Name: "flap retrain", Msg: "none: " + why}
			default:
				st.method = rtr.Method
				if err := rtr.Run(); err != nil {
					st.err = err
					mine = oob.Result{Name: "flap retrain", Msg: "failed: " + err.Error()}
				} else {
					mine = oob.Result{Name: "flap retrain", OK: true, Msg: rtr.Method}
				}
			}
			if res.Gbps > 0 {
				mine.Values = map[string]float64{"before": res.Gbps}
			}
			close(done)
			st.watch = <-watched
			_, err := e.Sess.ExchangeResult(mine)
			return err
		}
		peer, err := e.Sess.ExchangeResult(oob.Result{Name: "flap retrain", OK: true})
		close(done)
		st.watch = <-watched
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case peer.OK:
			st.method = fmt.Sprintf("the peer %s retrained its end: %s", hostOnly(e.Sess.Peer()), peer.Msg)
		case strings.HasPrefix(peer.Msg, "none: "):
			st.none = "the peer could not retrain: " + strings.TrimPrefix(peer.Msg, "none: ")
		default:
			st.err = fmt.Errorf("the peer's retrain %s", peer.Msg)
		}
		if v, ok := peer.Values["before"]; ok {
			st.before = &v
		}
		return nil
	})
	if err := firstErr(errs); err != nil {
		return nil, fmt.Sprintf("%s: the guard's exchange with the peer failed: %v", name, err), false
	}
	me := state[len(state)-1] // the client end in loopback, this host's end with a peer
	if me.none != "" {
		return nil, me.none, true
	}
	if me.err != nil {
		return nil, fmt.Sprintf("%s: the retrain did not run: %v", name, me.err), false
	}
	if res.Gbps > 0 && me.before == nil {
		v := res.Gbps
		me.before = &v
	}
	rt = &model.Retrain{Rail: g.rail, Method: me.method, At: me.at, Up: me.watch.Up, Took: me.watch.Took, Waited: me.watch.Waited}
	rt.Before = model.Measure{Gbps: me.before, Link: linkBefore}
	if !me.watch.Left {
		// The retrain was shorter than a poll, or the port never left
		// ACTIVE (a peer's retrain a virtual link does not carry).
		rt.Took = 0
	}
	// Step 2: both ends agree to measure again only where both ports came
	// back (a port still down would fail the transfer, not measure it).
	up := true
	errs = rc.Each(g.ends, func(e *rc.End) error {
		st := state[idx[e]]
		peer, err := e.Sess.ExchangeResult(oob.Result{Name: "flap up", OK: st.watch.Up})
		mu.Lock()
		up = up && st.watch.Up && peer.OK
		mu.Unlock()
		return err
	})
	if err := firstErr(errs); err != nil || !up {
		return rt, "", false
	}
	after, err := g.best()
	if err != nil {
		return nil, fmt.Sprintf("%s: the connection made before the retrain carried no traffic after it: %v", name, err), false
	}
	// Step 3: the client's rate after, to the server.
	errs = rc.Each(g.ends, func(e *rc.End) error {
		st := state[idx[e]]
		mine := oob.Result{Name: "flap after", OK: true}
		if after.Gbps > 0 {
			mine.Values = map[string]float64{"after": after.Gbps}
		}
		peer, err := e.Sess.ExchangeResult(mine)
		if v, ok := peer.Values["after"]; ok && st.after == nil {
			st.after = &v
		}
		return err
	})
	if err := firstErr(errs); err != nil {
		return nil, fmt.Sprintf("%s: the guard's exchange with the peer failed: %v", name, err), false
	}
	if after.Gbps > 0 {
		v := after.Gbps
		me.after = &v
	}
	rt.After = model.Measure{Gbps: me.after, Link: g.link()}
	return rt, "", false
}

// bestOf is how many WRITE runs each side of the retrain takes.
const bestOf = 3

// best is the fastest of bestOf WRITE runs: a link the retrain left slow
// is slow in every run, while a busy CPU or fabric slows only some (under
// TCG one run's rate varied by a quarter between runs).
func (g *guard) best() (traffic.BWResult, error) {
	var top traffic.BWResult
	for range bestOf {
		res, errs := traffic.Bandwidth(g.ends, g.spec())
		if err := firstErr(errs); err != nil {
			return top, err
		}
		if res.Gbps > top.Gbps {
			top = res
		}
	}
	return top, nil
}

// link is mlxlink's reading of the rail's NIC, nil where it has none (a
// software device, no tool).
func (g *guard) link() *model.Link {
	if g.rail.PCI == "" {
		return nil
	}
	out, _, err := optics.Mlxlink(g.root, g.rail.PCI, linkTimeout)
	if err != nil {
		return nil
	}
	return link(optics.ParseMlxlink(out))
}

// hostOnly is addr without its port (the peer's ephemeral port says
// nothing to a reader).
func hostOnly(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}
