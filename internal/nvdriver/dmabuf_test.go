package nvdriver

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/hostfs/hostfstest"
	"github.com/gdrconf/gdrconf/internal/kmod"
	"github.com/gdrconf/gdrconf/internal/topo"
)

func kernel(t *testing.T, release string) (*hostfs.Root, *kmod.Host) {
	t.Helper()
	files := map[string]string{}
	if release != "" {
		files["proc/sys/kernel/osrelease"] = release + "\n"
	}
	root := hostfstest.Tree(t, files)
	km, err := kmod.New(root)
	require.NoError(t, err)
	return root, km
}

func TestDmabuf(t *testing.T) {
	open := Info{Version: "580.159.04", Open: true}
	root, km := kernel(t, "6.8.0-60-generic")
	ok, why := Dmabuf(root, km, open, nil)
	assert.True(t, ok)
	assert.Equal(t, "open kernel module 580.159.04, Linux 6.8.0-60-generic", why, "no library looked at off the live host")

	ok, why = Dmabuf(root, km, open, &VerbsDmabuf{Has: true})
	assert.True(t, ok)
	assert.Equal(t, "open kernel module 580.159.04, Linux 6.8.0-60-generic, libibverbs with ibv_reg_dmabuf_mr", why)

	ok, why = Dmabuf(root, km, open, &VerbsDmabuf{})
	assert.False(t, ok)
	assert.Equal(t, "libibverbs has no ibv_reg_dmabuf_mr (rdma-core < 34)", why)

	ok, why = Dmabuf(root, km, Info{Version: "535.1"}, &VerbsDmabuf{Err: errors.New("libibverbs.so.1: cannot open")})
	assert.False(t, ok)
	assert.Equal(t, "proprietary kernel module 535.1 (dma-buf needs the open one); libibverbs.so.1: cannot open", why)

	root, km = kernel(t, "5.4.0-200-generic")
	ok, why = Dmabuf(root, km, open, nil)
	assert.False(t, ok)
	assert.Equal(t, "Linux 5.4.0-200-generic (dma-buf MRs need 5.12)", why)

	root, km = kernel(t, "")
	ok, why = Dmabuf(root, km, open, nil)
	assert.False(t, ok)
	assert.Equal(t, "kernel release unknown ("+root.Host(kmod.ReleaseFile)+" missing)", why)
}

// The PCIe mapping type exactly where NCCL asks for it: a C2C GPU whose NIC
// is not P2C (Grace with a ConnectX-8 switch: PXB); flags 0 on PCIe GPUs
// (the H200 refuses the flag, 801) and on P2C rails (GH200/GB200 + CX7).
func TestChooseDmabufMapping(t *testing.T) {
	for _, tc := range []struct {
		c2c   bool
		class topo.Class
		flags int
		why   string
	}{
		{false, topo.PIX, 0, "not attached to its CPU over NVLink-C2C"},
		{false, topo.PXB, 0, "not attached"},
		{false, topo.SYS, 0, "not attached"},
		{false, topo.Unknown, 0, "not attached"},
		{true, topo.P2C, 0, "(P2C)"},
		{true, topo.Unknown, 0, "path to the NIC is unknown"},
		{true, topo.PXB, DmabufFlagPCIe, "PCIe path of its own (PXB)"},
		{true, topo.PIX, DmabufFlagPCIe, "(PIX)"},
		{true, topo.SYS, DmabufFlagPCIe, "(SYS)"}, // NCCL: distance != P2C, under a raised NCCL_NET_GDR_LEVEL
	} {
		m := ChooseDmabufMapping(tc.c2c, tc.class)
		assert.Equal(t, tc.flags, m.Flags, "%+v", tc)
		assert.Equal(t, tc.flags != 0, m.PCIe(), "%+v", tc)
		assert.Contains(t, m.Why, tc.why, "%+v", tc)
	}
	assert.Equal(t, 1, DmabufFlagPCIe, "cuda.h CUmemRangeFlags")
}

func TestDmabufMappingNote(t *testing.T) {
	pcie := ChooseDmabufMapping(true, topo.PXB)
	assert.Equal(t, pcie.Why, DmabufMappingNote(pcie, nil))
	refused := errors.New("cuMemGetHandleForAddressRange(DMA_BUF_FD, 2 MiB, flags 0x1): CUDA_ERROR_NOT_SUPPORTED (operation not supported)")
	n := DmabufMappingNote(pcie, refused)
	assert.True(t, strings.HasPrefix(n, "flags 0 after the driver refused CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE (cuMemGetHandleForAddressRange"), n)
	assert.Contains(t, n, "CUDA_ERROR_NOT_SUPPORTED")
	assert.Contains(t, n, "NCCL's net transport would fail")
	assert.Contains(t, n, "asked for because the GPU is on NVLink-C2C and the NIC on a PCIe path of its own (PXB)")
	plain := ChooseDmabufMapping(false, topo.PXB)
	assert.Equal(t, plain.Why, DmabufMappingNote(plain, refused), "flags 0 were never refused")
}
