package lab

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The cluster's host lines are columns as wide as their widest entry: a
// long verdict no longer pushes its fabric verdict out of line.
func TestHostTable(t *testing.T) {
	var b strings.Builder
	hostTable(&b, []ClusterHost{
		{Host: "node1", Verdict: "pass", Fabric: "pass"},
		{Host: "node10", Verdict: "fail (rail 3 below its floor, 2 of 8 rails)", Fabric: "fail"},
	})
	assert.Equal(t, ""+
		"  node1  pass                                        fabric pass\n"+
		"  node10 fail (rail 3 below its floor, 2 of 8 rails) fabric fail\n", b.String())
}
