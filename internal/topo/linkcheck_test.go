package topo

import (
	"testing"

	"github.com/gdrconf/gdrconf/internal/pci"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckLink(t *testing.T) {
	link := func(d *pci.Device, cur, max float64, curW, maxW int) *pci.Device {
		d.Link = pci.Link{CurGTs: cur, MaxGTs: max, CurWidth: curW, MaxWidth: maxW}
		return d
	}
	gpu := link(dev(dspA+"/0000:05:00.0", 0), 2.5, 32, 16, 16)
	nic := link(dev(dspB+"/0000:06:00.0", 0), 16, 16, 4, 8)
	nic.Class, nic.Vendor = 0x020700, 0x15b3
	vf := link(dev(dspB+"/0000:06:00.2", 0), 0, 0, 0, 0)
	vf.Class, vf.Vendor, vf.Device = 0x020700, 0x15b3, 0x101e
	ix := New([]*pci.Device{
		link(bridge(rp0, 0), 32, 32, 16, 16), link(bridge(usp, 0), 8, 32, 16, 16),
		link(bridge(dspA, 0), 2.5, 32, 16, 16), link(bridge(dspB, 0), 32, 32, 16, 16),
		gpu, nic, vf, dev(rp1, 0),
	})

	c := ix.CheckLink(gpu, gpu)
	assert.Empty(t, c.Failures, "an idle GPU is not a failure")
	assert.Equal(t, "0000:05:00.0 at 2.5 GT/s of 32 GT/s (normal when idle)", c.IdleGPU)
	assert.Contains(t, c.IdleLog, "GPU 0000:05:00.0 runs at 2.5 GT/s of 32 GT/s")
	assert.Equal(t, "0000:05:00.0 GPU 2.5 GT/s x16 (max 32 GT/s x16)", c.Summary)

	c = ix.CheckLink(nic, gpu)
	require.Len(t, c.Failures, 1)
	assert.Equal(t, "NIC 0000:06:00.0 link trained to x4, below its max x8 (speed 16 GT/s x4 (max 16 GT/s x8))", c.Failures[0].Cause)
	assert.Contains(t, c.Failures[0].Remedy, "lspci -vv -s 0000:06:00.0")

	c = ix.CheckLink(ix.Device("0000:01:00.0"), gpu)
	require.Len(t, c.Failures, 1, "a slow link above the GPU's is not excused as idle")
	assert.Equal(t, "bridge 0000:01:00.0 link trained to 8 GT/s, below its max 32 GT/s (8 GT/s x16 (max 32 GT/s x16))", c.Failures[0].Cause)
	assert.Empty(t, c.IdleGPU)

	c = ix.CheckLink(ix.Device("0000:02:00.0"), gpu)
	assert.Empty(t, c.Failures, "the port above the GPU shares its link")
	assert.NotEmpty(t, c.IdleGPU)

	c = ix.CheckLink(vf, gpu)
	assert.Equal(t, "NIC 0000:06:00.2 is an SR-IOV virtual function (no PF visible: known by its device ID): link speed and width not reported by a virtual function; no PF to judge: report only", c.VF)
	assert.Equal(t, "0000:06:00.2 NIC (virtual function) link not reported", c.Summary)
	assert.Empty(t, c.Failures)

	vf.PhysFn = nic.BDF
	c = ix.CheckLink(vf, gpu)
	assert.Contains(t, c.VF, "judged on the PF 0000:06:00.0")
	require.Len(t, c.Failures, 1, "the PF's link is judged")
	assert.Contains(t, c.Failures[0].Cause, "NIC PF 0000:06:00.0 link trained to x4")

	c = ix.CheckLink(ix.Device("0000:00:02.0"), gpu)
	assert.Contains(t, c.NotChecked, "0000:00:02.0: 0000:00:02.0 has no max_link_speed")
	assert.Empty(t, c.Summary)
}
