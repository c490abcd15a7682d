package nvdriver

import (
	"strings"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/kmod"
)

// VerbsDmabuf is what the live host's libibverbs offers for dma-buf memory
// regions: Err when it could not be opened, else whether it exports
// ibv_reg_dmabuf_mr (rdma-core >= 34). The caller opens the library.
type VerbsDmabuf struct {
	Err error
	Has bool
}

// Dmabuf says whether the dma-buf registration path can work, and why (what
// it has) or why not (what it lacks): the open kernel module, Linux >= 5.12
// and, where verbs is not nil (the live host), libibverbs with
// ibv_reg_dmabuf_mr.
func Dmabuf(root *hostfs.Root, km *kmod.Host, info Info, verbs *VerbsDmabuf) (bool, string) {
	var have, lack []string
	if info.Open {
		have = append(have, "open kernel module "+info.Version)
	} else {
		lack = append(lack, "proprietary kernel module "+info.Version+" (dma-buf needs the open one)")
	}
	rel := km.Release()
	if rel == "" {
		lack = append(lack, "kernel release unknown ("+root.Host(kmod.ReleaseFile)+" missing)")
	} else if ok, err := kmod.AtLeast(rel, 5, 12); err != nil {
		lack = append(lack, err.Error())
	} else if ok {
		have = append(have, "Linux "+rel)
	} else {
		lack = append(lack, "Linux "+rel+" (dma-buf MRs need 5.12)")
	}
	switch {
	case verbs == nil:
	case verbs.Err != nil:
		lack = append(lack, verbs.Err.Error())
	case !verbs.Has:
		lack = append(lack, "libibverbs has no ibv_reg_dmabuf_mr (rdma-core < 34)")
	default:
		have = append(have, "libibverbs with ibv_reg_dmabuf_mr")
	}
	if len(lack) > 0 {
		return false, strings.Join(lack, "; ")
	}
	return true, strings.Join(have, ", ")
}
