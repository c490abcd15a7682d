package nvdriver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs/hostfstest"
)

// A CUDA 12.4 toolkit's version.json (its shape: one object per component).
const cuda124JSON = `{
   "cuda" : {
      "name" : "CUDA SDK",
      "version" : "12.4.1"
   },
   "cuda_cudart" : {
      "name" : "CUDA Runtime (cudart)",
      "version" : "12.4.127"
   },
   "cuda_nvcc" : {
      "name" : "CUDA NVCC",
      "version" : "12.4.131"
   }
}`

func TestParseToolkitJSON(t *testing.T) {
	v, err := ParseToolkitJSON([]byte(cuda124JSON))
	require.NoError(t, err)
	assert.Equal(t, CUDAVersion{12, 4, 131}, v)
	v, err = ParseToolkitJSON([]byte(`{"cuda":{"version":"11.8.0"}}`))
	require.NoError(t, err)
	assert.Equal(t, "11.8", v.String())
	for _, bad := range []string{"", "{}", `{"cuda":{"version":"twelve"}}`, `{"cuda_nvcc":{"version":"0.1"}}`} {
		_, err := ParseToolkitJSON([]byte(bad))
		assert.Error(t, err, "%q", bad)
	}
}

func TestFindToolkit(t *testing.T) {
	r := hostfstest.Tree(t, map[string]string{
		"/usr/local/cuda-12.4/version.json": cuda124JSON, "/usr/local/cuda-12.4/bin/nvcc": "",
		"/usr/local/cuda-13.0/version.json": `{"cuda":{"version":"13.0.0"}}`, // runtime only: no nvcc
	})
	tk, ok, looked, err := FindToolkit(r)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, "12.4.131", tk.Version.Full())
	assert.Contains(t, tk.From, "/usr/local/cuda-12.4/version.json")
	assert.Len(t, looked, 2)

	_, ok, looked, err = FindToolkit(hostfstest.Tree(t, map[string]string{"/etc/hostname": "n"}))
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Len(t, looked, len(ToolkitDirs))

	_, _, _, err = FindToolkit(hostfstest.Tree(t, map[string]string{"/usr/local/cuda/version.json": "nope", "/usr/local/cuda/bin/nvcc": ""}))
	assert.ErrorContains(t, err, "version.json is not JSON")
}
