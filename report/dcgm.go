package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/gdrconf/gdrconf/internal/verdict"
)

// The tree of `dcgmi diag -j` as DCGM 4 writes it (dcgmi/Diag.cpp,
// Diag::HelperJsonBuildOutput in NVIDIA/DCGM): entity_groups and metadata at
// the root beside "DCGM Diagnostic", which holds test_categories, each with
// tests, each with one result per entity and a test_summary. The names are
// DCGM's so that tools which read DCGM diag output read ours; the file is
// schema-compatible only: NVIDIA did not produce it, and its version is the
// suite's, not DCGM's (metadata.producer says so).

// DCGMDoc is the document's root.
type DCGMDoc struct {
	EntityGroups []DCGMEntityGroup `json:"entity_groups,omitempty"`
	Metadata     DCGMMetadata      `json:"metadata"`
	Diagnostic   DCGMDiagnostic    `json:"DCGM Diagnostic"`
}

// DCGMEntityGroup lists the entities of one kind (DCGM's GPU group is 1).
type DCGMEntityGroup struct {
	ID       int          `json:"entity_group_id"`
	Group    string       `json:"entity_group"`
	Entities []DCGMEntity `json:"entities"`
}

// DCGMEntity is one GPU: entity_id is its index in PCI bus order (the
// suite's GPU numbering); pci_bus_id is ours (DCGM has a device id and
// serial we do not read; absent, never guessed).
type DCGMEntity struct {
	ID       int    `json:"entity_id"`
	PCIBusID string `json:"pci_bus_id,omitempty"`
}

// DCGMMetadata is DCGM's metadata object.
type DCGMMetadata struct {
	Version  string `json:"version"`
	Driver   string `json:"Driver Version Detected,omitempty"`
	Producer string `json:"producer"`
	Host     string `json:"host"`
}

// DCGMDiagnostic holds the categories.
type DCGMDiagnostic struct {
	Categories []DCGMCategory `json:"test_categories"`
}

// DCGMCategory is one of DCGM's categories (Deployment, Integration,
// Hardware, Performance): each area of the suite maps to one (dcgmCategory).
type DCGMCategory struct {
	Category string     `json:"category"`
	Tests    []DCGMTest `json:"tests"`
}

// DCGMTest is one requirement. A requirement that did not run has its name
// only, as DCGM writes a test that did not run.
type DCGMTest struct {
	Name    string       `json:"name"`
	Results []DCGMResult `json:"results,omitempty"`
	Summary *DCGMResult  `json:"test_summary,omitempty"`
}

// DCGMResult is one entity's result (entity fields set) or a summary or
// host-wide result (entity fields absent, as DCGM writes DCGM_FE_NONE).
type DCGMResult struct {
	GroupID  *int          `json:"entity_group_id,omitempty"`
	Group    string        `json:"entity_group,omitempty"`
	EntityID *int          `json:"entity_id,omitempty"`
	Status   string        `json:"status"` // Pass, Fail, Warn, Skip
	Warnings []DCGMWarning `json:"warnings,omitempty"`
	Info     []string      `json:"info,omitempty"`
}

// DCGMWarning is one failure or skip message. DCGM's error_id, category
// and severity are DCGM error codes the suite has none of, so are absent.
type DCGMWarning struct {
	Warning string `json:"warning"`
}

// DCGM's status words and its GPU entity group.
const (
	dcgmPass, dcgmFail, dcgmWarn, dcgmSkip = "Pass", "Fail", "Warn", "Skip"
	dcgmGPUGroup                           = 1
)

// dcgmCategory is the DCGM category an area's requirements are filed under.
var dcgmCategory = map[string]string{
	"install": "Deployment", "topology": "Integration", "memreg": "Integration",
	"gpu": "Hardware", "pingpong": "Performance",
}

// dcgmStatus maps a status to DCGM's word. A report-only requirement that
// failed is Warn: it does not change the verdict.
func dcgmStatus(s Status, level string) string {
	switch s {
	case Pass:
		return dcgmPass
	case Skip, NotRun, HostOnly:
		return dcgmSkip
	}
	if level != "must" {
		return dcgmWarn
	}
	return dcgmFail
}

// DCGM builds host h's DCGM-shaped document.
func (h *HostResult) DCGM() DCGMDoc {
	doc := DCGMDoc{Metadata: DCGMMetadata{Version: orUnknown(h.Identity.Suite), Driver: h.Identity.NvidiaDriver,
		Producer: "gdrconf GPUDirect RDMA conformance suite (DCGM diag schema-compatible; not produced by NVIDIA)", Host: h.Identity.Host}}
	gpuIndex := map[string]int{}
	var ents []DCGMEntity
	for i, g := range h.Identity.GPUs {
		bdf, _, _ := strings.Cut(g, " ")
		gpuIndex[bdf] = i
		ents = append(ents, DCGMEntity{ID: i, PCIBusID: bdf})
	}
	if len(ents) > 0 {
		doc.EntityGroups = []DCGMEntityGroup{{ID: dcgmGPUGroup, Group: "GPU", Entities: ents}}
	}
	byCat := map[string]*DCGMCategory{}
	var cats []*DCGMCategory // first-seen order
	for _, rq := range h.Reqs {
		name := dcgmCategory[rq.Area]
		if name == "" {
			name = "Custom" // DCGM's category for plugins outside its own
		}
		cat := byCat[name]
		if cat == nil {
			cat = &DCGMCategory{Category: name}
			byCat[name] = cat
			cats = append(cats, cat)
		}
		cat.Tests = append(cat.Tests, rq.dcgmTest(gpuIndex))
	}
	for _, c := range cats {
		doc.Diagnostic.Categories = append(doc.Diagnostic.Categories, *c)
	}
	return doc
}

// dcgmTest is one requirement as a DCGM test: a result per GPU where its
// cases name one (gdr.gpu), else one host-wide result, and the summary.
func (rq *ReqResult) dcgmTest(gpuIndex map[string]int) DCGMTest {
	t := DCGMTest{Name: rq.ID}
	if rq.Status == NotRun {
		return t
	}
	type acc struct {
		res  DCGMResult
		rank int
	}
	rank := map[string]int{dcgmPass: 0, dcgmSkip: 1, dcgmWarn: 2, dcgmFail: 3}
	var order []string
	by := map[string]*acc{}
	for _, c := range rq.cases {
		key := ""
		var res DCGMResult
		if idx, ok := gpuIndex[c.Attrs["gdr.gpu"]]; ok {
			g, id := dcgmGPUGroup, idx
			res = DCGMResult{GroupID: &g, Group: "GPU", EntityID: &id}
			key = c.Attrs["gdr.gpu"]
		}
		a := by[key]
		if a == nil {
			a = &acc{res: res, rank: -1}
			by[key] = a
			order = append(order, key)
		}
		st := dcgmStatus(c.Status(), rq.Level)
		if rank[st] > a.rank {
			a.rank, a.res.Status = rank[st], st
		}
		if c.Status() != Pass && c.Message != "" {
			a.res.Warnings = append(a.res.Warnings, DCGMWarning{Warning: c.Name + ": " + c.Message})
		}
		for _, n := range caseNumbers(c) {
			a.res.Info = append(a.res.Info, n.String())
		}
	}
	for _, k := range order {
		t.Results = append(t.Results, by[k].res)
	}
	sum := DCGMResult{Status: dcgmStatus(rq.Status, rq.Level), Info: []string{rq.Title}}
	if rq.Reason != "" {
		sum.Warnings = []DCGMWarning{{Warning: verdict.Line(rq.Reason, rq.Remedy)}}
	}
	t.Summary = &sum
	return t
}

// WriteDCGM writes the DCGM-shaped document of one host.
func (h *HostResult) WriteDCGM(w io.Writer) error { return h.writeDCGMDoc(w, true) }

// writeDCGMDoc writes it indented as dcgmi diag -j does, or for a fleet's
// thousand files not (indenting them was a second of a merge).
func (h *HostResult) writeDCGMDoc(w io.Writer, indent bool) error {
	enc := json.NewEncoder(w)
	if indent {
		enc.SetIndent("", "  ")
	}
	enc.SetEscapeHTML(false)
	return enc.Encode(h.DCGM())
}

// DCGMDir is where a merged report keeps each host's DCGM-shaped document,
// as <host>.json (DCGM's format is one host's).
const DCGMDir = "dcgm-diag"

// writeDCGM writes dcgm-diag.json for one host, or dcgm-diag/<host>.json
// for each of many.
func (r *Report) writeDCGM(dir string) error {
	indent := !r.Fleet()
	write := func(path string, h *HostResult) error {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := h.writeDCGMDoc(f, indent); err != nil {
			f.Close()
			return fmt.Errorf("%s: %v", path, err)
		}
		return f.Close()
	}
	if len(r.Hosts) == 1 {
		return write(filepath.Join(dir, DCGMFile), r.Hosts[0])
	}
	sub := filepath.Join(dir, DCGMDir)
	if err := os.MkdirAll(sub, 0o755); err != nil {
		return err
	}
	// One file per host, written side by side (1024 hosts: 1024 files):
	// two hosts must never share one (anchor keeps names apart; a merge
	// refuses two hosts of one name).
	names := map[string]string{}
	for _, h := range r.Hosts {
		n := anchor(h.Identity.Host)
		if other, ok := names[n]; ok {
			return fmt.Errorf("hosts %q and %q would share the DCGM file %s: not written", other, h.Identity.Host, n+".json")
		}
		names[n] = h.Identity.Host
	}
	errs := make([]error, len(r.Hosts))
	parallel(len(r.Hosts), func(i int) {
		h := r.Hosts[i]
		errs[i] = write(filepath.Join(sub, anchor(h.Identity.Host)+".json"), h)
	})
	return errors.Join(errs...)
}
