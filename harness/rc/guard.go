//go:build rdma

package rc

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gdrconf/gdrconf/harness/verbs"
	"github.com/gdrconf/gdrconf/internal/budget"
	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// Budget is test t's budget: its binary's deadline (-test.timeout) less
// budget.Reserve. Every wait of a test is bounded by it, so a slow fabric
// ends in one verdict per test, never in go test's timeout panic.
func Budget(t *testing.T) budget.Budget {
	d, ok := t.Deadline()
	return budget.New(d, ok, budget.Reserve)
}

// Timeout is GDR_TIMEOUT, or what is left of the test's budget when less.
func (e *End) Timeout() time.Duration {
	d, _ := e.budget.Bound(e.Cfg.Timeout, time.Now())
	return d
}

// guard runs a C polling loop (a measurement) within the test's budget: when
// the budget ends first, the QPs are moved to the error state, which flushes
// the loop's work requests and ends it, and the error says why. It may run
// on several goroutines at once (one per QP).
func (e *End) guard(fn func() error) error {
	if !e.budget.Has() || e.QP == nil {
		return fn()
	}
	var mu sync.Mutex
	done, fired := false, false
	tm := time.AfterFunc(time.Until(e.budget.End()), func() {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			fired = true
			for _, q := range e.QPs {
				_ = q.SetError()
			}
			if len(e.QPs) == 0 {
				_ = e.QP.SetError()
			}
		}
	})
	err := fn()
	tm.Stop()
	mu.Lock()
	done = true
	cut := fired
	mu.Unlock()
	if cut && err != nil {
		return fmt.Errorf("%w (the QP was moved to the error state to end the measurement; it reported: %v)",
			e.budget.Cut("the "+e.Role+"'s measurement", time.Now()), err)
	}
	return err
}

// portProblem says why port p of dev cannot carry traffic right now ("" if
// it is ACTIVE), read afresh from sysfs: the selection read the ports once
// per run, and a port that went DOWN since must be named before any wait.
func portProblem(root *hostfs.Root, dev string, p int) string {
	d, err := rdmadev.Load(root, dev)
	if err != nil {
		return fmt.Sprintf("RDMA device %s: %v", dev, err)
	}
	port := d.Port(p)
	if port == nil {
		return fmt.Sprintf("%s has no port %d (GDR_IB_PORT)", dev, p)
	}
	if port.Active() {
		return ""
	}
	msg := fmt.Sprintf("%s port %d is %s, not ACTIVE", dev, p, orWord(port.State, "in an unknown state"))
	if port.PhysState != "" {
		msg += " (physical state " + port.PhysState + ")"
	}
	if nd := netdevState(root, d); nd != "" {
		msg += "; " + nd
	}
	return msg
}

// netdevState describes the netdevs under a RoCE device whose link is not
// up ("netdev eth0 is down"), "" when all are up or unknown.
func netdevState(root *hostfs.Root, d *rdmadev.Device) string {
	var out []string
	for _, nd := range d.Netdevs {
		op, err := rdmadev.OperState(root, nd)
		if err != nil || op == "up" || op == "" {
			continue
		}
		out = append(out, fmt.Sprintf("netdev %s is %s", nd, op))
	}
	return strings.Join(out, ", ")
}

func orWord(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// portDownRemedy is what to do about a port that is not ACTIVE.
const portDownRemedy = "bring the link up (cable, switch port, `ip link set <netdev> up`; on InfiniBand a running subnet manager), or choose another port with GDR_IB_PORT"

// stalled adds what the NIC saw to a transfer that stalled or completed in
// error: a sentence naming the likely cause first, then the port's state
// now and during the step (during: what watchPort saw) and its counters
// since the connection, in place of verbs' generic guess. Wrappers up the
// chain formatted their text already (fmt.Errorf), so the returned error
// carries the whole message again with the verbs error's part replaced; it
// unwraps to err.
func (e *End) stalled(err error, during portSeen) error {
	var te *verbs.TimeoutError
	var we *verbs.WCError
	isT, isW := errors.As(err, &te), errors.As(err, &we)
	if !isT && !isW {
		return err
	}
	var ev, remedy string
	if e.budget.Has() && !time.Now().Before(e.budget.End()) {
		ev = e.budget.Cut("the wait", time.Now()).Error()
	} else {
		hint := "the peer stopped, or GDR_TIMEOUT is too short for this link"
		if isW {
			hint = we.Hint()
		}
		ev, remedy = e.evidence(during, hint)
	}
	if ev == "" {
		return err
	}
	var inner error = we
	if isT {
		inner = te
	}
	before := inner.Error()
	if isT {
		te.Evidence = ev
	} else {
		we.Evidence = ev
	}
	x := &evidenced{msg: strings.Replace(err.Error(), before, inner.Error(), 1), err: err}
	if remedy != "" {
		x.fix = verdict.Failf(remedy, "%s", x.msg)
	}
	return x
}

// evidenced is an error chain whose text was written again with evidence,
// and, when the evidence names what to do, a finding that carries it
// (verdict.As finds it; the text never holds the remedy).
type evidenced struct {
	msg string
	err error
	fix *verdict.Finding
}

func (e *evidenced) Error() string { return e.msg }
func (e *evidenced) Unwrap() []error {
	if e.fix == nil {
		return []error{e.err}
	}
	return []error{e.err, e.fix}
}

// evidence is the NIC's account of a stall ("" when it has none to give):
// the likely cause in a sentence, then the facts it rests on. during is
// what watchPort saw while the step ran; hint is
// the completion status's generic guess, stated as the likely cause only
// when nothing the NIC shows names one.
func (e *End) evidence(during portSeen, hint string) (ev, remedy string) {
	var causes, facts []string
	linkDown := false // the first cause is the link's: its remedy is portDownRemedy
	if e.Root != nil && e.Dev != "" {
		now := portProblem(e.Root, e.Dev, e.Cfg.IBPort)
		switch {
		case now != "":
			linkDown = true
			causes = append(causes, "the link went down during the test and is still down")
			facts = append(facts, now+" now")
		case during.problem != "":
			linkDown = true
			causes = append(causes, "the link went down during the test and came back")
			facts = append(facts, fmt.Sprintf("%s port %d is ACTIVE again now", e.Dev, e.Cfg.IBPort))
		default:
			facts = append(facts, fmt.Sprintf("%s port %d is ACTIVE now", e.Dev, e.Cfg.IBPort))
		}
		if during.problem != "" {
			facts = append(facts, "during the step: "+during.problem)
		} else if during.reads > 0 {
			facts = append(facts, fmt.Sprintf("ACTIVE at each of %d reads during the step (every %v)", during.reads, portSample))
		}
	}
	if e.counters0 == nil && e.countersErr != nil {
		facts = append(facts, "the NIC's counters could not be read at the connection: "+e.countersErr.Error())
	}
	if e.counters0 != nil {
		why, fact := e.countersEvidence()
		if why != "" {
			causes = append(causes, why)
		}
		facts = append(facts, fact)
	}
	if len(facts) == 0 {
		return "", ""
	}
	var cause string
	switch {
	case len(causes) > 0:
		cause = "likely cause: " + strings.Join(causes, "; ")
		if linkDown {
			remedy = portDownRemedy
		}
	case hint != "":
		cause = "likely cause (the NIC shows none): " + hint
	default:
		cause = "the NIC shows no cause"
	}
	return cause + "; " + strings.Join(facts, "; "), remedy
}

// portSample is how often watchPort reads the port's state.
const portSample = 200 * time.Millisecond

// portSeen is what watchPort saw: how often it read the port's state, and
// its first problem (portProblem) with when ("" when it stayed ACTIVE).
type portSeen struct {
	reads   int
	problem string
}

// watchPort reads the port's state every portSample while a step runs and
// returns a function that ends the watch and says what it saw. A link that
// flaps and is back by the time the step fails is named this way; the
// counters (link_downed) catch flaps shorter than a sample.
func (e *End) watchPort() func() portSeen {
	if e.Root == nil || e.Dev == "" {
		return func() portSeen { return portSeen{} }
	}
	start := time.Now()
	stop, done := make(chan struct{}), make(chan struct{})
	var seen portSeen
	go func() {
		defer close(done)
		tk := time.NewTicker(portSample)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
			}
			name, err := rdmadev.PortState(e.Root, e.Dev, e.Cfg.IBPort)
			seen.reads++
			if err != nil {
				continue // the port's problem, if any, is read again at the verdict
			}
			if name != "ACTIVE" {
				p := portProblem(e.Root, e.Dev, e.Cfg.IBPort)
				if p == "" {
					p = fmt.Sprintf("%s port %d was %s", e.Dev, e.Cfg.IBPort, name)
				}
				seen.problem = fmt.Sprintf("%s, %.1fs into the step", p, time.Since(start).Seconds())
				return
			}
		}
	}()
	return func() portSeen {
		close(stop)
		<-done
		return seen
	}
}
