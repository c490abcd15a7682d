// Package reqs is the catalogue of numbered requirements the conformance suite
// checks. Every conformance test names one ID (t.Attr "gdr.req"); the manual
// (docs/requirements.md) lists them all, and a unit test keeps the two in step.
//
// Each area registers its requirements in its own file (install.go,
// topology.go, ...), so areas can grow without touching each other.
package reqs

import (
	"fmt"
	"sort"
	"strings"
)

// Level says what a requirement's result means for the verdict.
type Level string

const (
	// Must: the host is QUALIFIED only when it passed; a failure makes it NOT
	// QUALIFIED and a skip INCOMPLETE. The zero Level is Must.
	Must Level = "must"
	// ReportOnly: its result and numbers are reported, but neither its failure
	// nor its skip changes the verdict. For cross-checks and for one of several
	// alternatives whose outcome another, must-level requirement judges.
	ReportOnly Level = "report-only"
)

// Req is one numbered requirement.
type Req struct {
	ID    string // e.g. "INST-03"; AREA-NN
	Area  string // conformance package: install, topology, gpu, memreg, pingpong
	Title string // one line: what must hold
	Level Level  // Must unless set

	// Traits the Soft-RoCE lab (lab/) judges by; they change no host's verdict.

	// GPUOnly: its test needs a CUDA GPU, so a skip for want of one (the
	// skip names libcuda.so.1 or says no GPU) is expected where there is none.
	GPUOnly bool
	// MultiRail: it needs two or more rails, so a skip for that reason alone
	// is expected on a one-rail host.
	MultiRail bool
	// EmulatedMust: it must pass on the lab's emulated GPU (lab/emugpu), on
	// every host that runs its area, with its data in emulated GPU memory.
	EmulatedMust bool

	// OptIn is the variable that asks for the requirement (GDR_SOAK); ""
	// for every requirement a plain run judges. An opt-in requirement
	// counts only in a run that asked for it: where its package did not
	// run, or each of its tests skipped as not asked (testenv.NotAsked,
	// gdr.not_asked), the report leaves it out, so a run that did not ask
	// is not INCOMPLETE for want of it.
	OptIn string
}

// PairedArea is the one conformance package whose tests meet a peer (the
// two-host RC traffic): a cluster's pair results come only from its tests
// (cluster/load.go), and a host's later rounds run only it
// (build/dist/build.sh marks its binary .paired; build/paths_test.go holds
// the script to this name).
const PairedArea = "pingpong"

var catalogue = map[string]Req{}

// register adds requirements; a duplicate ID is a programming error.
func register(rs ...Req) {
	for _, r := range rs {
		if _, dup := catalogue[r.ID]; dup {
			panic("reqs: duplicate requirement " + r.ID)
		}
		if r.ID == "" || r.Area == "" || r.Title == "" {
			panic(fmt.Sprintf("reqs: incomplete requirement %+v", r))
		}
		if r.Level == "" {
			r.Level = Must
		}
		if r.Level != Must && r.Level != ReportOnly {
			panic(fmt.Sprintf("reqs: %s has level %q; want %q or %q", r.ID, r.Level, Must, ReportOnly))
		}
		catalogue[r.ID] = r
	}
}

// Areas are the conformance packages in report order, with their ID prefix.
var Areas = []struct{ Name, Prefix string }{
	{"install", "INST"}, {"topology", "TOPO"}, {"gpu", "GPU"}, {"memreg", "MREG"}, {"pingpong", "PP"}, {"soak", "SOAK"},
}

// Families are ID prefixes that cross areas: a requirement of a family
// lives in the area whose tests it judges (HLTH-01 in pingpong, HLTH-02 in
// gpu) and keeps the family's prefix.
var Families = []struct{ Prefix, What string }{
	{"HLTH", "health around traffic: error counters and the kernel log"},
}

// PrefixOK reports whether id's prefix belongs to area: the area's own, or
// a family's.
func PrefixOK(id, area string) bool {
	for _, a := range Areas {
		if a.Name == area && strings.HasPrefix(id, a.Prefix+"-") {
			return true
		}
	}
	for _, f := range Families {
		if strings.HasPrefix(id, f.Prefix+"-") {
			return true
		}
	}
	return false
}

// Lookup returns the requirement with id.
func Lookup(id string) (Req, bool) {
	r, ok := catalogue[id]
	return r, ok
}

// All returns every requirement, ordered by area then ID.
func All() []Req {
	out := make([]Req, 0, len(catalogue))
	for _, r := range catalogue {
		out = append(out, r)
	}
	order := map[string]int{}
	for i, a := range Areas {
		order[a.Name] = i
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Area != out[j].Area {
			oi, iok := order[out[i].Area]
			oj, jok := order[out[j].Area]
			if iok && jok {
				return oi < oj
			}
			return out[i].Area < out[j].Area
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Markdown renders the catalogue as the manual's requirements table.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| ID | area | level | requirement |\n| --- | --- | --- | --- |\n")
	for _, r := range All() {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", r.ID, r.Area, r.Level, r.Title)
	}
	return b.String()
}
