//go:build gpu

package emugpu_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/gdrconf/gdrconf/harness/cuda"
	"github.com/gdrconf/gdrconf/lab/emugpu"
)

// The tests below load the emulated GPU, compiled now, in place of
// libcuda.so.1 through harness/cuda, so its dlopen/dlsym plumbing, error
// texts and the flush rule are checked on machines without a GPU. They live
// here, not in harness/cuda, because nothing under harness/ imports lab/.
// Where the real driver is present they skip: it cannot be unloaded safely
// under a live context.

// libraryPath is the emulated driver the test loaded (for its children).
var libraryPath string

func useFake(t *testing.T, cflags ...string) {
	t.Helper()
	if d, err := cuda.Load(); err == nil {
		if ok, _ := d.Emulated(); !ok {
			t.Skip("the real libcuda.so.1 is loaded here; emulated-GPU tests run where it is absent")
		}
	} else if le := (*cuda.LoadError)(nil); !errors.As(err, &le) || !le.Missing {
		t.Skipf("libcuda.so.1 is present but unusable here (%v); emulated-GPU tests run where it is absent", err)
	}
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler (cc) to build the emulated GPU")
	}
	lib, err := emugpu.Build(t.TempDir(), cflags...)
	require.NoError(t, err)
	cuda.UseDriver(lib)
	libraryPath = lib
	t.Cleanup(func() { cuda.UseDriver(cuda.Library) })
}

func TestFakeDriver(t *testing.T) {
	useFake(t)
	d, err := cuda.Load()
	require.NoError(t, err)
	assert.Equal(t, 12040, d.Version())
	emu, desc := d.Emulated()
	assert.True(t, emu, "gdrEmulatedGPU is exported")
	assert.Contains(t, desc, "PROT_NONE")
	assert.True(t, d.HasDmabufExport())
	assert.True(t, d.HasFlush())
	devs, err := d.Devices()
	require.NoError(t, err)
	require.Len(t, devs, 1)
	assert.Equal(t, "0000:3b:00.0", devs[0].PCI, "CUDA's upper-case bus id normalised")
	assert.Equal(t, "GDR emulated GPU 0", devs[0].Name)
	assert.True(t, devs[0].Emulated)
	assert.Equal(t, "gpu-emulated", devs[0].MemLabel())
	maj, min, err := devs[0].ComputeCapability()
	require.NoError(t, err)
	assert.Equal(t, [2]int{9, 0}, [2]int{maj, min})

	_, err = devs[0].Attr(999)
	require.Error(t, err)
	assert.Equal(t, "cuDeviceGetAttribute(attribute 999, gpu 0): CUDA_ERROR_INVALID_VALUE (invalid argument)", err.Error())

	c := cuda.Primary(t, devs[0])
	m := cuda.Alloc(t, c, 1000) // small allocations are only 512-byte aligned: Alloc must re-align
	assert.Zero(t, m.Addr()%4096)
	want := []byte("through the emulated driver")
	require.NoError(t, m.Fill(want))
	got := make([]byte, len(want))
	require.NoError(t, m.ReadBack(got))
	assert.True(t, bytes.Equal(want, got))
	sync, err := c.SyncMemops(m.Addr())
	require.NoError(t, err)
	assert.True(t, sync, "Alloc sets SYNC_MEMOPS")

	_, err = c.Alloc(2 << 30)
	require.Error(t, err)
	assert.Equal(t, "cuMemAlloc(2 GiB): CUDA_ERROR_OUT_OF_MEMORY (out of memory)", err.Error())

	_, _, _, err = m.DmabufFD()
	require.Error(t, err)
	assert.Equal(t, cuda.ErrNotSupported, cuda.Code(err))
	assert.Contains(t, err.Error(), "rxe has no dma-buf MRs")

	mt, err := c.PointerType(m.Addr())
	require.NoError(t, err)
	assert.Equal(t, cuda.MemDevice, mt)
	man := cuda.AllocManaged(t, c, 4096)
	mt, err = c.PointerType(man.Addr())
	require.NoError(t, err)
	assert.Equal(t, cuda.MemManaged, mt)
	pin := cuda.HostAlloc(t, c, 4096)
	mt, err = c.PointerType(pin.Addr())
	require.NoError(t, err)
	assert.Equal(t, cuda.MemHost, mt)
	var stack [8]byte
	mt, err = c.PointerType(uintptrOf(&stack[0]))
	require.NoError(t, err)
	assert.Equal(t, cuda.MemUnknown, mt, "INVALID_VALUE from cuPointerGetAttribute: not CUDA memory")

	require.NoError(t, c.Synchronize(), "Synchronize runs with the context current")
}

// The emulated memory behaves like GPU memory where the suite could get it
// wrong: once in use the CPU cannot touch it, and bytes written behind the
// driver's back (by a NIC) are refused by cuMemcpyDtoH until
// cuFlushGPUDirectRDMAWrites. Child processes show the fault and the
// refusal without taking the test binary down.
func TestEmulatedGPUMemory(t *testing.T) {
	if os.Getenv("GDR_EMU_CHILD") != "" {
		emulatedChild(t, os.Getenv("GDR_EMU_CHILD"))
		return
	}
	useFake(t) // builds the library for the children and checks it loads
	for _, c := range []struct {
		mode string
		want string
		ok   bool
	}{
		{"cpu-read", "unexpected fault address", false},
		{"unflushed", "cuMemcpyDtoH", true},
		{"flushed", "", true},
		// cuMemCreate memory (NCCL's allocator) behaves the same.
		{"vmm-cpu-read", "unexpected fault address", false},
		{"vmm-unflushed", "cuMemcpyDtoH", true},
		{"vmm-flushed", "", true},
	} {
		t.Run(c.mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestEmulatedGPUMemory$", "-test.v")
			cmd.Env = append(os.Environ(), "GDR_EMU_CHILD="+c.mode, "GDR_EMU_LIB="+libraryPath)
			out, err := cmd.CombinedOutput()
			if c.ok {
				require.NoError(t, err, "%s", out)
			} else {
				require.Error(t, err, "%s", out)
			}
			assert.Contains(t, string(out), c.want)
			assert.Contains(t, string(out), "PROT_NONE", "every protection is logged")
			if strings.HasSuffix(c.mode, "unflushed") {
				assert.Contains(t, string(out), "cuFlushGPUDirectRDMAWrites before reading RDMA-written GPU memory")
			}
		})
	}
}

func emulatedChild(t *testing.T, mode string) {
	cuda.UseDriver(os.Getenv("GDR_EMU_LIB"))
	d, err := cuda.Load()
	require.NoError(t, err)
	devs, err := d.Devices()
	require.NoError(t, err)
	c := cuda.Primary(t, devs[0])
	var m interface {
		cuda.Buffer
		ReadBackUnflushed([]byte) error
	}
	if vmm, ok := strings.CutPrefix(mode, "vmm-"); ok {
		m, mode = cuda.AllocVMM(t, c, 8192), vmm
	} else {
		m = cuda.Alloc(t, c, 8192)
	}
	require.NoError(t, m.Fill(bytes.Repeat([]byte{0x5a}, 8192))) // first copy: alias A becomes PROT_NONE
	switch mode {
	case "cpu-read":
		p := (*[8192]byte)(ptrOf(m.Addr()))
		t.Logf("read %d", p[100]) // faults: the Go runtime reports "unexpected fault address"
		t.Fatal("a CPU read of emulated device memory did not fault")
	case "unflushed", "flushed":
		// A NIC write: bytes change behind the driver, through the alias
		// the emulator does not own (here: remapped readable for the test).
		nicWrite(t, m)
		got := make([]byte, 64)
		if mode == "flushed" {
			require.NoError(t, m.ReadBack(got), "ReadBack flushes first")
			assert.Equal(t, bytes.Repeat([]byte{0xee}, 16), got[:16])
			return
		}
		err := m.ReadBackUnflushed(got)
		require.Error(t, err, "a read without the flush is refused")
		t.Logf("refused as it must be: %v", err)
		assert.Contains(t, err.Error(), "cuFlushGPUDirectRDMAWrites")
	}
}

// nicWrite plays the NIC: it changes 16 bytes of m without going through
// the driver (mprotect the alias back to writable for an instant, as only
// the test may; the suite never does).
func nicWrite(t *testing.T, m cuda.Buffer) {
	t.Helper()
	require.NoError(t, mprotectRW(m.Addr(), 4096))
	p := (*[16]byte)(ptrOf(m.Addr()))
	for i := range p {
		p[i] = 0xee
	}
	require.NoError(t, mprotectNone(m.Addr(), 4096))
}

func TestFakeDriverNoDevice(t *testing.T) {
	useFake(t)
	t.Setenv("FAKE_CUDA_INIT", "100")
	_, err := cuda.Load()
	require.Error(t, err)
	assert.Equal(t, "cuInit(0): CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)", err.Error())
	assert.Equal(t, cuda.ErrNoDevice, cuda.Code(err))
	assert.Contains(t, cuda.InitRemedy(err), "nvidia-smi")
}

func TestFakeDriverUnknownCode(t *testing.T) {
	useFake(t)
	t.Setenv("FAKE_CUDA_INIT", "4242")
	_, err := cuda.Load()
	require.Error(t, err)
	assert.Equal(t, "cuInit(0): CUresult 4242", err.Error(), "no name from cuGetErrorName: the number is kept")
}

func TestFakeDriverMissingSymbol(t *testing.T) {
	useFake(t, "-DOMIT_MANAGED")
	_, err := cuda.Load()
	var le *cuda.LoadError
	require.True(t, errors.As(err, &le), "%v", err)
	assert.False(t, le.Missing)
	assert.True(t, strings.Contains(err.Error(), "has no symbol cuMemAllocManaged"), err.Error())
}

func TestFakeDriverPre117(t *testing.T) {
	useFake(t, "-DNO_DMABUF_SYMBOL")
	d, err := cuda.Load()
	require.NoError(t, err)
	assert.False(t, d.HasDmabufExport(), "a driver before CUDA 11.7 has no cuMemGetHandleForAddressRange")
	devs, err := d.Devices()
	require.NoError(t, err)
	m := cuda.Alloc(t, cuda.Primary(t, devs[0]), 4096)
	_, _, _, err = m.DmabufFD()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "11.7")
}

// Views of raw addresses (the emulated GPU's memory), for these tests only.

// ptrOf turns a C address (not Go memory) into a pointer without vet's
// uintptr-to-Pointer warning, which is about Go memory moving.
func ptrOf(a uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&a)) }

func uintptrOf(p *byte) uintptr { return uintptr(unsafe.Pointer(p)) }

func mprotectRW(a uintptr, n int) error {
	return unix.Mprotect(unsafe.Slice((*byte)(ptrOf(a)), n), unix.PROT_READ|unix.PROT_WRITE)
}

func mprotectNone(a uintptr, n int) error {
	return unix.Mprotect(unsafe.Slice((*byte)(ptrOf(a)), n), unix.PROT_NONE)
}
