//go:build rdma

package rc

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gdrconf/gdrconf/harness/oob"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/rails"
)

// Rails are the rails a multi-rail test runs on here: the selected rails
// with a NIC (GDR_RAILS, GDR_GPU), in rail order; on a host without GPUs (or
// whose GPUs have no candidate NIC) the primary rail alone, which is the
// NIC Probe picks (or says why there is none).
func Rails(t testing.TB) []*rails.Rail {
	t.Helper()
	sel := testenv.Selection(t)
	var out []*rails.Rail
	for _, r := range sel.Rails {
		if r.NIC != nil {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return []*rails.Rail{primaryOrNone(sel)}
	}
	return out
}

func primaryOrNone(sel *rails.Selection) *rails.Rail {
	if sel.Primary != nil {
		return sel.Primary
	}
	return &rails.Rail{Index: -1, Reason: sel.PrimaryWhy}
}

// PlanRails agrees with the peer which of rs to run: each host offers its
// rail numbers and both run those both have, in order. The rails only one
// side has come back in missing, naming the host that lacks them (a
// two-host run of unequal hosts cannot test them). Loopback runs rs.
func PlanRails(t *testing.T, rs []*rails.Rail) (run []*rails.Rail, missing string) {
	t.Helper()
	cfg := testenv.Config(t)
	if cfg.Role == config.Loopback {
		return rs, ""
	}
	bud := Budget(t)
	if err := bud.Start(t.Name(), time.Now()); err != nil {
		notJudged(t, err)
	}
	mine := make([]string, len(rs))
	for i, r := range rs {
		mine[i] = strconv.Itoa(max(r.Index, 0))
	}
	// Ports that are DOWN now are the cause to name; when every rail's is,
	// the out-of-band network most likely is down too: do not spend
	// GDR_TIMEOUT on it.
	root := testenv.Root(t)
	var down []string
	for _, r := range rs {
		if r.NIC != nil {
			if p := portProblem(root, r.NIC.Name, cfg.IBPort); p != "" {
				down = append(down, p)
			}
		}
	}
	wait := cfg.Timeout
	if len(down) > 0 && len(down) == len(rs) {
		wait = min(wait, portDownWait)
	}
	opt := oob.Options{Test: t.Name(), Token: cfg.Token, Timeout: wait, Caps: []string{"rails/1"}, Logf: t.Logf, Deadline: bud.End(),
		Host: HostName(cfg), PeerHost: cfg.PeerName}
	var s *oob.Session
	var err error
	if cfg.Role == config.Server {
		var ln *oob.Listener
		if ln, err = oob.Listen(cfg.Listen, opt); err == nil {
			s, err = ln.Accept()
			remember(t.Name(), ln.Rejected())
			ln.Close()
		}
	} else {
		s, err = oob.Dial(cfg.Peer, opt)
	}
	if err != nil {
		if len(down) > 0 {
			// The ports are the cause to name: the host fell short.
			testenv.Failf(t, fmt.Sprintf("%s (agreeing the rails with the peer failed too: %v)", portDownRemedy, err), "%s", strings.Join(down, "; "))
		}
		testenv.NotJudgedf(t, "", "agreeing the rails with the peer: %v", connectError(err, ""))
	}
	defer s.Close()
	peer, _, _, err := s.Agree(oob.Agree{Info: map[string]string{"rails": strings.Join(mine, ",")}})
	if err != nil {
		testenv.NotJudgedf(t, "", "agreeing the rails with the peer %s: %v", s.Peer(), err)
	}
	theirs := strings.Split(peer.Info["rails"], ",")
	var onlyMine, onlyTheirs []string
	for i, r := range rs {
		if slices.Contains(theirs, mine[i]) {
			run = append(run, r)
		} else {
			onlyMine = append(onlyMine, mine[i])
		}
	}
	for _, x := range theirs {
		if x != "" && !slices.Contains(mine, x) {
			onlyTheirs = append(onlyTheirs, x)
		}
	}
	var why []string
	if len(onlyMine) > 0 {
		why = append(why, fmt.Sprintf("the peer %s has no rail %s", s.Peer(), strings.Join(onlyMine, ",")))
	}
	if len(onlyTheirs) > 0 {
		why = append(why, fmt.Sprintf("this host has no rail %s that the peer %s has", strings.Join(onlyTheirs, ","), s.Peer()))
	}
	return run, strings.Join(why, "; ")
}

// NeedNIC ends t as every PP test ends when no rail of rs (Rails) has a
// NIC: absent, or failed when NICs are there but none is usable. Tests that
// do not connect through Connect (PP-10, HLTH-01) call it first, so they
// join the same shared cause.
func NeedNIC(t *testing.T, rs []*rails.Rail) {
	t.Helper()
	if len(rs) != 1 || rs[0].NIC != nil {
		return
	}
	_, stop := Probe(t)
	StopIf(t, stop)
}
