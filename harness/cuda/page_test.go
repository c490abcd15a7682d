//go:build gpu

package cuda

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Every host-page rule of the GPU harness takes the page size: 4 KiB on
// x86, 64 KiB on arm64 kernels with 64K pages (Ubuntu's linux-nvidia-64k,
// RHEL's kernel-64k), where dma-buf exports and registrations cover whole
// 64 KiB pages.
func TestHostPage64K(t *testing.T) {
	const pg = 65536
	// cuMemAlloc buffers: the span and a re-aligned start.
	assert.Equal(t, pg, roundUp(1000, pg))
	assert.Equal(t, 2<<20, roundUp(2<<20, pg))
	assert.Equal(t, uintptr(0x7f0000010000), alignUp(0x7f0000000200, pg), "512-byte aligned small allocation moved to the next 64 KiB page")
	assert.Equal(t, uintptr(0x7f0000001000), alignUp(0x7f0000000200, 4096))
	assert.Equal(t, uintptr(0x7f0000200000), alignUp(0x7f0000200000, pg))

	// dma-buf export ranges.
	assert.NoError(t, exportRange(0x7f0000010000, pg, pg))
	assert.NoError(t, exportRange(0x7f0000200000, 2<<20, pg))
	assert.ErrorContains(t, exportRange(0x7f0000001000, 4096, pg), "multiples of the 65536-byte host page", "4 KiB aligned is not enough there")
	assert.ErrorContains(t, exportRange(0x7f0000010000, 4096, pg), "65536-byte host page")
	assert.NoError(t, exportRange(0x7f0000001000, 4096, 4096))
	assert.Error(t, exportRange(0x7f0000010000, 0, pg))

	// VMM granularity: the H200's 2 MiB covers 64 KiB pages.
	assert.NoError(t, checkGranularity(2<<20, 2<<20, pg))
	assert.ErrorContains(t, checkGranularity(4096, 32768, pg), "65536-byte host page")
	assert.Error(t, checkGranularity(2<<20, 3<<20, pg), "recommended not a multiple of the minimum")
	assert.Error(t, checkGranularity(0, 2<<20, pg))
}
