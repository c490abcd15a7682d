package nvdriver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/pathclass"
)

func sample(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "fixtures", "nvsmi", name))
	require.NoError(t, err)
	return string(b)
}

func TestRecordedH200(t *testing.T) {
	m, err := ParseTopo(sample(t, "h200-1.txt"))
	require.NoError(t, err)
	assert.Equal(t, []string{"GPU0"}, m.Labels)
	assert.Empty(t, m.Pairs())
	assert.Equal(t, "0-15", m.CPUAffinity["GPU0"])
	assert.Equal(t, "0", m.NUMAAffinity["GPU0"])
	assert.Equal(t, "N/A", m.GPUNUMAID["GPU0"])
	assert.Contains(t, m.Legend["PIX"], "at most a single PCIe bridge")
	assert.Len(t, m.Legend, 7)
}

func TestHGX(t *testing.T) {
	m, err := ParseTopo(sample(t, "hgx-8gpu-4nic.txt"))
	require.NoError(t, err)
	require.Len(t, m.Labels, 12)
	assert.Len(t, m.GPUs(), 8)
	assert.Len(t, m.Pairs(), 66)
	assert.Equal(t, "mlx5_2", m.NICNames["NIC2"])
	for _, tc := range []struct{ a, b, want string }{
		{"GPU0", "GPU7", "NV18"}, {"GPU0", "NIC0", "PIX"}, {"GPU3", "NIC1", "PIX"}, {"GPU0", "NIC1", "NODE"},
		{"GPU0", "NIC3", "SYS"}, {"NIC3", "GPU0", "SYS"}, {"GPU6", "NIC3", "PIX"},
	} {
		v, ok := m.Cell(tc.a, tc.b)
		require.True(t, ok)
		assert.Equal(t, tc.want, v, "%s-%s", tc.a, tc.b)
	}
	assert.Equal(t, "56-111,168-223", m.CPUAffinity["GPU5"])
	assert.Equal(t, "1", m.NUMAAffinity["GPU5"])
}

func TestX2AndOldStyle(t *testing.T) {
	m, err := ParseTopo(sample(t, "h200x2-nv18.txt"))
	require.NoError(t, err)
	require.Equal(t, []TopoPair{{A: "GPU0", B: "GPU1", Link: "NV18"}}, m.Pairs())
	lk, err := ParseTopoLink(m.Pairs()[0].Link)
	require.NoError(t, err)
	assert.Equal(t, 18, lk.NVLinks)

	m, err = ParseTopo(sample(t, "old-style-2gpu.txt"))
	require.NoError(t, err)
	assert.Equal(t, []string{"GPU0", "GPU1", "mlx5_0"}, m.Labels)
	assert.Equal(t, "mlx5_0", m.NICNames["mlx5_0"])
	v, _ := m.Cell("GPU0", "mlx5_0")
	assert.Equal(t, "PIX", v)
	assert.Contains(t, m.Legend, "SOC")
}

func TestParseTopoLink(t *testing.T) {
	for in, want := range map[string]TopoLink{
		" X ": {Self: true}, "NV4": {NVLinks: 4}, "PIX": {Class: pathclass.PIX}, "PXB": {Class: pathclass.PXB},
		"PHB": {Class: pathclass.PHB}, "NODE": {Class: pathclass.NODE}, "SYS": {Class: pathclass.SYS}, "SOC": {Class: pathclass.SYS},
	} {
		got, err := ParseTopoLink(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "NV", "NV0", "NV1234", "FAST", "UNKNOWN"} {
		_, err := ParseTopoLink(bad)
		assert.Error(t, err, "%q", bad)
	}
}

func TestParseTopoMalformed(t *testing.T) {
	good := sample(t, "hgx-8gpu-4nic.txt")
	for name, tc := range map[string]struct{ in, want string }{
		"empty":       {"", "no header line"},
		"error text":  {"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", "no header line"},
		"bad cell":    {strings.Replace(good, "GPU0\t X \tNV18", "GPU0\t X \tWARP", 1), `"WARP"`},
		"asymmetric":  {strings.Replace(good, "GPU0\t X \tNV18", "GPU0\t X \tNV12", 1), "GPU0->GPU1 is NV12 but GPU1->GPU0 is NV18"},
		"self moved":  {strings.Replace(good, "GPU0\t X \tNV18", "GPU0\tNV18\t X ", 1), "wrong place for X"},
		"short row":   {strings.Replace(good, "GPU0\t X \tNV18\tNV18\tNV18\tNV18\tNV18\tNV18\tNV18\tPIX\tNODE\tSYS\tSYS\t0-55,112-167\t0\t\tN/A", "GPU0\t X \tNV18", 1), "row GPU0 has 2 cells, want 12"},
		"missing row": {strings.Replace(good, "\nGPU7\t", "\ngpu7\t", 1), "no row for GPU7, NIC0, NIC1, NIC2, NIC3 (line 9 reads \"gpu7"},
		"bad legend":  {strings.Replace(good, "NIC3: mlx5_3", "NIC9: mlx5_3", 1), "NIC9"},
	} {
		_, err := ParseTopo(tc.in)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), tc.want, name)
	}
}

func FuzzParseTopo(f *testing.F) {
	for _, n := range []string{"h200-1.txt", "hgx-8gpu-4nic.txt", "h200x2-nv18.txt", "old-style-2gpu.txt"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "fixtures", "nvsmi", n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseTopo(s)
		if err != nil {
			return
		}
		for _, p := range m.Pairs() {
			if _, err := ParseTopoLink(p.Link); err != nil {
				t.Fatalf("pair %v has a bad link: %v", p, err)
			}
		}
	})
}
