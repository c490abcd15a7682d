package soak

import (
	"errors"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/counters"
	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/kmsg"
	"github.com/gdrconf/gdrconf/internal/optics"
	model "github.com/gdrconf/gdrconf/internal/soak"
)

var t0 = time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)

func series() *model.Series {
	return &model.Series{Host: "h1", Start: t0, Planned: time.Minute, Interval: 10 * time.Second,
		Rails: []model.Rail{
			{Index: 0, Device: "mlx5_0", Port: 1, PCI: "0000:3c:00.0", GPU: "0000:3b:00.0", Between: []string{"0000:3a:00.0"}},
			{Index: 1, Device: "mlx5_1", Port: 1, PCI: "0000:5e:00.0", GPU: "0000:5d:00.0"},
		},
		GPUs: []model.GPU{{Index: 0, PCI: "0000:3b:00.0"}, {Index: 1, PCI: "0000:5d:00.0"}}}
}

func i64(v int64) *int64     { return &v }
func f64(v float64) *float64 { return &v }
func key(dev, name string) counters.Key {
	return counters.Key{Device: dev, Port: 1, Source: counters.Source("counters"), Name: name}
}

// kernelMatches parses kernel log lines of the real shapes (NVRM's Xid
// line, the AER service driver's "error received") through internal/kmsg.
func kernelMatches(t *testing.T, lines ...string) []kmsg.Match {
	var recs []kmsg.Record
	for i, l := range lines {
		r, err := kmsg.ParseRecord("3," + string(rune('0'+i)) + ",100,-;" + l)
		require.NoError(t, err)
		recs = append(recs, r)
	}
	return kmsg.Scan(recs)
}

// Two samples: rates from bytes over the interval, counters kept only
// where they changed with what rose named, a port that went DOWN and came
// back as events, Xid and AER lines on the rail whose GPU or path they
// name, mlxlink's BERs kept, an unmeasured rail absent.
func TestRecorderSamplesAndEvents(t *testing.T) {
	s := series()
	rec := NewRecorder(s)
	sym, down := key("mlx5_0", "symbol_error"), key("mlx5_0", "link_downed")
	ml := optics.ParseMlxlink("Physical Counters and BER Info\n------\nEffective Physical BER          : 15E-255\nRaw Physical BER                : 4E-11\nSymbol BER                      : 15E-255\nLink Down Counter               : 2\n")
	st := rec.Add(Reading{At: t0.Add(10 * time.Second),
		Rails: []RailReading{
			{Bytes: i64(125e8), State: "ACTIVE", Counters: map[counters.Key]uint64{sym: 5, down: 2}, Link: ml},
			{Bytes: nil, State: "ACTIVE"},
		},
		GPUs: []GPUReading{{SMClockMHz: f64(1980), TempC: f64(45), CopyBytes: i64(500e9)}, {}},
	})
	require.Len(t, st.Sample.Rails, 2)
	assert.InDelta(t, 10.0, *st.Sample.Rails[0].Gbps, 1e-9, "12.5 GB in 10 s")
	assert.Nil(t, st.Sample.Rails[1].Gbps, "not measured: absent, not 0")
	assert.Len(t, st.Sample.Rails[0].Counters, 2, "the first sample keeps every counter")
	assert.Empty(t, st.Rose)
	require.NotNil(t, st.Sample.Rails[0].Link)
	assert.Equal(t, 4e-11, *st.Sample.Rails[0].Link.RawBER)
	assert.InDelta(t, 400.0, *st.Sample.GPUs[0].CopyGbps, 1e-9)
	assert.Empty(t, st.Events)

	st = rec.Add(Reading{At: t0.Add(20 * time.Second),
		Rails: []RailReading{
			{Bytes: i64(5e9), State: "DOWN", Counters: map[counters.Key]uint64{sym: 8, down: 2}},
			{Bytes: i64(125e8), State: "ACTIVE"},
		},
		Kernel: kernelMatches(t,
			"NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=gdr, GPU has fallen off the bus.",
			"pcieport 0000:3a:00.0: AER: Corrected error message received from 0000:3a:00.0",
			"mlx5_core 0000:3c:00.0: mlx5_cmd_out_err:838: QUERY_VPORT_COUNTER(0x770) op_mod(0x0) failed, status bad parameter(0x3)"),
	})
	assert.InDelta(t, 4.0, *st.Sample.Rails[0].Gbps, 1e-9)
	assert.Equal(t, []model.Count{{Key: sym, Value: 8}}, st.Sample.Rails[0].Counters, "only what changed")
	assert.Equal(t, []string{"mlx5_0 port 1 counters/symbol_error +3"}, st.Rose)
	require.Len(t, st.Events, 3, "%+v", st.Events)
	assert.Equal(t, model.LinkDown, st.Events[0].Kind)
	assert.Equal(t, 0, *st.Events[0].Rail)
	assert.Equal(t, "mlx5_0 port 1: DOWN (was ACTIVE)", st.Events[0].Text)
	assert.Equal(t, model.Xid, st.Events[1].Kind)
	assert.Equal(t, 0, *st.Events[1].Rail, "the Xid names rail 0's GPU without its function")
	assert.Contains(t, st.Events[1].Text, "Xid 79")
	assert.Equal(t, model.AER, st.Events[2].Kind)
	assert.Equal(t, 0, *st.Events[2].Rail, "the AER names the switch port between rail 0's GPU and NIC")

	st = rec.Add(Reading{At: t0.Add(30 * time.Second), Rails: []RailReading{{State: "ACTIVE"}, {State: ""}}})
	require.Len(t, st.Events, 1)
	assert.Equal(t, model.LinkUp, st.Events[0].Kind)
	assert.Equal(t, "", st.Sample.Rails[1].State, "unreadable: no event")

	require.NoError(t, s.Validate())
	assert.Len(t, s.Samples, 3)
	assert.Len(t, s.Events, 4)
	assert.Equal(t, t0.Add(30*time.Second), s.End)
	rates := model.Rates(s)
	var symRise uint64
	for _, r := range rates {
		if r.Key == sym {
			symRise = r.Rise
		}
	}
	assert.Equal(t, uint64(3), symRise, "the series' counters read back as rises")
}

// A port not ACTIVE at the first sample is a link down from the start.
func TestRecorderDownAtStart(t *testing.T) {
	rec := NewRecorder(series())
	st := rec.Add(Reading{At: t0.Add(time.Second), Rails: []RailReading{{State: "INIT"}, {State: "ACTIVE"}}})
	require.Len(t, st.Events, 1)
	assert.Equal(t, "mlx5_0 port 1: INIT (was the start)", st.Events[0].Text)
}

func TestProgress(t *testing.T) {
	s := series()
	s.Planned = 2 * time.Hour
	st := Step{Sample: model.Sample{Rails: []model.RailSample{{Gbps: f64(92.126), State: "ACTIVE"}, {State: "DOWN"}},
		GPUs: []model.GPUSample{{CopyGbps: f64(400), SMClockMHz: f64(1980), TempC: f64(61)}, {}}},
		Rose:   []string{"mlx5_1 port 1 counters/link_downed +1"},
		Events: []model.Event{{Kind: model.LinkDown, Text: "mlx5_1 port 1: DOWN (was ACTIVE)"}}}
	assert.Equal(t, "soak 10m0s of 2h0m0s, 1h50m0s left: rail0 mlx5_0 92.13 Gb/s; rail1 mlx5_1 not measured (DOWN); gpu0 copy 400.00 Gb/s 1980 MHz 61 C;"+
		" rose: mlx5_1 port 1 counters/link_downed +1; link_down: mlx5_1 port 1: DOWN (was ACTIVE)",
		Progress(s, st, t0.Add(10*time.Minute)))
}

// Loop samples every interval to the end, saves after every sample and
// logs a line per sample.
func TestLoopRunsItsDuration(t *testing.T) {
	s := series()
	s.Start, s.Planned, s.Interval = time.Now(), 250*time.Millisecond, 50*time.Millisecond
	var saves, links int
	var lines []string
	err := Loop(s, NewRecorder(s), Sources{
		Read: func(at time.Time, withLink bool) Reading {
			if withLink {
				links++
			}
			return Reading{At: at, Rails: []RailReading{{Bytes: i64(1000), State: "ACTIVE"}, {Bytes: i64(1000), State: "ACTIVE"}}}
		},
		Save: func(*model.Series) error { saves++; return nil },
		Log:  func(l string) { lines = append(lines, l) },
	}, NewCutter(), time.Hour)
	require.NoError(t, err)
	assert.Len(t, s.Samples, 5)
	assert.Equal(t, 5, saves, "saved after every sample")
	assert.Len(t, lines, 5)
	assert.Equal(t, 1, links, "mlxlink once: its cadence is longer than the run")
	assert.Empty(t, s.Cut)
	assert.False(t, s.End.Before(s.Start.Add(s.Planned)))
}

// SIGTERM (Slurm, Kubernetes) cuts the soak: the sample at the cut is
// taken, the series says why and is saved, and the process lives on.
func TestLoopCutBySIGTERM(t *testing.T) {
	s := series()
	s.Start, s.Planned, s.Interval = time.Now(), time.Hour, 20*time.Millisecond
	cut := WatchSignals()
	defer cut.Stop()
	var saved *model.Series
	n := 0
	err := Loop(s, NewRecorder(s), Sources{
		Read: func(at time.Time, _ bool) Reading {
			n++
			if n == 3 {
				require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
			}
			return Reading{At: at, Rails: []RailReading{{State: "ACTIVE"}, {State: "ACTIVE"}}}
		},
		Save: func(x *model.Series) error { saved = x; return nil },
		Log:  func(string) {},
	}, cut, time.Hour)
	require.NoError(t, err)
	assert.Contains(t, s.Cut, "SIGTERM")
	require.NotNil(t, saved)
	assert.Equal(t, s.Cut, saved.Cut)
	last := s.Events[len(s.Events)-1]
	assert.Equal(t, model.Cut, last.Kind)
	assert.Contains(t, last.Text, "soak cut after")
	assert.GreaterOrEqual(t, len(s.Samples), 3)
	assert.Less(t, s.Duration(), time.Minute)
}

// A save that fails is said once and the soak goes on to its end.
func TestLoopSaveError(t *testing.T) {
	s := series()
	s.Start, s.Planned, s.Interval = time.Now(), 60*time.Millisecond, 20*time.Millisecond
	var lines []string
	err := Loop(s, NewRecorder(s), Sources{
		Read: func(at time.Time, _ bool) Reading { return Reading{At: at} },
		Save: func(*model.Series) error { return os.ErrPermission },
		Log:  func(l string) { lines = append(lines, l) },
	}, NewCutter(), time.Hour)
	assert.ErrorIs(t, err, os.ErrPermission)
	assert.Len(t, s.Samples, 3)
	assert.Contains(t, lines[0], "writing the series failed")
}

func TestCutterFirstReasonWins(t *testing.T) {
	c := NewCutter()
	assert.Empty(t, c.Reason())
	c.Cut("the peer left")
	c.Cut("SIGINT")
	<-c.Done()
	assert.Equal(t, "the peer left", c.Reason())
	assert.Contains(t, SignalReason(os.Interrupt), "SIGINT")
}

// A load's bytes are read per interval; a loop that ended on an error is
// not measured afterwards (absent, not 0 Gb/s) and is named when stopped.
func TestLoadTakeAndStop(t *testing.T) {
	l := newLoad([]string{"rail0 mlx5_0", "rail1 mlx5_1"})
	started := make(chan struct{})
	l.start(0, func(stop <-chan struct{}, moved *atomic.Int64) error {
		moved.Add(1 << 20)
		close(started)
		<-stop
		return nil
	})
	l.start(1, func(stop <-chan struct{}, moved *atomic.Int64) error {
		return errors.New("work completion: transport retry counter exceeded")
	})
	<-started
	require.NotNil(t, l.take(0))
	assert.Equal(t, int64(0), *l.take(0), "nothing moved since: 0, measured")
	require.Eventually(t, func() bool { return l.dead[1].Load() != nil }, time.Second, time.Millisecond)
	assert.Nil(t, l.take(1), "its loop ended: not measured")
	done := newLoad([]string{"rail2 mlx5_2"})
	done.start(0, func(<-chan struct{}, *atomic.Int64) error { return nil }) // the peer ended the rounds
	require.Eventually(t, func() bool { return done.ended[0].Load() }, time.Second, time.Millisecond)
	assert.Nil(t, done.take(0), "a loop that ended cleanly is not measured either")
	assert.Empty(t, done.Stop(time.Second))

	probs := l.Stop(time.Second)
	assert.Equal(t, []string{"rail1 mlx5_1: the load stopped: work completion: transport retry counter exceeded"}, probs)

	stuck := newLoad([]string{"GPU 0000:3b:00.0"})
	release := make(chan struct{})
	defer close(release)
	stuck.start(0, func(<-chan struct{}, *atomic.Int64) error { <-release; return nil })
	probs = stuck.Stop(10 * time.Millisecond)
	require.Len(t, probs, 1)
	assert.Contains(t, probs[0], "did not stop within 10ms")
}

// The reader on the lab's recorded rxe tree (fixtures/counters): the
// port's state and its 15 hw_counters per sample, no mlxlink (a software
// NIC has no PCI function), the rail load's bytes; no /dev/kmsg under the
// root is said, not fatal.
func TestReaderOnRecordedRXE(t *testing.T) {
	root, err := hostfs.New("../../fixtures/counters/rxe-6.1-server")
	require.NoError(t, err)
	s := &model.Series{Start: t0, Planned: time.Minute, Interval: 10 * time.Second, Rails: []model.Rail{{Index: 0, Device: "rxe0", Port: 1}}}
	rl := newLoad([]string{"rail0 rxe0"})
	rl.moved[0].Store(4 << 20)
	rd := newReader(root, s, rl, nil)
	defer rd.close()
	assert.Contains(t, rd.kmsgWhy, "kernel log not watched")
	x := rd.read(t0.Add(10*time.Second), true)
	require.Len(t, x.Rails, 1)
	assert.Equal(t, "ACTIVE", x.Rails[0].State)
	assert.Len(t, x.Rails[0].Counters, 15)
	assert.Equal(t, uint64(191), x.Rails[0].Counters[counters.Key{Device: "rxe0", Port: 1, Source: counters.HW, Name: "completer_retry_err"}])
	assert.Nil(t, x.Rails[0].Link, "no PCI function: no mlxlink")
	require.NotNil(t, x.Rails[0].Bytes)
	assert.Equal(t, int64(4<<20), *x.Rails[0].Bytes)
	assert.Empty(t, x.GPUs, "no GPU load")
	st := NewRecorder(s).Add(x)
	assert.Len(t, st.Sample.Rails[0].Counters, 15)
}

// A rail whose loop ended on an error: the load says why, take gives
// nothing (not measured), and the recorder turns the why into one
// traffic_stopped event on that rail, however many samples repeat it.
func TestRecorderTrafficStopped(t *testing.T) {
	l := newLoad([]string{"rail0 mlx5_0", "rail1 mlx5_1"})
	l.start(0, func(stop <-chan struct{}, moved *atomic.Int64) error { <-stop; return nil })
	l.start(1, func(_ <-chan struct{}, moved *atomic.Int64) error {
		moved.Add(1000)
		return errors.New("transport retry counter exceeded")
	})
	require.Eventually(t, func() bool { return l.ended[1].Load() }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, int64(1000), *l.take(1), "what it moved before it ended counts")
	assert.Nil(t, l.take(1), "nothing after it ended: not measured")
	why := l.dead[1].Load()
	require.NotNil(t, why)
	assert.Equal(t, "rail1 mlx5_1: the load stopped: transport retry counter exceeded", *why)

	s := series()
	rec := NewRecorder(s)
	for k := 1; k <= 3; k++ {
		rec.Add(Reading{At: t0.Add(time.Duration(k) * 10 * time.Second), Rails: []RailReading{{Bytes: i64(1), State: "ACTIVE"}, {State: "ACTIVE", Stopped: *why}}})
	}
	require.Len(t, s.Events, 1)
	e := s.Events[0]
	assert.Equal(t, model.Stopped, e.Kind)
	assert.Equal(t, 1, *e.Rail)
	assert.Equal(t, t0.Add(10*time.Second), e.At)
	assert.Equal(t, "mlx5_1", e.Device)
	assert.Contains(t, e.Text, "transport retry counter exceeded")
	assert.Equal(t, []string{*why}, l.Stop(time.Second), "Stop says it again for the log")
}
