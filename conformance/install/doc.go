// Package install checks the install steps of a GPUDirect RDMA host (INST-*):
// the NVIDIA driver and CUDA, rdma-core or MLNX_OFED, kernel modules, device
// nodes, peer memory and the development environment.
//
// Every read of /sys, /proc and /dev goes through GDR_HOST_ROOT, so the
// file-reading checks also run against recorded host trees. Checks that run
// host tools or dlopen host libraries need the running host (GDR_HOST_ROOT
// unset or "/") and report themselves absent on a recorded tree.
//
// The judging is internal/install's (the engine: each check returns its
// facts and findings); a test reads requirement -> engine -> record.
//
// GPUs and RDMA devices come from the run's selection (testenv.Selection:
// internal/rails over internal/pci and internal/rdmadev), so GDR_GPU and
// GDR_RDMA_DEVICE mean here what they mean in every package, and INST-12
// judges the port of the NIC the other areas will use.
package install
