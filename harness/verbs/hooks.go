//go:build rdma

// shim.c's checks and probes, callable from Go (cgo has no place in _test.go files).

package verbs

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"syscall"
	"unsafe"
)

// scatterGuard is shim.c's check at every QP creation (for tests: cgo has
// no place in _test.go files).
func scatterGuard(recvDevmem bool, dev mlx5Kind, dv bool) error {
	b := func(v bool) C.int {
		if v {
			return 1
		}
		return 0
	}
	if rc := C.gdr_scatter_guard(b(recvDevmem), C.int(dev), b(dv)); rc != 0 {
		return syscall.Errno(rc)
	}
	return nil
}

// scatterEnvOffC reports whether the C environment libmlx5 reads has
// MLX5_SCATTER_TO_CQE=0.
func scatterEnvOffC() bool { return C.gdr_scatter_env_off() != 0 }

// shimMLX5Kinds are shim.h's GDR_MLX5_* values in mlx5Kind order, and
// shimSQSigAll its sq_sig_all (for tests).
func shimMLX5Kinds() []mlx5Kind {
	return []mlx5Kind{C.GDR_MLX5_ABSENT, C.GDR_MLX5_NOT, C.GDR_MLX5_DV, C.GDR_MLX5_NODV, C.GDR_MLX5_UNKNOWN}
}

func shimSQSigAll() int { return int(C.gdr_sq_sig_all()) }

// regMRUsesIova2 is whether RegMR with access goes through
// ibv_reg_mr_iova2 (for tests).
func regMRUsesIova2(access int) bool { return C.gdr_reg_mr_uses_iova2(C.int(access)) != 0 }

// hasIova2 reports whether the loaded libibverbs exports ibv_reg_mr_iova2.
func hasIova2() bool { return C.gdr_has_iova2() != 0 }

// accessOptionalRange are the access flags a device may ignore.
const accessOptionalRange = C.IBV_ACCESS_OPTIONAL_RANGE

// probeStandin runs the mlx5 probe on a stand-in device called name; for
// tests (cgo has no place in _test.go files).
func probeStandin(name string) mlx5Kind {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	provMu.Lock()
	defer provMu.Unlock()
	return mlx5Kind(C.gdr_probe_standin(cs))
}

func mlx5Loaded() bool { return C.gdr_mlx5_loaded() != 0 }
func loadMLX5() bool   { return C.gdr_load_mlx5() != 0 }
func mlx5HasDV() bool  { return C.gdr_mlx5_has_dv() != 0 }
