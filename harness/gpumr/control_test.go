package gpumr

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/verdict"
)

func TestJudgeType(t *testing.T) {
	seen, f := JudgeType("cuMemHostAlloc", 0x1000, "host", "host", false)
	assert.Equal(t, "cuMemHostAlloc=host", seen)
	assert.Nil(t, f)

	// Managed memory read as device memory: the classifier RequireDevice
	// relies on would let it pass.
	seen, f = JudgeType("cuMemAllocManaged", 0x2000, "device", "managed", false)
	assert.Equal(t, "cuMemAllocManaged=device", seen)
	require.NotNil(t, f)
	assert.Equal(t, verdict.FellShort, f.Kind())
	assert.Equal(t, "cuMemAllocManaged memory at 0x2000 classified device, want managed", f.Cause)
	assert.Contains(t, f.Remedy, "report this driver")

	// On a coherent GPU the managed-memory misreading still fails ...
	_, f = JudgeType("cuMemAllocManaged", 0x2000, "device", "managed", true)
	require.NotNil(t, f)
	assert.Equal(t, verdict.FellShort, f.Kind())
	// ... but system memory the suite mapped, which that GPU addresses,
	// is not judged: nothing documents its reading there.
	_, f = JudgeType("mmap host memory", 0x4000, "device", "unknown", true)
	require.NotNil(t, f)
	assert.Equal(t, verdict.NotJudged, f.Kind())
	assert.Contains(t, f.Cause, "NVLink-C2C")
	assert.Contains(t, f.Cause, "not documented")
	_, f = JudgeType("mmap host memory", 0x4000, "device", "unknown", false)
	require.NotNil(t, f)
	assert.Equal(t, verdict.FellShort, f.Kind(), "on PCIe it is a misreport")
	_, f = JudgeType("mmap host memory", 0x4000, "unknown", "unknown", true)
	assert.Nil(t, f)
}

func TestControlMeaning(t *testing.T) {
	assert.True(t, strings.HasPrefix(ControlMeaning(false), "pcie: "))
	assert.Contains(t, ControlMeaning(false), "only a peer-memory client")
	assert.True(t, strings.HasPrefix(ControlMeaning(true), "c2c: "))
	assert.Contains(t, ControlMeaning(true), "unproven")
}

// A plain registration of device memory is the peermem path wherever a
// peer client is loaded, and on PCIe; on a C2C GPU without one it is not
// judged, naming the unknown, never a pass.
func TestJudgePlainRegistration(t *testing.T) {
	const desc = "nvidia_peermem not loaded"
	for _, tc := range []struct {
		c2c, loaded, legacy, judged bool
	}{
		{false, true, false, true},
		{false, false, false, true},
		{false, false, true, true},
		{true, true, false, true},
		{true, false, true, true},
		{true, false, false, false},
	} {
		f := JudgePlainRegistration("0009:01:00.0", tc.c2c, tc.loaded, tc.legacy, "cuMemAlloc", desc)
		if tc.judged {
			assert.Nil(t, f, "%+v", tc)
			continue
		}
		require.NotNil(t, f, "%+v", tc)
		assert.Equal(t, verdict.NotJudged, f.Kind())
		assert.Contains(t, f.Cause, "GPU 0009:01:00.0 is coherently attached over NVLink-C2C")
		assert.Contains(t, f.Cause, "unknown (no public source)")
		assert.Contains(t, f.Cause, desc)
		assert.Contains(t, f.Remedy, "modprobe nvidia-peermem")
	}
}

func TestJudgeCapable(t *testing.T) {
	for _, tc := range []struct {
		got, want, fails bool
	}{
		{true, true, false},
		{false, false, false},
		{false, true, true}, // the driver dropped the flag
		{true, false, true}, // the attribute cannot tell: RequireDevice could not fail
	} {
		seen, f := JudgeCapable("cuMemCreate", 0x3000, tc.got, tc.want)
		assert.Contains(t, seen, "IS_GPU_DIRECT_RDMA_CAPABLE=")
		if !tc.fails {
			assert.Nil(t, f, "%+v", tc)
			continue
		}
		require.NotNil(t, f, "%+v", tc)
		assert.Equal(t, verdict.FellShort, f.Kind())
		assert.Contains(t, f.Remedy, "gpuDirectRDMACapable flag")
	}
}

func TestNoPathRemedy(t *testing.T) {
	assert.NotContains(t, NoPathRemedy(false), "NCCL_CUMEM_ENABLE")
	assert.Contains(t, NoPathRemedy(true), "NCCL_CUMEM_ENABLE=0")
}
