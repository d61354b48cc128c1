package load

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

func TestOpenLoader(t *testing.T) {
	lib, err := Open(Spec{Name: "libc", Sonames: []string{"libc.so.6"}})
	if err != nil {
		t.Skipf("no glibc here: %v", err)
	}
	if lib.Where != "loader" || lib.Soname != "libc.so.6" || !strings.Contains(filepath.Base(lib.Path), "libc") {
		t.Errorf("found %+v", lib)
	}
	if !filepath.IsAbs(lib.Path) {
		t.Errorf("path %q not resolved through /proc/self/maps", lib.Path)
	}
	var getpid func() int32
	bs := []Binding{
		{Lib: "libc", Names: []string{"no_such_getpid", "getpid"}, Fn: &getpid},
		{Lib: "libc", Names: []string{"no_such_symbol"}, Fn: new(func()), Optional: true},
		{Lib: "other", Names: []string{"skipped"}, Fn: new(func())},
	}
	if err := lib.Bind(bs); err != nil {
		t.Fatal(err)
	}
	if bs[0].Resolved != "getpid" || bs[1].Resolved != "" || bs[2].Resolved != "" {
		t.Errorf("resolved %q %q %q", bs[0].Resolved, bs[1].Resolved, bs[2].Resolved)
	}
	if int(getpid()) != os.Getpid() {
		t.Errorf("getpid through the binding: %d, want %d", getpid(), os.Getpid())
	}
	var ms *MissingSymbolError
	err = lib.Bind([]Binding{{Lib: "libc", Names: []string{"no_such_symbol"}, Fn: new(func())}})
	if !errors.As(err, &ms) || ms.Symbols[0] != "no_such_symbol" {
		t.Errorf("missing symbol: %v", err)
	}
}

// TestOpenEnvDir puts a file that is not a library in a directory given to
// SetDirs (VRAM_CUDA_LIBS): it must be tried first and reported.
func TestOpenEnvDir(t *testing.T) {
	dir := t.TempDir()
	bogus := filepath.Join(dir, "libvramtest.so.13")
	if err := os.WriteFile(bogus, []byte("not an ELF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	SetDirs([]string{dir, "/nonexistent"})
	t.Cleanup(func() { SetDirs(nil) })
	t.Setenv("PATH", "") // no python3 to ask
	_, err := Open(Spec{Name: "libvramtest", Sonames: []string{"libvramtest.so.13", "libvramtest.so.12"}, NoToolkitDirs: true})
	var nf *NotFoundError
	if !errors.As(err, &nf) || !IsNotFound(err) {
		t.Fatalf("got %v, want *NotFoundError", err)
	}
	if len(nf.Tried) != 3 || nf.Tried[0].Where != EnvLibs || nf.Tried[0].Path != bogus || nf.Tried[0].Err == "" {
		t.Fatalf("attempts %+v", nf.Tried)
	}
	for i, so := range []string{"libvramtest.so.13", "libvramtest.so.12"} {
		if a := nf.Tried[i+1]; a.Where != "loader" || a.Path != so {
			t.Errorf("attempt %d: %+v", i+1, a)
		}
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "load: libvramtest.so.13 or libvramtest.so.12 not loadable: ") || strings.Contains(msg, "\n") {
		t.Errorf("message %q", msg)
	}
}

func TestCheckTable(t *testing.T) {
	var f func(p *byte, n uint64, flags uint32) int32
	var hot func(a, b uintptr) int32
	var addr uintptr
	bs := []Binding{
		{Lib: "libx", Names: []string{"xGood", "xOld"}, Fn: &f},
		{Lib: "libx", Names: []string{"xHot"}, Fn: &hot, Addr: &addr},
	}
	good := "# comment\nfunc\txGood\tlibx\t8,8,4\t4\tregister\txOld\nfunc\txHot\tlibx\t8,8\t4\tsyscall\t-\nstruct\tS\t12\n"
	bad := "func\txGood\tlibx\t8,4,4\t4\tregister\t-\nfunc\txExtra\tlibx\t-\t4\tregister\t-\nstruct\tS\t16\n"
	dir := t.TempDir()
	for _, tc := range []struct {
		name, table string
		wantDiffs   []string
	}{
		{"agrees", good, nil},
		{"disagrees", bad, []string{"argument widths", "fallbacks", "xHot is bound but has no row", "xExtra has a row", "struct S is 12 bytes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".tsv")
			os.WriteFile(path, []byte(tc.table), 0o644)
			diffs, err := CheckTable(path, bs, map[string]uintptr{"S": 12})
			if err != nil {
				t.Fatal(err)
			}
			all := strings.Join(diffs, "\n")
			if len(diffs) != len(tc.wantDiffs) {
				t.Errorf("%d differences, want %d:\n%s", len(diffs), len(tc.wantDiffs), all)
			}
			for _, w := range tc.wantDiffs {
				if !strings.Contains(all, w) {
					t.Errorf("no difference mentions %q:\n%s", w, all)
				}
			}
		})
	}
}

func TestSignature(t *testing.T) {
	var f func(a uint8, b string, c []byte, d float32, e float64, g unsafe.Pointer) uint64
	args, ret := Signature(reflect.TypeOf(f))
	if args != "1,8,8,f4,f8,8" || ret != "8" {
		t.Errorf("%s -> %s", args, ret)
	}
	var v func()
	if args, ret := Signature(reflect.TypeOf(v)); args != "-" || ret != "void" {
		t.Errorf("%s -> %s", args, ret)
	}
}

func TestCStrings(t *testing.T) {
	c := NewCStrings([]string{"-arch=sm_90", "", "x"})
	defer c.Unpin()
	if c.Len() != 3 {
		t.Fatal(c.Len())
	}
	arr := unsafe.Slice(c.Ptr(), 3)
	for i, want := range []string{"-arch=sm_90", "", "x"} {
		if got := GoString(arr[i]); got != want {
			t.Errorf("%d: %q, want %q", i, got, want)
		}
	}
	if NewCStrings(nil).Ptr() != nil || GoString(nil) != "" {
		t.Error("empty cases")
	}
}

func TestLoader(t *testing.T) {
	if _, err := Open(Spec{Name: "libc", Sonames: []string{"libc.so.6"}}); err != nil {
		t.Skipf("no glibc here: %v", err)
	}
	spec := Spec{Name: "libc", Sonames: []string{"libvram-no-such-library.so.1"}, NoToolkitDirs: true}
	var getpid func() int32
	l := Loader{Spec: &spec, Bindings: []Binding{
		{Lib: "libc", Names: []string{"no_such_getpid", "getpid"}, Fn: &getpid},
		{Lib: "other", Names: []string{"skipped"}, Fn: new(func())},
	}}
	t.Setenv("PATH", "") // no python3 to ask

	// A failed search leaves the loader empty, and the next Load searches
	// again (here with the spec changed in between).
	if lib, err := l.Load(); !IsNotFound(err) || lib != nil {
		t.Fatalf("first Load: %v, %v; want a *NotFoundError", lib, err)
	}
	if l.Ready() || l.Library() != nil || l.Resolved() != nil {
		t.Fatal("a failed Load left the loader ready")
	}
	spec.Sonames = []string{"libc.so.6"}

	var wg sync.WaitGroup
	libs := make([]*Library, 8)
	for i := range libs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lib, err := l.Load()
			if err != nil {
				t.Error(err)
			}
			libs[i] = lib
		}()
	}
	wg.Wait()
	for _, lib := range libs {
		if lib == nil || lib != libs[0] || lib != l.Library() {
			t.Fatalf("Load returned %p, want the one library %p", lib, l.Library())
		}
	}
	if !l.Ready() || int(getpid()) != os.Getpid() {
		t.Errorf("ready %v, getpid %d", l.Ready(), getpid())
	}
	if got := l.Resolved(); len(got) != 1 || got["no_such_getpid"] != "getpid" {
		t.Errorf("Resolved() = %v, want only the libc binding, resolved as getpid", got)
	}
}

func TestLoaderMissingSymbol(t *testing.T) {
	if _, err := Open(Spec{Name: "libc", Sonames: []string{"libc.so.6"}}); err != nil {
		t.Skipf("no glibc here: %v", err)
	}
	l := Loader{Spec: &Spec{Name: "libc", Sonames: []string{"libc.so.6"}}, Bindings: []Binding{
		{Lib: "libc", Names: []string{"no_such_symbol"}, Fn: new(func())},
	}}
	lib, err := l.Load()
	var ms *MissingSymbolError
	if !errors.As(err, &ms) || lib == nil {
		t.Fatalf("Load: %v, %v; want the library and a *MissingSymbolError", lib, err)
	}
	if l.Ready() || l.Library() != nil {
		t.Error("a library lacking a required symbol made the loader ready")
	}
}

func TestNotLoaded(t *testing.T) {
	err := NotLoaded("cuda", "libcuda.so.1", "cuda.Load")
	if got, want := err.Error(), "cuda: libcuda.so.1 is not loaded (call cuda.Load first)"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}

// TestLoadersShareTable loads two libraries whose bindings share one table
// (as cuBLASLt and cuBLAS do) at the same time: each binds only its own
// entries, and under -race the two never touch the same memory.
func TestLoadersShareTable(t *testing.T) {
	for _, so := range []string{"libc.so.6", "libm.so.6"} {
		if _, err := Open(Spec{Name: so, Sonames: []string{so}}); err != nil {
			t.Skipf("no %s here: %v", so, err)
		}
	}
	var getpid func() int32
	var cos func(float64) float64
	table := []Binding{
		{Lib: "libc", Names: []string{"getpid"}, Fn: &getpid},
		{Lib: "libm", Names: []string{"cos"}, Fn: &cos},
	}
	libc := Loader{Spec: &Spec{Name: "libc", Sonames: []string{"libc.so.6"}}, Bindings: table}
	libm := Loader{Spec: &Spec{Name: "libm", Sonames: []string{"libm.so.6"}}, Bindings: table}
	var wg sync.WaitGroup
	for _, l := range []*Loader{&libc, &libm, &libc, &libm} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := l.Load(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if int(getpid()) != os.Getpid() || cos(0) != 1 {
		t.Errorf("getpid %d, cos(0) %v", getpid(), cos(0))
	}
	if c, m := libc.Resolved(), libm.Resolved(); len(c) != 1 || c["getpid"] != "getpid" || len(m) != 1 || m["cos"] != "cos" {
		t.Errorf("resolved %v and %v", c, m)
	}
}

func TestNotFoundReason(t *testing.T) {
	tests := []struct {
		name  string
		tried []Attempt
		want  string
	}{
		{"loader first", []Attempt{{Where: EnvLibs, Path: "/a/libx.so.1", Err: "no file"}, {Where: "loader", Path: "libx.so.1", Err: "libx.so.1: cannot open"}}, "libx.so.1: cannot open"},
		{"no loader attempt", []Attempt{{Where: "cuda toolkit", Path: "/usr/local/cuda/lib64/libx.so.1", Err: "no file"}}, "no file"},
		{"nothing tried", nil, "not found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := &NotFoundError{Name: "libx", Sonames: []string{"libx.so.1"}, Tried: tc.tried}
			if got := e.Reason(); got != tc.want {
				t.Errorf("Reason = %q, want %q", got, tc.want)
			}
			if tc.tried != nil && !strings.Contains(e.Error(), tc.want) {
				t.Errorf("Error %q lacks the reason %q", e.Error(), tc.want)
			}
		})
	}
}
