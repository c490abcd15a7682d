package vm

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseModinfo(t *testing.T) {
	sec := []byte("license=GPL\x00depends=ib_uverbs,ib_core,udp-tunnel,\x00name=rdma_rxe\x00vermagic=6.1\x00\x00junk")
	mi := ParseModinfo(sec)
	assert.Equal(t, "rdma_rxe", mi.Name)
	assert.Equal(t, []string{"ib_uverbs", "ib_core", "udp_tunnel"}, mi.Depends)
	assert.Empty(t, ParseModinfo([]byte("depends=\x00")).Depends)
	assert.Equal(t, "virtio_pci", ModName("/x/kernel/drivers/virtio/virtio-pci.ko"))
}

func depsOf(m map[string][]string) func(string) ([]string, error) {
	return func(n string) ([]string, error) {
		d, ok := m[n]
		if !ok {
			return nil, fmt.Errorf("kernel module %s not found", n)
		}
		return d, nil
	}
}

// The lab's real module graph (Debian 6.1), as .modinfo declares it.
var debianGraph = map[string][]string{
	"crc32_generic": nil, "rdma_rxe": {"ib_uverbs", "ib_core", "udp_tunnel", "ip6_udp_tunnel"},
	"ib_uverbs": {"ib_core"}, "ib_core": nil, "udp_tunnel": nil, "ip6_udp_tunnel": nil,
	"rdma_ucm": {"ib_uverbs", "rdma_cm", "ib_core"}, "rdma_cm": {"iw_cm", "ib_cm", "ib_core"},
	"iw_cm": {"ib_core"}, "ib_cm": {"ib_core"},
	"virtio_pci":            {"virtio_pci_modern_dev", "virtio_pci_legacy_dev", "virtio_ring", "virtio"},
	"virtio_pci_modern_dev": nil, "virtio_pci_legacy_dev": nil, "virtio_ring": nil, "virtio": {"virtio_ring"},
	"virtio_net": {"net_failover", "virtio_ring", "virtio"}, "net_failover": {"failover"}, "failover": nil,
	"sch_netem": nil,
}

func TestLoadOrder(t *testing.T) {
	order, err := LoadOrder(ModuleRoots, depsOf(debianGraph))
	require.NoError(t, err)
	pos := map[string]int{}
	for i, m := range order {
		_, dup := pos[m]
		require.False(t, dup, "%s listed twice", m)
		pos[m] = i
	}
	assert.Len(t, order, len(debianGraph))
	for m, ds := range debianGraph {
		for _, d := range ds {
			assert.Less(t, pos[d], pos[m], "%s must load before %s", d, m)
		}
	}
	assert.Equal(t, 0, pos["crc32_generic"], "first root stays first")
	assert.Less(t, pos["rdma_rxe"], pos["virtio_net"], "roots keep their order")
	assert.Equal(t, []string{"crc32_generic", "ib_core", "ib_uverbs", "ip6_udp_tunnel", "udp_tunnel", "rdma_rxe"}, order[:6])
}

func TestLoadOrderErrors(t *testing.T) {
	_, err := LoadOrder([]string{"a"}, depsOf(map[string][]string{"a": {"b"}, "b": {"a"}}))
	assert.ErrorContains(t, err, "cycle: a -> b -> a")
	_, err = LoadOrder([]string{"a"}, depsOf(map[string][]string{"a": {"missing"}}))
	assert.ErrorContains(t, err, "missing not found")
	assert.ErrorContains(t, err, "needed by a")
}

func TestParseAptOutputs(t *testing.T) {
	dep := "linux-image-amd64\n  Depends: linux-image-6.1.0-57-amd64\n |Depends: foo\n"
	assert.Equal(t, "linux-image-6.1.0-57-amd64", ParseKernelDepends(dep))
	assert.Equal(t, "", ParseKernelDepends("linux-image-amd64\n"))
	pol := "perftest:\n  Installed: (none)\n  Candidate: 4.5+0.17-1\n  Version table:\n     4.5+0.17-1 500\nnothing:\n  Installed: (none)\n  Candidate: (none)\n"
	assert.Equal(t, map[string]string{"perftest": "4.5+0.17-1"}, ParsePolicy(pol))
	a := PartsKey(map[string]string{"a": "1", "b": "2"})
	assert.Equal(t, a, PartsKey(map[string]string{"b": "2", "a": "1"}), "key ignores map order")
	assert.NotEqual(t, a, PartsKey(map[string]string{"a": "1", "b": "3"}), "a new version is a new key")
}

func TestHasPVHNote(t *testing.T) {
	assert.False(t, HasPVHNote([]byte("not an elf")))
}
