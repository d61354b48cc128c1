package optim_test

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"strings"
	"testing"
)

// TestDocSignaturesNameTheirTypes checks that every method shown in the
// package's documentation names types a reader can look up: a method
// promoted from a generic embedded type shows its type parameter (such as
// C) instead of the config type, so each optimizer declares its own.
func TestDocSignaturesNameTheirTypes(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	p := doc.New(pkgs["optim"], "github.com/vramgo/vram/optim", 0)
	declared := map[string]bool{}
	for _, ty := range p.Types {
		declared[ty.Name] = true
	}
	for _, ty := range p.Types {
		for _, m := range ty.Methods {
			var fields []*ast.Field
			for _, fl := range []*ast.FieldList{m.Decl.Type.Params, m.Decl.Type.Results} {
				if fl != nil {
					fields = append(fields, fl.List...)
				}
			}
			for _, f := range fields {
				ast.Inspect(f.Type, func(n ast.Node) bool {
					switch n := n.(type) {
					case *ast.SelectorExpr:
						return false // a type of another package
					case *ast.FuncType:
						return false // parameter names of a function type
					case *ast.Ident:
						if !declared[n.Name] && types.Universe.Lookup(n.Name) == nil {
							t.Errorf("the documentation of %s.%s shows the type %s, which the package does not declare", ty.Name, m.Name, n.Name)
						}
					}
					return true
				})
			}
		}
	}
}
