//go:build gpu

package cuda

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/config"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// GPU-03..06: an attribute meets the value GPUDirect needs, or fails with
// the remedy; -1 reports it only; the emulated GPU is absent.
func TestJudgeAttr(t *testing.T) {
	dev := Device{PCI: "0000:3b:00.0", Name: "H200"}
	assert.Nil(t, JudgeAttr(dev, AttrGPUDirectRDMASupported, 1, 1, "r"))
	assert.Nil(t, JudgeAttr(dev, AttrGPUDirectRDMASupported, 0, -1, "r"), "want -1: reported only")
	f := JudgeAttr(dev, AttrGPUDirectRDMASupported, 0, 1, "the remedy")
	require.NotNil(t, f)
	assert.Equal(t, verdict.FellShort, f.Kind())
	assert.Equal(t, "GPU 0000:3b:00.0 (H200): GPU_DIRECT_RDMA_SUPPORTED is 0, want 1", f.Cause)
	assert.Equal(t, "the remedy", f.Remedy)
	dev.Emulated = true
	f = JudgeAttr(dev, AttrGPUDirectRDMASupported, 0, 1, "the remedy")
	require.NotNil(t, f)
	assert.Equal(t, verdict.Absent, f.Kind())
	assert.Equal(t, "GPU 0000:3b:00.0 is the lab's emulated GPU, which does not emulate GPU_DIRECT_RDMA_SUPPORTED (it reports 0); a real GPU is judged here", f.Cause)
}

func TestOneGPUWhy(t *testing.T) {
	assert.Equal(t, "the CUDA driver sees 1 GPU(s)", oneGPUWhy(1, config.Config{}))
	assert.Equal(t, "the CUDA driver sees 8 GPU(s) and GDR_GPU=3 selects one", oneGPUWhy(8, config.Config{GPU: "3"}))
	assert.Equal(t, "the CUDA driver sees 8 GPU(s) and GDR_RAILS=5 selects one", oneGPUWhy(8, config.Config{Rails: []int{5}}))
	assert.Equal(t, "the CUDA driver sees 8 GPU(s) and GDR_GPU=3 GDR_RAILS=3,4 selects one", oneGPUWhy(8, config.Config{GPU: "3", Rails: []int{3, 4}}))
}

// A missing library or no device is absence; any other load error is not.
func TestLoadAbsence(t *testing.T) {
	assert.Equal(t, "no CUDA driver: "+(&LoadError{Missing: true, Msg: "x"}).Error(), loadAbsence(&LoadError{Missing: true, Msg: "x"}))
	assert.Empty(t, loadAbsence(&LoadError{Msg: "cuFoo: undefined symbol"}), "an incomplete driver is broken, not absent")
	e := &Error{Op: "cuInit(0)", Code: ErrNoDevice}
	assert.Equal(t, "no GPU: "+e.Error(), loadAbsence(e))
	assert.Empty(t, loadAbsence(&Error{Op: "cuInit(0)", Code: 999}))
}
