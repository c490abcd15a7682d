package lab

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The emulated-GPU verdict looks at subtests: per-rail tests carry gdr.mem
// on "rail0", and a silent fallback to host memory is caught there.
func TestEmulatedVerdict(t *testing.T) {
	run := func(mem string) []string {
		var evs []Event
		for _, id := range emulatedMust(PingpongPkg) {
			name := "TestX" + strings.ReplaceAll(id, "-", "")
			evs = append(evs,
				Event{Action: "attr", Test: name, Key: "gdr.req", Value: id},
				Event{Action: "attr", Test: name + "/rail0", Key: "gdr.mem", Value: mem},
				Event{Action: "pass", Test: name + "/rail0"},
				Event{Action: "pass", Test: name})
		}
		p, _ := EmulatedVerdict([]*Suite{{Host: "server", Pkg: PingpongPkg, Events: evs}})
		return p
	}
	assert.Empty(t, run("gpu-emulated"))
	// HLTH tests move no data: they pass without gdr.mem.
	hl := []Event{{Action: "attr", Test: "TestHLTH01TrafficCounters", Key: "gdr.req", Value: "HLTH-01"},
		{Action: "pass", Test: "TestHLTH01TrafficCounters/rail0"}, {Action: "pass", Test: "TestHLTH01TrafficCounters"}}
	p, _ := EmulatedVerdict([]*Suite{{Host: "server", Pkg: PingpongPkg, Events: hl}})
	assert.NotContains(t, strings.Join(p, "\n"), "HLTH-01")
	p = run("host")
	assert.NotEmpty(t, p)
	assert.Contains(t, strings.Join(p, "\n"), `TestXPP03/rail0 (PP-03) passed on gdr.mem="host", not on the emulated GPU`)
	// A requirement that never passed is named.
	p, _ = EmulatedVerdict([]*Suite{{Host: "client", Pkg: PingpongPkg}})
	assert.Contains(t, strings.Join(p, "\n"), "PP-01 did not pass on the emulated GPU")
}
