//go:build rdma && !gpu

package pingpong

import (
	"testing"

	"github.com/gdrconf/gdrconf/harness/traffic"
)

// runVMM is the cuMemCreate case of PP-04/PP-05, which needs GPU memory:
// builds without the gpu tag have none (vmm_gpu_test.go).
func runVMM(*testing.T, string, traffic.Transfer) {}
