// Package membuf is the memory the RDMA tests move data through: page-aligned
// host memory, or GPU memory (harness/cuda provides that kind, tag gpu). The
// pingpong and memreg tests register a Buffer with the NIC and check its
// contents through Fill/ReadBack, so the same test code runs on either kind.
package membuf

// Kind says where a buffer's memory is.
type Kind string

const (
	Host Kind = "host"
	GPU  Kind = "gpu"
)

// Buffer is a registrable memory region.
type Buffer interface {
	// Kind is where the memory lives.
	Kind() Kind
	// Addr is the virtual address to register and to put in work requests
	// (a CUdeviceptr for GPU memory, which peer memory maps at the same value).
	Addr() uintptr
	// Len is the length in bytes.
	Len() int
	// Fill copies p to the start of the buffer (host-to-device for GPU memory).
	Fill(p []byte) error
	// ReadBack copies the start of the buffer into p (device-to-host for GPU
	// memory), so received data is checked, not trusted.
	ReadBack(p []byte) error
	// DmabufFD exports the buffer as a dma-buf file descriptor for
	// ibv_reg_dmabuf_mr, with the offset of Addr inside it. ok is false
	// when the kind cannot export (host memory).
	DmabufFD() (fd int, offset uint64, ok bool, err error)
	// Close frees the memory; safe to call twice.
	Close() error
}

// Label is what gdr.mem reports for b: its Kind, or the buffer's own label
// when it has one ("gpu-emulated" for the lab's emulated GPU, whose results
// are no hardware evidence).
func Label(b Buffer) string {
	if l, ok := b.(interface{ MemLabel() string }); ok {
		return l.MemLabel()
	}
	return string(b.Kind())
}

// GPUAlloc is what gdr.gpu_alloc reports for b: the driver call that
// allocated GPU memory ("cuMemAlloc", "cuMemCreate"), or "" for memory
// that does not say (host memory).
func GPUAlloc(b Buffer) string {
	if a, ok := b.(interface{ GPUAlloc() string }); ok {
		return a.GPUAlloc()
	}
	return ""
}

// DmabufExport is a dma-buf export of GPU memory for a NIC.
type DmabufExport struct {
	FD     int
	Offset uint64 // of Addr inside the dma-buf
	// Flags are the cuMemGetHandleForAddressRange flags the fd carries.
	Flags int
	// Refused is the driver's answer to the flags asked for when it
	// refused them and the export fell back to flags 0; nil otherwise.
	Refused error
}

// DmabufMapper is memory that can be exported with chosen
// cuMemGetHandleForAddressRange flags (GPU memory: harness/cuda), so that
// the PCIe mapping type is asked for where NCCL asks for it.
type DmabufMapper interface {
	// GPUPCI is the PCI address of the GPU the memory lives on.
	GPUPCI() string
	// DmabufExport exports the buffer with flags; a driver that refuses
	// non-zero flags gets the export retried with flags 0 (Refused says
	// why). The caller owns the fd.
	DmabufExport(flags int) (DmabufExport, error)
}
