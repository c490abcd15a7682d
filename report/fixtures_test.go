package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gdrconf/gdrconf/internal/golden"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runsDir holds recorded runs: JUnit-only recordings from before test.json
// was kept, and test.json + host.json folders as make conformance,
// dist/run.sh and the lab write them.
const runsDir = "../fixtures/runs"

// Every recorded run renders, its JUnit follows the rules, and its
// summary.txt is the golden one (UPDATE=1 rewrites testdata/golden).
func TestRecordedRunsRender(t *testing.T) {
	ents, err := os.ReadDir(runsDir)
	require.NoError(t, err)
	n := 0
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		n++
		t.Run(e.Name(), func(t *testing.T) {
			runs, err := LoadDir(filepath.Join(runsDir, e.Name()))
			require.NoError(t, err)
			require.NotEmpty(t, runs)
			r := Build(runs)
			r.Suite, r.Time = "(golden)", "(golden)"
			out := t.TempDir()
			require.NoError(t, r.WriteAll(out))
			j, err := os.ReadFile(filepath.Join(out, JUnitFile))
			require.NoError(t, err)
			checkJUnitRules(t, parseJUnit(t, j))
			var txt bytes.Buffer
			require.NoError(t, r.WriteText(&txt))
			goldenPath := filepath.Join("testdata", "golden", e.Name()+".summary.txt")
			want, err := golden.File(goldenPath, txt.Bytes())
			require.NoError(t, err, "no golden summary: "+golden.Hint("./report"))
			assert.Equal(t, string(want), txt.String(), "summary of %s changed: check it, then %s", e.Name(), golden.Hint("./report"))
		})
	}
	assert.Greater(t, n, 2)
}

// The H200 recording: 19 requirements skipped for want of a NIC print one
// shared cause, not 19 paragraphs, and the verdict says INCOMPLETE.
func TestH200RecordingVerdict(t *testing.T) {
	runs, err := LoadDir(filepath.Join(runsDir, "h200-suite"))
	require.NoError(t, err)
	r := Build(runs)
	h := r.Hosts[0]
	assert.Equal(t, Incomplete, r.Verdict.Verdict)
	require.NotEmpty(t, h.Causes)
	assert.Equal(t, "no RDMA device", h.Causes[0].Key)
	assert.Len(t, h.Causes[0].Reqs, 18, "18 requirements skip for the missing NIC (TOPO-06 for the single GPU)")
	assert.Contains(t, h.Identity.GPUs, "0000:00:06.0 NVIDIA H200")
	assert.Equal(t, "13.0", h.Identity.CUDADriver)
}

// The PCIe tree of a real topology run (against the constructed pix tree):
// every GPU and NIC with its switch, each GPU's nearest NIC PIX.
func TestPixTopologyTree(t *testing.T) {
	runs, err := LoadDir(filepath.Join(runsDir, "pix-topology"))
	require.NoError(t, err)
	h := Build(runs).Hosts[0]
	top := topology(h)
	assert.Len(t, top.GPUs, 2)
	assert.Len(t, top.NICs, 2)
	assert.Len(t, top.Pairs, 4, "TOPO-01: every (GPU, NIC) pair")
	require.Len(t, top.Nearest, 2)
	for g, p := range top.Nearest {
		assert.Equal(t, "PIX", p.Class, g)
	}
	svg := top.TreeSVG()
	assert.Equal(t, 2, strings.Count(svg, `class="node gpu"`))
	assert.Equal(t, 2, strings.Count(svg, `class="node nic"`))
	assert.Equal(t, 2, strings.Count(svg, ">switch 01:00.0<")+strings.Count(svg, ">switch 11:00.0<"))
	assert.Equal(t, 2, strings.Count(svg, `class="pair"`))
}
