package membuf

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// labelled is a Buffer that says what it is, as GPU memory does.
type labelled struct {
	*HostBuffer
	label, alloc string
}

func (l labelled) MemLabel() string { return l.label }
func (l labelled) GPUAlloc() string { return l.alloc }

func TestLabelAndGPUAlloc(t *testing.T) {
	b, err := NewHost(4096)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	assert.Equal(t, "host", Label(b))
	assert.Empty(t, GPUAlloc(b), "host memory names no GPU allocator")

	g := labelled{b, "gpu-emulated", "cuMemCreate"}
	assert.Equal(t, "gpu-emulated", Label(g))
	assert.Equal(t, "cuMemCreate", GPUAlloc(g))
}
