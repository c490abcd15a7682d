package rdmares

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// As iproute2 6.1 prints it for an rxe device with the kernel's GSI QP and
// one test connection open.
const sample = `[{"ifindex":1,"ifname":"rxe0","pd":2,"cq":3,"qp":2,"cm_id":0,"mr":1,"ctx":1,"srq":0}]`

func TestParse(t *testing.T) {
	s, err := Parse([]byte(sample))
	require.NoError(t, err)
	assert.Equal(t, uint64(2), s["rxe0"]["qp"])
	assert.Equal(t, uint64(1), s["rxe0"]["ctx"])
	_, has := s["rxe0"]["ifindex"]
	assert.False(t, has)

	empty, err := Parse([]byte("[]\n"))
	require.NoError(t, err)
	assert.Empty(t, empty)
}

func TestParseBadInput(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "not a JSON array"},
		{"rxe0: pd 1 cq 1", "not a JSON array"},
		{`[{"pd":1}]`, "no ifname"},
		{`[{"ifname":"rxe0","qp":-1}]`, "not a count"},
		{`[{"ifname":"rxe0","qp":1.5}]`, "not a count"},
		{"[" + strings.Repeat(" ", 2<<20) + "]", "more than"},
	} {
		_, err := Parse([]byte(c.in))
		require.Error(t, err, c.in)
		assert.Contains(t, err.Error(), c.want)
		assert.Less(t, len(err.Error()), 400)
	}
}

func TestLeaked(t *testing.T) {
	before, err := Parse([]byte(`[{"ifname":"rxe0","pd":1,"cq":1,"qp":1,"mr":0,"ctx":0},{"ifname":"mlx5_0","pd":0,"cq":0,"qp":1,"mr":0}]`))
	require.NoError(t, err)
	same, err := Parse([]byte(`[{"ifname":"mlx5_0","pd":0,"cq":0,"qp":1,"mr":0},{"ifname":"rxe0","pd":1,"cq":1,"qp":1,"mr":0,"ctx":3}]`))
	require.NoError(t, err)
	assert.Empty(t, Leaked(before, same), "contexts are not counted, and order does not matter")

	after, err := Parse([]byte(`[{"ifname":"rxe0","pd":2,"cq":3,"qp":2,"mr":1},{"ifname":"mlx5_0","pd":0,"cq":0,"qp":0,"mr":0}]`))
	require.NoError(t, err)
	rs := Leaked(before, after)
	assert.Equal(t, 5, Count(rs))
	assert.Equal(t, "rxe0 qp 1 -> 2 (+1), rxe0 cq 1 -> 3 (+2), rxe0 mr 0 -> 1 (+1), rxe0 pd 1 -> 2 (+1)", Join(rs))

	// A device that appears during the test counts from zero.
	newDev, err := Parse([]byte(`[{"ifname":"rxe0","pd":1,"cq":1,"qp":1,"mr":0},{"ifname":"rxe1","qp":1}]`))
	require.NoError(t, err)
	assert.Equal(t, "rxe1 qp 0 -> 1 (+1)", Join(Leaked(before, newDev)))
}
