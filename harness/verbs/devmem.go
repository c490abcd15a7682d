// The table of device-memory special cases the data paths honour, and its manual page.

package verbs

import (
	"fmt"
	"strings"
)

// DevMemCase is one special case that perftest, NCCL's net_ib or
// rdma-core (and its tests) make for device (GPU) memory, and what this
// suite does about it. The manual's table of the same name (docs/gpu-data-path.md) is
// generated from DevMemCases (TestDevMemTableInDocs keeps them equal).
type DevMemCase struct {
	Case    string // the special case
	Adopted bool   // true: the suite does it (Tests prove the code path); false: refused, Reason says why
	Reason  string // what the suite does, or why not
	Sources string // project, file, function where the others do it
	// Tests are "path/from/repo/root_test.go:TestName" of the unit tests
	// that check the code path implementing an adopted case.
	Tests []string
}

// DevMemCases is the table, one place.
var DevMemCases = []DevMemCase{
	{
		Case:    "Scatter-to-CQE, receive side: SENDs of up to 32/64 bytes are put into the CQE and copied to the receive buffer by the CPU in ibv_poll_cq",
		Adopted: true,
		Reason:  "every QP whose receives land in GPU memory on an mlx5 device is created with it off: mlx5dv_create_qp with MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE, else MLX5_SCATTER_TO_CQE=0 forced (overwriting an explicit =1); shim.c refuses any other way; host-memory QPs and other providers keep the default; gdr.scatter_to_cqe records which",
		Sources: "rdma-core providers/mlx5/verbs.c use_scatter_to_cqe, create_qp; providers/mlx5/cq.c mlx5_copy_to_recv_wqe; perftest src/perftest_parameters.c force_dependecies, disable_mlx5_scatter_to_cqe; perftest src/perftest_resources.c ctx_qp_create; NVSHMEM src/modules/transport/libfabric/libfabric.cpp nvshmemt_init (verbs provider); libfabric contrib/intel/jenkins/tests.py (dma-buf test environment)",
		Tests: []string{
			"harness/verbs/scatter_test.go:TestScatterToCQEPolicy",
			"harness/verbs/scatter_test.go:TestScatterToCQEEnvForced",
			"harness/verbs/verbs_test.go:TestScatterToCQEGuard",
			"harness/verbs/verbs_test.go:TestMLX5Probe",
		},
	},
	{
		Case:    "Scatter-to-CQE, requester side: RDMA READ responses of up to 32 bytes copied by the CPU into the local SGE",
		Adopted: true,
		Reason:  "on only with sq_sig_all or MLX5DV_QP_CREATE_ALLOW_SCATTER_TO_CQE; every QP here signals selectively (sq_sig_all 0) and never asks for ALLOW",
		Sources: "Linux drivers/infiniband/hw/mlx5/qp.c configure_requester_scat_cqe; rdma-core providers/mlx5/cq.c mlx5_copy_to_send_wqe",
		Tests:   []string{"harness/verbs/verbs_test.go:TestScatterToCQEGuard"},
	},
	{
		Case:    "Receives that carry no data: NCCL moves payload with RDMA WRITE (WRITE_WITH_IMM into zero-length receives), so scatter-to-CQE never reaches GPU memory and NCCL leaves it on",
		Adopted: false,
		Reason:  "the suite also checks SEND into GPU receive buffers (pingpong), so it turns scatter-to-CQE off per QP instead of avoiding data-carrying receives",
		Sources: "NCCL src/transport/net_ib/p2p.cc ncclIbMultiSend (RDMA_WRITE, the last one WRITE_WITH_IMM); src/transport/net_ib/connect.cc ncclIbQpCreate, ncclIbCreateQpMlx5 (no DISABLE_SCATTER_TO_CQE)",
	},
	{
		Case:    "Inline sends: the provider copies inline payload with the CPU, a fault on GPU memory",
		Adopted: true,
		Reason:  "IBV_SEND_INLINE is decided from the MR, never by the caller: host memory the CPU may read only, SEND/WRITE/WRITE_WITH_IMM only, on every post path (PostSend, the latency loop; the bandwidth loop never posts inline)",
		Sources: "perftest src/perftest_parameters.c ctx_set_max_inline, force_dependecies; NCCL src/transport/net_ib/connect.cc ncclIbQpCreate (NCCL_IB_USE_INLINE, default 0), src/transport/net_ib/p2p.cc (inline only for the host-memory CTS FIFO)",
		Tests: []string{
			"harness/verbs/verbs_test.go:TestInlineOnlyFromHostMemory",
			"harness/verbs/verbs_test.go:TestInlineNeverFromDeviceMemoryOnAnyPath",
		},
	},
	{
		Case:    "WRITE latency by polling the last byte of the receive buffer: a CPU read of GPU memory",
		Adopted: true,
		Reason:  "device memory waits on RDMA_WRITE_WITH_IMM completions; polling mode on an MR the CPU may not read is refused",
		Sources: "perftest src/perftest_parameters.c force_dependecies (device-memory WRITE latency needs --write_with_imm)",
		Tests:   []string{"harness/verbs/verbs_test.go:TestInlineNeverFromDeviceMemoryOnAnyPath"},
	},
	{
		Case:    "GPU flush after receive with cuFlushGPUDirectRDMAWrites where the GPU does not order RDMA writes for its own consumers",
		Adopted: true,
		Reason:  "before reading received data back (cuMemcpyDtoH), harness/cuda flushes when GPU_DIRECT_RDMA_WRITES_ORDERING is below OWNER, and fails naming the driver when it must and cannot",
		Sources: "CUDA driver API cuFlushGPUDirectRDMAWrites, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING; NCCL src/graph/paths.cc ncclTopoNeedFlush (no flush from compute capability 9.0 unless C2C)",
		Tests:   []string{"lab/emugpu/cuda_test.go:TestEmulatedGPUMemory"},
	},
	{
		Case:    "NCCL's iflush: a 1-byte RDMA READ of the received GPU buffer into host memory on a loopback flush QP (NCCL_GDR_FLUSH_DISABLE turns it off)",
		Adopted: false,
		Reason:  "it orders the NIC's writes before a GPU kernel consumes them; the suite's consumer is a driver copy after cuFlushGPUDirectRDMAWrites (row above), and READ from GPU memory is measured by pingpong anyway",
		Sources: "NCCL src/transport/net_ib/p2p.cc ncclIbIflush; src/transport/net_ib/connect.cc ncclIbAcceptImpl (flushEnabled, NCCL_GDR_FLUSH_DISABLE)",
	},
	{
		Case:    "dma-buf or peermem: which registration to use when both work",
		Adopted: true,
		Reason:  "GDR_MR=auto registers through every path that works (peermem, then dma-buf) and moves data through each; GDR_MR=peermem|dmabuf picks one. NCCL prefers dma-buf when the kernel and NIC support it; perftest uses peermem unless --use_cuda_dmabuf",
		Sources: "NCCL src/transport/net.cc sendProxySetup (useDmaBuf), src/transport/net_ib/reg.cc ncclIbRegMrDmaBufInternal2, src/init.cc NCCL_DMABUF_ENABLE; perftest src/cuda_memory.c cuda_allocate_device_memory_buffer",
		Tests:   []string{"harness/rc/rc_test.go:TestMRPathOrder"},
	},
	{
		Case:    "dma-buf support probed with ibv_reg_dmabuf_mr(fd=-1): EBADF means supported, EOPNOTSUPP/EPROTONOSUPPORT not",
		Adopted: true,
		Reason:  "ProbeDmabuf reads the answer the same way, and EINVAL (arguments checked before the fd) as inconclusive, left to a real registration",
		Sources: "NCCL src/transport/net_ib/gdr.cc ibDmaBufSupportInitOnce, src/transport/net_ib/init.cc ncclMlx5dvDmaBufCapable",
		Tests:   []string{"harness/verbs/verbs_test.go:TestDmabufProbeAnswer"},
	},
	{
		Case:    "dma-buf PCIe mapping type (CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE) on hosts with both C2C and PCIe attachment",
		Adopted: true,
		Reason:  "every dma-buf export for a NIC asks for it exactly where NCCL does: the GPU on NVLink-C2C (the driver's numa_status file) and the rail's path not P2C (a NIC on a PCIe path of its own, such as a ConnectX-8 switch); flags 0 elsewhere, PCIe GPUs included, where the H200 refuses the flag (801, measured); a driver that refuses it gets the export retried with flags 0 as NCCL's getDmaBufFd does; gdr.dmabuf_mapping records the flags and why",
		Sources: "NCCL src/graph/paths.cc ncclTopoCheckGdr (gdrMode PCI); src/transport/net.cc getHandleForAddressRangeFlags (no retry); src/rma/rma_proxy.cc and src/gin/gin_host_proxy.cc getDmaBufFd (retry with flags 0); perftest src/cuda_memory.c cuda_allocate_device_memory_buffer",
		Tests:   []string{"internal/nvdriver/dmabuf_test.go:TestChooseDmabufMapping", "internal/nvdriver/dmabuf_test.go:TestDmabufMappingNote", "lab/emugpu/dmabuf_test.go:TestDmabufMappingFlag"},
	},
	{
		Case:    "mlx5 Data Direct dma-buf registration (mlx5dv_reg_dmabuf_mr with MLX5DV_REG_DMABUF_ACCESS_DATA_DIRECT)",
		Adopted: false,
		Reason:  "for ConnectX-8 Data Direct NICs only; no such NIC has been seen by the suite, plain ibv_reg_dmabuf_mr is used",
		Sources: "NCCL src/transport/net_ib/reg.cc ncclIbRegMrDmaBufInternal2",
	},
	{
		Case:    "Relaxed ordering (IBV_ACCESS_RELAXED_ORDERING) on every MR",
		Adopted: true,
		Reason:  "every MR asks for it (harness/rc Access); an optional flag, so it goes through ibv_reg_mr_iova2 and rdma-core drops it where the device or kernel lacks it; without ibv_reg_mr_iova2 it is stripped",
		Sources: "NCCL src/transport/net_ib/init.cc ncclIbRelaxedOrderingCapable (NCCL_IB_PCI_RELAXED_ORDERING, default 2: when available), src/transport/net_ib/reg.cc ncclIbRegMrDmaBufInternal2; perftest src/perftest_resources.c setup_mr_flags (--disable_pcie_relaxed)",
		Tests:   []string{"harness/verbs/verbs_test.go:TestRelaxedOrderingEntryPoint"},
	},
	{
		Case:    "CU_POINTER_ATTRIBUTE_SYNC_MEMOPS on GPU buffers the NIC touches",
		Adopted: true,
		Reason:  "harness/cuda sets it on every cuMemAlloc test buffer; on cuMemCreate memory the driver refuses it (CUDA_ERROR_NOT_SUPPORTED, H200 with driver 580, measured), so a fill of that memory waits for the context (cuCtxSynchronize) before the NIC may read it",
		Sources: "rdma-core tests/test_cuda_dmabuf.py DmabufCudaRes.dmabuf_cuda_init",
		Tests:   []string{"lab/emugpu/cuda_test.go:TestFakeDriver", "lab/emugpu/vmm_test.go:TestFakeVMM"},
	},
	{
		Case:    "cuMemCreate (VMM) memory, NCCL's default allocation (NCCL_CUMEM_ENABLE): RDMA-capable only when created with gpuDirectRDMACapable, which NCCL sets where GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED is 1",
		Adopted: true,
		Reason:  "harness/cuda allocates it as NCCL does (cuMemCreate with gpuDirectRDMACapable, cuMemAddressReserve, cuMemMap, cuMemSetAccess READWRITE, rounded to the granularity) and requires IS_GPU_DIRECT_RDMA_CAPABLE=1 before registering; MREG-03/04/05 register it through peermem and dma-buf and PP-04/05 move data through it, beside cuMemAlloc memory (gdr.gpu_alloc); absent where the attribute is 0 (GPU-05 judges it)",
		Sources: "NCCL src/include/alloc.h ncclCuMemAlloc; src/allocator.cc ncclMemAlloc; src/misc/cudawrap.cc ncclIsCuMemSupported, ncclCuMemEnable; src/transport/net.cc (cuMemGetHandleForAddressRange of those buffers for regMrDmaBuf)",
		Tests: []string{
			"lab/emugpu/vmm_test.go:TestFakeVMM",
			"lab/emugpu/vmm_test.go:TestFakeVMMMisuse",
			"lab/emugpu/suite_test.go:TestVMMOnEmulatedGPU",
			"harness/gpumr/outcome_test.go:TestPeermemFailure",
		},
	},
	{
		Case:    "64 KiB GPU-page rounding of device buffers",
		Adopted: false,
		Reason:  "buffers come from cuMemAlloc (2 MiB aligned from 2 MiB, 4 KiB aligned below, measured on H200) or cuMemCreate (rounded to its granularity, 2 MiB on H200) and dma-buf export takes 4 KiB-aligned ranges (measured); rounding to GPU pages is left to the driver; unproven for peermem on a GDR host",
		Sources: "perftest src/cuda_memory.c cuda_allocate_device_memory_buffer (ACCEL_PAGE_SIZE); rdma-core tests/test_cuda_dmabuf.py (GPU_PAGE_SIZE)",
	},
	{
		Case:    "RLIMIT_MEMLOCK: host registrations pin pages against it (ENOMEM past it without CAP_IPC_LOCK)",
		Adopted: true,
		Reason:  "before registering host memory the soft limit is raised to the hard one when the registration needs it; when the hard limit is too low too, the registration fails naming both limits in bytes, the need and the remedy; ENOMEM/EPERM reads as the limit only where it can be",
		Sources: "rdma-core libibverbs/init.c check_memlock_limit (warns at 32 KiB or less); Linux drivers/infiniband/core/umem.c ib_umem_get",
		Tests: []string{
			"harness/verbs/memlock_test.go:TestMemlockDecision",
			"harness/verbs/memlock_test.go:TestMemlockCause",
			"harness/verbs/memlock_test.go:TestMemlockRaise",
		},
	},
	{
		Case:    "Non-root runs: /dev/infiniband/uverbsN (or rdma_cm) not accessible",
		Adopted: true,
		Reason:  "EACCES/EPERM from ibv_open_device names the node, its mode, owner and group, the user, and the remedy (the node's group, a udev rule, the container's device list, or root)",
		Sources: "rdma-core libibverbs/device.c verbs_open_device (open_cdev of the uverbs node)",
		Tests:   []string{"harness/verbs/devnode_test.go:TestNodeAccess"},
	},
	{
		Case:    "Fork safety: ibv_fork_init / RDMAV_FORK_SAFE",
		Adopted: false,
		Reason:  "the suite never forks while MRs exist: Go starts child processes with clone(CLONE_VFORK|CLONE_VM) and exec, so registered pages are never shared copy-on-write with a running child; RDMAV_FORK_SAFE in the environment is still honoured by libibverbs itself",
		Sources: "rdma-core libibverbs/init.c ibverbs_init (RDMAV_FORK_SAFE, IBV_FORK_SAFE), libibverbs/memory.c ibv_fork_init; NCCL src/transport/net_ib/init.cc ncclIbInitDevices",
	},
	{
		Case:    "GDR reads (the NIC reading GPU memory on the send side) off by default before Ampere without NVLink (NCCL_NET_GDR_READ)",
		Adopted: false,
		Reason:  "qualification measures what the path does on every GPU; whether NCCL then uses it is NCCL's policy",
		Sources: "NCCL src/graph/paths.cc ncclTopoCheckGdr",
	},
}

// DevMemTable renders DevMemCases as the manual's markdown table.
func DevMemTable() string {
	var b strings.Builder
	b.WriteString("| special case | suite | what the suite does, or why not | where others do it | unit tests |\n")
	b.WriteString("| --- | --- | --- | --- | --- |\n")
	for _, c := range DevMemCases {
		verdict := "refused"
		if c.Adopted {
			verdict = "adopted"
		}
		tests := make([]string, len(c.Tests))
		for i, t := range c.Tests {
			tests[i] = "`" + t[strings.LastIndex(t, ":")+1:] + "`"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", cell(c.Case), verdict, cell(c.Reason), cell(c.Sources), strings.Join(tests, ", "))
	}
	return b.String()
}

func cell(s string) string { return strings.ReplaceAll(s, "|", "\\|") }
