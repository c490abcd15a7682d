package kmod

// The libibverbs providers (rdma-core's user-space drivers) complete the
// RDMA stack beside its kernel modules: which are installed on a host, and
// which serves each kernel RDMA driver.

import (
	"path"
	"strings"

	"github.com/gdrconf/gdrconf/internal/hostfs"
)

// ProviderDirs hold libibverbs' driver plug-ins; ProviderConfigDir names them.
var ProviderDirs = []string{"/usr/lib/*/libibverbs", "/usr/lib64/libibverbs", "/usr/lib/libibverbs", "/usr/local/lib/libibverbs"}

const ProviderConfigDir = "/etc/libibverbs.d"

// ProviderFor maps the kernel driver of an RDMA device to the libibverbs
// provider that serves it.
var ProviderFor = map[string]string{
	"mlx5_core": "mlx5", "mlx5_ib": "mlx5", "mlx4_core": "mlx4", "mlx4_ib": "mlx4",
	"bnxt_en": "bnxt_re", "bnxt_re": "bnxt_re", "irdma": "irdma", "ice": "irdma", "i40e": "irdma",
	"efa": "efa", "qede": "qedr", "qedr": "qedr", "hfi1": "hfi1verbs", "vmw_pvrdma": "vmw_pvrdma",
	"hns_roce_hw_v2": "hns", "erdma": "erdma", "mana": "mana", "mana_ib": "mana", "ionic_rdma": "ionic",
	"rdma_rxe": "rxe", "siw": "siw",
}

// Providers returns the provider names from ProviderConfigDir/*.driver ("driver
// mlx5") and the plug-in files in ProviderDirs (libmlx5-rdmav34.so), each with the
// file that names it, and the places it looked (host paths). A config file
// that cannot be read is an error.
func Providers(root *hostfs.Root) (names map[string]string, looked []string, err error) {
	names = map[string]string{}
	looked = append(looked, root.Host(ProviderConfigDir)+"/*.driver")
	cfgs, _ := root.Glob(ProviderConfigDir + "/*.driver")
	for _, c := range cfgs {
		s, err := root.ReadString(c)
		if err != nil {
			return nil, looked, err
		}
		for _, line := range strings.Split(s, "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == "driver" {
				names[f[1]] = c
			}
		}
	}
	for _, d := range ProviderDirs {
		looked = append(looked, root.Host(d))
		libs, _ := root.Glob(d + "/lib*-rdmav*.so")
		for _, l := range libs {
			base := strings.TrimPrefix(path.Base(l), "lib")
			if i := strings.Index(base, "-rdmav"); i > 0 {
				names[base[:i]] = l
			}
		}
	}
	return names, looked, nil
}
