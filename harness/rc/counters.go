//go:build rdma

package rc

import (
	"fmt"
	"strings"
	"time"

	"github.com/gdrconf/gdrconf/internal/counters"
	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
)

// portCounters reads an RDMA port's counters/ and hw_counters/ (rxe has
// only the latter) for a stall's evidence; a port with none readable is an
// error, since a stall could not be measured against it.
func portCounters(root *hostfs.Root, dev string, port int) (*counters.Snapshot, error) {
	snap, err := counters.ReadPort(root, dev, port)
	if err != nil {
		return nil, err
	}
	if len(snap.Values) == 0 {
		why := append(append([]string{}, snap.Absent...), snap.Problems...)
		return nil, fmt.Errorf("no readable counter under %s: %s", rdmadev.PortDir(dev, port), strings.Join(why, "; "))
	}
	return snap, nil
}

// markCounters takes the port counters a stall's or a completion error's
// evidence is measured from (counters0), or keeps why they are unreadable.
func (e *End) markCounters() error {
	c, err := portCounters(e.Root, e.Dev, e.Cfg.IBPort)
	if err != nil {
		e.countersErr = err
		return err
	}
	e.counters0, e.countersErr = c, nil
	return nil
}

// countersEvidence is what the port's counters say since markCounters: the
// likely cause ("" when they name none) and the fact line with every rise.
func (e *End) countersEvidence() (cause, fact string) {
	now, err := portCounters(e.Root, e.Dev, e.Cfg.IBPort)
	if err != nil {
		return "", "the NIC's counters could not be read: " + err.Error()
	}
	d := counters.Diff(e.counters0, now)
	return counters.StallCause(d), fmt.Sprintf("%s port %d counters since the connection %v ago: %s",
		e.Dev, e.Cfg.IBPort, time.Since(e.counters0.Taken).Round(100*time.Millisecond), d.Rises())
}
