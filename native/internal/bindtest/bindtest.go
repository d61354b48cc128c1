// Package bindtest holds the CPU tests that every native bindings package
// runs on itself: its Go declarations against bindings.tsv, its table of
// status names, the C symbol named at each use of a binding, and the
// error of every wrapper before the library is loaded.
//
// The helpers read the package's source files from the current directory,
// which is the package's own while its tests run.
package bindtest

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/vramgo/vram/native/load"
)

// Table holds bindings and the sizes of the structs handed to C (name to
// size) to the package's bindings.tsv, failing t once for each difference
// (see [load.CheckTable]).
func Table(t *testing.T, bindings []load.Binding, structs map[string]uintptr) {
	t.Helper()
	diffs, err := load.CheckTable("bindings.tsv", bindings, structs)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diffs {
		t.Error(d)
	}
}

// Names checks a checked-in table of status names against copy slips:
// every name starts with prefix and no two codes share a name.
func Names[C ~int32](t *testing.T, names map[C]string, prefix string) {
	t.Helper()
	seen := map[string]C{}
	for code, name := range names {
		if other, dup := seen[name]; dup {
			t.Errorf("%s is both %d and %d", name, code, other)
		}
		seen[name] = code
		if !strings.HasPrefix(name, prefix) {
			t.Errorf("%d: %q does not start with %q", code, name, prefix)
		}
	}
}

// source is the parsed package in the current directory, without its
// test files, and the bound function variables found in its table.
type source struct {
	fset  *token.FileSet
	files []*ast.File
	// bound maps each variable named as Fn or Addr of a load.Binding
	// literal to the binding's C symbol (its first name).
	bound map[string]string
}

func parseSource(t *testing.T) *source {
	t.Helper()
	s := &source{fset: token.NewFileSet(), bound: map[string]string{}}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries { // sorted by name
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(s.fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		s.files = append(s.files, f)
	}
	for _, f := range s.files {
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.CompositeLit); ok {
				s.addBinding(lit)
			}
			return true
		})
	}
	if len(s.bound) == 0 {
		t.Fatal("no load.Binding literals found in the package")
	}
	return s
}

// addBinding records the variables of a {Names: ..., Fn: &v, Addr: &a}
// literal.
func (s *source) addBinding(lit *ast.CompositeLit) {
	var symbol string
	var vars []string
	for _, e := range lit.Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		key, _ := kv.Key.(*ast.Ident)
		if key == nil {
			continue
		}
		switch key.Name {
		case "Names":
			if names, ok := kv.Value.(*ast.CompositeLit); ok && len(names.Elts) > 0 {
				if b, ok := names.Elts[0].(*ast.BasicLit); ok && b.Kind == token.STRING {
					symbol, _ = strconv.Unquote(b.Value)
				}
			}
		case "Fn", "Addr":
			if u, ok := kv.Value.(*ast.UnaryExpr); ok && u.Op == token.AND {
				if id, ok := u.X.(*ast.Ident); ok {
					vars = append(vars, id.Name)
				}
			}
		}
	}
	if symbol == "" {
		return
	}
	for _, v := range vars {
		s.bound[v] = symbol
	}
}

// Uses checks that each binding's C symbol is named where the binding is
// used, as error messages report it. helpers maps the package's checking
// helpers (such as call) to the library whose readiness each checks. In
// the package's functions, every call of a helper must give as its first
// argument a string literal naming a C symbol of bindings in the helper's
// library, and the bound variables that the call's other arguments use
// must all be bound to that symbol. A bound variable called, or passed to
// a call, outside such a helper call is reported too. The functions named
// in exempt are not checked: the helpers themselves, and those that use a
// binding without reporting its status (an error-string lookup).
func Uses(t *testing.T, bindings []load.Binding, helpers map[string]string, exempt ...string) {
	t.Helper()
	s := parseSource(t)
	isExempt := map[string]bool{}
	for _, e := range exempt {
		isExempt[e] = true
	}
	libOf := map[string]string{}
	for _, b := range bindings {
		libOf[b.Names[0]] = b.Lib
	}
	for v, sym := range s.bound {
		if _, ok := libOf[sym]; !ok {
			t.Errorf("%s is bound to %q in the source but not in the table given", v, sym)
		}
	}
	used := map[string]bool{}
	for _, f := range s.files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil || isExempt[fd.Name.Name] {
				continue
			}
			where := func(n ast.Node) string {
				return s.fset.Position(n.Pos()).String() + " (" + fd.Name.Name + ")"
			}
			var named []*ast.CallExpr // helper calls, checked below
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				c, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				if id, ok := c.Fun.(*ast.Ident); ok && helpers[id.Name] != "" {
					named = append(named, c)
				}
				return true
			})
			inNamed := func(n ast.Node) bool {
				for _, c := range named {
					if n.Pos() >= c.Pos() && n.End() <= c.End() {
						return true
					}
				}
				return false
			}
			for _, c := range named {
				name := c.Fun.(*ast.Ident).Name
				lit, ok := c.Args[0].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Errorf("%s: %s's first argument is not a string literal naming a C symbol", where(c), name)
					continue
				}
				sym, _ := strconv.Unquote(lit.Value)
				if lib, ok := libOf[sym]; !ok {
					t.Errorf("%s: %s names %q, which no binding binds", where(c), name, sym)
				} else if lib != helpers[name] {
					t.Errorf("%s: %s checks that %s is loaded, but %q is a symbol of %s", where(c), name, helpers[name], sym, lib)
				}
				for _, arg := range c.Args[1:] {
					ast.Inspect(arg, func(n ast.Node) bool {
						id, ok := n.(*ast.Ident)
						if !ok {
							return true
						}
						if b, ok := s.bound[id.Name]; ok {
							used[id.Name] = true
							if b != sym {
								t.Errorf("%s: %s names %q but uses %s, bound to %q", where(id), name, sym, id.Name, b)
							}
						}
						return true
					})
				}
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				c, ok := n.(*ast.CallExpr)
				if !ok || inNamed(c) {
					return true
				}
				for _, e := range append([]ast.Expr{c.Fun}, c.Args...) {
					if id, ok := e.(*ast.Ident); ok {
						if sym, ok := s.bound[id.Name]; ok {
							t.Errorf("%s: %s (%s) used outside a call that names its symbol", where(id), id.Name, sym)
						}
					}
				}
				return true
			})
		}
	}
	if len(used) == 0 {
		t.Errorf("no call of the helpers %v uses a binding", helpers)
	}
}

// NotLoaded checks the package's wrappers before its library is loaded:
// each function in fns, called with zero arguments, must return an error
// matching want (its last result). fns must hold every exported function
// of the package that returns an error, except those named in skip (the
// Load functions, which would load the library).
//
// Call it only while the library is not loaded.
func NotLoaded(t *testing.T, want error, fns []any, skip ...string) {
	t.Helper()
	s := parseSource(t)
	listed := map[string]bool{}
	for _, fn := range fns {
		v := reflect.ValueOf(fn)
		if v.Kind() != reflect.Func {
			t.Fatalf("%T is not a function", fn)
		}
		full := runtime.FuncForPC(v.Pointer()).Name()
		name := full[strings.LastIndex(full, ".")+1:]
		listed[name] = true
		ft := v.Type()
		if ft.NumOut() == 0 || ft.Out(ft.NumOut()-1) != reflect.TypeFor[error]() {
			t.Errorf("%s does not return an error", name)
			continue
		}
		args := make([]reflect.Value, ft.NumIn())
		for i := range args {
			args[i] = reflect.Zero(ft.In(i))
		}
		if panicked, err := callZero(v, args); panicked != nil {
			t.Errorf("%s before loading panicked: %v", name, panicked)
		} else if !errors.Is(err, want) {
			t.Errorf("%s before loading: %v, want %v", name, err, want)
		}
	}
	for _, sk := range skip {
		listed[sk] = true
	}
	for _, f := range s.files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || !fd.Name.IsExported() || !returnsError(fd) {
				continue
			}
			if !listed[fd.Name.Name] {
				t.Errorf("%s returns an error but is not in the not-loaded list", fd.Name.Name)
			}
		}
	}
}

// callZero calls fn with args and returns its last result, or what it
// panicked with.
func callZero(fn reflect.Value, args []reflect.Value) (panicked any, err error) {
	defer func() { panicked = recover() }()
	var out []reflect.Value
	if fn.Type().IsVariadic() {
		out = fn.CallSlice(args)
	} else {
		out = fn.Call(args)
	}
	err, _ = out[len(out)-1].Interface().(error)
	return nil, err
}

func returnsError(fd *ast.FuncDecl) bool {
	if fd.Type.Results == nil {
		return false
	}
	for _, r := range fd.Type.Results.List {
		if id, ok := r.Type.(*ast.Ident); ok && id.Name == "error" {
			return true
		}
	}
	return false
}

// ErrorCase is one status code for [Errors]: its name in the C header and
// the sentinel it must match with errors.Is (nil for none).
type ErrorCase[C ~int32] struct {
	Code     C
	Name     string
	Sentinel error
}

// Code is a status type of a C library with its checked-in names.
type Code interface {
	~int32
	Name() string
}

// Errors checks a package's conversion of status codes to errors, done by
// check(fn, code): success gives nil, and for each case the error, once
// wrapped, is an E (errors.As) whose Code and Func fields are the code and
// the function, whose message starts with "pkg: fn: NAME (code)", and
// which matches the case's sentinel, and unknown only when that is the
// sentinel. The code's Name must be the case's name; so must the error's,
// unless the library may rename codes missing from the package's table at
// run time (renamesUnlisted, cuda once the driver is loaded).
func Errors[C Code, E error](t *testing.T, pkg string, check func(fn string, c C) error, success C, unknown error, renamesUnlisted bool, cases []ErrorCase[C]) {
	t.Helper()
	const fn = "xTest"
	if err := check(fn, success); err != nil {
		t.Errorf("success gave %v", err)
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			if got := tc.Code.Name(); got != tc.Name {
				t.Errorf("Name() = %q, want %q", got, tc.Name)
			}
			err := fmt.Errorf("wrapped: %w", check(fn, tc.Code))
			var e E
			if !errors.As(err, &e) {
				t.Fatalf("errors.As(%v) found no %T", err, e)
			}
			v := reflect.ValueOf(e).Elem()
			name := v.FieldByName("Name").String()
			if code := v.FieldByName("Code").Int(); code != int64(tc.Code) || v.FieldByName("Func").String() != fn {
				t.Errorf("%#v: want code %d from %s", e, tc.Code, fn)
			}
			unlisted := strings.HasSuffix(tc.Name, "_"+strconv.Itoa(int(tc.Code)))
			if name != tc.Name && !(renamesUnlisted && unlisted) {
				t.Errorf("error named %q, want %q", name, tc.Name)
			}
			if msg, want := e.Error(), fmt.Sprintf("%s: %s: %s (%d)", pkg, fn, name, tc.Code); !strings.HasPrefix(msg, want) {
				t.Errorf("message %q, want it to start with %q", msg, want)
			}
			if tc.Sentinel != nil && !errors.Is(err, tc.Sentinel) {
				t.Errorf("errors.Is(%v, %v) = false", err, tc.Sentinel)
			}
			if errors.Is(err, unknown) != (tc.Sentinel == unknown) {
				t.Errorf("errors.Is(%v, %v) = %v", err, unknown, !(tc.Sentinel == unknown))
			}
		})
	}
}
