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

	require.NoError(t, os.WriteFile(smi, []byte("#!/bin/sh\necho \"GPU0 $1 $2\"\n"), 0o755))
	out, src, err := TopoM(live, 5*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "GPU0 topo -m", out, "trimmed, as hostfs.Run returns it")
	assert.Equal(t, smi+" topo -m", src)
}
