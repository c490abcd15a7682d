// Package reqs is the catalogue of numbered requirements the conformance suite
// checks. Every conformance test names one ID (t.Attr "gdr.req"); the README
// lists them all, and a unit test keeps the two in step.
//
// Each area registers its requirements in its own file (install.go,
// topology.go, ...), so areas can grow without touching each other.
package reqs

import (
	"fmt"
	"sort"
	"strings"
)

// Req is one numbered requirement.
type Req struct {
	ID    string // e.g. "INST-03"; AREA-NN
	Area  string // conformance package: install, topology, gpu, memreg, pingpong
	Title string // one line: what must hold
}

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
		catalogue[r.ID] = r
	}
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
	order := map[string]int{"install": 0, "topology": 1, "gpu": 2, "memreg": 3, "pingpong": 4}
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

// Markdown renders the catalogue as the README's requirements table.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| ID | area | requirement |\n| --- | --- | --- |\n")
	for _, r := range All() {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", r.ID, r.Area, r.Title)
	}
	return b.String()
}
