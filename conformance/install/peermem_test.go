package install

import (
	"testing"

	"github.com/gdrconf/gdrconf/harness/dl"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/install"
	"github.com/gdrconf/gdrconf/internal/nvdriver"
)

// INST-13: GPU memory can be registered with the NIC, through
// nvidia_peermem or dma-buf (install.PeerMemory says which, or why
// neither). On the running host libibverbs is asked for ibv_reg_dmabuf_mr
// (rdma-core >= 34 exports it).
func TestINST13PeerMemory(t *testing.T) {
	testenv.Req(t, "INST-13")
	root := testenv.Root(t)
	devs, _ := rdmaDevices(t)
	var verbs *nvdriver.VerbsDmabuf
	if root.IsLive() {
		has, err := dl.Has("libibverbs.so.1", "ibv_reg_dmabuf_mr")
		verbs = &nvdriver.VerbsDmabuf{Has: has, Err: err}
	}
	record(t, install.PeerMemory(root, modules(t, root), devs, verbs))
}
