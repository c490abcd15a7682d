package soak

import (
	"cmp"
	"fmt"
	"time"

	"github.com/gdrconf/gdrconf/internal/counters"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// Retrain is one deliberate retrain of a rail's port (SOAK-08, opt-in
// and disruptive): what the port measured before, how it was retrained,
// whether and when it came back, and what it measured after.
type Retrain struct {
	Rail Rail
	// Method is how the port was retrained, as run ("mlxlink -d mlx5_0
	// -p 1 -a TG", "ip link set eth2 down; ip link set eth2 up").
	Method string
	At     time.Time
	// Up says whether the port was ACTIVE again within Waited; Took is how
	// long that took.
	Up     bool
	Took   time.Duration
	Waited time.Duration
	// Before and After are the port's rate and mlxlink reading around the
	// retrain; nil fields were not measured.
	Before, After Measure
}

// Measure is a port's rate and mlxlink reading at one moment.
type Measure struct {
	Gbps *float64
	Link *Link
}

// JudgeRecovery is SOAK-08: after a deliberate retrain the port is ACTIVE
// again within th.MaxRecovery, keeps th.MinRecoveryRatio of its rate
// before, and no BER rose more than th.MaxBERRise times over its reading
// before or past its ceiling. A value not measured on either side is not
// compared, and said so; nothing measured after a port that came back is
// not judged.
func JudgeRecovery(rt Retrain, th Thresholds) Result {
	rail := rt.Rail
	r := Result{Req: ReqRecovery, Device: rail.Device}
	name := railName(rail)
	how := rt.Method
	if how == "" {
		how = "a method not recorded"
	}
	r.attr("retrain_method", how)
	r.num("recovery_sec", rt.Took.Seconds())
	r.num("max_recovery_sec", th.MaxRecovery.Seconds())
	if !rt.Up {
		r.add(verdict.Finding{
			Cause:     fmt.Sprintf("%s did not come back ACTIVE within %s of its retrain (%s) at %s UTC", name, rt.Waited, how, rt.At.UTC().Format("15:04:05")),
			Remedy:    "bring the port up by hand (mlxlink -a UP, or ip link set up) and check the cable or optic and the switch port: a link that does not retrain cleanly will not survive a flap in production",
			Measured:  "gdr.recovery_sec",
			Threshold: "gdr.max_recovery_sec",
			Source:    SrcRecovery,
			Part:      counters.PartLink,
		})
		return r
	}
	if rt.Took > th.MaxRecovery {
		r.add(verdict.Finding{
			Cause:     fmt.Sprintf("%s took %s to be ACTIVE again after its retrain (%s), longer than %s", name, rt.Took.Round(time.Second), how, th.MaxRecovery),
			Remedy:    remedyLink,
			Measured:  "gdr.recovery_sec",
			Threshold: "gdr.max_recovery_sec",
			Source:    SrcRecovery,
			Part:      counters.PartLink,
		})
	}
	var notCompared []string
	switch b, a := rt.Before.Gbps, rt.After.Gbps; {
	case a == nil:
		notCompared = append(notCompared, "the rate after it was not measured")
	case b == nil:
		notCompared = append(notCompared, "the rate before it was not measured")
	default:
		r.num("bw_gbit_s_before", *b)
		r.num("bw_gbit_s_after", *a)
		if *b <= 0 {
			notCompared = append(notCompared, "the port moved nothing before it, so no ratio can be taken")
		} else {
			q := *a / *b
			r.num("recovery_ratio", q)
			r.num("min_recovery_ratio", th.MinRecoveryRatio)
			if q < th.MinRecoveryRatio {
				r.add(verdict.Finding{
					Cause:     fmt.Sprintf("%s moved %s after its retrain (%s), %.2f of the %s before, below %.2f", name, gbit(*a), how, q, gbit(*b), th.MinRecoveryRatio),
					Remedy:    "the port came back slower: check its speed and width after the retrain (ibstatus, mlxlink), retrain it once more, and reseat or replace the cable or optic if it stays slow",
					Measured:  "gdr.recovery_ratio",
					Threshold: "gdr.min_recovery_ratio",
					Source:    cmp.Or(th.RecoverySource, SrcRecovery),
					Part:      counters.PartLink,
				})
			}
		}
		if rail.Floor != nil && *a < *rail.Floor {
			r.num("min_bw_gbit_s", *rail.Floor)
			r.add(verdict.Finding{
				Cause:     fmt.Sprintf("%s moved %s after its retrain (%s), below its floor %s (%s)", name, gbit(*a), how, gbit(*rail.Floor), rail.FloorSource),
				Remedy:    remedyLink,
				Measured:  "gdr.bw_gbit_s_after",
				Threshold: "gdr.min_bw_gbit_s",
				Source:    rail.FloorSource,
				Part:      counters.PartLink,
			})
		}
	}
	switch b, a := rt.Before.Link, rt.After.Link; {
	case a == nil:
		notCompared = append(notCompared, "no mlxlink reading after it")
	default:
		for _, k := range berKinds {
			av := k.get(a)
			if av == nil {
				continue
			}
			if *av > k.ceiling(th) {
				r.ber(k.key+"_after", *av)
				r.add(verdict.Finding{Level: k.level,
					Cause:    fmt.Sprintf("%s: %s %s after its retrain (%s), above its ceiling %s", name, k.name, berText(*av), how, berText(k.ceiling(th))),
					Remedy:   remedyLink,
					Source:   k.src,
					Measured: "gdr." + k.key + "_after",
					Part:     counters.PartLink})
			}
			if b == nil || k.get(b) == nil {
				continue
			}
			bv := *k.get(b)
			rise := max(*av, th.BERRiseFloor) / max(bv, th.BERRiseFloor)
			if rise > th.MaxBERRise {
				r.num("ber_rise_ratio", rise)
				r.num("max_ber_rise_ratio", th.MaxBERRise)
				r.add(verdict.Finding{
					Cause:     fmt.Sprintf("%s: %s rose from %s before its retrain (%s) to %s after it, %.0f times, more than %g: the link came back degraded", name, k.name, berText(bv), how, berText(*av), rise, th.MaxBERRise),
					Remedy:    "retrain the port once more; if the BER stays high reseat, clean or replace the cable or optic (some optics send a poor signal as their transmitter comes back, and the far end adapts to it)",
					Measured:  "gdr.ber_rise_ratio",
					Threshold: "gdr.max_ber_rise_ratio",
					Source:    SrcBERRise,
					Part:      counters.PartLink,
				})
			}
		}
		if b == nil {
			notCompared = append(notCompared, "no mlxlink reading before it")
		}
	}
	if rt.After.Gbps == nil && rt.After.Link == nil {
		r.add(*verdict.NotJudgedf("", "%s came back ACTIVE after its retrain (%s) in %s, but nothing was measured after it: %s", name, how, rt.Took.Round(time.Second), join(notCompared)))
	} else if len(notCompared) > 0 {
		r.add(verdict.Finding{Level: verdict.Info, Cause: fmt.Sprintf("%s after its retrain: not compared: %s", name, join(notCompared))})
	}
	return r
}
