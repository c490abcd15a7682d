// Command deviceplugin is the lab's stand-in for the device plugins of the
// NVIDIA GPU and network operators: it registers with the kubelet
// (k8s.io/kubelet's deviceplugin v1beta1 API) the resources deploy/k8s asks
// for, so that the Job's pods are scheduled and started as on a GPU
// cluster, and gives each container what those plugins give it.
//
//   - rdma/rdma_shared_device_a, as the RDMA shared device plugin
//     (Mellanox/k8s-rdma-shared-dev-plugin, pkg/resources/server.go
//     Allocate): -shared devices, all alike, each allocation mounting every
//     RDMA character device of the node (/dev/infiniband/uverbsN, umadN,
//     issmN, ucmN and rdma_cm) with rwm, so the pod needs no privileges.
//   - nvidia.com/gpu: -gpus devices, as the GPU operator's plugin with
//     PASS_DEVICE_SPECS (NVIDIA/k8s-device-plugin, internal/plugin/server.go
//     getAllocateResponse and apiDeviceSpecs; internal/rm/nvml_manager.go
//     GetDevicePaths): each allocation hands the container the driver's
//     control device /dev/nvidiactl (where the node has it) and
//     /dev/nvidia<i> of each chosen GPU, rw, and sets
//     NVIDIA_VISIBLE_DEVICES to the chosen indexes. The lab's emulated
//     libcuda.so.1 opens those files as the driver does, so a pod that
//     were not given them would see no GPU.
//
// It re-registers whenever the kubelet's socket is created again (a
// restarted kubelet forgets its plugins).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

type plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	resource string
	socket   string // file name in pluginapi.DevicePluginPath
	devices  []*pluginapi.Device
	allocate func(ids []string) (*pluginapi.ContainerAllocateResponse, error)
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

func (p *plugin) ListAndWatch(_ *pluginapi.Empty, s grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: p.devices}); err != nil {
		return err
	}
	<-s.Context().Done() // the devices never change
	return nil
}

func (p *plugin) GetPreferredAllocation(context.Context, *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	return &pluginapi.PreferredAllocationResponse{}, nil
}

func (p *plugin) Allocate(_ context.Context, r *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	out := &pluginapi.AllocateResponse{}
	for _, c := range r.ContainerRequests {
		resp, err := p.allocate(c.DevicesIds)
		if err != nil {
			log.Printf("Allocate %s %v: %v", p.resource, c.DevicesIds, err)
			return nil, err
		}
		out.ContainerResponses = append(out.ContainerResponses, resp)
	}
	return out, nil
}

func (p *plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

// serve listens on the plugin's socket and registers it with the kubelet.
func (p *plugin) serve() (*grpc.Server, error) {
	path := filepath.Join(pluginapi.DevicePluginPath, p.socket)
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	go func() { _ = srv.Serve(l) }()
	conn, err := grpc.NewClient("unix://"+pluginapi.KubeletSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		srv.Stop()
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: p.socket, ResourceName: p.resource})
	if err != nil {
		srv.Stop()
		return nil, fmt.Errorf("registering %s with the kubelet: %w", p.resource, err)
	}
	return srv, nil
}

// rdmaDevices are the node's RDMA character devices, as the shared device
// plugin mounts them (rdmamap.GetRdmaCharDevices: per device uverbs, umad,
// issm, ucm; and rdma_cm).
func rdmaDevices(dir string) []*pluginapi.DeviceSpec {
	ents, _ := os.ReadDir(dir)
	var specs []*pluginapi.DeviceSpec
	for _, e := range ents {
		n := e.Name()
		if n == "rdma_cm" || strings.HasPrefix(n, "uverbs") || strings.HasPrefix(n, "umad") || strings.HasPrefix(n, "issm") || strings.HasPrefix(n, "ucm") {
			p := filepath.Join(dir, n)
			specs = append(specs, &pluginapi.DeviceSpec{HostPath: p, ContainerPath: p, Permissions: "rwm"})
		}
	}
	sort.Slice(specs, func(i, j int) bool { return specs[i].HostPath < specs[j].HostPath })
	return specs
}

// gpuAllocate is the nvidia.com/gpu allocation of GPUs ids (their
// indexes) with the device files under devDir: nvidiactl when it exists
// (the NVIDIA plugin's optional nodes), then each GPU's node, which must
// exist (the kubelet could not start the container without it).
func gpuAllocate(devDir string, ids []string) (*pluginapi.ContainerAllocateResponse, error) {
	ids = append([]string(nil), ids...)
	sort.Slice(ids, func(i, j int) bool {
		a, _ := strconv.Atoi(ids[i])
		b, _ := strconv.Atoi(ids[j])
		return a < b
	})
	r := &pluginapi.ContainerAllocateResponse{Envs: map[string]string{"NVIDIA_VISIBLE_DEVICES": strings.Join(ids, ",")}}
	spec := func(p string) *pluginapi.DeviceSpec {
		return &pluginapi.DeviceSpec{ContainerPath: p, HostPath: p, Permissions: "rw"}
	}
	if ctl := filepath.Join(devDir, "nvidiactl"); exists(ctl) {
		r.Devices = append(r.Devices, spec(ctl))
	}
	for _, id := range ids {
		p := filepath.Join(devDir, "nvidia"+id)
		if !exists(p) {
			return nil, fmt.Errorf("nvidia.com/gpu %s: no device file %s", id, p)
		}
		r.Devices = append(r.Devices, spec(p))
	}
	return r, nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func devices(prefix string, n int) []*pluginapi.Device {
	var d []*pluginapi.Device
	for i := range n {
		d = append(d, &pluginapi.Device{ID: prefix + strconv.Itoa(i), Health: pluginapi.Healthy})
	}
	return d
}

func main() {
	shared := flag.Int("shared", 64, "rdma/rdma_shared_device_a: how many pods may share the RDMA devices (the plugin's rdmaHcaMax)")
	gpus := flag.Int("gpus", 2, "nvidia.com/gpu: the node's (emulated) GPUs")
	ibDir := flag.String("dev", "/dev/infiniband", "the RDMA character devices")
	gpuDir := flag.String("gpu-dev", "/dev", "where the GPUs' device files are (nvidiactl, nvidia<i>)")
	flag.Parse()
	rdma := rdmaDevices(*ibDir)
	if len(rdma) == 0 {
		log.Fatalf("no RDMA character devices in %s: load ib_uverbs and rdma_ucm first", *ibDir)
	}
	plugins := []*plugin{
		{resource: "rdma/rdma_shared_device_a", socket: "gdrlab-rdma.sock", devices: devices("rdma", *shared),
			allocate: func([]string) (*pluginapi.ContainerAllocateResponse, error) {
				return &pluginapi.ContainerAllocateResponse{Devices: rdma}, nil
			}},
		{resource: "nvidia.com/gpu", socket: "gdrlab-gpu.sock", devices: devices("", *gpus),
			allocate: func(ids []string) (*pluginapi.ContainerAllocateResponse, error) {
				return gpuAllocate(*gpuDir, ids)
			}},
	}
	var lastSock time.Time
	var servers []*grpc.Server
	for {
		st, err := os.Stat(pluginapi.KubeletSocket)
		if err == nil && st.ModTime() != lastSock {
			for _, s := range servers {
				s.Stop()
			}
			servers = nil
			ok := true
			for _, p := range plugins {
				s, err := p.serve()
				if err != nil {
					log.Printf("%v (retrying)", err)
					ok = false
					break
				}
				servers = append(servers, s)
				log.Printf("registered %s: %d devices", p.resource, len(p.devices))
			}
			if ok {
				lastSock = st.ModTime()
			}
		}
		time.Sleep(2 * time.Second)
	}
}
