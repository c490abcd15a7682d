package nvdriver

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/hostfs/hostfstest"
	"github.com/gdrconf/gdrconf/internal/kmod"
)

func kernel(t *testing.T, release string) (*hostfs.Root, *kmod.Host) {
	t.Helper()
	files := map[string]string{}
	if release != "" {
		files["proc/sys/kernel/osrelease"] = release + "\n"
	}
	root := hostfstest.Tree(t, files)
	km, err := kmod.New(root)
	require.NoError(t, err)
	return root, km
}

func TestDmabuf(t *testing.T) {
	open := Info{Version: "580.159.04", Open: true}
	root, km := kernel(t, "6.8.0-60-generic")
	ok, why := Dmabuf(root, km, open, nil)
	assert.True(t, ok)
	assert.Equal(t, "open kernel module 580.159.04, Linux 6.8.0-60-generic", why, "no library looked at off the live host")

	ok, why = Dmabuf(root, km, open, &VerbsDmabuf{Has: true})
	assert.True(t, ok)
	assert.Equal(t, "open kernel module 580.159.04, Linux 6.8.0-60-generic, libibverbs with ibv_reg_dmabuf_mr", why)

	ok, why = Dmabuf(root, km, open, &VerbsDmabuf{})
	assert.False(t, ok)
	assert.Equal(t, "libibverbs has no ibv_reg_dmabuf_mr (rdma-core < 34)", why)

	ok, why = Dmabuf(root, km, Info{Version: "535.1"}, &VerbsDmabuf{Err: errors.New("libibverbs.so.1: cannot open")})
	assert.False(t, ok)
	assert.Equal(t, "proprietary kernel module 535.1 (dma-buf needs the open one); libibverbs.so.1: cannot open", why)

	root, km = kernel(t, "5.4.0-200-generic")
	ok, why = Dmabuf(root, km, open, nil)
	assert.False(t, ok)
	assert.Equal(t, "Linux 5.4.0-200-generic (dma-buf MRs need 5.12)", why)

	root, km = kernel(t, "")
	ok, why = Dmabuf(root, km, open, nil)
	assert.False(t, ok)
	assert.Equal(t, "kernel release unknown ("+root.Host(kmod.ReleaseFile)+" missing)", why)
}
