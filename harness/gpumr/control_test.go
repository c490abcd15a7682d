package gpumr

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/verdict"
)

func TestJudgeType(t *testing.T) {
	seen, f := JudgeType("cuMemHostAlloc", 0x1000, "host", "host")
	assert.Equal(t, "cuMemHostAlloc=host", seen)
	assert.Nil(t, f)

	// Managed memory read as device memory: the classifier RequireDevice
	// relies on would let it pass.
	seen, f = JudgeType("cuMemAllocManaged", 0x2000, "device", "managed")
	assert.Equal(t, "cuMemAllocManaged=device", seen)
	require.NotNil(t, f)
	assert.Equal(t, verdict.FellShort, f.Kind())
	assert.Equal(t, "cuMemAllocManaged memory at 0x2000 classified device, want managed", f.Cause)
	assert.Contains(t, f.Remedy, "report this driver")
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
