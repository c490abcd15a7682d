package lab

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The emulated-GPU verdict looks at subtests: per-rail tests carry gdr.mem
// on "rail0", and a silent fallback to host memory is caught there.
func TestEmulatedVerdict(t *testing.T) {
	runVMM := func(mem string, vmm bool) []string {
		var evs []Event
		for _, id := range emulatedMust(PingpongPkg) {
			name := "TestX" + strings.ReplaceAll(id, "-", "")
			evs = append(evs,
				Event{Action: "attr", Test: name, Key: "gdr.req", Value: id},
				Event{Action: "attr", Test: name + "/rail0", Key: "gdr.mem", Value: mem},
				Event{Action: "attr", Test: name + "/rail0", Key: "gdr.gpu_alloc", Value: "cuMemAlloc"},
				Event{Action: "pass", Test: name + "/rail0"})
			if vmm && vmmReqs[id] {
				leaf := name + "/cuMemCreate/rail0"
				evs = append(evs,
					Event{Action: "attr", Test: leaf, Key: "gdr.mem", Value: mem},
					Event{Action: "attr", Test: leaf, Key: "gdr.gpu_alloc", Value: "cuMemCreate"},
					Event{Action: "pass", Test: leaf}, Event{Action: "pass", Test: name + "/cuMemCreate"})
			}
			evs = append(evs, Event{Action: "pass", Test: name})
		}
		p, notes := EmulatedVerdict([]*Suite{{Host: "server", Pkg: PingpongPkg, Events: evs}})
		if vmm && len(p) == 0 {
			assert.Contains(t, strings.Join(notes, "\n"), "; PP-04, PP-05 also on cuMemCreate memory (NCCL's allocator)")
		}
		return p
	}
	run := func(mem string) []string { return runVMM(mem, true) }
	assert.Empty(t, run("gpu-emulated"))
	_, notes := EmulatedVerdict([]*Suite{{Host: "server", Pkg: PingpongPkg}})
	assert.NotContains(t, strings.Join(notes, "\n"), "cuMemCreate", "no cuMemCreate case passed: none claimed")
	// PP-04/PP-05 must also have run on cuMemCreate memory.
	novmm := strings.Join(runVMM("gpu-emulated", false), "\n")
	assert.Contains(t, novmm, "TestXPP04 (PP-04) passed, but none of its cuMemCreate cases passed on gdr.mem=gpu-emulated")
	assert.Contains(t, novmm, "TestXPP05 (PP-05) passed")
	assert.NotContains(t, novmm, "PP-03", "PP-03 has no cuMemCreate case")
	// HLTH tests move no data: they pass without gdr.mem.
	hl := []Event{{Action: "attr", Test: "TestHLTH01TrafficCounters", Key: "gdr.req", Value: "HLTH-01"},
		{Action: "pass", Test: "TestHLTH01TrafficCounters/rail0"}, {Action: "pass", Test: "TestHLTH01TrafficCounters"}}
	p, _ := EmulatedVerdict([]*Suite{{Host: "server", Pkg: PingpongPkg, Events: hl}})
	assert.NotContains(t, strings.Join(p, "\n"), "HLTH-01")
	p = run("host")
	assert.NotEmpty(t, p)
	assert.Contains(t, strings.Join(p, "\n"), `TestXPP03/rail0 (PP-03) passed on gdr.mem="host", not on the emulated GPU`)
	// A parent whose cases all skipped (MREG-04 on rxe: no dma-buf MRs)
	// skipped: no "passed but not on the GPU", and it counts as no pass.
	mr := []Event{{Action: "attr", Test: "TestMREG04Dmabuf", Key: "gdr.req", Value: "MREG-04"},
		{Action: "skip", Test: "TestMREG04Dmabuf/cuMemAlloc"}, {Action: "skip", Test: "TestMREG04Dmabuf/cuMemCreate"},
		{Action: "pass", Test: "TestMREG04Dmabuf"}}
	p, _ = EmulatedVerdict([]*Suite{{Host: "server", Pkg: "conformance/memreg", Events: mr}})
	assert.NotContains(t, strings.Join(p, "\n"), "MREG-04", "all cases skipped: a skip")
	// A requirement that never passed is named.
	p, _ = EmulatedVerdict([]*Suite{{Host: "client", Pkg: PingpongPkg}})
	assert.Contains(t, strings.Join(p, "\n"), "PP-01 did not pass on the emulated GPU")
}
