//go:build gpu

package cuda

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/verdict"
)

// The gpu area's rules: nil at their thresholds, a finding with cause and
// remedy (the tests write none) below them.
func TestGPURules(t *testing.T) {
	dev := Device{PCI: "0000:3b:00.0", Name: "P100"}
	assert.Nil(t, DriverTooOld(MinDriverVersion))
	f := DriverTooOld(10020)
	require.NotNil(t, f)
	assert.Equal(t, "CUDA driver 10.2 is older than 11.0, the oldest this suite supports", f.Cause)
	assert.Equal(t, "upgrade the NVIDIA driver to R450 or newer", f.Remedy)

	assert.Nil(t, ReadBackMismatch(dev.PCI, []byte("gdr"), []byte("gdr")))
	assert.Equal(t, `GPU 0000:3b:00.0: wrote "gdr" to device memory, read back "\x00\x00\x00"`, ReadBackMismatch(dev.PCI, []byte("gdr"), make([]byte, 3)).Cause)

	assert.Nil(t, JudgeCC(dev, 6, 0))
	f = JudgeCC(dev, 5, 2)
	require.NotNil(t, f)
	assert.Equal(t, "GPU 0000:3b:00.0 (P100) has compute capability 5.2, below 6.0", f.Cause)
	assert.Contains(t, f.Remedy, "Pascal")

	for _, a := range []Attribute{AttrGPUDirectRDMASupported, AttrDMABufSupported, AttrGPUDirectRDMAWithVMM} {
		assert.NotEmpty(t, attrRemedies[a], "%s: CheckAttr has a remedy for it", a)
	}

	assert.Nil(t, JudgeWritesOrdering(dev, WritesOrderingNone, FlushHost), "a flush option suffices")
	assert.Nil(t, JudgeWritesOrdering(dev, 100, 0))
	f = JudgeWritesOrdering(dev, WritesOrderingNone, 0)
	require.NotNil(t, f)
	assert.Contains(t, f.Cause, "writes ordering NONE")

	assert.Nil(t, JudgeBAR1Free(dev.PCI, 64<<20, 64<<20))
	f = JudgeBAR1Free(dev.PCI, 32<<20, 64<<20)
	require.NotNil(t, f)
	assert.Equal(t, "GPU 0000:3b:00.0: only 32 MiB of BAR1 free, below the 64 MiB the suite's registrations need", f.Cause)

	assert.Equal(t, "NVML has no GPU at 0000:3b:00.0 (NVML sees 0000:5e:00.0, 0000:86:00.0)", NVMLLacksGPU(dev.PCI, []string{"0000:5e:00.0", "0000:86:00.0"}).Cause)
	assert.Equal(t, verdict.Absent, NoDmabufExport(dev.PCI, 0, 11040).Kind(), "GPU-04 fails for it")
	assert.Equal(t, verdict.FellShort, DmabufExportFailed(dev.PCI, errors.New("CUDA_ERROR_NOT_SUPPORTED")).Kind())
	assert.Equal(t, "GPU 0000:3b:00.0: exported fd 7: boom", FDUnread(dev.PCI, 7, errors.New("boom")).Cause)

	ok := DmabufInfo{IsDmabuf: true, Size: 2 << 20}
	assert.Nil(t, JudgeDmabufFD(dev.PCI, 7, ok, 2<<20))
	assert.Nil(t, JudgeDmabufFD(dev.PCI, 7, DmabufInfo{IsDmabuf: true}, 2<<20), "a size the kernel does not show is not judged")
	f = JudgeDmabufFD(dev.PCI, 7, DmabufInfo{FSType: 0x9fa0, Link: "anon_inode:[eventfd]"}, 2<<20)
	require.NotNil(t, f)
	assert.Contains(t, f.Cause, "is not a dma-buf")
	f = JudgeDmabufFD(dev.PCI, 7, DmabufInfo{IsDmabuf: true, Size: 4096}, 2<<20)
	require.NotNil(t, f)
	assert.Equal(t, "GPU 0000:3b:00.0: dma-buf of 4096 bytes exported for a 2097152-byte range", f.Cause)
}
