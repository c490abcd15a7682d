package verdict

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gdrconf/gdrconf/internal/attrkey"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Finding is an error whose text is its cause: the remedy is a field, so
// a wrapper's text never carries it and nothing has to cut it out.
func TestFindingIsAnErrorWithItsCause(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", Failf("reseat the card", "x4 of x16"))
	f, ok := As(err)
	require.True(t, ok)
	assert.Equal(t, "wrapped: x4 of x16", err.Error())
	assert.Equal(t, "reseat the card", f.Remedy)
	assert.Equal(t, FellShort, f.Kind())
	assert.Equal(t, "x4 of x16; remedy: reseat the card", f.Line())

	assert.True(t, IsAbsent(fmt.Errorf("probe: %w", Absentf("load ib_uverbs", "no RDMA device"))))
	assert.False(t, IsAbsent(err))
	assert.False(t, IsAbsent(errors.New("no RDMA device")), "text is never read")
	_, ok = As(errors.New("x"))
	assert.False(t, ok)
}

// Of is how a test records an engine's error: the finding with the whole
// message as its cause, or not judged when no engine classified it.
func TestOf(t *testing.T) {
	assert.Nil(t, Of(nil))
	f := Of(fmt.Errorf("lspci: %w", NotJudgedf("install pciutils", "exit 1")))
	assert.Equal(t, Finding{Outcome: NotJudged, Cause: "lspci: exit 1", Remedy: "install pciutils"}, *f)
	f = Of(errors.New("short read"))
	assert.Equal(t, Finding{Outcome: NotJudged, Cause: "short read"}, *f)
	assert.Equal(t, FellShort, Finding{}.Kind(), "the zero outcome fell short")
}

// The wire format: what testenv writes the report reads back, field for
// field; older recordings read as they were meant.
func TestAttrsRoundTrip(t *testing.T) {
	f := Finding{Outcome: FellShort, Device: "0000:3b:00.0", Rule: "mps-path", Cause: "x4 of x16", Remedy: "reseat",
		Measured: "link_width_lanes", Threshold: "gdr.min_link_width_lanes", Source: "the device's LnkCap",
		Evidence: []string{"LnkSta x4", "LnkCap x16"}, Part: "pcie link"}
	own := map[string]string{}
	for _, a := range f.Attrs() {
		_, dup := own[a.Key]
		assert.False(t, dup, a.Key)
		own[a.Key] = a.Value
	}
	assert.Equal(t, "gdr.link_width_lanes", own[KeyMeasured], "keys get their prefix")
	back, ok := FromAttrs(own)
	require.True(t, ok)
	f.Measured = "gdr.link_width_lanes"
	assert.Equal(t, f, back)

	// An empty field is absent, never "".
	for _, a := range (Finding{Cause: "c"}).Attrs() {
		assert.NotEmpty(t, a.Value, a.Key)
	}

	_, ok = FromAttrs(map[string]string{"gdr.req": "PP-01"})
	assert.False(t, ok, "a passing test recorded no finding")

	// A skip: absent, its reason the cause, its remedy when recorded.
	back, _ = FromAttrs(map[string]string{KeySkip: "no RDMA device", KeyRemedy: "load ib_uverbs"})
	assert.Equal(t, Finding{Outcome: Absent, Cause: "no RDMA device", Remedy: "load ib_uverbs"}, back)
	// Before gdr.outcome: fell short.
	back, _ = FromAttrs(map[string]string{KeyCause: "x"})
	assert.Equal(t, FellShort, back.Outcome)
	// Before outcome "absent": an absence failed under GDR_STRICT=1.
	back, _ = FromAttrs(map[string]string{KeyCause: "GDR_STRICT=1: no GPU", KeyOutcome: "fell_short", KeyStrictAbsent: "no GPU"})
	assert.Equal(t, Absent, back.Outcome)
	assert.False(t, back.Outcome.Judged())
}

// The keys a finding travels as follow the suite's key rule (literal
// keys elsewhere are checked where they are written: internal/attrkey).
func TestKeysFollowTheRule(t *testing.T) {
	for _, k := range []string{KeyOutcome, KeyCause, KeyRemedy, KeyMeasured, KeyThreshold, KeySource, KeyDevice,
		KeyRule, KeyEvidence, KeyPart, KeySkip, KeyStrictAbsent} {
		assert.NoError(t, attrkey.Check(k), k)
	}
}
