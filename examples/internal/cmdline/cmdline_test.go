package cmdline

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		done bool
		out  []string // what the output must contain
	}{
		{"nothing", nil, 0, false, nil},
		{"short help", []string{"-h"}, 0, true, []string{"usage: prog", "Prog does things.", "no flags"}},
		{"long help", []string{"--help"}, 0, true, []string{"usage: prog", "Prog does things."}},
		{"unknown flag", []string{"--device", "cuda"}, 2, true, []string{"-device", "usage: prog"}},
		{"argument", []string{"cuda:0"}, 2, true, []string{`unexpected argument "cuda:0"`, "usage: prog"}},
		{"after --", []string{"--", "x"}, 2, true, []string{`unexpected argument "x"`}},
		{"bare --", []string{"--"}, 0, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			code, done := check("prog", "Prog does things.", tc.args, &b)
			if code != tc.code || done != tc.done {
				t.Errorf("status %d, exit %v; want %d, %v", code, done, tc.code, tc.done)
			}
			if !tc.done && b.Len() > 0 {
				t.Errorf("printed %q for a good command line", b.String())
			}
			for _, want := range tc.out {
				if !strings.Contains(b.String(), want) {
					t.Errorf("output lacks %q:\n%s", want, b.String())
				}
			}
		})
	}
}

// TestExamplesReadTheirCommandLine checks that the main function of every
// example either parses its flags (flag.Parse, or a FlagSet's Parse) or
// calls NoArgs, so that none ignores the flags and arguments it is given.
func TestExamplesReadTheirCommandLine(t *testing.T) {
	mains, err := filepath.Glob("../../*/main.go")
	if err != nil {
		t.Fatal(err)
	}
	if len(mains) < 10 {
		t.Fatalf("found only %d examples: %v", len(mains), mains)
	}
	for _, path := range mains {
		t.Run(filepath.Base(filepath.Dir(path)), func(t *testing.T) {
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			var body *ast.BlockStmt
			for _, d := range f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.Name == "main" {
					body = fd.Body
				}
			}
			if body == nil {
				t.Fatal("no main function")
			}
			found := false
			ast.Inspect(body, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if x, ok := sel.X.(*ast.Ident); ok {
						found = found || x.Name == "cmdline" && sel.Sel.Name == "NoArgs" || sel.Sel.Name == "Parse" // flag.Parse or a FlagSet's
					}
				}
				return true
			})
			if !found {
				t.Error("main neither calls cmdline.NoArgs nor flag.Parse: the program ignores its command line")
			}
		})
	}
}
