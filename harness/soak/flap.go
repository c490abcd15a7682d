package soak

import (
	"fmt"
	"strings"
	"time"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/optics"
	"github.com/gdrconf/gdrconf/internal/rails"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
	model "github.com/gdrconf/gdrconf/internal/soak"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// The link-flap guard (SOAK-08, GDR_SOAK_FLAP=1): per rail, the WRITE
// rate and mlxlink's BERs, one deliberate retrain of the port, a wait for
// it to be ACTIVE again, and the same readings after it; model.JudgeRecovery
// judges. The parts here need no device: choosing and running the retrain,
// and watching the port come back.

// Retrainer is how one port is retrained: a command line per step, run in
// order with Pause between them.
type Retrainer struct {
	// Method is the steps as a person would type them, for the report.
	Method string
	Steps  [][]string
	Pause  time.Duration
	// Restore brings the port up again when a step fails after the first
	// ran: a guard that took a production port down must not leave it down
	// because the second half failed.
	Restore []string
}

// flapDown is how long a netdev stays down: long enough that the PHY drops
// the link and both ends retrain, as a flapping optic makes them.
const flapDown = 2 * time.Second

// ChooseRetrainer picks the documented way to retrain nic's port:
//   - a PCI NIC with NVIDIA's mlxlink (MFT) or mstlink (mstflint):
//     `mlxlink -d <bdf> -a TG`, the port_state toggle (PAOS register) that
//     the tools list as "Configure Port State [UP(up)/DN(down)/TG(toggle)]"
//     (mstflint mlxlink/mlxlink_ui.cpp, printSynopsisCommands; by reading);
//   - else a RoCE port with a netdev (the NIC's own, or a software device's
//     parent): `ip link set dev <netdev> down`, then up; on mlx5 the
//     netdev's admin state is the port's (mlx5e_close sets the port down),
//     and rdma_rxe follows its netdev's carrier;
//   - else (InfiniBand without the tools) none, and why.
//
// look finds a tool (hostfs.LookTool on a live host).
func ChooseRetrainer(nic *rails.NIC, look func(string) string) (*Retrainer, string) {
	if nic == nil {
		return nil, "no NIC on the rail"
	}
	if nic.PCI != "" {
		for _, tool := range optics.LinkTools {
			if p := look(tool); p != "" {
				// A toggle that failed half-way may leave the port down;
				// UP is the same register's other setting.
				return &Retrainer{Method: fmt.Sprintf("%s -d %s -a TG", tool, nic.PCI),
					Steps:   [][]string{{p, "-d", nic.PCI, "-a", "TG"}},
					Restore: []string{p, "-d", nic.PCI, "-a", "UP"}}, ""
			}
		}
	}
	var netdev string
	switch {
	case nic.Software:
		netdev = nic.Parent
	case nic.Dev != nil && len(nic.Dev.Netdevs) > 0:
		netdev = nic.Dev.Netdevs[0]
	}
	if nic.LinkLayer == "Ethernet" && netdev != "" && rdmadev.CheckName(netdev) == nil {
		ip := look("ip")
		if ip == "" {
			return nil, fmt.Sprintf("%s: neither %s nor ip (iproute2) found in PATH", nic.Name, strings.Join(optics.LinkTools, " nor "))
		}
		return &Retrainer{Method: fmt.Sprintf("ip link set dev %s down; ip link set dev %s up", netdev, netdev),
			Steps:   [][]string{{ip, "link", "set", "dev", netdev, "down"}, {ip, "link", "set", "dev", netdev, "up"}},
			Pause:   flapDown,
			Restore: []string{ip, "link", "set", "dev", netdev, "up"}}, ""
	}
	return nil, fmt.Sprintf("%s: no way to retrain its port: %s not found in PATH, and it has no Ethernet netdev to set down (link layer %s)",
		nic.Name, strings.Join(optics.LinkTools, " nor "), orNone(nic.LinkLayer))
}

// stepTimeout bounds one retrain command (mlxlink reads registers for
// seconds).
const stepTimeout = 30 * time.Second

// restoreTries is how often Restore is tried (a second apart) before the
// port is said to be left down.
const restoreTries = 3

// Run runs the steps; the first that fails ends it, with its output. Where
// a step failed after one that may have taken the port down (or a single
// toggle failed half-way), Restore runs, and the error says whether the
// port was brought back or must be brought up by hand.
func (rt *Retrainer) Run() error {
	for i, st := range rt.Steps {
		if i > 0 && rt.Pause > 0 {
			time.Sleep(rt.Pause)
		}
		out, err := hostfs.Run(stepTimeout, "", nil, st[0], st[1:]...)
		if err == nil {
			continue
		}
		err = fmt.Errorf("%s: %v: %s", strings.Join(st, " "), err, strings.TrimSpace(out))
		if len(rt.Restore) == 0 || (i == 0 && len(rt.Steps) > 1) {
			return err // nothing ran that could have taken the port down
		}
		return fmt.Errorf("%w; %s", err, rt.restore())
	}
	return nil
}

// restore runs Restore up to restoreTries times and says how it went.
func (rt *Retrainer) restore() string {
	cmd := strings.Join(rt.Restore, " ")
	var last string
	for try := 1; try <= restoreTries; try++ {
		if try > 1 {
			time.Sleep(time.Second)
		}
		out, err := hostfs.Run(stepTimeout, "", nil, rt.Restore[0], rt.Restore[1:]...)
		if err == nil {
			return fmt.Sprintf("the port was brought up again (%s, try %d)", cmd, try)
		}
		last = fmt.Sprintf("%v: %s", err, strings.TrimSpace(out))
	}
	return fmt.Sprintf("bringing the port up again failed %d times (%s: %s): the port may be left down; bring it up by hand", restoreTries, cmd, last)
}

// PortWatch follows a port's state from before a retrain until it is
// ACTIVE again: when it left ACTIVE and when it came back.
type PortWatch struct {
	// State reads the port's state name ("ACTIVE", "DOWN").
	State func() (string, error)
	// Every is the polling period.
	Every time.Duration
	// Grace is how long after the retrain returned a port still ACTIVE is
	// given to go down: a toggle may return before the PHY drops the link.
	Grace time.Duration
}

// WatchResult is what a PortWatch saw.
type WatchResult struct {
	Left   bool          // the port was seen out of ACTIVE
	Up     bool          // ACTIVE again by the deadline
	Took   time.Duration // from the retrain's start to ACTIVE again (0: never seen down)
	Last   string        // the last state read, or the read's error
	Waited time.Duration
}

// Follow polls from start while retrain runs (done closes when it has
// returned), then until the port is ACTIVE again or within has passed
// since start. A port never seen out of ACTIVE within Grace of the
// retrain's end is Up with Took 0: the retrain was shorter than a poll, or
// this end's link never went down.
func (w PortWatch) Follow(start time.Time, done <-chan struct{}, within time.Duration) WatchResult {
	every := w.Every
	if every <= 0 {
		every = 100 * time.Millisecond
	}
	res := WatchResult{Waited: within}
	finished := false
	var doneAt time.Time
	for {
		st, err := w.State()
		now := time.Now()
		switch {
		case err != nil:
			res.Last = err.Error()
			res.Left = true
		default:
			res.Last = st
			if st != "ACTIVE" {
				res.Left = true
			}
		}
		if finished && err == nil && st == "ACTIVE" && (res.Left || now.Sub(doneAt) >= w.Grace) {
			res.Up = true
			if res.Left {
				res.Took = now.Sub(start)
			}
			return res
		}
		if now.Sub(start) >= within {
			return res
		}
		select {
		case <-done:
			finished, doneAt = true, time.Now()
			done = nil // read once; then poll on the timer
		case <-time.After(every):
		}
	}
}

// Flap is the guard's outcome on this host: one Retrain per rail judged
// here, or why there is none.
type Flap struct {
	Retrains []model.Retrain
	// Absent says why the guard could not run at all (no rail, no way to
	// retrain); nil when it ran.
	Absent *verdict.Finding
	// NotJudged are rails whose guard could not be judged, with why.
	NotJudged []string
}

// Describe is one retrain in a line: how, whether and when the port came
// back, the rates around it.
func Describe(rt model.Retrain) string {
	s := fmt.Sprintf("%s: ", rt.Method)
	if !rt.Up {
		return s + fmt.Sprintf("not ACTIVE again within %s", rt.Waited)
	}
	if rt.Took == 0 {
		s += "ACTIVE throughout (never seen down: the link's other end did not drop, or the retrain was shorter than a poll)"
	} else {
		s += fmt.Sprintf("ACTIVE again after %s", rt.Took.Round(10*time.Millisecond))
	}
	if rt.Before.Gbps != nil && rt.After.Gbps != nil {
		s += fmt.Sprintf("; WRITE %.3f Gbit/s before, %.3f after", *rt.Before.Gbps, *rt.After.Gbps)
	}
	return s
}

// Unjudged are the rails whose guard could not be judged, as findings to
// record beside the judged ones.
func (f *Flap) Unjudged() []verdict.Finding {
	var out []verdict.Finding
	for _, why := range f.NotJudged {
		out = append(out, *verdict.NotJudgedf("", "%s", why))
	}
	return out
}
