package topo

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

func TestIOMMUParams(t *testing.T) {
	assert.Equal(t, []string{"intel_iommu=on", "iommu=pt"}, IOMMUParams("BOOT_IMAGE=/vmlinuz root=/dev/sda1 intel_iommu=on iommu=pt quiet\n"))
	assert.Empty(t, IOMMUParams(""))
}

// TOPO-05's rule table: identity passes, translated DMA fails unless
// GDR_ALLOW_IOMMU=1 allows it, blocked and unmanaged fail whatever it
// says, an unknown type fails asking to be learnt; a group without a
// type file is read from the kernel parameters.
func TestJudgeIOMMU(t *testing.T) {
	dev := func(group, typ string) *pci.Device {
		return &pci.Device{BDF: "0000:3b:00.0", Vendor: 0x10de, Class: 0x030200, IOMMUGroup: group, IOMMUType: typ}
	}
	j := JudgeIOMMU(dev("", ""), nil, false)
	assert.Equal(t, "none (no IOMMU group)", j.Mode)
	assert.Nil(t, j.Finding)

	j = JudgeIOMMU(dev("7", "identity"), nil, false)
	assert.Equal(t, "identity", j.Mode)
	assert.Nil(t, j.Finding)

	j = JudgeIOMMU(dev("7", ""), []string{"iommu=pt"}, false)
	assert.Equal(t, "identity (inferred: no group type file, iommu=pt)", j.Mode)
	assert.Nil(t, j.Finding)

	for _, typ := range []string{"DMA", "DMA-FQ"} {
		j = JudgeIOMMU(dev("7", typ), []string{"intel_iommu=on"}, false)
		require.NotNil(t, j.Finding, typ)
		assert.Equal(t, verdict.Fail, j.Finding.Level)
		assert.Equal(t, verdict.FellShort, j.Finding.Kind())
		assert.Contains(t, j.Finding.Cause, "is in IOMMU group 7 of type "+typ+": translated DMA")
		assert.Contains(t, j.Finding.Cause, "(kernel parameters: intel_iommu=on)")
		assert.True(t, strings.HasPrefix(j.Finding.Remedy, "boot with iommu=pt"), j.Finding.Remedy)
		assert.Equal(t, "0000:3b:00.0", j.Finding.Device)
		assert.Equal(t, "host configuration", j.Finding.Part)

		j = JudgeIOMMU(dev("7", typ), nil, true)
		require.NotNil(t, j.Finding)
		assert.Equal(t, verdict.Info, j.Finding.Level, "GDR_ALLOW_IOMMU=1: reported")
		assert.True(t, strings.HasSuffix(j.Finding.Cause, "; allowed by GDR_ALLOW_IOMMU=1"), j.Finding.Cause)
	}

	j = JudgeIOMMU(dev("7", ""), nil, false)
	assert.Equal(t, "DMA (inferred: IOMMU group 7 without a type file and no iommu=pt)", j.Mode)
	require.NotNil(t, j.Finding)
	assert.Contains(t, j.Finding.Cause, "(kernel parameters: none)")

	for _, typ := range []string{"blocked", "unmanaged"} {
		j = JudgeIOMMU(dev("7", typ), nil, true)
		require.NotNil(t, j.Finding, typ)
		assert.Equal(t, verdict.Fail, j.Finding.Level, "%s: GDR_ALLOW_IOMMU does not apply", typ)
		assert.Contains(t, j.Finding.Remedy, "GDR_ALLOW_IOMMU does not apply")
	}

	j = JudgeIOMMU(dev("7", "DMA-new"), nil, true)
	require.NotNil(t, j.Finding)
	assert.Equal(t, verdict.Fail, j.Finding.Level)
	assert.Contains(t, j.Finding.Cause, `of type "DMA-new", which this suite does not know`)
}
