package nvdriver

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

func TestTopoMRecorded(t *testing.T) {
	r, err := hostfs.New(filepath.Join("..", "..", "fixtures", "hosts", "dgx"))
	require.NoError(t, err)
	out, src, err := TopoM(r, time.Second)
	require.NoError(t, err)
	assert.Contains(t, out, "GPU0")
	assert.Equal(t, r.Host(RecordedTopo), src)

	dir := t.TempDir()
	r, err = hostfs.New(dir)
	require.NoError(t, err)
	_, _, err = TopoM(r, time.Second)
	var a *verdict.Finding
	require.ErrorAs(t, err, &a)
	assert.Equal(t, verdict.Absent, a.Kind())
	assert.Equal(t, "GDR_HOST_ROOT="+r.Dir()+" is not the running host and holds no recorded /cmd/nvidia-smi_topo_-m.txt; nvidia-smi is run only against the live host", a.Cause)
}

func TestTopoMLive(t *testing.T) {
	live, err := hostfs.New("/")
	require.NoError(t, err)
	bin := t.TempDir()
	t.Setenv("PATH", bin)
	_, _, err = TopoM(live, time.Second)
	var a *verdict.Finding
	require.ErrorAs(t, err, &a)
	assert.Equal(t, verdict.Absent, a.Kind())
	assert.Contains(t, a.Cause, "nvidia-smi not found in PATH")

	smi := filepath.Join(bin, "nvidia-smi")
	require.NoError(t, os.WriteFile(smi, []byte("#!/bin/sh\necho 'NVIDIA-SMI has failed'\nexit 9\n"), 0o755))
	_, _, err = TopoM(live, 5*time.Second)
	var f *verdict.Finding
	require.ErrorAs(t, err, &f)
	assert.Equal(t, verdict.FellShort, f.Kind())
	assert.Equal(t, smi+" topo -m: exit status 9: NVIDIA-SMI has failed", f.Cause)
	assert.Equal(t, "check that the NVIDIA driver is loaded and nvidia-smi works", f.Remedy)

	// What nvidia-smi topo -m printed into a pipe on an H100 (driver
	// 580.159.04, 2026-12-06): the header starts with a tab and is
	// underlined with ANSI escapes even though stdout is no terminal.
	rec, err := filepath.Abs(filepath.Join("..", "..", "fixtures", "nvsmi", "h100-1-pipe.txt"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(smi, []byte("#!/bin/sh\n[ \"$1 $2\" = 'topo -m' ] || exit 3\nexec /bin/cat '"+rec+"'\n"), 0o755))
	out, src, err := TopoM(live, 5*time.Second)
	require.NoError(t, err)
	assert.Equal(t, smi+" topo -m", src)
	m, err := ParseTopoAt(out, src)
	require.NoError(t, err, "the live output parses as it was printed")
	assert.Equal(t, []string{"GPU0"}, m.Labels)
	assert.Equal(t, "0-15", m.CPUAffinity["GPU0"])
}
