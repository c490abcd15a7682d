package install

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gdrconf/gdrconf/harness/dl"
	"github.com/gdrconf/gdrconf/harness/testenv"
	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/kmod"
	"github.com/gdrconf/gdrconf/internal/nvdriver"
	"github.com/gdrconf/gdrconf/internal/reqs"
)

// INST-13: GPU memory can be registered with the NIC.
//
// Two kernel paths exist. The peer-memory path (nvidia_peermem, formerly the
// separate nv_peer_mem) lets ibv_reg_mr take a cudaMalloc pointer; it needs
// MLNX_OFED or a kernel carrying the peer-memory patches (Ubuntu's do). The
// dma-buf path (ibv_reg_dmabuf_mr on an fd from cuMemGetHandleForAddressRange)
// needs the open GPU kernel module (driver >= 515, which also means
// CUDA >= 11.7), Linux >= 5.12 and rdma-core >= 34; NCCL and perftest
// --use_cuda_dmabuf use it when it is there.
//
// So a host with neither module loaded but dma-buf available passes, with the
// note that legacy applications still need nvidia_peermem; a host with
// neither path fails with `modprobe nvidia-peermem` first, because that is
// the fix on every driver flavour. Both modules loaded at once is a
// conflict (they register the same peer client) and fails.
func TestINST13PeerMemory(t *testing.T) {
	testenv.Req(t, "INST-13")
	root := testenv.Root(t)
	km := modules(t, root)
	peermem := lookupMod(t, km, "nvidia_peermem")
	legacy := lookupMod(t, km, "nv_peer_mem")
	peers, _ := root.Glob("/sys/kernel/mm/memory_peers/*")
	state := fmt.Sprintf("nvidia_peermem %s, nv_peer_mem %s, memory_peers [%s]", peermem, legacy, strings.Join(peers, " "))
	if peermem.Loaded() && legacy.Loaded() {
		testenv.Failf(t, "rmmod nv_peer_mem and uninstall it (nvidia-peer-memory / nvidia-peer-memory-dkms packages, /etc/modules-load.d entries); keep nvidia_peermem",
			"both nvidia_peermem and the legacy nv_peer_mem are loaded; they register the same peer-memory client and conflict")
	}
	info, ok := driverInfo(t, root)
	if !ok {
		testenv.Absent(t, reqs.RemedyNoDriver, "no NVIDIA driver (%s missing), so there is no GPU memory to register; %s", root.Host(nvdriver.VersionFile), state)
	}
	devs, _ := rdmaDevices(t)
	dmabuf, why := dmabufPossible(t, root, km, info)
	if len(devs) == 0 {
		testenv.Absent(t, reqs.RemedyNoRDMADevice, "no RDMA device in %s, so GPU peer memory cannot be used; %s; dma-buf path %s",
			root.Host("/sys/class/infiniband"), state, map[bool]string{true: "available", false: "unavailable: " + why}[dmabuf])
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
		testenv.Absent(t, reqs.RemedyHardwareNIC, "only software RDMA device(s) %s in %s (no PCI function): rxe and siw register GPU memory through neither nvidia_peermem nor dma-buf, so GPUDirect RDMA needs a hardware NIC; %s",
			strings.Join(soft, ", "), root.Host("/sys/class/infiniband"), state)
	}
	t.Logf("%s", state)
	switch {
	case peermem.Loaded():
		testenv.Attr(t, "peer_memory", "nvidia_peermem")
	case legacy.Loaded():
		testenv.Attr(t, "peer_memory", "nv_peer_mem")
		t.Logf("legacy nv_peer_mem is loaded: it is unmaintained; NVIDIA drivers >= 470 ship nvidia_peermem instead (rmmod nv_peer_mem; modprobe nvidia-peermem)")
	case len(peers) > 0:
		// Module list hidden (container) but a peer client is registered.
		testenv.Attr(t, "peer_memory", "memory_peers")
	case dmabuf:
		testenv.Attr(t, "peer_memory", "dmabuf")
		t.Logf("nvidia_peermem is not loaded; GPU memory registration uses dma-buf (%s). Applications that pass cudaMalloc pointers to plain ibv_reg_mr (the peer-memory path) still need: modprobe nvidia-peermem", why)
	default:
		testenv.Failf(t, "modprobe nvidia-peermem (ships with NVIDIA driver >= 470; persist it in /etc/modules-load.d; it needs MLNX_OFED or a kernel with the peer-memory patches), or enable the dma-buf path: open GPU kernel module, Linux >= 5.12, rdma-core >= 34",
			"no GPU peer-memory path: %s, and dma-buf is unavailable (%s)", state, why)
	}
}

// dmabufPossible says whether the dma-buf registration path can work here,
// and why (or why not): nvdriver.Dmabuf, with ibv_reg_dmabuf_mr looked up
// in the live libibverbs (rdma-core >= 34 exports it).
func dmabufPossible(t *testing.T, root *hostfs.Root, km *kmod.Host, info nvdriver.Info) (bool, string) {
	t.Helper()
	var verbs *nvdriver.VerbsDmabuf
	if root.IsLive() {
		has, err := dl.Has("libibverbs.so.1", "ibv_reg_dmabuf_mr")
		verbs = &nvdriver.VerbsDmabuf{Has: has, Err: err}
	}
	return nvdriver.Dmabuf(root, km, info, verbs)
}
