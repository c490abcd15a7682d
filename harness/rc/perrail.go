//go:build rdma

package rc

import (
	"strconv"
	"testing"

	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/rails"
)

// PerRail runs fn in one subtest per rail ("rail<N>", Rails), each tagged
// with requirement id (t has it already: the test names its own), the
// rails agreed with the peer (rail i meets rail i); rails only one host has
// fail the test, naming them.
func PerRail(t *testing.T, id string, fn func(t *testing.T, r *rails.Rail)) {
	t.Helper()
	run, missing := PlanRails(t, Rails(t))
	testenv.Attr(t, "rails", len(run))
	for _, r := range run {
		t.Run(r.Name(), func(t *testing.T) {
			testenv.Req(t, id)
			fn(t, r)
		})
	}
	if missing != "" {
		testenv.Failf(t, "run both hosts with the same rails (GPUs and NICs), or choose the common ones with GDR_RAILS", "%s", missing)
	}
}

// Done ends t when an end's check failed (FailIf), else records the ends'
// facts on t (Report).
func Done(t testing.TB, ends []*End, errs []error) {
	t.Helper()
	FailIf(t, ends, errs)
	Report(t, ends)
}

// Settings are the settings of cfg both hosts must have the same
// (Options.Info): iterations, depth, queue pairs and the size sweep.
func Settings(cfg config.Config) map[string]string {
	return map[string]string{"GDR_ITERS": strconv.Itoa(cfg.Iters), "GDR_BW_ITERS": strconv.Itoa(cfg.BWIters),
		"GDR_TX_DEPTH": strconv.Itoa(cfg.TxDepth), "GDR_QPS": strconv.Itoa(cfg.QPs), "GDR_BW_SIZES": JoinInts(cfg.BWSizes)}
}
