package cluster

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/cluster/isolate"
	"github.com/gdrconf/gdrconf/cluster/jobenv"
)

const events = `{"Action":"start","Package":"github.com/gdrconf/gdrconf/conformance/pingpong"}
not json: gotestsum may print this
{"Action":"run","Package":"p","Test":"TestPP08Bandwidth"}
{"Action":"run","Package":"p","Test":"TestPP08Bandwidth/rail1/WRITE/1048576"}
{"Action":"attr","Package":"p","Test":"TestPP08Bandwidth/rail1/WRITE/1048576","Key":"gdr.rail","Value":"1"}
{"Action":"attr","Package":"p","Test":"TestPP08Bandwidth/rail1/WRITE/1048576","Key":"gdr.bw_gbit_s","Value":"12.500"}
{"Action":"attr","Package":"p","Test":"TestPP08Bandwidth/rail1/WRITE/1048576","Key":"gdr.size_bytes","Value":"1048576"}
{"Action":"attr","Package":"p","Test":"TestPP08Bandwidth/rail1/WRITE/1048576","Key":"gdr.peer","Value":"198.18.0.2:41388"}
{"Action":"attr","Package":"p","Test":"TestPP08Bandwidth/rail1/WRITE/1048576","Key":"gdr.op","Value":"WRITE"}
{"Action":"output","Package":"p","Test":"TestPP08Bandwidth/rail1/WRITE/1048576","Output":"=== RUN   TestPP08Bandwidth/rail1/WRITE/1048576\n"}
{"Action":"output","Package":"p","Test":"TestPP08Bandwidth/rail1/WRITE/1048576","Output":"    pingpong_test.go:478: WRITE bandwidth at 1048576 B is 12.50 Gb/s, below the 75.00 Gb/s floor\n"}
{"Action":"fail","Package":"p","Test":"TestPP08Bandwidth/rail1/WRITE/1048576"}
{"Action":"run","Package":"p","Test":"TestPP03Write/rail0"}
{"Action":"attr","Package":"p","Test":"TestPP03Write/rail0","Key":"gdr.rail","Value":"0"}
{"Action":"attr","Package":"p","Test":"TestPP03Write/rail0","Key":"gdr.peer","Value":"gpu9"}
{"Action":"attr","Package":"p","Test":"TestPP03Write/rail0","Key":"gdr.role","Value":"server"}
{"Action":"pass","Package":"p","Test":"TestPP03Write/rail0"}
{"Action":"run","Package":"p","Test":"TestPP08Bandwidth/rail0/WRITE/65536"}
{"Action":"attr","Package":"p","Test":"TestPP08Bandwidth/rail0/WRITE/65536","Key":"gdr.rail","Value":"0"}
{"Action":"attr","Package":"p","Test":"TestPP08Bandwidth/rail0/WRITE/65536","Key":"gdr.bw_gbps","Value":"2.5"}
{"Action":"attr","Package":"p","Test":"TestPP08Bandwidth/rail0/WRITE/65536","Key":"gdr.size","Value":"65536"}
{"Action":"attr","Package":"p","Test":"TestPP08Bandwidth/rail0/WRITE/65536","Key":"gdr.peer","Value":"[fd00::2]:7"}
{"Action":"pass","Package":"p","Test":"TestPP08Bandwidth/rail0/WRITE/65536"}
{"Action":"run","Package":"p","Test":"TestPP09HostVsGPU"}
{"Action":"attr","Package":"p","Test":"TestPP09HostVsGPU","Key":"gdr.rail","Value":"1"}
{"Action":"attr","Package":"p","Test":"TestPP09HostVsGPU","Key":"gdr.role","Value":"client"}
{"Action":"run","Package":"p","Test":"TestPP09HostVsGPU/gpu/WRITE-bw/65536"}
{"Action":"attr","Package":"p","Test":"TestPP09HostVsGPU/gpu/WRITE-bw/65536","Key":"gdr.bw_gbit_s","Value":"0.058"}
{"Action":"attr","Package":"p","Test":"TestPP09HostVsGPU/gpu/WRITE-bw/65536","Key":"gdr.size_bytes","Value":"65536"}
{"Action":"pass","Package":"p","Test":"TestPP09HostVsGPU/gpu/WRITE-bw/65536"}
{"Action":"pass","Package":"p","Test":"TestPP09HostVsGPU"}
{"Action":"run","Package":"g","Test":"TestGPU08DmaBuf/0000:3b:00.0"}
{"Action":"attr","Package":"g","Test":"TestGPU08DmaBuf/0000:3b:00.0","Key":"gdr.req","Value":"GPU-08"}
{"Action":"attr","Package":"g","Test":"TestGPU08DmaBuf/0000:3b:00.0","Key":"gdr.rail","Value":"0"}
{"Action":"fail","Package":"g","Test":"TestGPU08DmaBuf/0000:3b:00.0"}
{"Action":"run","Package":"m","Test":"TestMREG03Peermem/rail1"}
{"Action":"attr","Package":"m","Test":"TestMREG03Peermem/rail1","Key":"gdr.req","Value":"MREG-03"}
{"Action":"attr","Package":"m","Test":"TestMREG03Peermem/rail1","Key":"gdr.rail","Value":"1"}
{"Action":"fail","Package":"m","Test":"TestMREG03Peermem/rail1"}
{"Action":"run","Package":"p","Test":"TestTOPO01Inventory"}
{"Action":"pass","Package":"p","Test":"TestTOPO01Inventory"}
{"Action":"fail","Package":"p","Test":"TestPP08Bandwidth"}
`

// TestLoad reads pair results: from the two-host tests only (a failed
// single-host test on a rail, GPU-08 or MREG-03 above, is the host's own
// and no pair's: the whole suite runs in a host's first round).
func TestLoad(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, WritePlan(root, Plan{Round: 0, Host: "gpu1", Index: 0, Hosts: 3, Role: "client", Peer: "gpu2", Pairing: "ring", Job: "slurm//1"}))
	require.NoError(t, os.WriteFile(filepath.Join(RoundDir(root, "gpu1", 0), "test.json"), []byte(events), 0o644))
	// gpu2 planned round 0 and wrote nothing else; gpu3 idled.
	require.NoError(t, WritePlan(root, Plan{Round: 0, Host: "gpu2", Index: 1, Hosts: 3, Role: "server", Peer: "gpu1", Pairing: "ring", Job: "slurm//1"}))
	require.NoError(t, WritePlan(root, Plan{Round: 0, Host: "gpu3", Index: 2, Hosts: 3, Role: Idle, Pairing: "ring", Job: "slurm//1"}))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "gpu3", "notes"), 0o755)) // ignored
	require.NoError(t, os.WriteFile(filepath.Join(root, "merged.json"), nil, 0o644))

	res, plans, err := Load(root, "")
	require.NoError(t, err)
	assert.Len(t, plans, 3)
	assert.Equal(t, []isolate.Result{
		{Host: "gpu1", Round: 0, Rail: 1, Peer: "gpu2", Role: "client", Test: "TestPP08Bandwidth/rail1/WRITE/1048576", Status: isolate.Fail,
			BWGbitS: 12.5, Size: 1048576, Op: "WRITE", Detail: "WRITE bandwidth at 1048576 B is 12.50 Gb/s, below the 75.00 Gb/s floor"},
		// A host name in gdr.peer that is not the plan's peer: the host's
		// word against its plan, a failure of the planned pair.
		{Host: "gpu1", Round: 0, Rail: 0, Peer: "gpu2", Role: "server", Test: "TestPP03Write/rail0", Status: isolate.Fail,
			Detail: "test TestPP03Write/rail0 records gdr.peer gpu9, and plan.json names gpu2 as the peer of round 0: the record is not of the planned pair (counted as its failure)"},
		// An address in gdr.peer (what the suite records) leaves the plan's
		// peer; the keys from before the unit-in-key rename still read.
		{Host: "gpu1", Round: 0, Rail: 0, Peer: "gpu2", Role: "client", Test: "TestPP08Bandwidth/rail0/WRITE/65536", Status: isolate.Pass, BWGbitS: 2.5, Size: 65536},
		// Attributes of a parent (the rail's test) reach its subtests.
		{Host: "gpu1", Round: 0, Rail: 1, Peer: "gpu2", Role: "client", Test: "TestPP09HostVsGPU", Status: isolate.Pass},
		{Host: "gpu1", Round: 0, Rail: 1, Peer: "gpu2", Role: "client", Test: "TestPP09HostVsGPU/gpu/WRITE-bw/65536", Status: isolate.Pass, BWGbitS: 0.058, Size: 65536},
		{Host: "gpu2", Round: 0, Rail: isolate.AllRails, Peer: "gpu1", Role: "server", Status: isolate.Missing, Detail: "no pair results (no test.json)"},
	}, res)

	hosts, err := Hosts(root, "")
	require.NoError(t, err)
	assert.Equal(t, []string{"gpu1", "gpu2", "gpu3"}, hosts)
}

func TestLoadErrors(t *testing.T) {
	root := t.TempDir()
	dir := RoundDir(root, "gpu1", 0)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "test.json"), []byte(`{"Action":"attr","Test":"T","Key":"gdr.rail","Value":"x"}`+"\n"+`{"Action":"pass","Test":"T"}`+"\n"), 0o644))
	_, _, err := Load(root, "")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `gdr.rail="x" is not a rail index`)

	// A node that stopped mid-write leaves a cut last line: passed over, not
	// an error that would stop every task's rounds (gdrcluster plan).
	require.NoError(t, os.WriteFile(filepath.Join(dir, "test.json"), []byte(`{"Action":"attr","Test":"T","Key":"gdr.rail","Value":"0"}`+"\n"+`{"Action":"pass","Test":"T","Pac`), 0o644))
	_, _, err = Load(root, "")
	require.NoError(t, err)
	// Nor does a FIFO in its place hang the reader.
	require.NoError(t, os.Remove(filepath.Join(dir, "test.json")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "test.json"), 0o644))
	_, _, err = Load(root, "")
	require.NoError(t, err)
	require.NoError(t, os.Remove(filepath.Join(dir, "test.json")))

	require.NoError(t, os.WriteFile(filepath.Join(dir, "plan.json"), []byte(`{"round":"zero"}`), 0o644))
	_, _, err = Load(root, "")
	assert.ErrorContains(t, err, "plan.json")

	_, _, err = Load(filepath.Join(root, "nope"), "")
	assert.ErrorContains(t, err, "reports folder")

	_, err = Hosts(t.TempDir(), "")
	assert.ErrorContains(t, err, "holds no <host>/round-<k>/plan.json")

	two := t.TempDir()
	require.NoError(t, WritePlan(two, Plan{Round: 0, Host: "a", Index: 0, Hosts: 2}))
	require.NoError(t, WritePlan(two, Plan{Round: 0, Host: "b", Index: 0, Hosts: 2}))
	_, err = Hosts(two, "")
	assert.ErrorContains(t, err, "two jobs in one folder")
}

func TestSecret(t *testing.T) {
	_, err := Secret(Config{})
	assert.ErrorContains(t, err, "GDR_CLUSTER_SECRET (or GDR_CLUSTER_SECRET_FILE) is not set")
	_, err = Secret(Config{Secret: "short"})
	assert.ErrorContains(t, err, "holds 5 bytes")
	f := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(f, []byte("0123456789abcdef0123\n"), 0o600))
	s, err := Secret(Config{SecretFile: f})
	require.NoError(t, err)
	assert.Equal(t, "0123456789abcdef0123", string(s))
	_, err = Secret(Config{SecretFile: f + ".missing"})
	assert.ErrorContains(t, err, "GDR_CLUSTER_SECRET_FILE=")
}

func TestPlanRoundShell(t *testing.T) {
	task := jobenv.Task{Engine: jobenv.Slurm, JobID: "9", Names: []string{"n1", "n2", "n3", "n4"}, Addrs: []string{"n1-ib", "n2-ib", "n3-ib", "n4-ib"}}
	c := DefaultConfig()
	c.Reports = "/shared/r"
	secret := []byte("0123456789abcdef")

	task.Index = 1 // round 1 of a ring of 4: (1,2) with 1 serving
	s := PlanRound(task, c, secret, 1, nil, isolate.Liveness{})
	require.False(t, s.Done)
	assert.Equal(t, "server", s.Plan.Role)
	assert.Equal(t, "n3", s.Plan.Peer)
	sh := s.Shell()
	for _, want := range []string{"export GDR_PLAN='run'\n", "export GDR_ROUND='1'\n", "export GDR_ROLE='server'\n",
		"export GDR_LISTEN=':" + itoa(s.Plan.Port) + "'\n", "unset GDR_PEER\n", "export GDR_PEER_NAME='n3'\n",
		"export GDR_TOKEN='" + s.Token + "'\n", "export GDR_ROUND_REPORTS='/shared/r/n2/round-1'\n", "export GDR_HOST_NAME='n2'\n"} {
		assert.Contains(t, sh, want)
	}

	task.Index = 2
	c2 := PlanRound(task, c, secret, 1, nil, isolate.Liveness{})
	assert.Equal(t, "client", c2.Plan.Role)
	assert.Equal(t, s.Token, c2.Token, "both ends derive the same token")
	// The other pair of the round has its own: n1 cannot pass for n2 with n3.
	task.Index = 0
	other := PlanRound(task, c, secret, 1, nil, isolate.Liveness{})
	assert.Equal(t, "n4", other.Plan.Peer)
	assert.NotEqual(t, s.Token, other.Token, "each pair of a round has its own token")
	assert.Contains(t, c2.Shell(), "export GDR_PEER='n2-ib:"+itoa(s.Plan.Port)+"'\n")
	assert.Contains(t, c2.Shell(), "unset GDR_LISTEN\n")

	done := PlanRound(task, c, secret, 2, nil, isolate.Liveness{})
	assert.True(t, done.Done)
	assert.Contains(t, done.Shell(), "export GDR_PLAN='done'\n")
	assert.Contains(t, done.Shell(), "unset GDR_ROLE GDR_PEER GDR_LISTEN GDR_TOKEN")

	three := jobenv.Task{Engine: jobenv.Slurm, JobID: "9", Index: 2, Names: []string{"a", "b", "c"}, Addrs: []string{"a", "b", "c"}}
	idle := PlanRound(three, c, secret, 0, nil, isolate.Liveness{})
	assert.Equal(t, Idle, idle.Plan.Role)
	assert.Contains(t, idle.Shell(), "export GDR_PLAN='idle'\n")
	assert.Empty(t, idle.Token, "an idle host has no pair to hold a token for")

	assert.Equal(t, `'it'\''s'`, quote("it's"))
	assert.Equal(t, "[fd00::1]:20000", joinHostPort("fd00::1", 20000))
}

func itoa(n int) string { return strconv.Itoa(n) }

// A round kept compressed (gdrreport -collect -compact: test.json.gz)
// gives the pairs its plain test.json gives, to the merge's Load and to
// the lead's LoadCompact alike (a host that stopped before done left no
// pairs.json); a .gz that is no gzip gives none, as a missing file does.
func TestLoadCompressedRound(t *testing.T) {
	plain, packed := t.TempDir(), t.TempDir()
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	_, err := zw.Write([]byte(events))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	for _, root := range []string{plain, packed} {
		require.NoError(t, WritePlan(root, Plan{Round: 0, Host: "gpu1", Index: 0, Hosts: 2, Role: "client", Peer: "gpu2", Pairing: "ring", Job: "slurm//1"}))
		require.NoError(t, WritePlan(root, Plan{Round: 0, Host: "gpu2", Index: 1, Hosts: 2, Role: "server", Peer: "gpu1", Pairing: "ring", Job: "slurm//1"}))
	}
	require.NoError(t, os.WriteFile(filepath.Join(RoundDir(plain, "gpu1", 0), "test.json"), []byte(events), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(RoundDir(packed, "gpu1", 0), "test.json.gz"), zb.Bytes(), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(RoundDir(packed, "gpu2", 0), "test.json.gz"), []byte(events), 0o644))
	want, _, err := Load(plain, "")
	require.NoError(t, err)
	got, _, err := Load(packed, "")
	require.NoError(t, err)
	require.NotEmpty(t, got)
	assert.Equal(t, want[:len(want)-1], got[:len(got)-1], "gpu1's pairs, read from test.json.gz")
	last := got[len(got)-1]
	assert.Equal(t, isolate.Missing, last.Status, "gpu2's file is no gzip: no results")
	compact, err := LoadCompact(packed, "")
	require.NoError(t, err)
	assert.Equal(t, got, compact)
}
