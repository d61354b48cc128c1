package load

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
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

// TestOpenEnvDir puts a file that is not a library in a VRAM_CUDA_LIBS
// directory: it must be tried first and reported.
func TestOpenEnvDir(t *testing.T) {
	dir := t.TempDir()
	bogus := filepath.Join(dir, "libvramtest.so.13")
	if err := os.WriteFile(bogus, []byte("not an ELF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvLibs, dir+string(os.PathListSeparator)+"/nonexistent")
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
