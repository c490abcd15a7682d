//go:build rdma

package soak

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gdrconf/gdrconf/harness/oob"
	"github.com/gdrconf/gdrconf/harness/rc"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/harness/traffic"
	"github.com/gdrconf/gdrconf/harness/verbs"
	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/rails"
	model "github.com/gdrconf/gdrconf/internal/soak"
)

// startRails connects every rail (rc.PlanRails: with the peer, the rails
// both hosts have; each on its own out-of-band port, GDR_LISTEN + 1 +
// rail, as PP-10), measures each alone once at the largest GDR_BW_SIZES
// size for its floor (PP-08's WRITE point: the rail's floor in the
// series), then starts a loop per rail of that WRITE point (PP-10's
// engine, traffic.MeasureRail) until the soak ends. Both ends agree on
// every round, so the two hosts stop together.
func startRails(t *testing.T, cfg config.Config, s *model.Series) (*load, string) {
	run, why := planRails(t)
	if len(run) == 0 {
		return nil, why
	}
	size := traffic.MaxSize(cfg.BWSizes)
	info := rc.Settings(cfg)
	info["GDR_SOAK"] = cfg.Soak.String()
	info["GDR_SOAK_INTERVAL"] = cfg.SoakInterval.String()
	sel := testenv.Selection(t)
	names := make([]string, len(run))
	conns := make([][]*rc.End, len(run))
	for i, r := range run {
		names[i] = r.Name() + " " + r.NIC.Name
		conns[i] = rc.Connect(t, rc.Options{Rail: r, BufSize: 2 * size, Alloc: railAlloc, Info: info,
			Session: "soak/" + r.Name(), PortOffset: 1 + max(r.Index, 0)})
		rail := seriesRail(sel, r, conns[i][0])
		base, errs := traffic.Bandwidth(conns[i], traffic.BWSpec{Op: verbs.OpWrite, Name: "WRITE", Size: size, Largest: true})
		if err := firstErr(errs); err != nil {
			rc.Stop(t, err)
		}
		if base.Floor > 0 {
			f := base.Floor
			rail.Floor, rail.FloorSource = &f, base.Why
		}
		t.Logf("soak: %s alone before the soak: %s", names[i], base.Log(traffic.BWSpec{Name: "WRITE", Size: size}))
		s.Rails = append(s.Rails, rail)
	}
	l := newLoad(names)
	for i, r := range run {
		ends := conns[i]
		l.start(i, func(stop <-chan struct{}, moved *atomic.Int64) error {
			for {
				goOn, err := agree(ends, stop)
				if err != nil || !goOn {
					return err
				}
				res := traffic.MeasureRail(ends, r, size)
				if res.Err != nil {
					return res.Err
				}
				moved.Add(int64(size) * int64(traffic.PointIters(cfg.BWIters, size, res.Soft)))
			}
		})
	}
	return l, ""
}

// planRails are the rails the soak and the flap guard run (rc.PlanRails:
// with the peer, the rails both hosts have), or none and why.
func planRails(t *testing.T) ([]*rails.Rail, string) {
	rs := rc.Rails(t)
	if len(rs) == 1 && rs[0].NIC == nil {
		return nil, "no RDMA NIC on a rail: " + rs[0].Reason
	}
	run, missing := rc.PlanRails(t, rs)
	if missing != "" {
		testenv.Attr(t, "rails_missing", missing)
	}
	if len(run) == 0 {
		return nil, "no rail both hosts have: " + missing
	}
	return run, ""
}

// seriesRail is rail r as the series names it: device, port, GPU, the PCI
// functions between them, the peer.
func seriesRail(sel *rails.Selection, r *rails.Rail, e *rc.End) model.Rail {
	rail := model.Rail{Index: max(r.Index, 0), Device: r.NIC.Name, Port: r.NIC.Port, PCI: r.NIC.PCI}
	if rail.Port < 1 {
		rail.Port = sel.Port
	}
	if r.GPU != nil {
		rail.GPU = r.GPU.PCI
	}
	devs, _ := sel.PathDevices(r)
	for _, d := range devs {
		if d.Role != "GPU" && d.Role != "NIC" {
			rail.Between = append(rail.Between, d.Dev.BDF)
		}
	}
	if !e.Loopback() {
		rail.Peer = e.Sess.Peer()
	}
	return rail
}

// agree asks both ends whether to run another round: each says whether
// its soak is still on, and a round runs only when both are, so the two
// hosts (or the two ends of a loopback) stop on the same round and neither
// waits for a peer that has left.
func agree(ends []*rc.End, stop <-chan struct{}) (bool, error) {
	var mu sync.Mutex
	goOn := true
	errs := rc.Each(ends, func(e *rc.End) error {
		mine := true
		select {
		case <-stop:
			mine = false
		default:
		}
		peer, err := e.Sess.ExchangeResult(oob.Result{Name: "soak round", OK: mine, Values: map[string]float64{"on": b2f(mine)}})
		if err != nil {
			return err
		}
		mu.Lock()
		goOn = goOn && mine && peer.OK
		mu.Unlock()
		return nil
	})
	return goOn, firstErr(errs)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func firstErr(errs []error) error {
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("end %s: %w", strconv.Itoa(i), err)
		}
	}
	return nil
}
