package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// commaList stands in for cluster/hostlist.Expand (internal/ does not
// import cluster/): names separated by commas; brackets are an error.
func commaList(s string) ([]string, error) {
	if strings.ContainsAny(s, "[]") {
		return nil, errors.New("hostlist " + s + ": brackets")
	}
	var out []string
	for _, n := range strings.Split(s, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out, nil
}

func groups(t Topology) map[string][]string {
	m := map[string][]string{}
	for _, g := range t.Groups {
		m[g.Name] = g.Hosts
	}
	return m
}

// The suite's form and Slurm's topology.conf give the same groups: leaf
// switches are groups, the spine above them groups nothing.
func TestParseTopologyForms(t *testing.T) {
	own := "# leaf switches of row A\nleaf1 a1,a2\n\nleaf2 a3 a4   # the hostlist may hold spaces\n"
	top, err := ParseTopology("own.txt", []byte(own), commaList)
	require.NoError(t, err)
	assert.Equal(t, map[string][]string{"leaf1": {"a1", "a2"}, "leaf2": {"a3", "a4"}}, groups(top))
	assert.Equal(t, 2, top.Groups[0].Line)
	assert.Equal(t, 4, top.Groups[1].Line)

	slurm := `# topology.conf of a two-level fat tree
SwitchName=s0 Nodes=a1,a2 LinkSpeed=200
switchname=s1 nodes=a3,\
a4
SwitchName=spine Switches=s0,s1
`
	top, err = ParseTopology("topology.conf", []byte(slurm), commaList)
	require.NoError(t, err)
	assert.Equal(t, map[string][]string{"s0": {"a1", "a2"}, "s1": {"a3", "a4"}}, groups(top))
	assert.Equal(t, 3, top.Groups[1].Line, "a continued line is named by its first line")

	block := "BlockName=b1 Nodes=a1,a2\nBlockName=b2 Nodes=a3\nBlockSizes=2,4\n"
	top, err = ParseTopology("topology.conf", []byte(block), commaList)
	require.NoError(t, err)
	assert.Equal(t, map[string][]string{"b1": {"a1", "a2"}, "b2": {"a3"}}, groups(top))

	dir := t.TempDir()
	p := filepath.Join(dir, "topo")
	require.NoError(t, os.WriteFile(p, []byte(own), 0o644))
	top, err = ReadTopology(p, commaList)
	require.NoError(t, err)
	assert.Len(t, top.Groups, 2)
	_, err = ReadTopology(filepath.Join(dir, "missing"), commaList)
	assert.ErrorContains(t, err, "GDR_TOPOLOGY_FILE=")
}

// Each bad line is named, with what is wrong and what is wanted.
func TestParseTopologyErrorsNameTheLine(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"leaf1\n", `line 1: "leaf1": want "<group> <hostlist>"`},
		{"leaf1 a1\n\nleaf1 a2\n", `line 3: group "leaf1" is defined on line 1 too`},
		{"leaf1 a1,a2\nleaf2 a2,a3\n", `line 2: host a2 is in group "leaf1" (line 1) and in group "leaf2": each host belongs to one group`},
		{"leaf1 gpu[1-2]\n", `line 1: hostlist gpu[1-2]: brackets`},
		{"SwitchName=s0 Nodes=a1 Switches=s1\n", `line 1: switch "s0" has both Nodes= and Switches=`},
		{"SwitchName=s0 Nodes=a1 Speed=1\n", `line 1: SwitchName= takes Nodes=, Switches= and LinkSpeed= (topology.conf(5)), not speed=`},
		{"SwitchName=s0 Nodes\n", `line 1: "Nodes" is not key=value`},
		{"NodeName=a1 Gres=gpu:8\n", `line 1: nodename= is not a topology.conf line`},
		{"BlockName=b1\n", `line 1: block "b1" has no Nodes=`},
		{"leaf1 Nodes=a1\n", `line 1: "leaf1 Nodes=a1": a group's name comes first`},
		{"SwitchName=spine Switches=s[0-1]\n# only the spine\n", "names no group of hosts"},
		{"", "names no group of hosts"},
	} {
		_, err := ParseTopology("t.conf", []byte(tc.file), commaList)
		require.Error(t, err, "%q", tc.file)
		assert.Contains(t, err.Error(), tc.want, "%q", tc.file)
		if !strings.Contains(tc.want, "names no group") {
			assert.Contains(t, err.Error(), `GDR_TOPOLOGY_FILE="t.conf" line `, "the file and the line are named")
		}
	}
}
