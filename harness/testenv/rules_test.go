package testenv

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// No file under conformance/ may skip a test itself: every skip goes through
// Absent, which names what is missing and turns into a failure under
// GDR_STRICT=1. A direct t.Skip would pass a qualification run silently.
func TestConformanceSkipsOnlyThroughAbsent(t *testing.T) {
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
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
				switch sel.Sel.Name {
				case "Skip", "Skipf", "SkipNow":
					found = append(found, fset.Position(call.Pos()).String()+": "+sel.Sel.Name)
				}
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, files, 10, "the conformance tree was found")
	assert.Empty(t, found, "call testenv.Absent instead, so GDR_STRICT=1 can turn the skip into a failure")
}
