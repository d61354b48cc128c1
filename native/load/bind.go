package load

import (
	"bufio"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Binding is one C function to resolve.
type Binding struct {
	// Lib is the short name of the library that exports it ([Spec.Name]).
	Lib string
	// Names is the C symbol, then older names tried in order when the
	// library lacks it (cuEventElapsedTime_v2, then cuEventElapsedTime).
	// Every name must have the same C signature.
	Names []string
	// Fn points to a func variable whose Go type mirrors the C signature:
	// integer and pointer arguments of the C widths, the C return type.
	// Unless Addr is set, Bind registers it with purego.RegisterFunc.
	Fn any
	// Addr, when set, receives the symbol's address instead, for calls
	// through purego.SyscallN; Fn then only documents the signature (and is
	// what [CheckTable] checks).
	Addr *uintptr
	// Optional bindings may be missing without failing Bind.
	Optional bool
	// Resolved is set by Bind to the name that was found, empty if none.
	Resolved string
}

// MissingSymbolError reports required symbols a library lacks.
type MissingSymbolError struct {
	Library string   // the library's short name
	Path    string   // the file that was loaded
	Symbols []string // the missing symbols (first names)
}

// Error lists the missing symbols.
func (e *MissingSymbolError) Error() string {
	return fmt.Sprintf("load: %s (%s) lacks %s: too old for these bindings", e.Library, e.Path, strings.Join(e.Symbols, ", "))
}

// Bind resolves every binding of bs whose Lib is l's name, trying each
// binding's names in order, and either registers its Fn or stores its
// address. It sets each binding's Resolved field. It returns a
// *MissingSymbolError listing the required symbols it could not find;
// the bindings that were found are bound even then.
func (l *Library) Bind(bs []Binding) error {
	var missing []string
	for i := range bs {
		b := &bs[i]
		if b.Lib != l.Name {
			continue
		}
		var addr uintptr
		for _, name := range b.Names {
			if a := dlsym(l.Handle, name); a != 0 {
				addr, b.Resolved = a, name
				break
			}
		}
		if addr == 0 {
			if !b.Optional {
				missing = append(missing, b.Names[0])
			}
			continue
		}
		if b.Addr != nil {
			*b.Addr = addr
		} else {
			purego.RegisterFunc(b.Fn, addr)
		}
	}
	if len(missing) > 0 {
		return &MissingSymbolError{Library: l.Name, Path: l.Path, Symbols: missing}
	}
	return nil
}

// dlsym returns the address of name in the library, 0 when it lacks it.
// The thread is held for the same reason as in dlopen.
func dlsym(handle uintptr, name string) uintptr {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	a, err := purego.Dlsym(handle, name)
	if err != nil {
		return 0
	}
	return a
}

// GoString copies the NUL-terminated C string at p. It returns "" for nil.
func GoString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// CStrings is an array of NUL-terminated strings laid out for C (char**),
// with every buffer pinned so that C may read it. Call Unpin when C is done
// with it.
type CStrings struct {
	bufs   [][]byte
	ptrs   []*byte
	pinner runtime.Pinner
}

// NewCStrings copies ss into pinned C-style strings.
func NewCStrings(ss []string) *CStrings {
	c := &CStrings{bufs: make([][]byte, len(ss)), ptrs: make([]*byte, len(ss))}
	for i, s := range ss {
		b := make([]byte, len(s)+1)
		copy(b, s)
		c.bufs[i] = b
		c.ptrs[i] = &b[0]
		c.pinner.Pin(&b[0])
	}
	if len(ss) > 0 {
		c.pinner.Pin(&c.ptrs[0])
	}
	return c
}

// Ptr returns the char** to hand to C, nil for an empty array.
func (c *CStrings) Ptr() **byte {
	if len(c.ptrs) == 0 {
		return nil
	}
	return &c.ptrs[0]
}

// Len returns the number of strings.
func (c *CStrings) Len() int { return len(c.ptrs) }

// Unpin releases the pins; C must no longer use the array.
func (c *CStrings) Unpin() { c.pinner.Unpin() }

// Signature returns the argument widths and the return width of a Go func
// type as [CheckTable] writes them: widths in bytes separated by commas
// ("-" for no arguments), floats prefixed with 'f', "void" for no result.
func Signature(t reflect.Type) (args, ret string) {
	width := func(t reflect.Type) string {
		s := strconv.Itoa(int(t.Size()))
		switch t.Kind() {
		case reflect.String, reflect.Slice:
			s = strconv.Itoa(int(unsafe.Sizeof(uintptr(0)))) // passed as a pointer
		case reflect.Float32, reflect.Float64:
			s = "f" + s
		}
		return s
	}
	var parts []string
	for i := 0; i < t.NumIn(); i++ {
		parts = append(parts, width(t.In(i)))
	}
	args = "-"
	if len(parts) > 0 {
		args = strings.Join(parts, ",")
	}
	ret = "void"
	if t.NumOut() == 1 {
		ret = width(t.Out(0))
	}
	return args, ret
}

// CheckTable compares bindings and struct sizes with the TSV file at path
// and returns one line for each difference (nil when they agree).
//
// The file has '#' comment lines and two kinds of rows, fields separated by
// tabs:
//
//	func	SYMBOL	LIBRARY	ARGS	RETURN	CALL	FALLBACKS
//	struct	NAME	SIZE
//
// ARGS and RETURN are as [Signature] writes them; CALL is "register" (bound
// with purego.RegisterFunc) or "syscall" (called through purego.SyscallN);
// FALLBACKS lists older symbol names separated by commas, or "-". Every
// binding must have a row and every func row a binding; every struct row
// must have an entry in structs (name to size) and the reverse.
func CheckTable(path string, bindings []Binding, structs map[string]uintptr) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var diffs []string
	funcs := map[string][]string{}
	sizes := map[string]string{}
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if strings.TrimSpace(text) == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Split(text, "\t")
		switch {
		case fields[0] == "func" && len(fields) == 7:
			if _, dup := funcs[fields[1]]; dup {
				diffs = append(diffs, fmt.Sprintf("%s:%d: %s listed twice", path, line, fields[1]))
			}
			funcs[fields[1]] = fields
		case fields[0] == "struct" && len(fields) == 3:
			sizes[fields[1]] = fields[2]
		default:
			diffs = append(diffs, fmt.Sprintf("%s:%d: malformed row %q", path, line, text))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}

	seen := map[string]bool{}
	for _, b := range bindings {
		sym := b.Names[0]
		seen[sym] = true
		row, ok := funcs[sym]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("%s is bound but has no row in %s", sym, path))
			continue
		}
		args, ret := Signature(reflect.TypeOf(b.Fn).Elem())
		call := "register"
		if b.Addr != nil {
			call = "syscall"
		}
		fallbacks := "-"
		if len(b.Names) > 1 {
			fallbacks = strings.Join(b.Names[1:], ",")
		}
		want := []string{"func", sym, b.Lib, args, ret, call, fallbacks}
		for i, name := range []string{"", "", "library", "argument widths", "return width", "call", "fallbacks"} {
			if name != "" && row[i] != want[i] {
				diffs = append(diffs, fmt.Sprintf("%s: %s is %q in the Go declaration, %q in %s", sym, name, want[i], row[i], path))
			}
		}
	}
	for sym := range funcs {
		if !seen[sym] {
			diffs = append(diffs, fmt.Sprintf("%s has a row in %s but no binding", sym, path))
		}
	}
	for name, size := range structs {
		got, ok := sizes[name]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("struct %s has no row in %s", name, path))
			continue
		}
		if got != strconv.Itoa(int(size)) {
			diffs = append(diffs, fmt.Sprintf("struct %s is %d bytes in Go, %s in %s", name, size, got, path))
		}
	}
	for name := range sizes {
		if _, ok := structs[name]; !ok {
			diffs = append(diffs, fmt.Sprintf("struct %s has a row in %s but no Go type was checked", name, path))
		}
	}
	return diffs, nil
}
