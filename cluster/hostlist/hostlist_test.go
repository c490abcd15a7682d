package hostlist

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var valid = []struct {
	expr string
	want []string
}{
	{"", nil},
	{" , ,", nil},
	{"node1", []string{"node1"}},
	{"gpu[001-004,017]", []string{"gpu001", "gpu002", "gpu003", "gpu004", "gpu017"}},
	{"n[8-10]", []string{"n8", "n9", "n10"}},
	{"n[08-10]", []string{"n08", "n09", "n10"}},
	{"n[1-010]", []string{"n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9", "n10"}}, // width is LO's
	{"n[7,08-09,1]", []string{"n7", "n08", "n09", "n1"}},                                // order kept, per-item width
	{"a[1-2]b[3-4]", []string{"a1b3", "a1b4", "a2b3", "a2b4"}},
	{"rack[1-2]_blade[0-1]", []string{"rack1_blade0", "rack1_blade1", "rack2_blade0", "rack2_blade1"}},
	{"gpu[1-2],cpu[5],login", []string{"gpu1", "gpu2", "cpu5", "login"}},
	{"gpu[1,3] cpu1\tcpu2", []string{"gpu1", "gpu3", "cpu1", "cpu2"}},
	{"a.b-c_d[1]", []string{"a.b-c_d1"}},
	{"[1-3]", []string{"1", "2", "3"}},
	{"x1,x1", []string{"x1", "x1"}}, // duplicates kept, as Slurm does
}

func TestExpand(t *testing.T) {
	for _, c := range valid {
		got, err := Expand(c.expr)
		require.NoError(t, err, c.expr)
		assert.Equal(t, c.want, got, c.expr)
	}
}

func TestExpandErrors(t *testing.T) {
	for _, c := range []struct{ expr, why string }{
		{"gpu[1-2]-ib", `text "-ib" after the last ']'`},
		{"gpu[1-2", "never closed"},
		{"gpu1-2]", "']' without '['"},
		{"gpu[1-[2]]", "nested"},
		{"gpu[]", "empty brackets"},
		{"gpu[1,,2]", `bad range item ""`},
		{"gpu[^1-3]", `bad range item "^1-3"`},
		{"gpu[1-3:2]", `bad range item "1-3:2"`},
		{"gpu[-1]", `bad range item "-1"`},
		{"gpu[1--2]", `bad range item "1--2"`},
		{"gpu[3-1]", "runs backwards"},
		{"gpu[0x1]", "bad range item"},
		{"gpu[1x3]", "bad range item"},
		{"gpu[a-b]", "bad range item"},
		{"gpu[0-70000]", "more than 65536"},
		{"gpu[99999999999]", "too large"},
		{"a[0-65535]b[0-65535]", "more than"},
		{"gpu^1", `character '^'`},
		{"gpu!1", `character '!'`},
		{"gpu/1", `character '/'`},
		{"gpü1", "not allowed"},
		{"gpu[1]\x00", "not allowed"},
	} {
		_, err := Expand(c.expr)
		require.Error(t, err, c.expr)
		assert.Contains(t, err.Error(), c.why, c.expr)
		assert.Contains(t, err.Error(), "hostlist ", c.expr)
	}
}

// The expansion agrees with Slurm's own where scontrol is installed (it
// needs no controller for this, only a configuration file to start).
func TestAgreesWithScontrol(t *testing.T) {
	bin, err := exec.LookPath("scontrol")
	if err != nil {
		t.Skip("scontrol not installed (slurm-client): cross-check not run")
	}
	conf := filepath.Join(t.TempDir(), "slurm.conf")
	require.NoError(t, os.WriteFile(conf, []byte("ClusterName=gdr\nSlurmctldHost=localhost\nNodeName=n1\nPartitionName=p Nodes=n1\n"), 0o644))
	for _, c := range valid {
		if c.expr == "" || strings.Trim(c.expr, " ,") == "" {
			continue
		}
		cmd := exec.Command(bin, "show", "hostnames", c.expr)
		cmd.Env = append(os.Environ(), "SLURM_CONF="+conf)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s: %s", c.expr, out)
		assert.Equal(t, c.want, strings.Fields(string(out)), c.expr)
	}
	// What Slurm rejects, Expand rejects.
	for _, expr := range []string{"gpu[1-2]-ib", "gpu[3-1]", "gpu[a-b]", "gpu[-1]", "gpu[1-[2]]", "gpu[]", "gpu[1,,2]",
		"gpu[^1-3]", "gpu[1-3:2]", "gpu[1--2]", "gpu[1x3]", "gpu[0-70000]"} {
		cmd := exec.Command(bin, "show", "hostnames", expr)
		cmd.Env = append(os.Environ(), "SLURM_CONF="+conf)
		out, err := cmd.CombinedOutput()
		_, mine := Expand(expr)
		assert.Error(t, mine, expr)
		assert.True(t, err != nil || strings.Contains(string(out), "Invalid hostlist"), "scontrol accepted %q: %s", expr, out)
	}
}

func FuzzExpand(f *testing.F) {
	for _, c := range valid {
		f.Add(c.expr)
	}
	f.Add("a[1-3]b[2-4]c")
	f.Fuzz(func(t *testing.T, s string) {
		names, err := Expand(s)
		if err != nil {
			return
		}
		for _, n := range names {
			if n == "" || strings.ContainsAny(n, "[], \t") {
				t.Fatalf("%q expanded to bad name %q", s, n)
			}
		}
	})
}

func TestCompress(t *testing.T) {
	for in, want := range map[string]string{
		"gpu01 gpu02 gpu03 gpu07 login": "gpu[01-03,07],login",
		"gpu1 gpu10 gpu2":               "gpu[1-2,10]",
		"node0005 node0040":             "node[0005,0040]",
		"gpu-05 gpu-40":                 "gpu-[05,40]",
		"n08 n09 n10 n11":               "n[08-11]",
		"n9 n10 n010":                   "n[9-10,010]",
		"a1 a01":                        "a[1,01]",
		"vm3":                           "vm3",
		"gdrconf-2 gdrconf-0 gdrconf-1": "gdrconf-[0-2]",
		"x x y":                         "x,y",
	} {
		got := Compress(strings.Fields(in))
		assert.Equal(t, want, got, in)
		back, err := Expand(got)
		require.NoError(t, err, got)
		assert.ElementsMatch(t, uniq(strings.Fields(in)), back, "%s expands back", got)
	}
	assert.Equal(t, "", Compress(nil))
}

func uniq(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
