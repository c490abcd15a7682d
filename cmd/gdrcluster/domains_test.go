package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/cluster"
)

// gpu16 writes the events GPU-16 alone leaves (rounds.sh runs it before
// the start barrier): one subtest per GPU, each with its NVLink domain
// where it has one.
func gpu16(t *testing.T, path string, domains ...string) {
	t.Helper()
	var b bytes.Buffer
	for i, d := range domains {
		test := fmt.Sprintf("TestGPU16Identity/0000:%02x:00.0", i+1)
		for _, kv := range [][2]string{{"gdr.req", "GPU-16"}, {"gdr.gpu", fmt.Sprintf("0000:%02x:00.0", i+1)}, {"gdr.nvlink_domain", d}} {
			if kv[1] == "" {
				continue
			}
			j, err := json.Marshal(map[string]string{"Action": "attr", "Package": "github.com/gdrconf/gdrconf/conformance/gpu", "Test": test, "Key": kv[0], "Value": kv[1]})
			require.NoError(t, err)
			b.Write(append(j, '\n'))
		}
	}
	require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
}

// Four GB200 trays of two racks, listed rack by rack: each start publishes
// the domain its GPU-16 events name, and round 0 pairs across the racks
// (the job's order would pair n1 with n2). A host without the events file,
// or whose events hold a value that is not a domain, publishes none and
// says why; neither fails.
func TestStartPublishesAndPlanPairsAcrossDomains(t *testing.T) {
	const (
		rackA = "6b0c2d1e-0000-4000-8000-00000000000a/32766"
		rackB = "6b0c2d1e-0000-4000-8000-00000000000b/32766"
	)
	root := t.TempDir()
	base := map[string]string{"SLURM_JOB_ID": "778", "SLURM_JOB_NODELIST": "n[1-6]", "SLURM_NTASKS": "6", "SLURM_STEP_ID": "0",
		"GDR_REPORTS": root, "GDR_CLUSTER_SECRET": "0123456789abcdef0123456789abcdef"}
	task := func(i int) map[string]string {
		e := map[string]string{"SLURM_PROCID": fmt.Sprint(i), "SLURMD_NODENAME": fmt.Sprintf("n%d", i+1)}
		for k, v := range base {
			e[k] = v
		}
		return e
	}
	dir := t.TempDir()
	ident := func(i int) string { return filepath.Join(dir, fmt.Sprintf("n%d.json", i+1)) }
	gpu16(t, ident(0), rackA, rackA, rackA, rackA)
	gpu16(t, ident(1), rackA, rackA)
	gpu16(t, ident(2), rackB, "", rackB) // a GPU not registered yet
	gpu16(t, ident(3), rackB)
	gpu16(t, ident(4), "rack\x00e\nnvlink-domain "+rackA) // not a domain
	// n6: no events file (no GPU test binary): none, silently.
	var wg sync.WaitGroup
	codes := make([]int, 6)
	errs := make([]bytes.Buffer, 6)
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out bytes.Buffer
			codes[i] = run([]string{"start", "-identity", ident(i), "-timeout", "1m"}, lookup(task(i)), &out, &errs[i])
		}()
	}
	wg.Wait()
	for i := range 6 {
		require.Equal(t, 0, codes[i], "n%d: %s", i+1, errs[i].String())
	}
	// The events reader shows control bytes as escapes; the check then
	// names the first byte that is no domain's.
	assert.Contains(t, errs[4].String(), `gdrcluster: -identity `+ident(4)+`: NVLink domain "rack\\x00e\nnvlink-domain `)
	assert.Contains(t, errs[4].String(), "holds byte 0x5c at 4")
	assert.Contains(t, errs[4].String(), "this host publishes no NVLink domain")
	assert.Empty(t, errs[5].String())
	doms, err := cluster.StartDomains(root, "slurm//778")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"n1": rackA, "n2": rackA, "n3": rackB, "n4": rackB}, map[string]string(doms))

	for i := range 4 {
		var out, errb bytes.Buffer
		require.Equal(t, 0, run([]string{"plan", "-round", "0"}, lookup(task(i)), &out, &errb), errb.String())
		env := evalShell(t, out.String())
		self, peer := env["GDR_HOST_NAME"], env["GDR_PEER_NAME"]
		require.NotEmpty(t, peer, "%s idles in round 0", self)
		assert.NotEqual(t, doms[self], doms[peer], "%s meets %s inside one rack", self, peer)
		raw, err := os.ReadFile(filepath.Join(env["GDR_ROUND_REPORTS"], "plan.json"))
		require.NoError(t, err)
		var p cluster.Plan
		require.NoError(t, json.Unmarshal(raw, &p))
		assert.Equal(t, doms[self], p.NVLinkDomain)
		assert.Equal(t, doms[peer], p.PeerNVLinkDomain)
	}
}
