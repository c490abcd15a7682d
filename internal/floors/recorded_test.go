package floors_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/floors"
	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/rails"
)

// The floors of a recorded 8-GPU host's rail, built the way pingpong builds
// them (harness/rc.End.PathLimit): every function on the GPU<->NIC path as
// trained, with its MaxPayload.
func TestFloorsOnRecordedRail(t *testing.T) {
	r, err := hostfs.New(filepath.Join("..", "..", "fixtures", "hosts", "dgx"))
	require.NoError(t, err)
	h := rails.Discover(r)
	cfg, err := config.Parse(func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	s, err := h.Select(cfg)
	require.NoError(t, err)
	rail := s.All[5]
	devs, missing := s.PathDevices(rail)
	require.Empty(t, missing)
	var links []floors.Link
	for _, d := range devs {
		links = append(links, floors.LinkOf(d.Dev, d.Role, s.Index.Device(d.Dev.Parent())))
	}
	b, err := floors.Find(rail.NIC.RateGbps, false, links)
	require.NoError(t, err)
	t.Logf("%s: port %.0f Gb/s; %s", rail, rail.NIC.RateGbps, b.Derived)
	sizes := []int{2, 4096, 16384, 65536, 1048576}
	fs := floors.Floors(b, floors.DefaultFractions, sizes)
	for _, f := range fs {
		t.Logf("  %8d B: floor %6.1f Gb/s  (%s)", f.Size, f.Gbps, f.Why)
	}
	assert.Zero(t, fs[0].Gbps)
	assert.InDelta(t, 0.9*b.Gbps, fs[4].Gbps, 1e-9)
	assert.LessOrEqual(t, b.Gbps, rail.NIC.RateGbps)
}
