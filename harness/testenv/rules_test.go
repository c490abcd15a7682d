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
