package soak

import (
	"strings"
	"testing"

	soakrun "github.com/gdrconf/gdrconf/harness/soak"
	"github.com/gdrconf/gdrconf/harness/testenv"
	model "github.com/gdrconf/gdrconf/internal/soak"
)

// SOAK-01: no rail below its floor for longer than a window.
func TestSOAK01NoDip(t *testing.T) { judge(t, "SOAK-01", rails) }

// SOAK-02: error counters rise slower than their thresholds per hour.
func TestSOAK02CounterRates(t *testing.T) { judge(t, "SOAK-02", rails) }

// SOAK-03: no link flap.
func TestSOAK03NoFlap(t *testing.T) { judge(t, "SOAK-03", rails) }

// SOAK-04: no BER rise beyond a factor over the run.
func TestSOAK04BER(t *testing.T) { judge(t, "SOAK-04", rails) }

// SOAK-05: no GPU throttling under the copy load (report-only).
func TestSOAK05Throttle(t *testing.T) { judge(t, "SOAK-05", gpus) }

// SOAK-06: bandwidth stable over the run.
func TestSOAK06Stable(t *testing.T) { judge(t, "SOAK-06", rails) }

// SOAK-07: no Xid or AER line in the kernel log during the soak.
func TestSOAK07KernelLog(t *testing.T) { judge(t, "SOAK-07", either) }

// SOAK-08: the link-flap guard. Disruptive (a port retrain takes the link
// down for seconds), so asked for on its own with GDR_SOAK_FLAP=1.
func TestSOAK08FlapGuard(t *testing.T) {
	testenv.Req(t, "SOAK-08")
	if !testenv.Config(t).SoakFlap {
		testenv.NotAsked(t, "SOAK-08", "the link-flap guard retrains a port (disruptive): set GDR_SOAK_FLAP=1 to run it")
	}
	th := model.DefaultThresholds()
	if fr := testenv.Config(t).SoakRecoveryFraction; fr > 0 {
		th.MinRecoveryRatio, th.RecoverySource = fr, "GDR_SOAK_RECOVERY_FRACTION"
	}
	f := soakrun.RunFlap(t, th.MaxRecovery)
	if f.Absent != nil {
		testenv.Stop(t, f.Absent)
	}
	if len(f.Retrains) == 0 {
		testenv.NotJudgedf(t, "", "no rail's retrain could be judged: %s", strings.Join(f.NotJudged, "; "))
	}
	testenv.Record(t, f.Unjudged()...)
	for _, rt := range f.Retrains {
		t.Run(rt.Rail.Device, func(t *testing.T) {
			t.Logf("flap guard: %s", soakrun.Describe(rt))
			record(t, model.JudgeRecovery(rt, th))
		})
	}
}

// What a requirement needs the soak to have had.
type needs int

const (
	rails  needs = iota // a rail that carried traffic
	gpus                // a GPU that copied
	either              // either
)

// judge is every soak test: not asked without GDR_SOAK; else the one soak
// run's series, judged, and this requirement's findings recorded.
func judge(t *testing.T, id string, need needs) {
	testenv.Req(t, id)
	if cfg := testenv.Config(t); cfg.Soak == 0 && cfg.SoakSkip != "" {
		// Asked for, but this cluster round cannot give it (rounds.sh).
		testenv.Stop(t, soakrun.Skipped(cfg.SoakSkip))
	} else if cfg.Soak == 0 {
		testenv.NotAsked(t, id, "set GDR_SOAK to a duration (2h, 8h) or run make soak to run a soak")
	}
	res, why := soakrun.Run(t)
	if res == nil {
		testenv.NotJudgedf(t, "", "%s", why)
	}
	if res.Absent != nil {
		testenv.Stop(t, res.Absent)
	}
	s := res.Series
	if res.File != "" {
		testenv.Attr(t, "soak_file", res.File)
	}
	testenv.Attr(t, "soak_samples_count", len(s.Samples))
	testenv.Attr(t, "soak_run_sec", s.Duration().Seconds())
	if s.Emulated {
		testenv.Attr(t, "mem", "gpu-emulated")
	}
	for _, p := range res.Problems {
		t.Logf("soak: %s", p)
	}
	if s.Cut != "" {
		testenv.Attr(t, "soak_cut", s.Cut)
		t.Logf("the soak was CUT after %s of %s (%s): judged on what it measured", s.Duration().Round(1e9), s.Planned, s.Cut)
	}
	switch {
	case need == rails && len(s.Rails) == 0:
		testenv.Absent(t, "", "no rail carried the soak's traffic: %s", res.RailsWhy)
	case need == gpus && len(s.GPUs) == 0:
		testenv.Absent(t, "", "no GPU copied during the soak: %s", res.GPUsWhy)
	}
	var mine []model.Result
	th := model.DefaultThresholds()
	if fr := testenv.Config(t).SoakStableFraction; fr > 0 {
		th.MinStableRatio, th.StableSource = fr, "GDR_SOAK_STABLE_FRACTION"
	}
	for _, r := range model.JudgeAll(s, th) {
		if r.Req == id {
			mine = append(mine, r)
		}
	}
	// One part: its values on the test itself; several (rails, GPUs): a
	// subtest per part, named for the device, so each part's values and
	// findings stay together.
	if len(mine) == 1 {
		record(t, mine[0])
		return
	}
	for _, r := range mine {
		t.Run(orHost(r.Device), func(t *testing.T) { record(t, r) })
	}
}

func record(t *testing.T, r model.Result) {
	for _, a := range r.Attrs {
		testenv.Attr(t, a.Key, a.Value)
	}
	testenv.Record(t, r.Findings...)
}

func orHost(dev string) string {
	if dev == "" {
		return "host"
	}
	return dev
}
