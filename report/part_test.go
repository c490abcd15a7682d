package report

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gdrconf/gdrconf/internal/inventory"
)

func partOfReq(t *testing.T, h *HostResult, id string) *Part {
	t.Helper()
	for _, rq := range h.Reqs {
		if rq.ID == id {
			return rq.Part
		}
	}
	t.Fatalf("no %s", id)
	return nil
}

// Each failure names its part from the evidence beside it: a slow rail
// whose optic TOPO-10 found out of limits is the cable/optic (high), a slow
// copy with its link down-trained under load is the PCIe link, a strict
// absence names nothing, and the identity comes from the inventory.
func TestAttribution(t *testing.T) {
	run := gpuHost("gpu07")
	run.Host.Inventory = &inventory.Host{
		GPUs: []inventory.GPU{{BDF: "0000:00:06.0", Model: "NVIDIA H200", Serial: "1654024199838", PartNumber: "692-2G520-0280-000"}},
		NICs: []inventory.NIC{{Name: "mlx5_1", HCAType: "MT4129", BoardID: "MT_0000000838", Firmware: "28.43.1014", Serial: "MT2312X01400"}},
	}
	run.Events = append(run.Events, events("github.com/gdrconf/gdrconf/conformance/gpu",
		tc{name: "TestGPU11LinkUnderLoad", result: "fail", attrs: []string{"gdr.req", "GPU-11"}},
		tc{name: "TestGPU11LinkUnderLoad/0000:00:06.0", result: "fail", attrs: []string{"gdr.gpu", "0000:00:06.0", "gdr.cause", "GPU 0000:00:06.0 runs x8 while copying (max x16)"}},
		tc{name: "TestGPU12ConcurrentHtoD", result: "fail", attrs: []string{"gdr.req", "GPU-12", "gdr.outcome", "absent", "gdr.cause", "GDR_STRICT=1: GPU-12 needs two or more GPUs"}},
		// As testenv recorded a strict absence before outcome "absent".
		tc{name: "TestGPU13ConcurrentDtoH", result: "fail", attrs: []string{"gdr.req", "GPU-13", "gdr.absent", "GPU-13 needs two or more GPUs", "gdr.outcome", "fell_short",
			"gdr.cause", "GDR_STRICT=1: GPU-13 needs two or more GPUs"}},
	)...)
	run.Events = append(run.Events, events("github.com/gdrconf/gdrconf/conformance/topology",
		tc{name: "TestTOPO10LinkHealth", result: "fail", attrs: []string{"gdr.req", "TOPO-10"}},
		tc{name: "TestTOPO10LinkHealth/mlx5_1", result: "fail", attrs: []string{"gdr.nic", "mlx5_1", "gdr.optic", "Mellanox FX-Q28SR4-0100 serial FXQ2831170042",
			"gdr.cause", "mlx5_1 (0000:14:00.0) cable/optic Mellanox FX-Q28SR4-0100 serial FXQ2831170042: Rx power lane 3 0.021 mW below its low alarm threshold 0.0468 mW"}},
	)...)
	run.Events = append(run.Events, events("github.com/gdrconf/gdrconf/conformance/pingpong",
		tc{name: "TestPP08Bandwidth", result: "fail", attrs: []string{"gdr.req", "PP-08"}},
		tc{name: "TestPP08Bandwidth/rail1/WRITE/1048576", result: "fail", attrs: []string{"gdr.nic", "mlx5_1", "gdr.rail", "1", "gdr.cause", "RDMA WRITE reaches 120 Gbit/s < floor 360"}},
	)...)
	h := Build([]Run{run}).Hosts[0]

	p := partOfReq(t, h, "PP-08")
	require.NotNil(t, p)
	assert.Equal(t, "cable/optic", p.Kind)
	assert.Equal(t, confHigh, p.Confidence)
	assert.Equal(t, "MT4129, PSID MT_0000000838, firmware 28.43.1014, serial MT2312X01400", p.Identity)
	assert.Contains(t, p.Why, "TOPO-10")

	p = partOfReq(t, h, "TOPO-10")
	require.NotNil(t, p)
	assert.Equal(t, "Mellanox FX-Q28SR4-0100 serial FXQ2831170042", p.Identity, "the optic's own identity")

	p = partOfReq(t, h, "GPU-09")
	require.NotNil(t, p)
	assert.Equal(t, "pcie link", p.Kind, "slow copies beside a down-trained link")
	assert.Equal(t, "NVIDIA H200, serial 1654024199838, part 692-2G520-0280-000", p.Identity)

	assert.Nil(t, partOfReq(t, h, "GPU-12"), "a strict absence is no faulty part")
	assert.Nil(t, partOfReq(t, h, "GPU-13"), "nor one recorded before outcome absent")

	var txt, md, html, js bytes.Buffer
	r := Build([]Run{run})
	require.NoError(t, r.WriteText(&txt))
	require.NoError(t, r.WriteMarkdown(&md))
	require.NoError(t, r.WriteHTML(&html))
	require.NoError(t, r.WriteJSON(&js))
	for name, out := range map[string]string{"txt": txt.String(), "md": md.String(), "html": html.String(), "json": js.String()} {
		assert.Contains(t, out, "cable/optic", name)
		assert.Contains(t, out, "MT2312X01400", name)
	}
	var x bytes.Buffer
	require.NoError(t, r.WriteJUnit(&x))
	assert.Contains(t, x.String(), "gdr.part=cable/optic: mlx5_1")
}

// A PP failure with no other evidence names the rail's NIC at low
// confidence, not a GPU.
func TestAttributionDefaultsLow(t *testing.T) {
	run := Run{Host: Identity{Host: "h"}, Events: events("github.com/gdrconf/gdrconf/conformance/pingpong",
		tc{name: "TestPP08Bandwidth", result: "fail", attrs: []string{"gdr.req", "PP-08"}},
		tc{name: "TestPP08Bandwidth/rail0/WRITE/1048576", result: "fail", attrs: []string{"gdr.nic", "mlx5_0", "gdr.cause", "slow"}},
	)}
	p := partOfReq(t, Build([]Run{run}).Hosts[0], "PP-08")
	require.NotNil(t, p)
	assert.Equal(t, "nic", p.Kind)
	assert.Equal(t, confLow, p.Confidence)
}

// PP-09 beside a slow rail: host memory through the NIC as slow puts it on
// the NIC side, GPU memory much slower on the GPU side.
func TestAttributionByPP09(t *testing.T) {
	for ratio, want := range map[string]string{"0.98": "nic", "0.41": "gpu"} {
		run := Run{Host: Identity{Host: "h"}, Events: events("github.com/gdrconf/gdrconf/conformance/pingpong",
			tc{name: "TestPP09HostVsGPU", result: "pass", attrs: []string{"gdr.req", "PP-09"}},
			tc{name: "TestPP09HostVsGPU/rail0", result: "pass", attrs: []string{"gdr.nic", "mlx5_0", "gdr.bw_ratio_gpu_host", ratio}},
			tc{name: "TestPP08Bandwidth", result: "fail", attrs: []string{"gdr.req", "PP-08"}},
			tc{name: "TestPP08Bandwidth/rail0/WRITE/1048576", result: "fail", attrs: []string{"gdr.nic", "mlx5_0", "gdr.gpu", "0000:3b:00.0", "gdr.mem", "gpu", "gdr.cause", "slow"}},
		)}
		p := partOfReq(t, Build([]Run{run}).Hosts[0], "PP-08")
		require.NotNil(t, p, ratio)
		assert.Equal(t, want, p.Kind, ratio)
		assert.Equal(t, confMedium, p.Confidence, ratio)
		assert.Contains(t, p.Why, "PP-09", ratio)
	}
}
