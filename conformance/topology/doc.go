// Package topology checks the PCIe topology between GPUs and RDMA NICs
// (TOPO-*): the path class of every (GPU, NIC) pair as `nvidia-smi topo -m`
// names it, the nearest NIC within GDR_MAX_PATH, ACS on the switch ports
// between them, link training, IOMMU translation, and agreement with NVML and
// nvidia-smi.
//
// It reads only the host root (GDR_HOST_ROOT) and needs no build tags, so it
// runs against recorded and constructed trees under fixtures/hosts as well as
// the live host. Host tools and NVML are used only on the live host ("/").
package topology
