// Package install checks the install steps of a GPUDirect RDMA host (INST-*):
// the NVIDIA driver and CUDA, rdma-core or MLNX_OFED, kernel modules, device
// nodes, peer memory and the development environment.
//
// Every read of /sys, /proc and /dev goes through GDR_HOST_ROOT, so the
// file-reading checks also run against recorded host trees. Checks that run
// host tools or dlopen host libraries need the running host (GDR_HOST_ROOT
// unset or "/") and report themselves absent on a recorded tree.
package install
