package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// An nvidia.com/gpu allocation hands the container the driver's control
// device and each chosen GPU's node, as the GPU operator's plugin does with
// PASS_DEVICE_SPECS; without them the emulated driver in the pod (like the
// real one) finds no GPU.
func TestGPUAllocate(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"nvidiactl", "nvidia0", "nvidia1", "nvidia10"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o666); err != nil {
			t.Fatal(err)
		}
	}
	r, err := gpuAllocate(dir, []string{"10", "1"})
	if err != nil {
		t.Fatal(err)
	}
	spec := func(n string) *pluginapi.DeviceSpec {
		p := filepath.Join(dir, n)
		return &pluginapi.DeviceSpec{ContainerPath: p, HostPath: p, Permissions: "rw"}
	}
	want := []*pluginapi.DeviceSpec{spec("nvidiactl"), spec("nvidia1"), spec("nvidia10")}
	if !reflect.DeepEqual(r.Devices, want) {
		t.Errorf("devices %v, want %v", r.Devices, want)
	}
	if got := r.Envs["NVIDIA_VISIBLE_DEVICES"]; got != "1,10" {
		t.Errorf("NVIDIA_VISIBLE_DEVICES=%q, want 1,10 (numeric order)", got)
	}

	if _, err := gpuAllocate(dir, []string{"2"}); err == nil || !strings.Contains(err.Error(), "nvidia2") {
		t.Errorf("a GPU without its device file: %v, want an error naming it", err)
	}
	if err := os.Remove(filepath.Join(dir, "nvidiactl")); err != nil {
		t.Fatal(err)
	}
	r, err = gpuAllocate(dir, []string{"0"})
	if err != nil || !reflect.DeepEqual(r.Devices, []*pluginapi.DeviceSpec{spec("nvidia0")}) {
		t.Errorf("no nvidiactl on the node: %v %v, want nvidia0 alone (the control device is optional)", r, err)
	}
}
