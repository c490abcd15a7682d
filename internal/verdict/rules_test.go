package verdict

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// failureLike names a type that says what went wrong on its own terms:
// Finding is the one such type (this package), so a new one is a second
// vocabulary the report would have to learn.
var failureLike = regexp.MustCompile(`(Verdict|Failure|Finding)s?$`)

// lookAlikes lists the failure-like types declared under the layers that
// judge (internal/, harness/, conformance/), "dir.Type": a type named like
// one (failureLike), or a struct with a Remedy field of its own, which
// only a finding carries. Test files and this package are not looked at.
func lookAlikes(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	var found []string
	files := 0
	for _, root := range []string{"../../internal", "../../harness", "../../conformance"} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if p == "../../internal/verdict" || d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			files++
			f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			dir := strings.TrimPrefix(filepath.Dir(p), "../../")
			for _, decl := range f.Decls {
				g, ok := decl.(*ast.GenDecl)
				if !ok || g.Tok != token.TYPE {
					continue
				}
				for _, spec := range g.Specs {
					ts := spec.(*ast.TypeSpec)
					if failureLike.MatchString(ts.Name.Name) || hasRemedy(ts.Type) {
						found = append(found, dir+"."+ts.Name.Name)
					}
				}
			}
			return nil
		})
		require.NoError(t, err)
	}
	require.Greater(t, files, 100, "the tree was found")
	sort.Strings(found)
	return found
}

func hasRemedy(e ast.Expr) bool {
	st, ok := e.(*ast.StructType)
	if !ok {
		return false
	}
	for _, f := range st.Fields.List {
		for _, n := range f.Names {
			if n.Name == "Remedy" {
				return true
			}
		}
	}
	return false
}

// allowed are the look-alikes that stay, each with why: data that is not
// a judgement of the host. The list only shrinks.
var allowed = map[string]string{
	// A CUDA error as the driver returned it, with what the suite knows
	// of its cause; tests turn it into a Finding (cuda.InitRemedy).
	"harness/cuda.Error": "an API error type, not a judgement",
	// A candidate NIC of the selection and why it is not one, with what
	// would make it one: selection data the topology tests report.
	"internal/rails.NIC": "selection data, not a judgement",
}

// Every engine says what it judged as a verdict.Finding: no layer that
// judges declares a failure type of its own.
func TestNoLookAlikeFailureTypes(t *testing.T) {
	found := lookAlikes(t)
	var extra []string
	for _, x := range found {
		if _, ok := allowed[x]; !ok {
			extra = append(extra, x)
		}
	}
	assert.Empty(t, extra, "return verdict.Finding (internal/verdict) instead of a failure type of your own")
	for x := range allowed {
		assert.True(t, slices.Contains(found, x), "%s is gone: take it off the allowed list", x)
	}
}

// matchers are the calls that look for text in text: a regular expression,
// or a strings/bytes search, cut or split.
var matchers = map[string]bool{
	"regexp.MustCompile": true, "regexp.Compile": true, "regexp.MatchString": true, "regexp.MustCompilePOSIX": true,
	"strings.Contains": true, "strings.Index": true, "strings.LastIndex": true, "strings.Cut": true,
	"strings.CutPrefix": true, "strings.CutSuffix": true, "strings.Split": true, "strings.SplitN": true,
	"strings.SplitAfter": true, "strings.HasPrefix": true, "strings.HasSuffix": true, "strings.TrimPrefix": true,
	"strings.TrimSuffix": true, "strings.Count": true, "strings.EqualFold": true, "strings.Replace": true,
	"strings.ReplaceAll": true, "strings.NewReplacer": true,
	"bytes.Contains": true, "bytes.Index": true, "bytes.Cut": true, "bytes.Split": true, "bytes.HasPrefix": true,
}

// remedyMatchers lists, "file:line", the calls in the repository's code
// (not its tests) that look for a remedy in text: a matcher given a
// string literal that names "remedy:" (a regular expression: "remedy"
// with anything after it).
func remedyMatchers(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	var found []string
	files := 0
	err := filepath.WalkDir("../..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || n == "vendor" || (strings.HasPrefix(n, ".") && p != "../..") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
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
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			pkg, ok := sel.X.(*ast.Ident)
			if !ok || !matchers[pkg.Name+"."+sel.Sel.Name] {
				return true
			}
			for _, a := range call.Args {
				lit, ok := a.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					continue
				}
				s = strings.ToLower(s)
				if strings.Contains(s, "remedy:") || (pkg.Name == "regexp" && regexp.MustCompile(`remedy\W`).MatchString(s)) {
					found = append(found, strings.TrimPrefix(fset.Position(lit.Pos()).String(), "../../"))
				}
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, files, 200, "the tree was found")
	return found
}

// A remedy is a field (Finding.Remedy, gdr.remedy): verdict.Line only ever
// joins it to a cause, and no code looks for "remedy:" in text to split a
// line, pick one or recover a remedy.
func TestNoCodeMatchesRemedyText(t *testing.T) {
	assert.Empty(t, remedyMatchers(t), "read the remedy from the Finding or the gdr.remedy attribute, not from text")
}
