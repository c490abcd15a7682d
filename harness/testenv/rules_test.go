package testenv

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// calls lists the calls under conformance/ of the methods in names, "file:line: name";
// with onT, only those on a value named t (a test's, not fmt.Errorf or err.Error).
func calls(t *testing.T, onT bool, names ...string) []string {
	fset := token.NewFileSet()
	var found []string
	files := 0
	err := filepath.WalkDir("../../conformance", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") {
			return err
		}
		files++
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && slices.Contains(names, sel.Sel.Name) {
				if x, ok := sel.X.(*ast.Ident); !onT || ok && x.Name == "t" {
					found = append(found, fset.Position(call.Pos()).String()+": "+sel.Sel.Name)
				}
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, files, 10, "the conformance tree was found")
	return found
}

// No file under conformance/ may skip a test itself: every skip goes through
// Absent, which names what is missing and turns into a failure under
// GDR_STRICT=1. A direct t.Skip would pass a qualification run silently.
func TestConformanceSkipsOnlyThroughAbsent(t *testing.T) {
	assert.Empty(t, calls(t, false, "Skip", "Skipf", "SkipNow"), "call testenv.Absent instead, so GDR_STRICT=1 can turn the skip into a failure")
}

// Nor fail one itself: every failure goes through testenv (Fail, Error,
// Failf, Errorf, NotJudgedf, Stop), which records its cause, remedy and
// outcome for the report before the test fails.
func TestConformanceFailsOnlyThroughTestenv(t *testing.T) {
	assert.Empty(t, calls(t, true, "Fatal", "Fatalf", "Error", "Errorf", "FailNow"),
		"call testenv.Failf/Errorf (the host fell short) or testenv.NotJudgedf (the suite could not judge) instead")
}

// remedyArg is, for each testenv call that takes a remedy, the position
// of its remedy and whether "" (nothing can be done here) is allowed
// there: a skip or a result not judged may have no remedy, a failure
// always has one, from the engine that judged.
var remedyArg = map[string]struct {
	pos       int
	emptyFine bool
}{
	"Failf":      {1, false},
	"Errorf":     {1, false},
	"NotJudgedf": {1, true},
	"Absent":     {1, true},
}

// verdictCtor are the verdict constructors whose first argument is a
// remedy; a conformance file that calls one writes a remedy itself.
var verdictCtor = map[string]bool{"Failf": true, "Absentf": true, "NotJudgedf": true}

// writesText says whether e is remedy text written where it stands: a
// string literal ("" only when emptyFine is false), a concatenation with
// one, or a fmt.Sprint* call. A field, variable or engine call is not.
func writesText(e ast.Expr, emptyFine bool) bool {
	switch x := e.(type) {
	case *ast.ParenExpr:
		return writesText(x.X, emptyFine)
	case *ast.BasicLit:
		return x.Kind == token.STRING && !(emptyFine && (x.Value == `""` || x.Value == "``"))
	case *ast.BinaryExpr:
		return x.Op == token.ADD && (writesText(x.X, true) || writesText(x.Y, true) || hasLit(x.X) || hasLit(x.Y))
	case *ast.CallExpr:
		if sel, ok := x.Fun.(*ast.SelectorExpr); ok {
			if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "fmt" && strings.HasPrefix(sel.Sel.Name, "Sprint") {
				return true
			}
		}
	}
	return false
}

// hasLit: e is a string literal, or a concatenation holding one.
func hasLit(e ast.Expr) bool {
	switch x := e.(type) {
	case *ast.ParenExpr:
		return hasLit(x.X)
	case *ast.BasicLit:
		return x.Kind == token.STRING
	case *ast.BinaryExpr:
		return x.Op == token.ADD && (hasLit(x.X) || hasLit(x.Y))
	}
	return false
}

// inlineRemedies lists, under conformance/, every remedy written in place
// ("file:line: what"): the remedy argument of a testenv call, the first
// argument of a verdict constructor, a verdict.Finding's Remedy field, and
// a non-empty value given to a variable named like a remedy.
func inlineRemedies(t *testing.T) []string {
	fset := token.NewFileSet()
	var found []string
	files := 0
	at := func(n ast.Node, what string) {
		found = append(found, strings.TrimPrefix(fset.Position(n.Pos()).String(), "../../")+": "+what)
	}
	err := filepath.WalkDir("../../conformance", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") {
			return err
		}
		files++
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.CallExpr:
				sel, ok := x.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				pkg, ok := sel.X.(*ast.Ident)
				if !ok {
					return true
				}
				if a, ok := remedyArg[sel.Sel.Name]; ok && pkg.Name == "testenv" && len(x.Args) > a.pos && writesText(x.Args[a.pos], a.emptyFine) {
					at(x.Args[a.pos], "testenv."+sel.Sel.Name)
				}
				if verdictCtor[sel.Sel.Name] && pkg.Name == "verdict" && len(x.Args) > 0 && writesText(x.Args[0], false) {
					at(x.Args[0], "verdict."+sel.Sel.Name)
				}
			case *ast.CompositeLit:
				typ, ok := x.Type.(*ast.SelectorExpr)
				if !ok || typ.Sel.Name != "Finding" {
					return true
				}
				for _, e := range x.Elts {
					if kv, ok := e.(*ast.KeyValueExpr); ok {
						if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Remedy" && writesText(kv.Value, true) {
							at(kv.Value, "Finding.Remedy")
						}
					}
				}
			case *ast.AssignStmt:
				for i, l := range x.Lhs {
					if id, ok := l.(*ast.Ident); ok && i < len(x.Rhs) && len(x.Lhs) == len(x.Rhs) && namesRemedy(id.Name) && writesText(x.Rhs[i], true) {
						at(x.Rhs[i], id.Name)
					}
				}
			case *ast.ValueSpec:
				for i, id := range x.Names {
					if i < len(x.Values) && namesRemedy(id.Name) && writesText(x.Values[i], true) {
						at(x.Values[i], id.Name)
					}
				}
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, files, 10, "the conformance tree was found")
	return found
}

func namesRemedy(name string) bool { return strings.Contains(strings.ToLower(name), "remed") }

// No conformance file writes a remedy: the engine that judged carries it
// in its verdict.Finding (or error), and the test records that with one
// testenv call. A remedy typed into a test drifts from the engine's, and
// the engine's unit tests never see it.
func TestConformanceRemediesFromEngines(t *testing.T) {
	assert.Empty(t, inlineRemedies(t), "return a verdict.Finding with its remedy from the engine (internal/..., harness/...) and record it with testenv.Fail, Error, Record or Stop")
}

// The rule catches each way a remedy can be written in place.
func TestWritesText(t *testing.T) {
	for src, want := range map[string]bool{
		`"modprobe x"`:               true,
		`""`:                         false,
		"``":                         false,
		`"check " + pci.DevicesDir`:  true,
		`("check " + dir)`:           true,
		`a + b`:                      false,
		`fmt.Sprintf("set %s", bdf)`: true,
		`f.Remedy`:                   false,
		`nvml.Remedy(err)`:           false,
		`strings.Join(rs, "; ")`:     false,
	} {
		e, err := parser.ParseExpr(src)
		require.NoError(t, err)
		assert.Equal(t, want, writesText(e, true), src)
	}
	e, _ := parser.ParseExpr(`""`)
	assert.True(t, writesText(e, false), `"" where a remedy is required`)
}
