package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dcgmDiagJSON mirrors the names and tree of `dcgmi diag -j` (DCGM 4,
// dcgmi/Diag.cpp), declared apart from the writer's types so that a renamed
// field fails here.
type dcgmDiagJSON struct {
	EntityGroups []struct {
		ID       *int   `json:"entity_group_id"`
		Group    string `json:"entity_group"`
		Entities []struct {
			ID *int `json:"entity_id"`
		} `json:"entities"`
	} `json:"entity_groups"`
	Metadata struct {
		Version string `json:"version"`
		Driver  string `json:"Driver Version Detected"`
	} `json:"metadata"`
	Diag *struct {
		Categories []struct {
			Category string `json:"category"`
			Tests    []struct {
				Name    string           `json:"name"`
				Results []dcgmResultJSON `json:"results"`
				Summary *dcgmResultJSON  `json:"test_summary"`
			} `json:"tests"`
		} `json:"test_categories"`
	} `json:"DCGM Diagnostic"`
}

type dcgmResultJSON struct {
	GroupID  *int   `json:"entity_group_id"`
	Group    string `json:"entity_group"`
	EntityID *int   `json:"entity_id"`
	Status   string `json:"status"`
	Warnings []struct {
		Warning string `json:"warning"`
	} `json:"warnings"`
	Info []string `json:"info"`
}

// dcgm-diag.json has DCGM's tree: the GPU entity group, metadata, and the
// requirements as tests with a result per GPU and a summary, statuses in
// DCGM's words; a merged report writes one document per host.
func TestDCGMDocument(t *testing.T) {
	run := gpuHost("gpu01")
	run.Host.GPUs = []string{"0000:00:06.0 NVIDIA H200"}
	run.Host.NvidiaDriver, run.Host.Suite = "580.159.04", "v1.0.0"
	dir := t.TempDir()
	require.NoError(t, Build([]Run{run}).WriteAll(dir))
	b, err := os.ReadFile(filepath.Join(dir, DCGMFile))
	require.NoError(t, err)
	var doc dcgmDiagJSON
	require.NoError(t, json.Unmarshal(b, &doc))
	require.Len(t, doc.EntityGroups, 1)
	g := doc.EntityGroups[0]
	require.NotNil(t, g.ID)
	assert.Equal(t, 1, *g.ID)
	assert.Equal(t, "GPU", g.Group)
	require.Len(t, g.Entities, 1)
	assert.Equal(t, "580.159.04", doc.Metadata.Driver)
	assert.Equal(t, "v1.0.0", doc.Metadata.Version)
	require.NotNil(t, doc.Diag)

	tests := map[string]dcgmResultJSON{}
	perGPU := map[string][]dcgmResultJSON{}
	cats := map[string]bool{}
	for _, c := range doc.Diag.Categories {
		cats[c.Category] = true
		for _, tt := range c.Tests {
			if tt.Summary != nil {
				tests[tt.Name] = *tt.Summary
			}
			perGPU[tt.Name] = tt.Results
		}
	}
	assert.True(t, cats["Hardware"], "the gpu area is DCGM's Hardware category: %v", cats)
	require.Contains(t, tests, "GPU-09")
	assert.Equal(t, "Fail", tests["GPU-09"].Status)
	require.NotEmpty(t, tests["GPU-09"].Warnings)
	assert.Contains(t, tests["GPU-09"].Warnings[0].Warning, "below GDR_MIN_COPY_FRACTION")
	require.Len(t, perGPU["GPU-09"], 1)
	res := perGPU["GPU-09"][0]
	require.NotNil(t, res.EntityID)
	assert.Equal(t, 0, *res.EntityID)
	assert.Equal(t, "GPU", res.Group)
	assert.Equal(t, "Fail", res.Status)
	assert.Contains(t, res.Info, "0000:00:06.0: copy_fraction 0.319 (floor 0.600)")
	assert.Equal(t, "Pass", tests["GPU-02"].Status)
	assert.Equal(t, "Skip", tests["PP-01"].Status, "no NIC: skipped")
	for name, s := range tests {
		assert.Contains(t, []string{"Pass", "Fail", "Warn", "Skip"}, s.Status, name)
	}

	// Many hosts: one document per host.
	merged := t.TempDir()
	require.NoError(t, Build([]Run{run, gpuHost("gpu02")}).WriteAll(merged))
	for _, h := range []string{"gpu01", "gpu02"} {
		assert.FileExists(t, filepath.Join(merged, DCGMDir, h+".json"))
	}
}

// A failed report-only requirement is DCGM's Warn: it fails no verdict.
func TestDCGMStatusWords(t *testing.T) {
	assert.Equal(t, "Warn", dcgmStatus(Fail, "report-only"))
	assert.Equal(t, "Fail", dcgmStatus(Fail, "must"))
	assert.Equal(t, "Skip", dcgmStatus(Skip, "must"))
	assert.Equal(t, "Pass", dcgmStatus(Pass, "report-only"))
}
