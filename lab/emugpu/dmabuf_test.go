//go:build gpu

package emugpu_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/gdrconf/gdrconf/harness/cuda"
	"github.com/gdrconf/gdrconf/harness/membuf"
	"github.com/gdrconf/gdrconf/internal/nvdriver"
)

// The PCIe mapping type of a dma-buf export (what NCCL asks of a GPU on
// NVLink-C2C whose NIC is on a PCIe path of its own): the emulator refuses
// it as the PCIe H200 does (801) unless FAKE_CUDA_DMABUF_PCIE=1, and the
// harness then exports with flags 0, saying so (Refused). With
// FAKE_CUDA_DMABUF=memfd exports succeed (a memfd, not a dma-buf), so the
// flags each one carried can be seen.
func TestDmabufMappingFlag(t *testing.T) {
	useFake(t)
	t.Setenv("FAKE_CUDA_DMABUF", "memfd")
	t.Setenv("FAKE_CUDA_DMABUF_PCIE", "")
	d, err := cuda.Load()
	require.NoError(t, err)
	devs, err := d.Devices()
	require.NoError(t, err)
	c := cuda.Primary(t, devs[0])
	bufs := []cuda.Buffer{cuda.Alloc(t, c, 2<<20)}
	if cuda.VMMAbsence(d, devs[0]) == "" {
		bufs = append(bufs, cuda.AllocVMM(t, c, 2<<20))
	}
	export := func(b cuda.Buffer, flags int) membuf.DmabufExport {
		t.Helper()
		mb, ok := b.(membuf.DmabufMapper)
		require.True(t, ok, "GPU memory chooses its export flags")
		assert.Equal(t, devs[0].PCI, mb.GPUPCI())
		x, err := mb.DmabufExport(flags)
		require.NoError(t, err)
		require.GreaterOrEqual(t, x.FD, 0)
		require.NoError(t, unix.Close(x.FD))
		return x
	}
	for _, b := range bufs {
		x := export(b, 0)
		assert.Equal(t, 0, x.Flags)
		assert.NoError(t, x.Refused)

		// Refused as on a PCIe GPU: flags 0, with the driver's answer.
		x = export(b, nvdriver.DmabufFlagPCIe)
		assert.Equal(t, 0, x.Flags, "%s: fell back to flags 0", b.Allocator())
		require.Error(t, x.Refused)
		assert.Equal(t, cuda.ErrNotSupported, cuda.Code(x.Refused))
		assert.Contains(t, x.Refused.Error(), "flags 0x1")
		assert.Contains(t, x.Refused.Error(), "PCIe mapping type")

		// Accepted as a C2C GPU's driver would.
		t.Setenv("FAKE_CUDA_DMABUF_PCIE", "1")
		x = export(b, nvdriver.DmabufFlagPCIe)
		assert.Equal(t, nvdriver.DmabufFlagPCIe, x.Flags, "%s", b.Allocator())
		assert.NoError(t, x.Refused)
		t.Setenv("FAKE_CUDA_DMABUF_PCIE", "")

		// A flag the driver does not know: INVALID_VALUE, then flags 0.
		x = export(b, 2)
		assert.Equal(t, cuda.ErrInvalidValue, cuda.Code(x.Refused))
		assert.Equal(t, 0, x.Flags)
	}

	// Without exports (the lab's default) both answers come back: the
	// refusal of the flag and the export's own.
	t.Setenv("FAKE_CUDA_DMABUF", "")
	_, err = bufs[0].(membuf.DmabufMapper).DmabufExport(nvdriver.DmabufFlagPCIe)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "PCIe mapping type")
	assert.Contains(t, err.Error(), "retried with flags 0")
	assert.Contains(t, err.Error(), "rxe has no dma-buf MRs")
	assert.Equal(t, cuda.ErrNotSupported, cuda.Code(err))
}
