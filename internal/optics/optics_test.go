package optics

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/verdict"
)

// testdata: outputs of our own making in the layouts ethtool 6.15 (and, for
// *-legacy, ethtool <= 6.13) and mstflint 4.36's mlxlink print (README.md).
func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	require.NoError(t, err)
	return string(b)
}

func module(t *testing.T, name string) *Module {
	t.Helper()
	m, err := ParseEthtool(read(t, name))
	require.NoError(t, err)
	return m
}

func TestParseEthtoolGood(t *testing.T) {
	m := module(t, "ethtool-m-qsfp28-good.txt")
	assert.Equal(t, "0x11 (QSFP28)", m.Identifier)
	assert.Equal(t, "Mellanox FX-Q28SR4-0100 serial "+m.Serial, m.Part())
	assert.True(t, m.HasDOM())
	assert.False(t, m.Copper())
	assert.Len(t, m.RxMW, 4)
	assert.Equal(t, []int{1, 2, 3, 4}, m.ActiveLanes())
	require.NotNil(t, m.Thresholds["Laser rx power"].LowAlarm)
	assert.InDelta(t, 0.0468, *m.Thresholds["Laser rx power"].LowAlarm, 1e-9)
	assert.Empty(t, JudgeModule(m))
}

// Lane 3 below its low alarm: an alarm naming the lane, its value and the
// module's own threshold; the same data in the pre-6.14 layout agrees.
func TestParseEthtoolRxLow(t *testing.T) {
	for _, f := range []string{"ethtool-m-qsfp28-rx-low.txt", "ethtool-m-qsfp28-rx-low-legacy.txt"} {
		m := module(t, f)
		fs := JudgeModule(m)
		require.Len(t, fs, 1, f)
		assert.Equal(t, Alarm, fs[0].Level)
		assert.Equal(t, "Rx power lane 3 0.021 mW below its low alarm threshold 0.0468 mW", fs[0].Cause, f)
		assert.Equal(t, PartOptic, fs[0].Part, "the engine names the part")
		assert.Equal(t, SrcModule, fs[0].Source)
	}
}

// CMIS OSFP: 8 lanes printed, 4 used; the unused ones (zero, -inf dBm) are
// not judged, so a healthy module has no finding.
func TestParseEthtoolCMIS(t *testing.T) {
	m := module(t, "ethtool-m-cmis-osfp.txt")
	assert.Len(t, m.RxMW, 8)
	assert.Equal(t, []int{1, 2, 3, 4}, m.ActiveLanes())
	assert.Empty(t, JudgeModule(m))
	// A used lane going dark is an alarm even between thresholds.
	m.RxMW[2] = 0
	fs := JudgeModule(m)
	require.Len(t, fs, 1)
	assert.Contains(t, fs[0].Cause, "Rx power lane 2 0 mW")
}

func TestParseEthtoolDACAndUnsupported(t *testing.T) {
	m := module(t, "ethtool-m-dac.txt")
	assert.True(t, m.Copper())
	assert.False(t, m.HasDOM())
	assert.Empty(t, JudgeModule(m))
	for _, f := range []string{"ethtool-m-unsupported.txt", "ethtool-m-unsupported-ioctl.txt"} {
		_, err := ParseEthtool(read(t, f))
		var u *ErrUnsupported
		assert.ErrorAs(t, err, &u, f)
	}
	_, err := ParseEthtool("garbage")
	assert.ErrorContains(t, err, "no module fields")
	f := Unparsed("ethtool -m eth0", err)
	assert.Equal(t, verdict.NotJudged, f.Kind())
	assert.Equal(t, "ethtool -m eth0: "+err.Error(), f.Cause)
	assert.Equal(t, "run ethtool -m by hand", f.Remedy)
}

func TestParseMlxlink(t *testing.T) {
	l := ParseMlxlink(read(t, "mlxlink-good.txt"))
	assert.Equal(t, "Active", l.State, "ANSI colour stripped")
	require.NotNil(t, l.EffectiveBER)
	assert.Zero(t, *l.EffectiveBER, "15E-255 is the firmware's zero")
	assert.Empty(t, JudgeLink(l))

	l = ParseMlxlink(read(t, "mlxlink-high-ber.txt"))
	assert.Equal(t, "FX-OSFP-SR4-400", l.PartNumber)
	fs := JudgeLink(l)
	var alarms, warns []string
	for _, f := range fs {
		if f.Level == Alarm {
			alarms = append(alarms, f.Cause)
		} else {
			warns = append(warns, f.Cause)
		}
	}
	assert.Equal(t, []string{"effective (post-FEC) BER 4e-11 above its ceiling 1e-12"}, alarms)
	assert.Len(t, warns, 2, "link down and recoveries; raw BER 2E-4 is within 2.4E-4: %s", strings.Join(warns, "; "))
}

func TestBER(t *testing.T) {
	for in, want := range map[string]float64{"4E-11": 4e-11, "15E-255": 0, "2E-4": 2e-4, "1e-12": 1e-12} {
		v := ber(in)
		require.NotNil(t, v, in)
		assert.InEpsilon(t, want+1e-300, *v+1e-300, 1e-9, in)
	}
	for _, bad := range []string{"", "N/A", "E-", "-1E-3", "4E-x"} {
		assert.Nil(t, ber(bad), bad)
	}
}

func FuzzParseEthtool(f *testing.F) {
	f.Add("\tIdentifier : 0x11 (QSFP28)\n\tRcvr signal avg optical power(Channel 1) : 0.1 mW / -10 dBm\n")
	f.Fuzz(func(t *testing.T, s string) {
		if m, err := ParseEthtool(s); err == nil {
			_ = JudgeModule(m)
		}
		_ = JudgeLink(ParseMlxlink(s))
	})
}

// A twin-port module shows each port all 8 lanes: with the port's width
// known only its own lanes are judged.
func TestPortLanes(t *testing.T) {
	m := module(t, "ethtool-m-cmis-osfp.txt")
	m.TxMW[6], m.BiasMA[6], m.RxMW[6] = 0.8, 7.0, 0 // the other port's lane, transmitting into a dark fibre
	require.Len(t, JudgeModule(m), 1, "unbounded: lane 6 is judged")
	m.PortLanes = PortWidth("400 Gb/sec (4X NDR)")
	assert.Equal(t, 4, m.PortLanes)
	assert.Empty(t, JudgeModule(m), "lane 6 is not this port's")
	assert.Zero(t, PortWidth("100 Gb/sec"))
	assert.Equal(t, 1, PortWidth("25 Gb/sec (1X EDR)"))
}

// TOPO-10: one failure per NIC, its alarms the evidence and their sources
// once each; warnings only logged.
func TestJudgeNIC(t *testing.T) {
	warn := verdict.Finding{Level: Warning, Cause: "temp high warning", Source: "module"}
	f, w := JudgeNIC("mlx5_0", "0000:01:00.0", "cable/optic X", []verdict.Finding{warn})
	assert.Nil(t, f)
	assert.Equal(t, []verdict.Finding{warn}, w)
	f, w = JudgeNIC("mlx5_0", "0000:01:00.0", "cable/optic X", []verdict.Finding{
		{Level: Alarm, Cause: "rx lane 1 low", Source: "module"}, warn, {Level: Alarm, Cause: "rx lane 2 low", Source: "module"}, {Level: Alarm, Cause: "BER", Source: "link"}})
	require.NotNil(t, f)
	assert.Len(t, w, 1)
	assert.Equal(t, "mlx5_0 (0000:01:00.0) cable/optic X: rx lane 1 low; rx lane 2 low; BER", f.Cause)
	assert.Equal(t, "module; link", f.Source)
	assert.Equal(t, []string{"rx lane 1 low", "rx lane 2 low", "BER"}, f.Evidence)
	assert.Equal(t, "mlx5_0", f.Device)
	assert.Equal(t, PartOptic, f.Part)
	assert.Equal(t, "reseat, clean or replace the cable/optic X; if it persists with a known-good one, check the switch port", f.Remedy)
}
