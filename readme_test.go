package vram_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// readmeImports maps the package names README.md's Go blocks use to their
// import paths.
var readmeImports = map[string]string{
	"errors": "errors",
	"fmt":    "fmt",
	"vram":   "github.com/vramgo/vram",
	"memory": "github.com/vramgo/vram/memory",
	"nn":     "github.com/vramgo/vram/nn",
	"optim":  "github.com/vramgo/vram/optim",
}

// TestREADMEGoBlocks builds every Go block of README.md into a program of
// its own, adding only the imports and a main function, and runs it,
// so that a renamed function or a changed signature breaks this
// test rather than the first program a reader copies the block into.
func TestREADMEGoBlocks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds programs")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)\n```go\n(.*?)\n```").FindAllStringSubmatch(string(readme), -1)
	if len(blocks) < 2 {
		t.Fatalf("found %d Go blocks in README.md, want the quick tour and the configuration", len(blocks))
	}
	used := regexp.MustCompile(`\b([a-z]+)\.[A-Z]`)
	for i, b := range blocks {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			code := b[1]
			var src strings.Builder
			src.WriteString("package main\n\nimport (\n")
			seen := map[string]bool{}
			for _, m := range used.FindAllStringSubmatch(code, -1) {
				if path, ok := readmeImports[m[1]]; ok && !seen[m[1]] {
					seen[m[1]] = true
					fmt.Fprintf(&src, "\t%q\n", path)
				}
			}
			src.WriteString(")\n\nfunc main() {\n" + code + "\n")
			if strings.Contains(code, "err :=") {
				src.WriteString("if err != nil {\nprintln(\"err:\", err.Error())\n}\n")
			}
			src.WriteString("}\n")
			// Inside the module, so that its packages resolve; the leading
			// "_" keeps the directory out of ./... should it be left behind.
			dir, err := os.MkdirTemp(".", "_readme")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(dir)
			if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(goTool, "run", "./"+filepath.Base(dir))
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("README.md's Go block %d: %v\n%s\n--- the program:\n%s", i, err, out, src.String())
			}
			// What the blocks' comments say they print.
			switch {
			case strings.Contains(code, "vram.Configure("):
				if strings.Contains(string(out), "err:") {
					t.Errorf("README.md's configuration block: Configure failed:\n%s", out)
				}
			case strings.Contains(code, "DeviceMismatchError"):
				for _, w := range []string{"step 0: loss ", "step 200: loss ", "[256, 1] ", "true vram: add: expected all tensors on the same device"} {
					if !strings.Contains(string(out), w) {
						t.Errorf("README.md's quick tour printed no %q:\n%s", w, out)
					}
				}
			}
		})
	}
}

// pytorchNames are names in README.md that are PyTorch's, not vram's:
// the topic a row of the table answers.
var pytorchNames = map[string]bool{
	"nn.DataParallel": true,
}

// TestDocNames checks that every qualified name that README.md, the
// package documentation (each doc.go) and the help of the vram command and
// of the examples mention, such as vram.Tidy, optim.NewAdamW or
// vram.Config.SimDevices, is declared by a package of the module of that
// name: the text a user learns the API from cannot name a function, type,
// field or method that was renamed or removed. Only the two Go blocks of
// README.md are compiled (TestREADMEGoBlocks).
func TestDocNames(t *testing.T) {
	decls := moduleDecls(t)
	texts := map[string]string{} // where -> text
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	texts["README.md"] = string(readme)
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		switch dir := filepath.Dir(path); {
		case d.Name() == "doc.go":
			text, err := os.ReadFile(path)
			texts[path] = string(text)
			return err
		case (dir == filepath.Join("cmd", "vram") || filepath.Dir(dir) == "examples") &&
			strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go"):
			// The help texts are string literals.
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			var b strings.Builder
			ast.Inspect(f, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if s, err := strconv.Unquote(lit.Value); err == nil {
						b.WriteString(s + "\n")
					}
				}
				return true
			})
			texts[path+" (its strings)"] = b.String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A name after a dot (torch.cuda.MemPool) is a longer path's, not
	// a vram package's.
	qualified := regexp.MustCompile(`(?:^|[^.\w])([a-z][a-z0-9]*)\.([A-Z]\w*)(?:\.([A-Z]\w*))?`)
	checked := 0
	for doc, text := range texts {
		for _, m := range qualified.FindAllStringSubmatch(text, -1) {
			pkg, name, member := m[1], m[2], m[3]
			pkgDecls, ok := decls[pkg]
			if !ok || pytorchNames[pkg+"."+name] {
				continue
			}
			checked++
			switch {
			case !pkgDecls[name]:
				t.Errorf("%s names %s.%s, which no package %s declares", doc, pkg, name, pkg)
			case member != "" && pkgDecls["type "+name] && !pkgDecls[name+"."+member] && !pkgDecls[name+".embeds"]:
				t.Errorf("%s names %s.%s.%s, but %s.%s has no field or method %s", doc, pkg, name, member, pkg, name, member)
			}
		}
	}
	if checked < 100 {
		t.Errorf("checked only %d names; is the pattern still finding them?", checked)
	}
}

// moduleDecls returns, per package name, the exported top-level names
// declared by the module's packages of that name (every package of a name
// together: backend/cuda and native/cuda are both cuda), with "type T"
// for each type, "T.M" for its fields and methods, and "T.embeds" for a
// struct that embeds another type, whose promoted members it does not
// follow.
func moduleDecls(t *testing.T) map[string]map[string]bool {
	t.Helper()
	decls := map[string]map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		set := decls[f.Name.Name]
		if set == nil {
			set = map[string]bool{}
			decls[f.Name.Name] = set
		}
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				if decl.Recv == nil {
					set[decl.Name.Name] = true
					continue
				}
				recv := decl.Recv.List[0].Type
				if star, ok := recv.(*ast.StarExpr); ok {
					recv = star.X
				}
				switch r := recv.(type) {
				case *ast.IndexExpr:
					recv = r.X
				case *ast.IndexListExpr:
					recv = r.X
				}
				if id, ok := recv.(*ast.Ident); ok {
					set[id.Name+"."+decl.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					switch spec := spec.(type) {
					case *ast.ValueSpec:
						for _, n := range spec.Names {
							set[n.Name] = true
						}
					case *ast.TypeSpec:
						name := spec.Name.Name
						set[name], set["type "+name] = true, true
						var fields []*ast.Field
						switch typ := spec.Type.(type) {
						case *ast.StructType:
							fields = typ.Fields.List
						case *ast.InterfaceType:
							fields = typ.Methods.List
						default:
							set[name+".embeds"] = true // a defined type's members are not followed
						}
						for _, field := range fields {
							if len(field.Names) == 0 {
								set[name+".embeds"] = true
							}
							for _, n := range field.Names {
								set[name+"."+n.Name] = true
							}
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	delete(decls, "main")
	return decls
}
