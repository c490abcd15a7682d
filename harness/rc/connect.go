//go:build rdma

package rc

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/gdrconf/gdrconf/harness/oob"
	"github.com/gdrconf/gdrconf/internal/config"
)

// portDownWait bounds the out-of-band connect of a host whose port is not
// ACTIVE: it still tells a reachable peer why, but does not spend
// GDR_TIMEOUT on a network that is most likely the one that is down.
const portDownWait = 5 * time.Second

// turnedAway keeps the last gdrconf peers a server turned away in this run
// (wrong token, version, test) with the test they tried, so that a later
// test whose peer never came says what happened to it earlier.
var turnedAway struct {
	sync.Mutex
	list []string
}

func remember(test string, rej []oob.Rejection) {
	turnedAway.Lock()
	defer turnedAway.Unlock()
	for _, r := range rej {
		if r.Kind == oob.ErrProtocol {
			continue // strays and garbage: the listener logged them
		}
		turnedAway.list = append(turnedAway.list, fmt.Sprintf("%s in %s: %s", r.Addr, test, r.Why))
	}
	if n := len(turnedAway.list); n > 3 {
		turnedAway.list = turnedAway.list[n-3:]
	}
}

func earlierRejections() string {
	turnedAway.Lock()
	defer turnedAway.Unlock()
	return strings.Join(turnedAway.list, "; ")
}

// HostName is this host's name as its peer checks it: GDR_HOST_NAME (a
// cluster round sets it to the job's name for the host), else the kernel's.
func HostName(cfg config.Config) string {
	if cfg.HostName != "" {
		return cfg.HostName
	}
	h, _ := os.Hostname()
	return h
}

// connectError explains a failed out-of-band connect: a local port that is
// DOWN is the cause (the peer could not even be told), a host one test
// behind its peer skips forward, and a peer that never came may have been
// turned away by an earlier test.
func connectError(err error, fail string) error {
	if fail != "" {
		return fmt.Errorf("%s (the peer could not be told either: %v)", fail, err)
	}
	var e *oob.Error
	if !errors.As(err, &e) {
		return err
	}
	switch {
	case e.Kind == oob.ErrTest && e.Lag == oob.LagSelfBehind:
		at := "is at " + e.PeerTest
		if e.PeerTest == "" {
			at = "is further on (which test, a peer without GDR_TOKEN does not tell)"
		}
		return fmt.Errorf("skipped forward: this host is behind its peer, which ran this test already and %s (an earlier test ended on one host without the other: see both logs); this test is not run here, the next one meets the peer: %w",
			at, err)
	case e.Kind == oob.ErrVanished:
		if away := earlierRejections(); away != "" {
			return fmt.Errorf("%w; earlier in this run this server turned away: %s", err, away)
		}
	}
	return err
}
