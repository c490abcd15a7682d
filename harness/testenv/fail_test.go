package testenv

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/gdrconf/gdrconf/internal/verdict"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recTB is a test whose attributes, messages and end the helpers' tests
// read: attributes in the order written, so a key written twice shows.
type recTB struct {
	fakeTB
	order   []string // "key=value" and "fatal: msg" / "error: msg", as they came
	fatal   bool
	skipped bool
	logs    []string
}

func newRec(t *testing.T) *recTB {
	return &recTB{fakeTB: fakeTB{T: t, attrs: map[string]string{}}}
}

func (r *recTB) Attr(k, v string) {
	r.attrs[k] = v
	r.order = append(r.order, k+"="+v)
}
func (r *recTB) Errorf(format string, a ...any) {
	r.order = append(r.order, "error: "+fmt.Sprintf(format, a...))
}
func (r *recTB) Fatalf(format string, a ...any) {
	r.order = append(r.order, "fatal: "+fmt.Sprintf(format, a...))
	r.fatal = true
	runtime.Goexit()
}
func (r *recTB) Helper() {}
func (r *recTB) Logf(format string, a ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, a...))
}
func (r *recTB) Skip(a ...any) {
	r.order = append(r.order, "skip: "+fmt.Sprint(a...))
	r.skipped = true
	runtime.Goexit()
}

// run calls fn as a test body: a Fatalf ends fn only; then the cleanups run.
func (r *recTB) run(fn func(t testing.TB)) {
	done := make(chan struct{})
	go func() { defer close(done); fn(r) }()
	<-done
	r.runCleanups()
}

// keys counts how often each key was written.
func (r *recTB) keys() map[string]int {
	n := map[string]int{}
	for k := range r.attrs {
		for _, o := range r.order {
			if len(o) > len(k) && o[:len(k)+1] == k+"=" {
				n[k]++
			}
		}
	}
	return n
}

func TestFailfRecordsCauseBeforeItStops(t *testing.T) {
	r := newRec(t)
	r.run(func(t testing.TB) {
		Failf(t, "reseat the card", "GPU %s: link trained to x4 of x16", "0000:3b:00.0")
		t.Errorf("not reached")
	})
	require.True(t, r.fatal)
	assert.Equal(t, []string{
		"gdr.outcome=fell_short",
		"gdr.cause=GPU 0000:3b:00.0: link trained to x4 of x16",
		"gdr.remedy=reseat the card",
		// The line people read is today's.
		"fatal: GPU 0000:3b:00.0: link trained to x4 of x16; remedy: reseat the card",
	}, r.order)
}

func TestFailRecordsWhatWasJudged(t *testing.T) {
	r := newRec(t)
	r.run(func(t testing.TB) {
		Fail(t, verdict.Finding{Cause: "WRITE bandwidth at 65536 B is 10.00 Gb/s, below the 75.00 Gb/s floor", Remedy: "check the link",
			Measured: "bw_gbit_s", Threshold: "gdr.min_bw_gbit_s", Source: "75% of the 100 Gb/s port rate"})
	})
	assert.Equal(t, "gdr.bw_gbit_s", r.attrs["gdr.measured"], "the key, with its prefix")
	assert.Equal(t, "gdr.min_bw_gbit_s", r.attrs["gdr.threshold"])
	assert.Equal(t, "75% of the 100 Gb/s port rate", r.attrs["gdr.threshold_source"])
	assert.Equal(t, "fatal: WRITE bandwidth at 65536 B is 10.00 Gb/s, below the 75.00 Gb/s floor; remedy: check the link", r.order[len(r.order)-1])
}

// A test that reports every offender keeps the first cause and counts them all.
func TestErrorfKeepsTheFirstCauseAndCounts(t *testing.T) {
	r := newRec(t)
	r.run(func(t testing.TB) {
		Errorf(t, "enable ACS", "bridge %s: ACS off", "0000:00:01.0")
		Errorf(t, "enable ACS", "bridge %s: ACS off", "0000:00:02.0")
		NotJudgedf(t, "", "peer vanished")
	})
	assert.Equal(t, "bridge 0000:00:01.0: ACS off", r.attrs["gdr.cause"])
	assert.Equal(t, "fell_short", r.attrs["gdr.outcome"], "the first failure's outcome")
	assert.Equal(t, "3", r.attrs["gdr.failures_count"])
	for k, n := range r.keys() {
		assert.Equal(t, 1, n, "%s written once", k)
	}
	assert.Contains(t, r.order, "error: bridge 0000:00:02.0: ACS off; remedy: enable ACS")
	assert.Equal(t, "fatal: peer vanished", r.order[len(r.order)-2], "no remedy: the cause alone")

	// One failure: no count.
	r = newRec(t)
	r.run(func(t testing.TB) { Errorf(t, "x", "y") })
	assert.NotContains(t, r.attrs, "gdr.failures_count")
}

func TestStopOutcomes(t *testing.T) {
	for _, c := range []struct {
		err           error
		outcome, line string
		remedy        string
	}{
		{&verdict.Finding{Cause: "x4 of x16", Remedy: "reseat", Measured: "gdr.link_width_lanes"}, "fell_short", "x4 of x16; remedy: reseat", "reseat"},
		// A wrapper's words stay in the cause; the remedy is the finding's.
		{fmt.Errorf("wrapped: %w", verdict.NotJudgedf("install pciutils", "lspci exited 1")), "not_judged", "wrapped: lspci exited 1; remedy: install pciutils", "install pciutils"},
		// An error the engine did not classify: the suite could not judge.
		{errors.New("parse /sys/bus/pci/devices/0000:3b:00.0/config: short read"), "not_judged", "parse /sys/bus/pci/devices/0000:3b:00.0/config: short read", ""},
	} {
		r := newRec(t)
		r.run(func(t testing.TB) { Stop(t, c.err) })
		assert.True(t, r.fatal, "%v", c.err)
		assert.Equal(t, c.outcome, r.attrs["gdr.outcome"], "%v", c.err)
		assert.Equal(t, c.remedy, r.attrs["gdr.remedy"], "%v", c.err)
		assert.Equal(t, "fatal: "+c.line, r.order[len(r.order)-1])
	}
	r := newRec(t)
	r.run(func(t testing.TB) { Stop(t, nil) })
	assert.Empty(t, r.order)
}

func TestReqUnknownIsNotJudged(t *testing.T) {
	r := newRec(t)
	r.run(func(t testing.TB) { Req(t, "NOPE-99") })
	assert.Equal(t, "not_judged", r.attrs["gdr.outcome"])
	assert.Equal(t, "suite bug: requirement NOPE-99 is not in internal/reqs", r.attrs["gdr.cause"])
}

// An absence carries its remedy as a field, skipped or failed: the report
// never has to find it in the message.
func TestAbsentRecordsItsRemedy(t *testing.T) {
	r := newRec(t)
	r.run(func(t testing.TB) {
		Absent(t, "load the NIC's RDMA driver", "no RDMA device under %s", "/sys/class/infiniband")
	})
	assert.True(t, r.skipped)
	assert.Equal(t, "no RDMA device under /sys/class/infiniband", r.attrs["gdr.skip"], "the reason, as before")
	assert.Equal(t, "absent", r.attrs["gdr.outcome"])
	assert.Equal(t, "load the NIC's RDMA driver", r.attrs["gdr.remedy"])
	assert.Equal(t, "skip: no RDMA device under /sys/class/infiniband; remedy: load the NIC's RDMA driver", r.order[len(r.order)-1])
	f, ok := verdict.FromAttrs(r.attrs)
	require.True(t, ok)
	assert.Equal(t, verdict.Finding{Outcome: verdict.Absent, Cause: "no RDMA device under /sys/class/infiniband", Remedy: "load the NIC's RDMA driver"}, f)
}

func TestAbsentUnderStrictFails(t *testing.T) {
	// The configuration is loaded once: load it here with GDR_STRICT=1,
	// and again from scratch for the tests after this one.
	loadOnce = sync.Once{}
	t.Cleanup(func() { loadOnce = sync.Once{} })
	t.Setenv("GDR_STRICT", "1")
	r := newRec(t)
	r.run(func(t testing.TB) {
		Absent(t, "load the NIC's RDMA driver", "no RDMA device under /sys/class/infiniband")
	})
	assert.True(t, r.fatal)
	assert.Equal(t, "absent", r.attrs["gdr.outcome"], "absent, not fell short: it names no part")
	assert.Equal(t, "GDR_STRICT=1: no RDMA device under /sys/class/infiniband", r.attrs["gdr.cause"])
	assert.Equal(t, "load the NIC's RDMA driver", r.attrs["gdr.remedy"])
	assert.Equal(t, "fatal: GDR_STRICT=1: no RDMA device under /sys/class/infiniband; remedy: load the NIC's RDMA driver", r.order[len(r.order)-1])
}

// Record takes an engine's findings in one call: facts and warnings are
// logged (warnings also in gdr.warning), failures recorded, the first one's
// attributes kept.
func TestRecordFindings(t *testing.T) {
	r := newRec(t)
	r.run(func(t testing.TB) {
		Record(t,
			verdict.Finding{Level: verdict.Info, Cause: "MaxPayload 256 B"},
			verdict.Finding{Level: verdict.Warn, Cause: "Relaxed Ordering off", Remedy: "enable it"},
			verdict.Finding{Cause: "x4 of x16", Remedy: "reseat", Device: "0000:3b:00.0", Part: "pcie link", Evidence: []string{"LnkSta x4"}},
			verdict.Finding{Cause: "x8 of x16", Device: "0000:3c:00.0"},
		)
	})
	assert.False(t, r.fatal, "Record does not stop the test")
	assert.Contains(t, r.logs, "MaxPayload 256 B")
	assert.Contains(t, r.logs, "WARNING: Relaxed Ordering off; remedy: enable it")
	assert.Equal(t, "Relaxed Ordering off; remedy: enable it", r.attrs["gdr.warning"])
	assert.Equal(t, "x4 of x16", r.attrs["gdr.cause"])
	assert.Equal(t, "0000:3b:00.0", r.attrs["gdr.device"])
	assert.Equal(t, "pcie link", r.attrs["gdr.part_kind"])
	assert.Equal(t, "LnkSta x4", r.attrs["gdr.evidence"])
	assert.Equal(t, "2", r.attrs["gdr.failures_count"])
	assert.Contains(t, r.order, "error: x8 of x16")
}

// A host-only requirement's skip stays a skip under GDR_STRICT=1 and
// carries gdr.host_only; any other requirement cannot end that way.
func TestHostOnlyINST14(t *testing.T) {
	loadOnce = sync.Once{}
	t.Cleanup(func() { loadOnce = sync.Once{} })
	t.Setenv("GDR_STRICT", "1")
	r := newRec(t)
	r.run(func(tb testing.TB) { HostOnly(tb, "INST-14", "run on the host") })
	assert.False(t, r.fatal, "not a failure under strict")
	assert.Contains(t, r.attrs["gdr.skip"], "not judgeable from a container: run on the host")
	assert.NotEmpty(t, r.attrs["gdr.host_only"])
	assert.True(t, r.skipped)

	r = newRec(t)
	r.run(func(tb testing.TB) { HostOnly(tb, "TOPO-03", "x") })
	assert.True(t, r.fatal)
	assert.Contains(t, r.attrs["gdr.cause"], "suite bug: TOPO-03 has no host-only rule")
}
