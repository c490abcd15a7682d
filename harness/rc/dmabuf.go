//go:build rdma

package rc

import (
	"testing"

	"github.com/gdrconf/gdrconf/harness/membuf"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/nvdriver"
	"github.com/gdrconf/gdrconf/internal/rails"
	"github.com/gdrconf/gdrconf/internal/topo"
)

// DmabufMapping is how memory of GPU gpu (a PCI address) is exported for
// NIC dev (nvdriver.ChooseDmabufMapping, NCCL's rule): whether the NVIDIA
// driver shows the GPU on NVLink-C2C (under GDR_HOST_ROOT), and the class
// of the selection's path between the two. A driver directory that cannot
// be read leaves flags 0, the PCIe GPU's export, and says so.
func DmabufMapping(t testing.TB, gpu, dev string) nvdriver.DmabufMapping {
	c2c, err := nvdriver.IsC2C(testenv.Root(t), gpu)
	if err != nil {
		m := nvdriver.ChooseDmabufMapping(false, topo.Unknown)
		m.Why += " (whether it is on NVLink-C2C could not be read: " + err.Error() + ")"
		return m
	}
	return nvdriver.ChooseDmabufMapping(c2c, pathClass(testenv.Selection(t), gpu, dev))
}

// pathClass is the class of the selection's rail from GPU gpu to NIC dev;
// Unknown where no rail joins the two over a known PCIe path.
func pathClass(s *rails.Selection, gpu, dev string) topo.Class {
	for _, r := range s.All {
		if r.GPU != nil && r.NIC != nil && r.HasPath && r.GPU.PCI == gpu && r.NIC.Name == dev {
			return r.Path.Class
		}
	}
	return topo.Unknown
}

// ExportDmabuf exports b as a dma-buf for NIC dev: GPU memory with the
// flags DmabufMapping chooses (a refused PCIe mapping falls back to flags
// 0: membuf.DmabufMapper), other memory through DmabufFD. note is
// gdr.dmabuf_mapping's value ("" where b chooses no flags); ok is false
// when b cannot be exported at all (host memory).
func ExportDmabuf(t testing.TB, b membuf.Buffer, dev string) (x membuf.DmabufExport, note string, ok bool, err error) {
	mb, isGPU := b.(membuf.DmabufMapper)
	if !isGPU {
		fd, off, ok, err := b.DmabufFD()
		return membuf.DmabufExport{FD: fd, Offset: off}, "", ok, err
	}
	m := DmabufMapping(t, mb.GPUPCI(), dev)
	x, err = mb.DmabufExport(m.Flags)
	return x, nvdriver.DmabufMappingNote(m, x.Refused), true, err
}
