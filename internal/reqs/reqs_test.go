package reqs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/gdrconf/gdrconf/internal/golden"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reqCall is one testenv.Req(t, "<ID>") call found in a conformance file.
type reqCall struct {
	id   string
	fn   string // the enclosing top-level function
	file string
	pos  string
}

// reqCalls parses every Go file under dir and returns its testenv.Req calls
// (found in the syntax tree, so comments and other strings do not count).
// An ID passed in through a helper's parameter (forEachGPU(t, "GPU-02", ...)
// calling testenv.Req(t, id)) is resolved at each call of the helper in the
// same package, and counts for the function that calls the helper. A Req
// call whose ID is neither a literal nor so resolved has id "".
func reqCalls(t *testing.T, dir string) []reqCall {
	t.Helper()
	fset := token.NewFileSet()
	pkgs := map[string][]*ast.File{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") {
			return err
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err == nil {
			pkgs[filepath.Dir(p)] = append(pkgs[filepath.Dir(p)], f)
		}
		return err
	})
	require.NoError(t, err)
	var calls []reqCall
	dirs := make([]string, 0, len(pkgs))
	for d := range pkgs {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, d := range dirs {
		files := pkgs[d]
		// resolve returns the IDs e stands for inside fn, each with the
		// function that named it.
		var resolve func(e ast.Expr, fn *ast.FuncDecl, depth int) []reqCall
		resolve = func(e ast.Expr, fn *ast.FuncDecl, depth int) []reqCall {
			if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				id, _ := strconv.Unquote(lit.Value)
				return []reqCall{{id: id, fn: fn.Name.Name, file: fset.Position(lit.Pos()).Filename, pos: fset.Position(lit.Pos()).String()}}
			}
			id, ok := e.(*ast.Ident)
			idx := paramIndex(fn, id)
			if !ok || idx < 0 || depth > 3 {
				return []reqCall{{fn: fn.Name.Name, file: fset.Position(e.Pos()).Filename, pos: fset.Position(e.Pos()).String()}}
			}
			var out []reqCall
			for _, f := range files {
				eachCall(f, func(call *ast.CallExpr, caller *ast.FuncDecl) {
					if callee, ok := call.Fun.(*ast.Ident); ok && callee.Name == fn.Name.Name && idx < len(call.Args) {
						out = append(out, resolve(call.Args[idx], caller, depth+1)...)
					}
				})
			}
			return out
		}
		for _, f := range files {
			eachCall(f, func(call *ast.CallExpr, fn *ast.FuncDecl) {
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "Req" || len(call.Args) != 2 {
					return
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "testenv" {
					calls = append(calls, resolve(call.Args[1], fn, 0)...)
				}
			})
		}
	}
	return calls
}

// eachCall calls do for every call expression inside a top-level function of f.
func eachCall(f *ast.File, do func(*ast.CallExpr, *ast.FuncDecl)) {
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				do(call, fd)
			}
			return true
		})
	}
}

// paramIndex is the position of the parameter id of fn, or -1.
func paramIndex(fn *ast.FuncDecl, id *ast.Ident) int {
	if id == nil {
		return -1
	}
	i := 0
	for _, field := range fn.Type.Params.List {
		if len(field.Names) == 0 {
			i++
		}
		for _, n := range field.Names {
			if n.Name == id.Name {
				return i
			}
			i++
		}
	}
	return -1
}

var testNameRe = regexp.MustCompile(`^Test([A-Z]+)(\d{2})[A-Z0-9]`)

// Every ID a conformance test names is catalogued, every catalogued ID is
// checked by some test, and every Test function is named for its ID
// (Test<AREA><NN><Name>), so -run selects by requirement.
func TestCatalogueMatchesConformanceTests(t *testing.T) {
	calls := reqCalls(t, "../../conformance")
	require.NotEmpty(t, calls)
	used := map[string]bool{}
	for _, c := range calls {
		if !assert.NotEmpty(t, c.id, "%s: testenv.Req needs the ID as a string literal", c.pos) {
			continue
		}
		used[c.id] = true
		_, ok := Lookup(c.id)
		assert.True(t, ok, "%s: %s is not registered in internal/reqs", c.pos, c.id)
		if m := testNameRe.FindStringSubmatch(c.fn); m != nil {
			assert.Equal(t, m[1]+"-"+m[2], c.id, "%s: %s calls testenv.Req with another requirement's ID", c.pos, c.fn)
		} else if strings.HasPrefix(c.fn, "Test") {
			assert.Fail(t, "test not named for its requirement", "%s: %s should be named Test<AREA><NN><Name> for %s", c.pos, c.fn, c.id)
		}
	}
	for _, r := range All() {
		assert.True(t, used[r.ID], "%s (%s) is registered but no conformance test checks it", r.ID, r.Title)
		assert.True(t, PrefixOK(r.ID, r.Area), "%s has area %s (prefix %s or a family's)", r.ID, r.Area, prefix[r.Area])
	}
}

// The parser finds calls, not strings: a commented-out call or an ID in a
// string elsewhere does not count.
func TestReqCallsParsesGo(t *testing.T) {
	dir := t.TempDir()
	src := `package x

import "testing"

// testenv.Req(t, "PP-77") in a comment does not count
func TestPP01Device(t *testing.T) {
	testenv.Req(t, "PP-01")
	_ = "testenv.Req(t, \"PP-78\")"
	t.Run("sub", func(t *testing.T) { testenv.Req(t, "PP-01") })
}

func helper(t *testing.T, id string) { testenv.Req(t, id) }

func TestPP02Connect(t *testing.T) { helper(t, "PP-02") }

func other(t *testing.T, id string) { testenv.Req(t, id+"x") }
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "x_test.go"), []byte(src), 0o644))
	calls := reqCalls(t, dir)
	require.Len(t, calls, 4)
	assert.Equal(t, reqCall{id: "PP-01", fn: "TestPP01Device", file: calls[0].file, pos: calls[0].pos}, calls[0])
	assert.Equal(t, "PP-01", calls[1].id)
	assert.Equal(t, "PP-02", calls[2].id, "an ID passed through a helper counts for its caller")
	assert.Equal(t, "TestPP02Connect", calls[2].fn)
	assert.Equal(t, "", calls[3].id, "an ID built at run time is reported as such")
}

var prefix = func() map[string]string {
	m := map[string]string{}
	for _, a := range Areas {
		m[a.Name] = a.Prefix
	}
	return m
}()

const (
	beginMark = "<!-- requirements:begin (generated: UPDATE=1 go test ./internal/reqs) -->"
	endMark   = "<!-- requirements:end -->"
)

// The manual's requirement table is the catalogue. UPDATE=1 rewrites it.
func TestDocsListEveryRequirement(t *testing.T) {
	have, want, err := golden.Section("../../docs/requirements.md", beginMark, endMark, "\n"+Markdown())
	require.NoError(t, err)
	assert.Equal(t, want, have, "docs/requirements.md's requirement table is stale: run %s", golden.Hint("./internal/reqs"))
}

func TestPrefixOK(t *testing.T) {
	assert.True(t, PrefixOK("PP-01", "pingpong"))
	assert.False(t, PrefixOK("PP-01", "gpu"))
	assert.True(t, PrefixOK("HLTH-01", "pingpong"))
	assert.True(t, PrefixOK("HLTH-02", "gpu"))
	assert.False(t, PrefixOK("HLTHX-02", "gpu"))
}

func TestAllIsOrdered(t *testing.T) {
	all := All()
	for i := 1; i < len(all); i++ {
		if all[i].Area == all[i-1].Area {
			assert.Less(t, all[i-1].ID, all[i].ID)
		}
	}
}

// The lab's traits are where the lab expects them: a change here changes
// what the lab excuses or insists on.
func TestLabTraits(t *testing.T) {
	with := func(trait func(Req) bool) []string {
		var ids []string
		for _, r := range All() {
			if trait(r) {
				ids = append(ids, r.ID)
			}
		}
		return ids
	}
	assert.Equal(t, []string{"PP-09"}, with(func(r Req) bool { return r.GPUOnly }))
	assert.Equal(t, []string{"PP-10"}, with(func(r Req) bool { return r.MultiRail }))
	assert.Equal(t, []string{"GPU-01", "GPU-02", "GPU-03", "GPU-06", "MREG-01", "MREG-02", "MREG-03", "MREG-05",
		"PP-01", "PP-02", "PP-03", "PP-04", "PP-05", "PP-06", "PP-07", "PP-08", "PP-09"},
		with(func(r Req) bool { return r.EmulatedMust }))
}

// Every requirement says how it is judged in a container, and only
// requirements do.
func TestContainerProfileComplete(t *testing.T) {
	for _, r := range All() {
		c, ok := Container(r.ID)
		if assert.True(t, ok, "%s has no container rule (internal/reqs/container.go)", r.ID) {
			assert.Contains(t, []string{FromNode, FromPod, FromBoth}, c.From, r.ID)
			assert.NotEmpty(t, c.How, r.ID)
		}
	}
	for id := range containerRules {
		_, ok := Lookup(id)
		assert.True(t, ok, "container rule for unknown requirement %s", id)
	}
	// The host-only rule is narrow: only the host's developer environment.
	var host []string
	for _, r := range All() {
		if c, _ := Container(r.ID); c.HostOnly != "" {
			host = append(host, r.ID)
		}
	}
	assert.Equal(t, []string{"INST-05", "INST-14"}, host)
}

const (
	containerBegin = "<!-- container:begin (generated: UPDATE=1 go test ./internal/reqs) -->"
	containerEnd   = "<!-- container:end -->"
)

// docs/checks.md's "In a container" table is the profile.
func TestDocsContainerProfile(t *testing.T) {
	have, want, err := golden.Section("../../docs/checks.md", containerBegin, containerEnd, "\n"+ContainerMarkdown())
	require.NoError(t, err)
	assert.Equal(t, want, have, "docs/checks.md's container table is stale: run %s", golden.Hint("./internal/reqs"))
}

func TestLabVMAbsentKnown(t *testing.T) {
	for id := range LabVMAbsent {
		_, ok := Lookup(id)
		assert.True(t, ok, "LabVMAbsent names unknown requirement %s", id)
		c, _ := Container(id)
		assert.Empty(t, c.HostOnly, "%s is host only in the lab's pods, never absent", id)
	}
}

const (
	labBegin = "<!-- lab-vm-absent:begin (generated: UPDATE=1 go test ./internal/reqs) -->"
	labEnd   = "<!-- lab-vm-absent:end -->"
)

// docs/lab.md's list of what is absent in the lab's VMs is LabVMAbsent.
func TestDocsLabVMAbsent(t *testing.T) {
	have, want, err := golden.Section("../../docs/lab.md", labBegin, labEnd, "\n"+LabMarkdown())
	require.NoError(t, err)
	assert.Equal(t, want, have, "docs/lab.md's lab-vm-absent table is stale: run %s", golden.Hint("./internal/reqs"))
}

// Every requirement has the time it entered the catalogue (added.go), and
// the table names no other: the report tells a recording older than a
// requirement from a -run filter by it.
func TestEveryRequirementAdded(t *testing.T) {
	ids := map[string]bool{}
	for _, r := range All() {
		ids[r.ID] = true
		at, ok := Added(r.ID)
		if assert.True(t, ok, "%s has no time in internal/reqs/added.go: add `%q: %q,` (now, UTC)", r.ID, r.ID, "YYYY-MM-DDTHH:MM:SSZ") {
			assert.False(t, at.IsZero(), r.ID)
		}
	}
	for id := range added {
		assert.True(t, ids[id], "added.go names %s, which the catalogue lacks", id)
	}
	_, ok := Added("XX-99")
	assert.False(t, ok)
}

// The soak's requirements, and only they, count only where asked: a run
// without GDR_SOAK must not turn INCOMPLETE for want of them.
func TestOptIn(t *testing.T) {
	var ids []string
	for _, r := range All() {
		if r.OptIn != "" {
			ids = append(ids, r.ID)
			assert.Equal(t, "soak", r.Area, r.ID)
		}
	}
	assert.Equal(t, []string{"SOAK-01", "SOAK-02", "SOAK-03", "SOAK-04", "SOAK-05", "SOAK-06", "SOAK-07", "SOAK-08"}, ids)
	r, _ := Lookup("SOAK-05")
	assert.Equal(t, ReportOnly, r.Level, "the site's cooling decides")
	r, _ = Lookup("SOAK-08")
	assert.Equal(t, "GDR_SOAK_FLAP", r.OptIn, "disruptive: asked for on its own")
}
