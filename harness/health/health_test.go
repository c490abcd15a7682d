package health

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/counters"
	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

func key(dev string, src counters.Source, group, name string) counters.Key {
	port := 1
	if src == counters.AER {
		port = 0
	}
	return counters.Key{Device: dev, Port: port, Source: src, Group: group, Name: name}
}

// A window over the recorded rxe tree (fixtures/counters) against a later
// reading with loss: the loss counters fail naming counter, device, delta,
// cause and the test; the emulation-timer retries warn; traffic is a delta.
func TestOutcome(t *testing.T) {
	r, err := hostfs.New("../../fixtures/counters/rxe-6.1-server")
	require.NoError(t, err)
	base := counters.Take(r, []counters.PortRef{{Device: "rxe0", Port: 1}}, nil)
	require.Empty(t, base.Problems)
	require.Len(t, base.Values, 15)

	after := &counters.Snapshot{Taken: base.Taken.Add(40 * time.Second), Values: map[counters.Key]uint64{}}
	for k, v := range base.Values {
		after.Values[k] = v
	}
	oos := key("rxe0", counters.HW, "", "out_of_seq_request")
	retry := key("rxe0", counters.HW, "", "completer_retry_err")
	pkts := key("rxe0", counters.HW, "", "rcvd_pkts")
	after.Values[oos] += 41
	after.Values[retry] += 7
	after.Values[pkts] += 100000

	rose := map[counters.Key][]string{oos: {"TestPP08Bandwidth/rail0/WRITE/65536 +30", "TestPP05Read/rail0 +11"}}
	o := Outcome(counters.Diff(base, after), map[string]bool{"rxe0": true}, rose)
	assert.Equal(t, []string{"rxe0 port 1 hw_counters/completer_retry_err +7", "rxe0 port 1 hw_counters/out_of_seq_request +41",
		"rxe0 port 1 hw_counters/rcvd_pkts +100000"}, o.Deltas)
	fails, warns := o.Of(verdict.Fail), o.Of(verdict.Warn)
	require.Len(t, fails, 1)
	for _, want := range []string{"rxe0 port 1 hw_counters/out_of_seq_request rose by 41", "a packet was lost", "retransmission",
		"rose during: TestPP08Bandwidth/rail0/WRITE/65536 +30, TestPP05Read/rail0 +11"} {
		assert.Contains(t, fails[0].Cause, want)
	}
	assert.Contains(t, fails[0].Remedy, "packets were lost")
	assert.Equal(t, "rxe0", fails[0].Device)
	assert.Equal(t, counters.PartPath, fails[0].Part, "a lost packet points at the path between the hosts")
	assert.NotContains(t, fails[0].Cause, "remedy")
	require.Len(t, warns, 1)
	assert.Contains(t, warns[0].Cause, "completer_retry_err rose by 7")
	assert.Contains(t, warns[0].Cause, "rose during: between tests")

	// Nothing rose: nothing fails, nothing warns.
	o = Outcome(counters.Diff(base, base), map[string]bool{"rxe0": true}, nil)
	assert.Empty(t, o.Deltas)
	assert.Empty(t, o.Findings)
}
