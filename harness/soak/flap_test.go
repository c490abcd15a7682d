package soak

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/rails"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
)

func TestChooseRetrainer(t *testing.T) {
	tools := func(have ...string) func(string) string {
		return func(n string) string {
			for _, h := range have {
				if h == n {
					return "/usr/bin/" + n
				}
			}
			return ""
		}
	}
	cx := &rails.NIC{Name: "mlx5_0", PCI: "0000:1b:00.0", LinkLayer: "Ethernet", Dev: &rdmadev.Device{Netdevs: []string{"ens1f0np0"}}}
	rt, why := ChooseRetrainer(cx, tools("mlxlink", "ip"))
	require.NotNil(t, rt, why)
	assert.Equal(t, "mlxlink -d 0000:1b:00.0 -a TG", rt.Method)
	assert.Equal(t, [][]string{{"/usr/bin/mlxlink", "-d", "0000:1b:00.0", "-a", "TG"}}, rt.Steps)
	assert.Equal(t, []string{"/usr/bin/mlxlink", "-d", "0000:1b:00.0", "-a", "UP"}, rt.Restore, "a toggle that failed half-way is undone with UP")

	rt, why = ChooseRetrainer(cx, tools("mstlink", "ip"))
	require.NotNil(t, rt, why)
	assert.Equal(t, "mstlink -d 0000:1b:00.0 -a TG", rt.Method, "mstflint's tool takes the same flags")

	rt, why = ChooseRetrainer(cx, tools("ip"))
	require.NotNil(t, rt, why)
	assert.Equal(t, "ip link set dev ens1f0np0 down; ip link set dev ens1f0np0 up", rt.Method)
	assert.Equal(t, flapDown, rt.Pause, "down long enough for both ends to drop the link")
	assert.Len(t, rt.Steps, 2)
	assert.Equal(t, []string{"/usr/bin/ip", "link", "set", "dev", "ens1f0np0", "up"}, rt.Restore)

	rxe := &rails.NIC{Name: "rxe1", Software: true, Parent: "eth1", LinkLayer: "Ethernet"}
	rt, why = ChooseRetrainer(rxe, tools("ip", "mlxlink"))
	require.NotNil(t, rt, why)
	assert.Equal(t, "ip link set dev eth1 down; ip link set dev eth1 up", rt.Method, "no PCI function: mlxlink cannot reach it")

	ib := &rails.NIC{Name: "mlx5_4", PCI: "0000:9a:00.0", LinkLayer: "InfiniBand", Dev: &rdmadev.Device{Netdevs: []string{"ib0"}}}
	rt, why = ChooseRetrainer(ib, tools("ip"))
	assert.Nil(t, rt, "an IPoIB netdev going down does not take the IB port down")
	assert.Contains(t, why, "mlx5_4")
	assert.Contains(t, why, "mlxlink nor mstlink not found in PATH")
	assert.Contains(t, why, "InfiniBand")

	rt, why = ChooseRetrainer(rxe, tools())
	assert.Nil(t, rt)
	assert.Contains(t, why, "ip (iproute2)")

	bad := &rails.NIC{Name: "rxe9", Software: true, Parent: "../x", LinkLayer: "Ethernet"}
	rt, _ = ChooseRetrainer(bad, tools("ip"))
	assert.Nil(t, rt, "a netdev name that is not one is never passed to ip")
}

// states plays a port's states, one per read, the last repeated.
func states(seq ...string) func() (string, error) {
	var i atomic.Int32
	return func() (string, error) {
		n := int(i.Add(1)) - 1
		if n >= len(seq) {
			n = len(seq) - 1
		}
		if seq[n] == "err" {
			return "", errors.New("read failed")
		}
		return seq[n], nil
	}
}

func TestPortWatchFollow(t *testing.T) {
	closed := make(chan struct{})
	close(closed)
	w := PortWatch{State: states("ACTIVE", "DOWN", "err", "POLLING", "ACTIVE"), Every: time.Millisecond}
	r := w.Follow(time.Now(), closed, 5*time.Second)
	assert.True(t, r.Left)
	assert.True(t, r.Up)
	assert.Greater(t, r.Took, time.Duration(0))
	assert.Equal(t, "ACTIVE", r.Last)

	w = PortWatch{State: states("ACTIVE", "DOWN"), Every: time.Millisecond}
	r = w.Follow(time.Now(), closed, 50*time.Millisecond)
	assert.True(t, r.Left)
	assert.False(t, r.Up, "never back within the deadline")
	assert.Equal(t, "DOWN", r.Last)
	assert.Equal(t, 50*time.Millisecond, r.Waited)

	w = PortWatch{State: states("ACTIVE"), Every: time.Millisecond}
	r = w.Follow(time.Now(), closed, time.Second)
	assert.False(t, r.Left)
	assert.True(t, r.Up)
	assert.Zero(t, r.Took, "never seen down: no recovery time to claim")

	// While the retrain runs, ACTIVE does not end the watch: the port may
	// not have gone down yet.
	done := make(chan struct{})
	w = PortWatch{State: states("ACTIVE", "ACTIVE", "ACTIVE", "DOWN", "ACTIVE"), Every: time.Millisecond}
	go func() { time.Sleep(20 * time.Millisecond); close(done) }()
	r = w.Follow(time.Now(), done, 5*time.Second)
	assert.True(t, r.Left)
	assert.True(t, r.Up)
}

func TestPortWatchGrace(t *testing.T) {
	closed := make(chan struct{})
	close(closed)
	// The toggle returned before the port went down: the watch waits for
	// it within Grace instead of calling it back at once.
	w := PortWatch{State: states("ACTIVE", "ACTIVE", "ACTIVE", "ACTIVE", "DOWN", "ACTIVE"), Every: time.Millisecond, Grace: time.Second}
	r := w.Follow(time.Now(), closed, 5*time.Second)
	assert.True(t, r.Left)
	assert.True(t, r.Up)
	assert.Greater(t, r.Took, time.Duration(0))

	start := time.Now()
	w = PortWatch{State: states("ACTIVE"), Every: time.Millisecond, Grace: 30 * time.Millisecond}
	r = w.Follow(start, closed, 5*time.Second)
	assert.False(t, r.Left)
	assert.True(t, r.Up)
	assert.GreaterOrEqual(t, time.Since(start), 30*time.Millisecond, "a port never seen down is watched for Grace")
}

// A retrain whose second half failed brings the port back up (Restore),
// and says so; one whose first step failed touched nothing.
func TestRetrainerRestores(t *testing.T) {
	mark := filepath.Join(t.TempDir(), "restored")
	up := []string{"sh", "-c", "echo up >> " + mark}
	restored := func() int {
		b, err := os.ReadFile(mark)
		if err != nil {
			return 0
		}
		return strings.Count(string(b), "up")
	}

	rt := &Retrainer{Steps: [][]string{{"true"}, {"sh", "-c", "echo no carrier >&2; exit 2"}}, Restore: up}
	err := rt.Run()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no carrier", "the failed step's output")
	assert.Contains(t, err.Error(), "the port was brought up again (sh -c echo up >> "+mark+", try 1)")
	assert.Equal(t, 1, restored())

	rt = &Retrainer{Steps: [][]string{{"false"}, {"true"}}, Restore: up}
	err = rt.Run()
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "brought up", "the down step failed: nothing to undo")
	assert.Equal(t, 1, restored(), "Restore did not run")

	rt = &Retrainer{Steps: [][]string{{"false"}}, Restore: up}
	err = rt.Run()
	require.Error(t, err, "a toggle that failed may have left the port down")
	assert.Contains(t, err.Error(), "brought up again")
	assert.Equal(t, 2, restored())

	rt = &Retrainer{Steps: [][]string{{"true"}, {"false"}}, Restore: []string{"sh", "-c", "echo busy >&2; exit 1"}}
	err = rt.Run()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "bringing the port up again failed 3 times")
	assert.Contains(t, err.Error(), "busy")
	assert.Contains(t, err.Error(), "bring it up by hand")

	require.NoError(t, (&Retrainer{Steps: [][]string{{"true"}, {"true"}}, Restore: up}).Run())
	assert.Equal(t, 2, restored(), "a retrain that worked restores nothing")
}
