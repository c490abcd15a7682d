package report

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/dmi"
	"github.com/gdrconf/gdrconf/internal/inventory"
)

func invHost(name, nicFW string) Run {
	r := gpuHost(name)
	r.Host.MachineID = "m-" + name
	r.Host.Inventory = &inventory.Host{
		DMI:  &dmi.Info{SysVendor: "NVIDIA", Product: "DGXH200", ProductSerial: "SN-" + name, BIOSVersion: "1.6.7", Unreadable: nil},
		GPUs: []inventory.GPU{{BDF: "0000:00:06.0", Model: "NVIDIA H200", UUID: "GPU-1", VBIOS: "96.00.A5.00.1A", Source: "procfs"}},
		NICs: []inventory.NIC{{Name: "mlx5_0", PCI: "0000:3c:00.0", HCAType: "MT4129", BoardID: "MT_0000000838", Firmware: nicFW,
			PartNumber: "MCX75310AAS-NEAT", Serial: "MT2312X0001" + name}},
		Software: inventory.Software{NvidiaDriver: "580.159.04", Kernel: "6.18.44"},
	}
	// GPU-16 ran: NVML's serial and InfoROM join the procfs values.
	r.Events = append(r.Events, events("github.com/gdrconf/gdrconf/conformance/gpu",
		tc{name: "TestGPU16Identity", result: "pass", attrs: []string{"gdr.req", "GPU-16"}},
		tc{name: "TestGPU16Identity/0000:00:06.0", result: "pass", attrs: []string{"gdr.gpu", "0000:00:06.0", "gdr.gpu_serial", "1654024199838",
			"gdr.gpu_part_number", "692-2G520-0280-000", "gdr.inforom_image", "G520.0280.00.05", "gdr.inforom_valid", "yes"}},
	)...)
	return r
}

// A host's report names each part with its identity, in every format
// (one view model: identityLines), and summary.json carries the inventory.
func TestInventoryInReports(t *testing.T) {
	r := Build([]Run{invHost("gpu01", "28.43.1014")})
	inv := r.Hosts[0].Identity.Inventory
	require.NotNil(t, inv)
	require.Len(t, inv.GPUs, 1)
	assert.Equal(t, "1654024199838", inv.GPUs[0].Serial, "NVML's serial merged from GPU-16")
	assert.Equal(t, "procfs+nvml", inv.GPUs[0].Source)

	var txt, md, html, js bytes.Buffer
	require.NoError(t, r.WriteText(&txt))
	require.NoError(t, r.WriteMarkdown(&md))
	require.NoError(t, r.WriteHTML(&html))
	require.NoError(t, r.WriteJSON(&js))
	for name, out := range map[string]string{"txt": txt.String(), "md": md.String(), "html": html.String()} {
		for _, want := range []string{"NVIDIA DGXH200, serial SN-gpu01, BIOS 1.6.7",
			"NVIDIA H200, serial 1654024199838, part 692-2G520-0280-000, VBIOS 96.00.A5.00.1A, InfoROM G520.0280.00.05",
			"MT4129, PSID MT_0000000838, firmware 28.43.1014, part MCX75310AAS-NEAT"} {
			assert.Contains(t, out, want, name)
		}
	}
	var doc struct {
		Hosts []struct {
			Identity Identity `json:"identity"`
		} `json:"hosts"`
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &doc))
	require.NotNil(t, doc.Hosts[0].Identity.Inventory)
	assert.Equal(t, "MT2312X0001gpu01", doc.Hosts[0].Identity.Inventory.NICs[0].Serial)
	assert.NotContains(t, js.String(), `"serial": ""`)
}

// A merge flags the host whose NIC firmware differs from the majority's,
// in the verdict's flags and summary.json's inventory_drift.
func TestInventoryDriftFlagged(t *testing.T) {
	runs, err := MergeRuns([]Run{invHost("gpu01", "28.43.1014"), invHost("gpu02", "28.43.1014"), invHost("gpu03", "28.39.1002")}, false)
	require.NoError(t, err)
	r := Build(runs)
	require.Len(t, r.Drift, 1)
	assert.Equal(t, map[string]string{"gpu03": "28.39.1002"}, r.Drift[0].Odd)
	assert.Contains(t, r.Verdict.Flags, "versions differ from the majority: NIC firmware (MT_0000000838): gpu03 has 28.39.1002 where 2 of 3 hosts (most) have 28.43.1014")
	var txt, js bytes.Buffer
	require.NoError(t, r.WriteText(&txt))
	require.NoError(t, r.WriteJSON(&js))
	assert.Contains(t, txt.String(), "FLAG: versions differ from the majority: NIC firmware")
	var doc struct {
		Drift []inventory.Difference `json:"inventory_drift"`
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &doc))
	require.Len(t, doc.Drift, 1)
	assert.Equal(t, "28.43.1014", doc.Drift[0].Majority)

	assert.Empty(t, Build([]Run{invHost("gpu01", "28.43.1014"), invHost("gpu02", "28.43.1014")}).Drift)
}
