package multigpu

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// loop makes n back-to-back operations of d each, the first starting at off.
func loop(off, d time.Duration, n int) []Span {
	var out []Span
	at := t0.Add(off)
	for i := 0; i < n; i++ {
		out = append(out, Span{at, at.Add(d)})
		at = at.Add(d)
	}
	return out
}

func TestOverlap(t *testing.T) {
	const mb = 1 << 20
	// Lane 0: 10 ms per op from t0; lane 1: 20 ms per op (half the rate),
	// starting 15 ms later and running past lane 0's end.
	a := loop(0, 10*time.Millisecond, 20)                   // 0..200 ms
	b := loop(15*time.Millisecond, 20*time.Millisecond, 10) // 15..215 ms
	w, err := Overlap([][]Span{a, b}, 10*mb, 2)
	require.NoError(t, err)
	assert.Equal(t, t0.Add(15*time.Millisecond), w.Start)
	assert.Equal(t, t0.Add(200*time.Millisecond), w.End)
	assert.Equal(t, 185*time.Millisecond, w.Length())
	// Lane 0's ops inside [15, 200]: those starting at 20..190 -> 18.
	assert.Equal(t, 18, w.Lanes[0].Ops)
	// Lane 1's ops inside: 15..195 ends at 195 -> 9 of 10.
	assert.Equal(t, 9, w.Lanes[1].Ops)
	assert.InDelta(t, 10*mb/0.010/1e9, w.Lanes[0].GBps, 1e-9)
	assert.InDelta(t, 10*mb/0.020/1e9, w.Lanes[1].GBps, 1e-9)
	assert.InDelta(t, w.Lanes[0].GBps+w.Lanes[1].GBps, w.Aggregate(), 1e-9)
	assert.Equal(t, int64(18*10*mb), w.Lanes[0].Bytes)
}

func TestOverlapErrors(t *testing.T) {
	a := loop(0, 10*time.Millisecond, 5)
	late := loop(time.Second, 10*time.Millisecond, 5)
	for _, tc := range []struct {
		name  string
		lanes [][]Span
		bytes int64
		min   int
		want  string
	}{
		{"none", nil, 1, 1, "no copy loops"},
		{"bytes", [][]Span{a}, 0, 1, "must be positive"},
		{"empty lane", [][]Span{a, nil}, 1, 1, "copy loop 1 timed no operation"},
		{"disjoint", [][]Span{a, late}, 1, 1, "never ran at the same time"},
		{"too few", [][]Span{a, loop(5*time.Millisecond, 10*time.Millisecond, 5)}, 1, 5, "completed 4 operations inside the 45ms in which all 2 loops ran, fewer than the 5"},
		{"backwards", [][]Span{{{t0.Add(time.Second), t0}}}, 1, 1, "ends before it starts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Overlap(tc.lanes, tc.bytes, tc.min)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestNVLinkRate(t *testing.T) {
	r, how, err := NVLinkRate(18, 6)
	require.NoError(t, err)
	assert.Equal(t, 450.0, r, "H100/H200: 18 NVLink 4 links x 25 GB/s per direction")
	assert.Equal(t, "18 x NVLink 4.0 links x 25 GB/s = 450 GB/s per direction", how)
	r, _, err = NVLinkRate(12, 4)
	require.NoError(t, err)
	assert.Equal(t, 300.0, r, "A100: 12 NVLink 3 links")
	r, _, err = NVLinkRate(18, 7)
	require.NoError(t, err)
	assert.Equal(t, 900.0, r, "B200: 18 NVLink 5 links x 50 GB/s")
	r, _, err = NVLinkRate(4, 1)
	require.NoError(t, err)
	assert.Equal(t, 80.0, r, "P100: 4 NVLink 1 links x 20 GB/s")
	// A driver that reports the generation number itself (4 for Hopper)
	// gets the same per-link rate.
	a, _, _ := NVLinkLinkGBps(4)
	b, _, _ := NVLinkLinkGBps(6)
	assert.Equal(t, a, b)

	_, _, err = NVLinkRate(0, 6)
	require.ErrorContains(t, err, "0 NVLink links")
	_, _, err = NVLinkRate(18, 8)
	require.ErrorContains(t, err, "NVLink version 8 is not one this suite knows")
	_, _, err = NVLinkRate(18, 0)
	require.ErrorContains(t, err, "NVLink version 0")
}

func TestAtOnce(t *testing.T) {
	var mu sync.Mutex
	var starts []time.Time
	err := AtOnce(3, 30*time.Millisecond, time.Second, time.Second, func(i int, arm func(), stop <-chan struct{}) error {
		time.Sleep(time.Duration(i) * 10 * time.Millisecond) // warm-ups of different lengths
		arm()
		mu.Lock()
		starts = append(starts, time.Now())
		mu.Unlock()
		<-stop
		return nil
	})
	require.NoError(t, err)
	require.Len(t, starts, 3)
	for _, s := range starts[1:] {
		assert.Less(t, s.Sub(starts[0]).Abs(), 10*time.Millisecond, "the timed parts start together")
	}

	err = AtOnce(2, 0, time.Second, time.Second, func(i int, arm func(), stop <-chan struct{}) error {
		if i == 1 {
			return errors.New("warm-up failed")
		}
		arm()
		<-stop
		return nil
	})
	require.EqualError(t, err, "copy loop 1: warm-up failed", "a lane failing before it arms does not hold the others")

	block := make(chan struct{})
	defer close(block)
	err = AtOnce(2, 0, 20*time.Millisecond, time.Second, func(i int, arm func(), stop <-chan struct{}) error {
		if i == 0 {
			<-block // a warm-up that hangs
		}
		arm()
		return nil
	})
	require.ErrorContains(t, err, "1 of 2 copy loops were not ready within 20ms")

	err = AtOnce(1, 0, time.Second, 20*time.Millisecond, func(i int, arm func(), stop <-chan struct{}) error {
		arm()
		<-block // ignores stop
		return nil
	})
	require.ErrorContains(t, err, "1 of 1 copy loops did not stop within 20ms")
}
