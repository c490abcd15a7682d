// Package topology checks the PCIe topology between GPUs and RDMA NICs
// (TOPO-*): the path class of every (GPU, NIC) pair as `nvidia-smi topo -m`
// names it, each GPU's rail NIC within GDR_MAX_PATH, ACS on the switch ports
// between them, link training, IOMMU translation, and agreement with NVML and
// nvidia-smi.
//
// GPUs, NICs and rails come from testenv.Selection (internal/rails): a rail
// NIC is the nearest candidate NIC (port GDR_IB_PORT ACTIVE, openable), so
// TOPO-02 judges the NIC traffic will use and names nearer NICs that were
// excluded and why. Where a GPU has no candidate NIC, ACS and link checks
// still follow the path to its nearest hardware NIC (gdr.path_nic).
//
// In a VM (internal/virt: DMI, the CPUID hypervisor flag, /sys/hypervisor,
// VMBus; gdr.virt, gdr.virt_signs) a flattened tree is what NCCL sees too:
// where NCCL would load a topology file (internal/nccltopo) rails and TOPO-02
// take its classes, and without one TOPO-02 names the cloud's file as the
// remedy; no remedy in a VM asks to move a card. ACS (TOPO-03) is judged only
// at the switch where the GPU<->NIC path turns (topo.TurnPorts).
//
// It reads only the host root (GDR_HOST_ROOT) and needs no build tags, so it
// runs against recorded and constructed trees under fixtures/hosts as well as
// the live host. Host tools and NVML are used only on the live host ("/").
package topology
