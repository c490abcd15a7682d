package soak

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/counters"
)

func f(v float64) *float64 { return &v }

func TestSeriesRoundTrip(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC)
	s := &Series{Host: "h1", Start: t0, End: t0.Add(20 * time.Second), Planned: time.Minute, Interval: 10 * time.Second, Cut: "SIGTERM",
		Rails: []Rail{{Index: 0, Device: "mlx5_0", Port: 1, Floor: f(360), FloorSource: "GDR_MIN_BW"}},
		GPUs:  []GPU{{Index: 0, PCI: "0000:1b:00.0"}},
		Samples: []Sample{
			{At: t0.Add(10 * time.Second), Rails: []RailSample{{Gbps: f(371.5), State: "ACTIVE", Counters: []Count{{Key: counters.Key{Device: "mlx5_0", Port: 1, Source: counters.Port, Name: "symbol_error"}, Value: 3}}}}, GPUs: []GPUSample{{TempC: f(41)}}},
			{At: t0.Add(20 * time.Second), Rails: []RailSample{{State: "DOWN"}}},
		},
		Events: []Event{{At: t0.Add(15 * time.Second), Kind: LinkDown, Device: "mlx5_0", Text: "port 1 DOWN"}},
	}
	d := t.TempDir()
	require.NoError(t, Write(d, s))
	got, err := Read(d)
	require.NoError(t, err)
	assert.Equal(t, s, got)
	assert.Nil(t, got.Samples[1].Rails[0].Gbps, "not measured stays absent")
	assert.Equal(t, 20*time.Second, got.Duration())

	_, err = Read(t.TempDir())
	assert.True(t, errors.Is(err, os.ErrNotExist), "%v", err)
}

func TestSeriesRefusesBadInput(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC)
	for _, c := range []struct{ in, want string }{
		{`{"version":2}`, "version 2 is newer"},
		{`{"version":0}`, "not a soak series"},
		{`{"version":1,"start":"` + t0.Format(time.RFC3339) + `","end":"` + t0.Add(-time.Second).Format(time.RFC3339) + `"}`, "before it starts"},
		{`{"version":1,"rails":[{"index":0}],"samples":[{"rails":[]}]}`, "sample 0 has 0 rails, the series 1"},
		{`{"version":1,"samples":[{"at":"` + t0.Format(time.RFC3339) + `","rails":[]},{"at":"` + t0.Add(-time.Second).Format(time.RFC3339) + `","rails":[]}]}`, "sample 1"},
		{`{"version":1,"host":`, "cut short"},
	} {
		_, err := decode("soak.json", strings.NewReader(c.in))
		if assert.Error(t, err, c.in) {
			assert.Contains(t, err.Error(), c.want)
		}
	}
}

func TestRates(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC)
	sym := counters.Key{Device: "mlx5_0", Port: 1, Source: counters.Port, Name: "symbol_error"}
	down := counters.Key{Device: "mlx5_0", Port: 1, Source: counters.Port, Name: "link_downed"}
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	s := &Series{Rails: []Rail{{Device: "mlx5_0", Port: 1}}, Samples: []Sample{
		{At: at(0), Rails: []RailSample{{Counters: []Count{{sym, 10}, {down, 0}}}}},
		{At: at(10), Rails: []RailSample{{}}},
		{At: at(20), Rails: []RailSample{{Counters: []Count{{sym, 40}}}}},
		{At: at(30), Rails: []RailSample{{Counters: []Count{{sym, 5}}}}}, // cleared, then 5 more
		{At: at(60), Rails: []RailSample{{}}},
	}}
	rs := Rates(s)
	require.Len(t, rs, 2)
	assert.Equal(t, down, rs[0].Key)
	assert.Zero(t, rs[0].Rise)
	assert.Equal(t, time.Hour, rs[0].Over, "watched to the last sample")
	assert.True(t, rs[0].First.IsZero())
	r := rs[1]
	assert.Equal(t, uint64(35), r.Rise)
	assert.True(t, r.Reset)
	assert.Equal(t, at(20), r.First)
	assert.Equal(t, at(30), r.Last)
	ph, ok := r.PerHour()
	assert.True(t, ok)
	assert.InDelta(t, 35, ph, 1e-9)

	one := Rates(&Series{Rails: []Rail{{}}, Samples: []Sample{{At: t0, Rails: []RailSample{{Counters: []Count{{sym, 1}}}}}}})
	_, ok = one[0].PerHour()
	assert.False(t, ok, "one sample: no rate")
}

func TestSeriesFileReadable(t *testing.T) {
	d := t.TempDir()
	require.NoError(t, Write(d, &Series{}))
	st, err := os.Stat(d + "/" + SeriesFile)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), st.Mode().Perm(), "readable like the folder's other reports")
}
