package gpumr

import (
	"fmt"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gdrconf/gdrconf/internal/hostfs/hostfstest"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

func TestPeermemState(t *testing.T) {
	root := hostfstest.Tree(t, map[string]string{
		"/proc/modules":                        "nvidia_peermem 16384 0 - Live 0x0000000000000000 (OE)\nnv_peer_mem 16384 0 - Live 0x0000000000000000 (OE)\n",
		"/sys/module/nvidia_peermem/initstate": "live\n",
	})
	loaded, legacy, desc := PeermemState(root)
	assert.True(t, loaded)
	assert.True(t, legacy)
	assert.Equal(t, fmt.Sprintf("nvidia_peermem loaded (live) (%s present); legacy nv_peer_mem loaded (live)", root.Host("/sys/module/nvidia_peermem")), desc)

	root = hostfstest.Tree(t, map[string]string{"/proc/modules": "mlx5_ib 16384 0 - Live 0x0000000000000000\n"})
	loaded, legacy, desc = PeermemState(root)
	assert.False(t, loaded)
	assert.False(t, legacy)
	assert.Equal(t, fmt.Sprintf("nvidia_peermem not loaded (%s absent)", root.Host("/sys/module/nvidia_peermem")), desc)

	root = hostfstest.Tree(t, map[string]string{"/proc/modules": "not a modules line\n"})
	_, _, desc = PeermemState(root)
	assert.Contains(t, desc, "module state unreadable: ")
}

func TestPeermemFailure(t *testing.T) {
	const desc = "nvidia_peermem not loaded"
	for _, tc := range []struct {
		name                string
		err                 error
		loaded, legacy, vmm bool
		why, remedy         string
		outcome             verdict.Outcome
	}{
		{"legacy module first", syscall.EFAULT, true, true, false, "the legacy nv_peer_mem module is loaded (" + desc + ")", "rmmod nv_peer_mem; modprobe nvidia-peermem", verdict.FellShort},
		{"legacy module first, VMM too", syscall.EFAULT, true, true, true, "the legacy nv_peer_mem module is loaded", "modprobe nvidia-peermem", verdict.FellShort},
		{"loaded but refused", syscall.EFAULT, true, false, false, "nvidia_peermem is loaded but the NIC stack refused GPU memory", "DKMS", verdict.FellShort},
		{"loaded but refused VMM memory", syscall.EFAULT, true, false, true, "nvidia_peermem is loaded but the NIC stack refused cuMemCreate memory created RDMA-capable", "", verdict.FellShort},
		{"loaded but refused VMM memory: NCCL named", syscall.EINVAL, true, false, true, "NCCL, which allocates with cuMemCreate by default", "set NCCL_CUMEM_ENABLE=0 until then", verdict.FellShort},
		{"not loaded: EFAULT", syscall.EFAULT, false, false, false, "nvidia_peermem is not loaded, so the NIC cannot pin GPU memory through ibv_reg_mr (" + desc + ")", "modprobe nvidia-peermem", verdict.Absent},
		{"not loaded: VMM memory alike", syscall.EFAULT, false, false, true, "nvidia_peermem is not loaded, so the NIC cannot pin GPU memory through ibv_reg_mr", "modprobe nvidia-peermem", verdict.Absent},
		{"not loaded: EINVAL wrapped", fmt.Errorf("ibv_reg_mr: %w", syscall.EINVAL), false, false, false, "nvidia_peermem is not loaded", "modprobe nvidia-peermem", verdict.Absent},
		{"anything else", syscall.ENOMEM, false, false, false, "unexpected error registering GPU memory (" + desc + ")", "", verdict.FellShort},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := peermemFailure(tc.err, tc.loaded, tc.legacy, tc.vmm, desc)
			assert.Equal(t, Failed, o.State)
			assert.Equal(t, tc.err, o.Err)
			assert.Contains(t, o.Why(), tc.why)
			assert.Contains(t, o.Finding.Remedy, tc.remedy)
			assert.NotContains(t, o.Finding.Cause, "remedy", "the remedy is a field")
			assert.Equal(t, tc.outcome, o.Finding.Kind(), "not loaded is absent (MREG-04 is the other way), the rest fell short")
		})
	}
}

func TestRefusedAsUnsupported(t *testing.T) {
	assert.True(t, refusedAsUnsupported(true, syscall.EOPNOTSUPP))
	assert.True(t, refusedAsUnsupported(true, fmt.Errorf("ibv_reg_dmabuf_mr: %w", syscall.EPROTONOSUPPORT)))
	assert.True(t, refusedAsUnsupported(true, syscall.EINVAL))
	assert.False(t, refusedAsUnsupported(false, syscall.EOPNOTSUPP), "a conclusive probe said it is supported: a failure")
	assert.False(t, refusedAsUnsupported(true, syscall.EFAULT))
	assert.False(t, refusedAsUnsupported(true, nil))
}
