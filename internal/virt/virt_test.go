package virt

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/hostfs"
	"github.com/gdrconf/gdrconf/internal/hostfs/hostfstest"
)

func root(t *testing.T, files map[string]string) *hostfs.Root {
	return hostfstest.Tree(t, files)
}

const bareFlags = "processor\t: 0\nflags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep\n"
const vmFlags = "processor\t: 0\nflags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep hypervisor lahf_lm\n"

func TestDetect(t *testing.T) {
	for _, c := range []struct {
		name       string
		files      map[string]string
		vm         bool
		hypervisor string
		cloud      string
		signs      []string
	}{
		{name: "bare metal DGX", files: map[string]string{
			"/sys/class/dmi/id/sys_vendor": "NVIDIA\n", "/sys/class/dmi/id/product_name": "DGXH100\n", "/proc/cpuinfo": bareFlags}},
		{name: "Microsoft laptop is not a VM", files: map[string]string{
			"/sys/class/dmi/id/sys_vendor": "Microsoft Corporation\n", "/sys/class/dmi/id/product_name": "Surface Laptop 5\n", "/proc/cpuinfo": bareFlags}},
		{name: "Azure ND H100 v5", files: map[string]string{
			"/sys/class/dmi/id/sys_vendor": "Microsoft Corporation\n", "/sys/class/dmi/id/product_name": "Virtual Machine\n",
			"/sys/class/dmi/id/chassis_asset_tag": "7783-7084-3265-9085-8269-3286-77\n", "/proc/cpuinfo": vmFlags,
			"/sys/bus/vmbus/devices/4487b255-b88c-403f-bb51-d1f69cf17f87/uevent": ""},
			vm: true, hypervisor: "Microsoft Hyper-V (Azure)", cloud: "Azure",
			signs: []string{"sys_vendor: Microsoft Corporation, product_name: Virtual Machine", "flag hypervisor", "1 VMBus device"}},
		{name: "GCE", files: map[string]string{
			"/sys/class/dmi/id/sys_vendor": "Google\n", "/sys/class/dmi/id/product_name": "Google Compute Engine\n", "/proc/cpuinfo": vmFlags},
			vm: true, hypervisor: "KVM (Google Compute Engine)", cloud: "Google Cloud",
			signs: []string{"product_name: Google Compute Engine", "sys_vendor: Google", "flag hypervisor"}},
		{name: "EC2", files: map[string]string{"/sys/class/dmi/id/sys_vendor": "Amazon EC2\n"},
			vm: true, hypervisor: "Amazon EC2 (Nitro)", cloud: "AWS", signs: []string{"sys_vendor: Amazon EC2"}},
		{name: "QEMU/KVM", files: map[string]string{"/sys/class/dmi/id/sys_vendor": "QEMU\n", "/sys/class/dmi/id/product_name": "Standard PC (Q35 + ICH9, 2009)\n"},
			vm: true, hypervisor: "QEMU", signs: []string{"sys_vendor: QEMU"}},
		{name: "VMware", files: map[string]string{"/sys/class/dmi/id/sys_vendor": "VMware, Inc.\n"},
			vm: true, hypervisor: "VMware", signs: []string{"sys_vendor: VMware, Inc."}},
		{name: "Xen PV", files: map[string]string{"/sys/hypervisor/type": "xen\n"},
			vm: true, hypervisor: "xen", signs: []string{"/sys/hypervisor/type: xen"}},
		{name: "Firecracker: only the CPUID flag", files: map[string]string{"/proc/cpuinfo": vmFlags},
			vm: true, signs: []string{"/proc/cpuinfo: flag hypervisor"}},
		{name: "empty VMBus directory is no sign", files: map[string]string{"/sys/bus/vmbus/devices/": ""}},
		{name: "nothing readable", files: map[string]string{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, err := Detect(root(t, c.files))
			require.NoError(t, err)
			assert.Equal(t, c.vm, g.VM, "%s", g)
			assert.Equal(t, c.hypervisor, g.Hypervisor)
			assert.Equal(t, c.cloud, g.Cloud)
			require.Len(t, g.Signs, len(c.signs), "%q", g.Signs)
			for i, s := range c.signs {
				assert.Contains(t, g.Signs[i], s)
			}
			if c.vm {
				assert.Contains(t, g.String(), "VM (")
			} else {
				assert.Contains(t, g.String(), "not a VM")
			}
		})
	}
}

// A large host's /proc/cpuinfo is far above hostfs.MaxFile (64 KiB).
func TestDetectLargeCPUInfo(t *testing.T) {
	big := strings.Repeat(vmFlags+"\n", 2000) // about 200 KiB
	g, err := Detect(root(t, map[string]string{"/proc/cpuinfo": big}))
	require.NoError(t, err)
	assert.True(t, g.VM)
}

func TestDetectUnreadable(t *testing.T) {
	// A directory where a file should be: an error naming it, not a panic,
	// and the other signs still count.
	r := root(t, map[string]string{"/sys/class/dmi/id/sys_vendor/x": "", "/proc/cpuinfo": vmFlags})
	g, err := Detect(r)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "sys_vendor")
	assert.True(t, g.VM)
}
