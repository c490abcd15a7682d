package install

import (
	"fmt"
	"strings"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/kmod"
	"github.com/gdrconf/gdrconf/internal/nvdriver"
	"github.com/gdrconf/gdrconf/internal/rdmadev"
	"github.com/gdrconf/gdrconf/internal/reqs"
	"github.com/gdrconf/gdrconf/internal/verdict"
)

// PeerPath is how GPU memory reaches the NIC on this host (gdr.peer_memory).
type PeerPath string

const (
	PeerNvidiaPeermem PeerPath = "nvidia_peermem" // the driver's peer-memory client
	PeerLegacy        PeerPath = "nv_peer_mem"    // the unmaintained out-of-tree one
	PeerMemoryPeers   PeerPath = "memory_peers"   // a registered client, module list hidden (a container)
	PeerDmabuf        PeerPath = "dmabuf"         // ibv_reg_dmabuf_mr on the GPU's dma-buf
)

// PeerMemory is INST-13: GPU memory can be registered with the NIC.
//
// Two kernel paths exist. The peer-memory path (nvidia_peermem, formerly
// the separate nv_peer_mem) lets ibv_reg_mr take a cudaMalloc pointer; it
// needs MLNX_OFED or a kernel carrying the peer-memory patches (Ubuntu's
// do). The dma-buf path (ibv_reg_dmabuf_mr on an fd from
// cuMemGetHandleForAddressRange) needs the open GPU kernel module, Linux
// >= 5.12 and rdma-core >= 34 (nvdriver.Dmabuf; verbs is libibverbs as the
// live host loads it, nil on a recorded tree). Neither path fails, with
// `modprobe nvidia-peermem` first because that is the fix on every driver
// flavour; both modules at once conflict (they register the same peer
// client) and fail.
func PeerMemory(root *hostfs.Root, km *kmod.Host, devs []*rdmadev.Device, verbs *nvdriver.VerbsDmabuf) Judged {
	var j Judged
	var mods [2]kmod.Status
	for i, m := range []string{"nvidia_peermem", "nv_peer_mem"} {
		st, err := km.Lookup(m)
		if err != nil {
			j.add(verdict.NotJudgedf("", "kernel module %s: %v", m, err))
			return j
		}
		mods[i] = st
	}
	peermem, legacy := mods[0], mods[1]
	peers, _ := root.Glob("/sys/kernel/mm/memory_peers/*")
	state := fmt.Sprintf("nvidia_peermem %s, nv_peer_mem %s, memory_peers [%s]", peermem, legacy, strings.Join(peers, " "))
	if peermem.Loaded() && legacy.Loaded() {
		j.add(verdict.Failf("rmmod nv_peer_mem and uninstall it (nvidia-peer-memory / nvidia-peer-memory-dkms packages, /etc/modules-load.d entries); keep nvidia_peermem",
			"both nvidia_peermem and the legacy nv_peer_mem are loaded; they register the same peer-memory client and conflict"))
		return j
	}
	info, ok, err := Driver(root)
	switch {
	case err != nil:
		j.add(verdict.Of(err))
		return j
	case !ok:
		j.add(verdict.Absentf(reqs.RemedyNoDriver, "no NVIDIA driver (%s missing), so there is no GPU memory to register; %s", root.Host(nvdriver.VersionFile), state))
		return j
	}
	dmabuf, why := nvdriver.Dmabuf(root, km, info, verbs)
	if len(devs) == 0 {
		avail := "available"
		if !dmabuf {
			avail = "unavailable: " + why
		}
		j.add(verdict.Absentf(reqs.RemedyNoRDMADevice, "no RDMA device in %s, so GPU peer memory cannot be used; %s; dma-buf path %s",
			root.Host("/sys/class/infiniband"), state, avail))
		return j
	}
	// Software devices (rxe, siw) copy with the CPU: they register GPU
	// memory through neither path, so only a PCI NIC can qualify the host.
	var soft []string
	for _, d := range devs {
		if d.PCI == "" {
			soft = append(soft, d.Name)
		}
	}
	if len(soft) == len(devs) {
		j.add(verdict.Absentf(reqs.RemedyHardwareNIC, "only software RDMA device(s) %s in %s (no PCI function): rxe and siw register GPU memory through neither nvidia_peermem nor dma-buf, so GPUDirect RDMA needs a hardware NIC; %s",
			strings.Join(soft, ", "), root.Host("/sys/class/infiniband"), state))
		return j
	}
	j.info("%s", state)
	var path PeerPath
	switch {
	case peermem.Loaded():
		path = PeerNvidiaPeermem
	case legacy.Loaded():
		path = PeerLegacy
		j.info("legacy nv_peer_mem is loaded: it is unmaintained; NVIDIA drivers >= 470 ship nvidia_peermem instead (rmmod nv_peer_mem; modprobe nvidia-peermem)")
	case len(peers) > 0:
		// Module list hidden (container) but a peer client is registered.
		path = PeerMemoryPeers
	case dmabuf:
		path = PeerDmabuf
		j.info("nvidia_peermem is not loaded; GPU memory registration uses dma-buf (%s). Applications that pass cudaMalloc pointers to plain ibv_reg_mr (the peer-memory path) still need: modprobe nvidia-peermem", why)
	default:
		j.add(verdict.Failf("modprobe nvidia-peermem (ships with NVIDIA driver >= 470; persist it in /etc/modules-load.d; it needs MLNX_OFED or a kernel with the peer-memory patches), or enable the dma-buf path: open GPU kernel module, Linux >= 5.12, rdma-core >= 34",
			"no GPU peer-memory path: %s, and dma-buf is unavailable (%s)", state, why))
		return j
	}
	j.attr("peer_memory", string(path))
	return j
}
