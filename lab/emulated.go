package lab

import (
	"fmt"
	"sort"
	"strings"

	"github.com/jstemmer/go-junit-report/v2/gtr"

	"github.com/gdrconf/gdrconf/internal/reqs"
	"github.com/gdrconf/gdrconf/report"
)

// HostMemSuffix marks the hosts of the lab's host-memory pingpong run
// (server-hostmem, client-hostmem) when the other runs use the emulated GPU.
const HostMemSuffix = "-hostmem"

// emulatedMust are the requirements of package pkg that the emulated GPU
// must pass in the lab (reqs.Req.EmulatedMust): on it, the GPU data path
// runs for real against rxe. dma-buf is not among them: rxe has no dma-buf
// MRs and the lab kernel no udmabuf.
func emulatedMust(pkg string) []string {
	var ids []string
	for _, r := range reqs.All() {
		if r.EmulatedMust && "conformance/"+r.Area == pkg {
			ids = append(ids, r.ID)
		}
	}
	return ids
}

// vmmReqs are the requirements whose data checks run on cuMemCreate memory
// too (NCCL's allocator: pingpong runVMM, memreg gpumr.EachAlloc). The
// emulated GPU emulates that memory, so in the lab one of each one's
// cuMemCreate cases must pass on it.
var vmmReqs = map[string]bool{"PP-04": true, "PP-05": true, "MREG-03": true, "MREG-05": true}

// EmulatedVerdict checks that the runs with the emulated GPU installed
// really moved data through emulated GPU memory: every listed requirement
// passed on every host that ran its package, and pingpong's and memreg's
// data tests say gdr.mem=gpu-emulated (a silent fallback to host memory
// would prove nothing). It returns the problems and the notes for the
// summary (what ran emulated, what the lab cannot prove).
func EmulatedVerdict(suites []*Suite) (problems, notes []string) {
	ran := map[string]int{}
	vmmRan := map[string]bool{} // requirement -> a cuMemCreate case passed
	for _, s := range suites {
		must := emulatedMust(s.Pkg)
		if len(must) == 0 || strings.HasSuffix(s.Host, HostMemSuffix) {
			continue
		}
		passed := map[string]bool{}
		onGPU := map[string]bool{} // top-level test -> it or a subtest ran on gpu-emulated
		onVMM := map[string]bool{} // top-level test -> a cuMemCreate case of it did
		// A run of a suite that names no allocator anywhere (recorded
		// before gdr.gpu_alloc) had no cuMemCreate cases to demand.
		named := false
		var top []*report.Case
		for _, t := range s.Tests() {
			if t.Own["gdr.gpu_alloc"] != "" {
				named = true
			}
			root, _, sub := strings.Cut(t.Name, "/")
			req := t.Req // subtests inherit the requirement
			if !sub {
				top = append(top, t)
				if ranAndPassed(t) {
					passed[t.Own["gdr.req"]] = true
				}
			}
			mem, has := t.Own["gdr.mem"]
			switch {
			case !has || t.Result != gtr.Pass:
			case mem == "gpu-emulated":
				onGPU[root] = true
				if t.Own["gdr.gpu_alloc"] == "cuMemCreate" {
					onVMM[root] = true
				}
			case strings.HasSuffix(t.Name, "/host") || strings.Contains(t.Name, "/host/"):
				// PP-09's host-memory half, on host memory by design
			case s.Pkg == PingpongPkg || s.Pkg == "conformance/memreg":
				problems = append(problems, fmt.Sprintf("%s: %s (%s) passed on gdr.mem=%q, not on the emulated GPU: the GPU path did not run", s.Name(), t.Name, req, mem))
			}
		}
		for _, t := range top {
			req := t.Own["gdr.req"]
			switch {
			case !ranAndPassed(t), s.Pkg == "conformance/gpu", req == "MREG-01", req == "MREG-02", strings.HasPrefix(req, "HLTH-"): // HLTH moves no data of its own
			case !onGPU[t.Name]:
				problems = append(problems, fmt.Sprintf("%s: %s (%s) passed, but neither it nor a subtest ran on gdr.mem=gpu-emulated: the GPU path did not run", s.Name(), t.Name, req))
			case named && vmmReqs[req] && !onVMM[t.Name]:
				problems = append(problems, fmt.Sprintf("%s: %s (%s) passed, but none of its cuMemCreate cases passed on gdr.mem=gpu-emulated: NCCL's allocator was not exercised", s.Name(), t.Name, req))
			default:
				ran[s.Pkg+" "+req]++
				if onVMM[t.Name] {
					vmmRan[req] = true
				}
			}
		}
		for _, id := range must {
			if !passed[id] {
				problems = append(problems, fmt.Sprintf("%s: %s did not pass on the emulated GPU (see the suite's own failure or skip)", s.Name(), id))
			}
		}
	}
	for _, s := range suites {
		if s.Pkg == PingpongPkg && strings.HasSuffix(s.Host, HostMemSuffix) && s.Counts().Pass == 0 {
			problems = append(problems, fmt.Sprintf("%s: no test passed on host memory", s.Name()))
		}
	}
	vmm := ""
	if len(vmmRan) > 0 {
		ids := make([]string, 0, len(vmmRan))
		for id := range vmmRan {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		vmm = fmt.Sprintf("; %s also on cuMemCreate memory (NCCL's allocator)", strings.Join(ids, ", "))
	}
	notes = append(notes,
		fmt.Sprintf("pingpong PP-01..PP-09 and memreg MREG-03/05 moved data through emulated GPU memory (%d requirements checked for gdr.mem=gpu-emulated on every host that ran them)%s", len(ran), vmm),
		"NOT proven by the lab: the dma-buf data path (rxe has no dma-buf MRs, the lab kernel no udmabuf; MREG-04 and GPU-04/08 report it absent), and anything about a real GPU's PCIe path or speed")
	return problems, notes
}

// ranAndPassed says whether a test passed having run: go test passes a
// parent whose subtests all skipped (MREG-04's allocator cases on rxe,
// which has no dma-buf MRs), and that is a skip, not a pass.
func ranAndPassed(c *report.Case) bool {
	if c.Result != gtr.Pass {
		return false
	}
	if len(c.Children) == 0 {
		return true
	}
	for _, k := range c.Children {
		if ranAndPassed(k) {
			return true
		}
	}
	return false
}
