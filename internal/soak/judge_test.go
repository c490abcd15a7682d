package soak

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/attrkey"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// failing is the findings of rs at level fail (fell short, absent or not
// judged).
func failing(rs []Result) []verdict.Finding {
	var out []verdict.Finding
	for _, r := range rs {
		for _, f := range r.Findings {
			if f.Level == verdict.Fail {
				out = append(out, f)
			}
		}
	}
	return out
}

func attrs(r Result) map[string]string {
	m := map[string]string{}
	for _, a := range r.Attrs {
		m[a.Key] = a.Value
	}
	return m
}

// checkNames holds every result to the attribute rule, and every finding
// that fell short to naming its device, its time, its evidence, its
// source, and values the result holds.
func checkNames(t *testing.T, rs []Result) {
	t.Helper()
	for _, r := range rs {
		a := attrs(r)
		for k := range a {
			assert.NoError(t, attrkey.Check(k))
		}
		for _, f := range r.Findings {
			assert.Equal(t, r.Req, f.Req)
			if f.Kind() != verdict.FellShort || f.Level == verdict.Info {
				continue
			}
			assert.NotEmpty(t, f.Device, f.Cause)
			assert.NotEmpty(t, f.Evidence, f.Cause)
			assert.NotEmpty(t, f.Source, f.Cause)
			if f.Measured != "" {
				assert.Contains(t, a, f.Measured, "%s: the measured value is an attribute", f.Cause)
			}
			if f.Threshold != "" {
				assert.Contains(t, a, f.Threshold, "%s: the bound is an attribute", f.Cause)
			}
			assert.Contains(t, f.Cause, "into the run (", "a failure says when")
		}
	}
}

func TestJudgeCleanEightRails(t *testing.T) {
	s := build(8, 30*time.Minute)
	rs := JudgeAll(s, DefaultThresholds())
	checkNames(t, rs)
	for _, r := range rs {
		for _, f := range r.Findings {
			t.Errorf("%s %s: %s", f.Req, f.Level, f.Line())
		}
	}
	// Every rail and GPU has a result per requirement, with its values.
	per := map[string]int{}
	for _, r := range rs {
		per[r.Req]++
	}
	assert.Equal(t, map[string]int{ReqDip: 8, ReqRates: 8, ReqFlap: 8, ReqBER: 8, ReqThrottle: 8, ReqStable: 8, ReqKernel: 1}, per)
	a := attrs(rs[0])
	assert.Equal(t, "0", a["gdr.dip_count"])
	assert.Equal(t, "20.000", a["gdr.max_dip_sec"])
	assert.Empty(t, Judge(s, DefaultThresholds()))
}

func TestJudgeCutRun(t *testing.T) {
	s := build(2, 12*time.Minute)
	s.Planned, s.Cut = 2*time.Hour, "SIGTERM"
	flap(s, 0)
	rs := JudgeAll(s, DefaultThresholds())
	fs := failing(rs)
	require.Len(t, fs, 2, "the flap, and the dip it makes")
	for _, f := range fs {
		assert.Equal(t, "mlx5_0", f.Device)
		assert.Contains(t, f.Cause, "judged on the 12m0s the run measured of 2h0m0s planned: it was cut (SIGTERM)")
	}
	for _, r := range rs {
		require.NotEmpty(t, r.Findings, "%s %s: a cut run says so", r.Req, r.Device)
		assert.Contains(t, r.Findings[len(r.Findings)-1].Cause, "cut (SIGTERM)")
	}
}

func TestJudgeNothing(t *testing.T) {
	for _, s := range []*Series{nil, {Version: Version, Host: "h", Cut: "interrupt", Rails: []Rail{{Device: "mlx5_0"}}}} {
		fs := Judge(s, DefaultThresholds())
		var reqs []string
		for _, f := range fs {
			assert.Equal(t, verdict.NotJudged, f.Kind())
			reqs = append(reqs, f.Req)
		}
		assert.Equal(t, []string{ReqDip, ReqRates, ReqFlap, ReqBER, ReqThrottle, ReqStable, ReqKernel}, reqs)
	}
	fs := Judge(&Series{Version: Version, Host: "h", Cut: "interrupt"}, DefaultThresholds())
	assert.Contains(t, fs[0].Cause, "the soak on h recorded no sample (cut: interrupt)")
}

// testdata/soak.json is a recorded-shape series others load: 5 minutes
// on 2 rails at 10 s, rail 1's link down 5 s every minute. UPDATE=1
// rewrites it from the builder.
func TestTestdataSeries(t *testing.T) {
	want := build(2, 5*time.Minute)
	flap(want, 1)
	if os.Getenv("UPDATE") == "1" {
		require.NoError(t, Write("testdata", want))
	}
	got, err := Read("testdata")
	require.NoError(t, err)
	assert.Equal(t, want, got, "testdata/soak.json is the builder's series (UPDATE=1 rewrites it)")
	fs := failing(JudgeAll(got, DefaultThresholds()))
	require.NotEmpty(t, fs)
	for _, f := range fs {
		assert.Equal(t, "mlx5_1", f.Device, "only the flapping rail fails: %s", f.Line())
	}
	_, err = os.Stat(filepath.Join("testdata", SeriesFile))
	require.NoError(t, err)
}

// The size the report is held to (8 rails x 8 h at 10 s) judges clean,
// and quickly: every judge is linear in the samples.
func TestJudgeEightHours(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	s := build(8, 8*time.Hour)
	start := time.Now()
	fs := Judge(s, DefaultThresholds())
	assert.Empty(t, fs)
	assert.Less(t, time.Since(start), 10*time.Second)
}
