// Package rails is the suite's one GPU/NIC selection: which GPUs there are
// and how they are numbered, which RDMA NICs can carry a test, which NIC
// serves which GPU (a rail), and what GDR_GPU, GDR_RDMA_DEVICE and GDR_RAILS
// select. Every conformance package takes its GPU and NIC from here (through
// harness/testenv), so "GPU 5" and "its NIC" are the same devices in install,
// topology, gpu, memreg and pingpong.
//
// GPUs are the NVIDIA display-class PCI functions (pci.Device.IsGPU) in PCI
// bus order, as nvidia-smi numbers them and CUDA_DEVICE_ORDER=PCI_BUS_ID
// gives them; a GPU's index is its position in that order. GPUs that only the
// CUDA driver sees (the lab's emulated GPU, whose PCI address is fictional)
// are added with Host.AddDriverGPUs; they have no PCIe path and come after
// the sysfs ones, by address.
//
// A NIC is a candidate for a rail when its port GDR_IB_PORT exists and is
// ACTIVE, user space can open it (a uverbs node names it in sysfs and its
// /dev/infiniband/uverbsN exists where this process opens device nodes:
// rdmadev.NodeState), its node type is a channel adapter (CA or RNIC) and,
// for hardware, its PCI function is in /sys/bus/pci/devices. With
// GDR_RDMA_DEVICE unset, a NIC that NCCL_IB_HCA keeps NCCL off (at port
// GDR_IB_PORT; environment or nccl.conf, read as NCCL reads it:
// internal/config HCAFilter) is no candidate either, so the rails are among
// the NICs NCCL uses; a setting that excludes every NIC is an error. NICs
// that are not candidates keep the reason (NIC.Why), so a check can say
// "mlx5_3 is nearer but its port 1 is DOWN".
//
// An SR-IOV virtual function is no candidate while its own PF (physfn) has
// an RDMA device this process can open: VFs serve VMs and containers, and
// with SR-IOV on a PF's VFs have lower PCI addresses than the next PF on the
// same switch, so rule 4 would hand them rails while that PF idles. On bare
// metal a VF whose PF is not visible is also no candidate while an ACTIVE
// PF of its vendor and link layer is; in a VM (internal/virt) VFs are rails
// (markVFs).
// A BlueField-3 network function (15b3:a2dc) is no candidate while a
// hardware NIC that is no BlueField is, unless NCCL_IB_HCA is an include
// list (markBlueField): DGX and GB200 trays use them for storage and
// north-south traffic; a host with only BlueField NICs keeps them.
// A bonded device (RoCE LAG, mlx5_bond_N) is one RDMA device over both PFs
// of a card: one NIC, one rail (its device link is the first PF).
//
// Rail rule. Rail N is GPU N with the nearest candidate NIC, GPUs taken in
// index order:
//  1. nearest = lower path class first (PIX < PXB < PHB < NODE < SYS, see
//     internal/topo), then fewer bridges on the path;
//  2. among equally near NICs, the higher port rate (a NIC without a rate
//     file last), then link layer InfiniBand before Ethernet: on a DGX the
//     compute NICs are InfiniBand and the storage NICs Ethernet, so a
//     storage NIC on the GPU's switch does not win the rail by address
//     (where both are Ethernet the link layer cannot tell them apart);
//  3. among those, one not already taken by a lower-numbered GPU, so two
//     GPUs under one switch with two equal NICs get one NIC each (a VF is
//     taken when its PF or another VF of that PF is: they share one port);
//  4. then the lower NIC PCI address, then the device name.
//
// The order in which /sys/class/infiniband lists devices never decides.
// Software NICs (rxe, siw) have no PCIe path: they are chosen only when no
// hardware NIC is a candidate, by rule 3 then name. A GPU without a sysfs
// path (driver-only) takes the first candidate by rules 2 to 4, hardware
// before software. GDR_RDMA_DEVICE overrides the rule: every rail uses that
// NIC, candidate or not (the reason says when it is not).
//
// Selection. GDR_GPU (an index or a PCI address, any case, with or without
// domain) keeps that GPU's rail; GDR_RAILS (all, or a list of rail indices)
// keeps those rails; both together keep their intersection. Primary, for
// single-rail tests: GDR_GPU's rail; else, with GDR_RDMA_DEVICE, the selected
// rail whose GPU is nearest that NIC; else the first selected rail. On a
// host with NICs but no GPU, Primary is NIC-only: GDR_RDMA_DEVICE, else the
// first hardware candidate by PCI address, else the first software
// candidate by name. On a host with GPUs but no candidate NIC the rails are
// GPU-only (NIC nil). Selectors that name nothing are errors naming the
// variable, the value and what exists.
package rails
