package topo

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTurnPorts(t *testing.T) {
	ix := host(0, 1)
	for _, c := range []struct {
		name          string
		a, b          string
		turn, through []string
	}{
		// GPU and NIC on two downstream ports of one switch: the path
		// turns there; both ports and the upstream port are judged.
		{"one switch", "0000:05:00.0", "0000:06:00.0", []string{"0000:02:00.0", "0000:01:00.0", "0000:02:01.0"}, nil},
		// The GPU sits below a second switch (0000:03/04) hanging off the
		// first: the path turns in the first switch; the second one is
		// only passed through on the way down to the GPU.
		{"cascade", "0000:07:00.0", "0000:06:00.0", []string{"0000:02:00.0", "0000:01:00.0", "0000:02:01.0"}, []string{"0000:04:00.0", "0000:03:00.0"}},
		{"functions of one device", "0000:06:00.0", "0000:06:00.1", []string{"0000:02:01.0"}, nil},
		// Two root ports: the turn is in the root complex, no switch port
		// decides.
		{"two root ports", "0000:05:00.0", "0000:08:00.0", nil, []string{"0000:02:00.0", "0000:01:00.0"}},
		{"two host bridges", "0000:05:00.0", "0000:41:00.0", nil, []string{"0000:02:00.0", "0000:01:00.0"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := ix.Classify(c.a, c.b)
			require.NoError(t, err)
			turn, through := ix.TurnPorts(p)
			assert.Equal(t, c.turn, turn, "turn (bridges %v, LCA %s)", p.Bridges, p.LCA)
			assert.Equal(t, c.through, through, "through")
		})
	}
}
