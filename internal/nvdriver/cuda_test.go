package nvdriver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const nvcc13 = `nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Wed_Aug_20_01:58:59_PM_PDT_2025
Cuda compilation tools, release 13.0, V13.0.88
Build cuda_13.0.r13.0/compiler.36424714_0
`

const nvcc118 = `nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2022 NVIDIA Corporation
Built on Wed_Sep_21_10:33:58_PDT_2022
Cuda compilation tools, release 11.8, V11.8.89
Build cuda_11.8.r11.8/compiler.31833905_0
`

func TestParseNvcc(t *testing.T) {
	v, err := ParseNvcc(nvcc13)
	require.NoError(t, err)
	assert.Equal(t, CUDAVersion{13, 0, 88}, v)
	assert.Equal(t, "13.0", v.String())
	assert.Equal(t, "13.0.88", v.Full())
	assert.Equal(t, 13000, v.Int())

	v, err = ParseNvcc(nvcc118)
	require.NoError(t, err)
	assert.Equal(t, CUDAVersion{11, 8, 89}, v)

	for _, bad := range []string{
		"",
		"bash: nvcc: command not found",
		"Cuda compilation tools, release 13.0, V12.9.41",
		"Cuda compilation tools, release 13.0",
		"Cuda compilation tools, release 0.0, V0.0.1",
		"Cuda compilation tools, release 99999999999999999999.0, V99999999999999999999.0.1",
	} {
		_, err := ParseNvcc(bad)
		assert.Error(t, err, "%q", bad)
	}
}

func TestCUDAFromInt(t *testing.T) {
	for n, want := range map[int]string{13000: "13.0", 12040: "12.4", 11080: "11.8", 1000: "1.0", 12090: "12.9"} {
		v, err := CUDAFromInt(n)
		require.NoError(t, err)
		assert.Equal(t, want, v.String())
		assert.Equal(t, n, v.Int())
	}
	for _, n := range []int{0, -1, 999, 13001, 1 << 40} {
		_, err := CUDAFromInt(n)
		assert.Error(t, err, n)
	}
}

func TestCUDAVersionAtMost(t *testing.T) {
	v := func(a, b int) CUDAVersion { return CUDAVersion{Major: a, Minor: b} }
	assert.True(t, v(13, 0).AtMost(v(13, 0)))
	assert.True(t, CUDAVersion{13, 0, 88}.AtMost(v(13, 0)), "patch ignored")
	assert.True(t, v(12, 9).AtMost(v(13, 0)))
	assert.False(t, v(13, 1).AtMost(v(13, 0)))
	assert.False(t, v(14, 0).AtMost(v(13, 9)))
}

func FuzzParseNvcc(f *testing.F) {
	f.Add(nvcc13)
	f.Add(nvcc118)
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseNvcc(s)
		if err != nil {
			return
		}
		if v.Major <= 0 || v.Minor < 0 || v.Patch < 0 {
			t.Fatalf("ParseNvcc accepted %+v", v)
		}
	})
}

func FuzzCUDAFromInt(f *testing.F) {
	f.Add(13000)
	f.Fuzz(func(t *testing.T, n int) {
		v, err := CUDAFromInt(n)
		if err != nil {
			return
		}
		if v.Int() != n {
			t.Fatalf("CUDAFromInt(%d).Int() = %d", n, v.Int())
		}
	})
}

func TestCUDACompatible(t *testing.T) {
	v := func(ma, mi int) CUDAVersion { return CUDAVersion{Major: ma, Minor: mi} }
	for _, tc := range []struct {
		tk, drv CUDAVersion
		want    CUDACompat
	}{
		{v(12, 4), v(12, 4), CUDASupported},
		{v(12, 2), v(13, 0), CUDASupported},
		{v(12, 8), v(12, 4), CUDAMinorCompat},
		{v(13, 0), v(12, 8), CUDAUnsupported},
		{v(13, 1), v(13, 0), CUDAMinorCompat},
	} {
		if got := CUDACompatible(tc.tk, tc.drv); got != tc.want {
			t.Errorf("CUDACompatible(%s, %s) = %d, want %d", tc.tk, tc.drv, got, tc.want)
		}
	}
}
