// Package verbsprov knows the libibverbs providers (rdma-core's user-space
// drivers): which are installed on a host, and which serves each kernel
// RDMA driver.
package verbsprov

import (
	"path"
	"strings"

	"github.com/gdrconf/gdrconf/internal/hostfs"
)

// Dirs hold libibverbs' driver plug-ins; ConfigDir names them.
var Dirs = []string{"/usr/lib/*/libibverbs", "/usr/lib64/libibverbs", "/usr/lib/libibverbs", "/usr/local/lib/libibverbs"}

const ConfigDir = "/etc/libibverbs.d"

// For maps the kernel driver of an RDMA device to the libibverbs
// provider that serves it.
var For = map[string]string{
	"mlx5_core": "mlx5", "mlx5_ib": "mlx5", "mlx4_core": "mlx4", "mlx4_ib": "mlx4",
	"bnxt_en": "bnxt_re", "bnxt_re": "bnxt_re", "irdma": "irdma", "ice": "irdma", "i40e": "irdma",
	"efa": "efa", "qede": "qedr", "qedr": "qedr", "hfi1": "hfi1verbs", "vmw_pvrdma": "vmw_pvrdma",
	"hns_roce_hw_v2": "hns", "erdma": "erdma", "mana_ib": "mana", "ionic_rdma": "ionic",
	"rdma_rxe": "rxe", "siw": "siw",
}

// Installed returns the provider names from ConfigDir/*.driver ("driver
// mlx5") and the plug-in files in Dirs (libmlx5-rdmav34.so), each with the
// file that names it, and the places it looked (host paths). A config file
// that cannot be read is an error.
func Installed(root *hostfs.Root) (names map[string]string, looked []string, err error) {
	names = map[string]string{}
	looked = append(looked, root.Host(ConfigDir)+"/*.driver")
	cfgs, _ := root.Glob(ConfigDir + "/*.driver")
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
	for _, d := range Dirs {
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
