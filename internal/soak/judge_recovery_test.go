package soak

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/verdict"
)

func TestJudgeRecovery(t *testing.T) {
	floor := 360.0
	rail := Rail{Index: 2, Device: "mlx5_2", Port: 1, PCI: "0000:38:00.0", GPU: "0000:3b:00.0", Floor: &floor, FloorSource: "PP-08"}
	at := t0.Add(time.Hour)
	good := Retrain{Rail: rail, Method: "mlxlink -d mlx5_2 -p 1 -a TG", At: at, Up: true, Took: 4 * time.Second, Waited: time.Minute,
		Before: Measure{Gbps: f(371), Link: &Link{EffectiveBER: f(0), RawBER: f(1e-10)}},
		After:  Measure{Gbps: f(370), Link: &Link{EffectiveBER: f(0), RawBER: f(2e-10)}}}
	r := JudgeRecovery(good, DefaultThresholds())
	assert.Empty(t, r.Findings)
	assert.Equal(t, "4.000", attrs(r)["gdr.recovery_sec"])
	assert.Equal(t, "mlxlink -d mlx5_2 -p 1 -a TG", attrs(r)["gdr.retrain_method"])

	// Back up, but its pre-FEC BER a hundred times worse (sonic-mgmt's
	// case) and slower.
	bad := good
	bad.After = Measure{Gbps: f(250), Link: &Link{EffectiveBER: f(0), RawBER: f(1e-8)}}
	r = JudgeRecovery(bad, DefaultThresholds())
	var causes []string
	for _, f := range r.Findings {
		require.Equal(t, verdict.Fail, f.Level)
		assert.Equal(t, "cable/optic", f.Part)
		assert.Equal(t, ReqRecovery, f.Req)
		causes = append(causes, f.Cause)
	}
	all := strings.Join(causes, "\n")
	assert.Contains(t, all, "raw (pre-FEC) BER rose from 1.0e-10 before its retrain (mlxlink -d mlx5_2 -p 1 -a TG) to 1.0e-08 after it, 100 times")
	assert.Contains(t, all, "moved 250.0 Gbit/s after its retrain (mlxlink -d mlx5_2 -p 1 -a TG), 0.67 of the 371.0 Gbit/s before")
	assert.Contains(t, all, "below its floor 360.0 Gbit/s (PP-08)")

	down := good
	down.Up, down.Took, down.After = false, 0, Measure{}
	r = JudgeRecovery(down, DefaultThresholds())
	require.Len(t, r.Findings, 1)
	assert.Contains(t, r.Findings[0].Cause, "did not come back ACTIVE within 1m0s of its retrain (mlxlink -d mlx5_2 -p 1 -a TG) at 02:00:00 UTC")

	blind := good
	blind.After = Measure{}
	r = JudgeRecovery(blind, DefaultThresholds())
	require.Len(t, r.Findings, 1)
	assert.Equal(t, verdict.NotJudged, r.Findings[0].Kind())
}
