package attrkey

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// keyCall says whether call records an attribute and which argument is its
// key: testenv.Attr(t, key, v) (Attr(t, key, v) inside testenv), or an RC
// end's e.Attr(key, v) / e.attr(key, v), which the end reports later.
func keyCall(call *ast.CallExpr) (int, bool) {
	if id, ok := call.Fun.(*ast.Ident); ok && id.Name == "Attr" && len(call.Args) == 3 {
		return 1, true
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return 0, false
	}
	if x, ok := sel.X.(*ast.Ident); ok && x.Name == "testenv" && sel.Sel.Name == "Attr" && len(call.Args) == 3 {
		return 1, true
	}
	if (sel.Sel.Name == "attr" || sel.Sel.Name == "Attr") && len(call.Args) == 2 {
		return 0, true
	}
	return 0, false
}

// keyDirs are where attribute keys are written: the suite, and the helpers
// and engines that record attributes for it.
var keyDirs = []string{"../../conformance", "../../harness/testenv", "../../harness/rc",
	"../../harness/traffic", "../../harness/gpucopy", "../../harness/gpumr"}

// Every key the conformance tests (and the helpers that record attributes
// for them) pass to testenv.Attr or an end's Attr follows the rule. Keys are found by parsing Go: a literal is checked whole; a key built
// with + has each literal fragment checked; a key that is a parameter of the
// enclosing function is checked at every call of that function in the package.
func TestConformanceKeysFollowTheRule(t *testing.T) {
	pkgs := map[string][]*ast.File{}
	fset := token.NewFileSet()
	for _, dir := range keyDirs {
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") {
				return err
			}
			f, err := parser.ParseFile(fset, p, nil, 0)
			if err != nil {
				return err
			}
			pkgs[filepath.Dir(p)] = append(pkgs[filepath.Dir(p)], f)
			return nil
		})
		require.NoError(t, err)
	}
	require.NotEmpty(t, pkgs)
	checked := 0
	for _, files := range pkgs {
		var check func(e ast.Expr, fn *ast.FuncDecl, depth int)
		check = func(e ast.Expr, fn *ast.FuncDecl, depth int) {
			pos := fset.Position(e.Pos())
			switch k := e.(type) {
			case *ast.BasicLit:
				s, err := strconv.Unquote(k.Value)
				require.NoError(t, err)
				assert.NoError(t, Check(s), "%s", pos)
				checked++
			case *ast.BinaryExpr:
				for _, side := range []ast.Expr{k.X, k.Y} {
					switch side := side.(type) {
					case *ast.BasicLit:
						s, _ := strconv.Unquote(side.Value)
						assert.NoError(t, CheckPart(s), "%s", pos)
						checked++
					case *ast.BinaryExpr, *ast.Ident:
						check(side, fn, depth)
					default:
						assert.Fail(t, "attribute key built from a run-time value", "%s: part of the key is computed at run time; put devices and addresses into values or subtest names", pos)
					}
				}
			case *ast.TypeAssertExpr:
				// report() replays what e.attr recorded; those keys are checked there.
			case *ast.SelectorExpr:
				// An engine's verdict entry replayed on t (traffic.Entry.Key):
				// its keys are checked where the engine's attr records them.
				if k.Sel.Name != "Key" {
					assert.Fail(t, "attribute key built from a run-time value", "%s: the key is computed at run time; a key must be a literal so this rule can check it", pos)
				}
			case *ast.Ident:
				idx := paramIndex(fn, k.Name)
				if idx < 0 || depth > 2 {
					assert.Fail(t, "attribute key built from a run-time value", "%s: %s is not a literal or a parameter bound to literals; a key must be checkable (put devices and addresses into values or subtest names)", pos, k.Name)
					return
				}
				for _, f := range files {
					ast.Inspect(f, func(n ast.Node) bool {
						call, ok := n.(*ast.CallExpr)
						if !ok {
							return true
						}
						// A call of the enclosing function, or of the method of that
						// name (an engine's v.attr(key, value)).
						name := ""
						switch fun := call.Fun.(type) {
						case *ast.Ident:
							name = fun.Name
						case *ast.SelectorExpr:
							if fn.Recv != nil {
								name = fun.Sel.Name
							}
						}
						if name == fn.Name.Name && idx < len(call.Args) {
							check(call.Args[idx], enclosing(f, call), depth+1)
						}
						return true
					})
				}
			default:
				assert.Fail(t, "attribute key built from a run-time value", "%s: the key is computed at run time; a key must be a literal so this rule can check it", pos)
			}
		}
		for _, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				if i, ok := keyCall(call); ok {
					check(call.Args[i], enclosing(f, call), 0)
				}
				return true
			})
		}
	}
	assert.Greater(t, checked, 100, "too few keys found: did the conformance tree move?")
}

func paramIndex(fn *ast.FuncDecl, name string) int {
	if fn == nil {
		return -1
	}
	i := 0
	for _, f := range fn.Type.Params.List {
		for _, n := range f.Names {
			if n.Name == name {
				return i
			}
			i++
		}
		if len(f.Names) == 0 {
			i++
		}
	}
	return -1
}

// enclosing is the top-level function declaration that contains n.
func enclosing(f *ast.File, n ast.Node) *ast.FuncDecl {
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Pos() <= n.Pos() && n.End() <= fd.End() {
			return fd
		}
	}
	return nil
}
