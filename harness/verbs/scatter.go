// libmlx5's scatter-to-CQE, kept off for receives into GPU memory.

package verbs

import (
	"fmt"
	"os"
	"sync"

	"github.com/gdrconf/gdrconf/harness/membuf"
)

// Scatter-to-CQE. libmlx5 creates every RC QP with scatter-to-CQE on unless
// MLX5_SCATTER_TO_CQE is exactly "0" (rdma-core providers/mlx5/verbs.c,
// use_scatter_to_cqe(), read at each create_qp). The NIC then puts received
// SENDs of up to 32 (64) bytes into the CQE and ibv_poll_cq copies them to
// the receive buffer with the CPU (providers/mlx5/cq.c, mlx5_copy_to_recv_wqe):
// a fault when that buffer is GPU memory. mlx5dv_create_qp's
// MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE clears it for one QP and wins over
// the environment (create_qp clears MLX5_QP_FLAG_SCATTER_CQE after reading
// it). The requester side (RDMA READ responses into the local SGE) is only on
// with sq_sig_all or MLX5DV_QP_CREATE_ALLOW_SCATTER_TO_CQE (Linux
// drivers/infiniband/hw/mlx5/qp.c, configure_requester_scat_cqe); every QP
// here signals selectively (GDR_SQ_SIG_ALL 0 in shim.h).

// How a QP's scatter-to-CQE was handled, as gdr.scatter_to_cqe reports it.
const (
	ScatterDV      = "disabled per QP (mlx5dv)"
	ScatterEnv     = "MLX5_SCATTER_TO_CQE=0 (env)"
	ScatterNotMLX5 = "not an mlx5 device"
	ScatterHost    = "host memory: provider default"
)

// ScatterEnvVar is libmlx5's switch.
const ScatterEnvVar = "MLX5_SCATTER_TO_CQE"

// mlx5Kind is what shim.c's gdr_mlx5_probe says about a device (the values
// of its GDR_MLX5_* enum, checked by a test).
type mlx5Kind int

const (
	mlx5Absent  mlx5Kind = iota // libmlx5.so.1 is not loaded: no device here is mlx5
	mlx5Not                     // mlx5dv_is_supported says no (rxe, siw, irdma, ...)
	mlx5DV                      // mlx5 with mlx5dv_create_qp
	mlx5NoDV                    // mlx5, libmlx5 without mlx5dv_create_qp
	mlx5Unknown                 // cannot tell (see shim.h): taken as mlx5 without mlx5dv
)

func (k mlx5Kind) String() string {
	switch k {
	case mlx5Absent:
		return "libmlx5.so.1 not loaded in this process"
	case mlx5Not:
		return "mlx5dv_is_supported: no"
	case mlx5DV:
		return "mlx5 with mlx5dv_create_qp"
	case mlx5NoDV:
		return "mlx5, libmlx5 has no mlx5dv_create_qp"
	case mlx5Unknown:
		return "mlx5 or not cannot be told (libmlx5 without mlx5dv_is_supported, rdma-core < 22; or no libmlx5.so.1 loaded and an mlx5-named device), taken as mlx5 without mlx5dv"
	}
	return fmt.Sprintf("mlx5 probe %d", int(k))
}

// scatterPlan is how one QP is created.
type scatterPlan struct {
	DV       bool   // mlx5dv_create_qp with DISABLE_SCATTER_TO_CQE
	ForceEnv bool   // MLX5_SCATTER_TO_CQE=0 (overwrite) before ibv_create_qp
	Attr     string // one of the Scatter* values
	Why      string // the detail behind Attr, for logs
}

// planScatter decides for a QP whose receives land in recv memory on a
// device of kind dev. dvRefused: an earlier mlx5dv_create_qp refused the
// flag (EINVAL from a libmlx5 older than rdma-core 21). envOff: the
// environment already says MLX5_SCATTER_TO_CQE=0.
func planScatter(recv membuf.Kind, dev mlx5Kind, dvRefused, envOff bool) (scatterPlan, error) {
	switch recv {
	case membuf.Host:
		p := scatterPlan{Attr: ScatterHost, Why: dev.String()}
		if envOff && dev != mlx5Absent && dev != mlx5Not {
			p.Why += "; " + ScatterEnvVar + "=0 is set in this process, so libmlx5 keeps it off here too"
		}
		return p, nil
	case membuf.GPU:
	default:
		return scatterPlan{}, fmt.Errorf("creating a QP: receive memory kind %q is neither %q nor %q", recv, membuf.Host, membuf.GPU)
	}
	switch dev {
	case mlx5Absent, mlx5Not:
		return scatterPlan{Attr: ScatterNotMLX5, Why: dev.String()}, nil
	case mlx5DV:
		if !dvRefused {
			return scatterPlan{DV: true, Attr: ScatterDV, Why: "mlx5dv_create_qp(MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE)"}, nil
		}
		return scatterPlan{ForceEnv: true, Attr: ScatterEnv, Why: "mlx5dv_create_qp refused MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE (EINVAL: libmlx5 older than rdma-core 21; EOPNOTSUPP: no mlx5dv on this context)"}, nil
	case mlx5NoDV, mlx5Unknown:
		return scatterPlan{ForceEnv: true, Attr: ScatterEnv, Why: dev.String()}, nil
	}
	return scatterPlan{}, fmt.Errorf("creating a QP: unknown mlx5 probe result %d", int(dev))
}

// scatterEnv forces MLX5_SCATTER_TO_CQE=0 once per process and remembers
// what was there: an explicit =1 would crash the first small receive into
// GPU memory, so it is overwritten. The variable stays 0 afterwards (later
// host-memory QPs on mlx5 lose the feature too, which costs only latency of
// small SENDs); unsetting it again would race libmlx5's getenv on other
// threads.
type scatterEnv struct {
	mu     sync.Mutex
	forced bool
	prev   string // the value before, "" when unset
	had    bool
}

var scatterEnvState scatterEnv

// force sets the variable (os.Setenv also sets the C environment libmlx5
// reads, cgo being linked) and says what it overrode.
func (s *scatterEnv) force() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.forced {
		s.prev, s.had = os.LookupEnv(ScatterEnvVar)
		if err := os.Setenv(ScatterEnvVar, "0"); err != nil {
			return "", fmt.Errorf("setting %s=0 before creating a QP on GPU memory: %w", ScatterEnvVar, err)
		}
		s.forced = true
	}
	switch {
	case !s.had:
		return ScatterEnvVar + " was unset", nil
	case s.prev == "0":
		return ScatterEnvVar + "=0 was already set", nil
	}
	return fmt.Sprintf("overrode %s=%q", ScatterEnvVar, s.prev), nil
}

// prepareScatter plans a QP and, where the plan says so, forces the
// environment: the one way from a receive memory kind to a QP creation.
func prepareScatter(recv membuf.Kind, dev mlx5Kind, dvRefused, envOff bool) (scatterPlan, error) {
	p, err := planScatter(recv, dev, dvRefused, envOff)
	if err != nil || !p.ForceEnv {
		return p, err
	}
	note, err := scatterEnvState.force()
	if err != nil {
		return scatterPlan{}, err
	}
	p.Why += "; " + note
	return p, nil
}
