package nvrtc

import (
	"fmt"

	"github.com/vramgo/vram/native/internal/status"
	"github.com/vramgo/vram/native/load"
)

// Program is an nvrtcProgram handle.
type Program uintptr

// Result is an nvrtcResult.
type Result int32

// Success is NVRTC_SUCCESS.
const Success Result = 0

// resultNames maps nvrtcResult values to their names in nvrtc.h (CUDA 13).
var resultNames = map[Result]string{
	0:  "NVRTC_SUCCESS",
	1:  "NVRTC_ERROR_OUT_OF_MEMORY",
	2:  "NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
	3:  "NVRTC_ERROR_INVALID_INPUT",
	4:  "NVRTC_ERROR_INVALID_PROGRAM",
	5:  "NVRTC_ERROR_INVALID_OPTION",
	6:  "NVRTC_ERROR_COMPILATION",
	7:  "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE",
	8:  "NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION",
	9:  "NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
	10: "NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID",
	11: "NVRTC_ERROR_INTERNAL_ERROR",
	12: "NVRTC_ERROR_TIME_FILE_WRITE_FAILED",
	13: "NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED",
	14: "NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED",
	15: "NVRTC_ERROR_PCH_CREATE",
	16: "NVRTC_ERROR_CANCELLED",
	17: "NVRTC_ERROR_TIME_TRACE_FILE_WRITE_FAILED",
}

// Name returns the result's name in nvrtc.h, e.g. "NVRTC_ERROR_COMPILATION";
// codes missing from the checked-in table are named "NVRTC_ERROR_<code>".
func (r Result) Name() string { return status.Name(resultNames, "NVRTC_ERROR_", r) }

// String returns the result's name.
func (r Result) String() string { return r.Name() }

// Error is a failed NVRTC call: the numeric code, NVRTC's name for it and
// the C function that returned it. errors.Is compares codes.
type Error struct {
	Code Result // the nvrtcResult
	Name string // e.g. "NVRTC_ERROR_COMPILATION"
	Func string // the C symbol that failed; empty in sentinels
}

// Error returns "nvrtc: nvrtcCompileProgram: NVRTC_ERROR_COMPILATION (6)".
func (e *Error) Error() string {
	return status.Message("nvrtc", e.Func, e.Name, int32(e.Code), "")
}

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

func sentinel(code Result) *Error { return &Error{Code: code, Name: code.Name()} }

// Sentinels for the common NVRTC errors; compare with errors.Is.
var (
	ErrOutOfMemory             = sentinel(1)  // NVRTC_ERROR_OUT_OF_MEMORY
	ErrProgramCreationFailure  = sentinel(2)  // NVRTC_ERROR_PROGRAM_CREATION_FAILURE
	ErrInvalidInput            = sentinel(3)  // NVRTC_ERROR_INVALID_INPUT
	ErrInvalidProgram          = sentinel(4)  // NVRTC_ERROR_INVALID_PROGRAM
	ErrInvalidOption           = sentinel(5)  // NVRTC_ERROR_INVALID_OPTION
	ErrCompilation             = sentinel(6)  // NVRTC_ERROR_COMPILATION: see GetProgramLog
	ErrBuiltinOperationFailure = sentinel(7)  // NVRTC_ERROR_BUILTIN_OPERATION_FAILURE (libnvrtc-builtins missing)
	ErrInternalError           = sentinel(11) // NVRTC_ERROR_INTERNAL_ERROR
)

// ErrNotLoaded is returned by every call made before [Load] succeeded.
var ErrNotLoaded = load.NotLoaded("nvrtc", libName, "nvrtc.Load")

// check turns an nvrtcResult from the C function fn into an error.
func check(fn string, r Result) error {
	if r == Success {
		return nil
	}
	return &Error{Code: r, Name: r.Name(), Func: fn}
}

// The C functions, declared with Go types of the C widths.
var (
	nvrtcGetErrorString    func(r Result) *byte
	nvrtcVersion           func(major, minor *int32) Result
	nvrtcCreateProgram     func(p *Program, src, name string, numHeaders int32, headers, includeNames **byte) Result
	nvrtcDestroyProgram    func(p *Program) Result
	nvrtcCompileProgram    func(p Program, numOptions int32, options **byte) Result
	nvrtcGetProgramLogSize func(p Program, n *uint64) Result
	nvrtcGetProgramLog     func(p Program, log *byte) Result
	nvrtcGetCUBINSize      func(p Program, n *uint64) Result
	nvrtcGetCUBIN          func(p Program, cubin *byte) Result
	nvrtcGetPTXSize        func(p Program, n *uint64) Result
	nvrtcGetPTX            func(p Program, ptx *byte) Result
)

const libName = "libnvrtc"

var bindings = []load.Binding{
	{Lib: libName, Names: []string{"nvrtcGetErrorString"}, Fn: &nvrtcGetErrorString},
	{Lib: libName, Names: []string{"nvrtcVersion"}, Fn: &nvrtcVersion},
	{Lib: libName, Names: []string{"nvrtcCreateProgram"}, Fn: &nvrtcCreateProgram},
	{Lib: libName, Names: []string{"nvrtcDestroyProgram"}, Fn: &nvrtcDestroyProgram},
	{Lib: libName, Names: []string{"nvrtcCompileProgram"}, Fn: &nvrtcCompileProgram},
	{Lib: libName, Names: []string{"nvrtcGetProgramLogSize"}, Fn: &nvrtcGetProgramLogSize},
	{Lib: libName, Names: []string{"nvrtcGetProgramLog"}, Fn: &nvrtcGetProgramLog},
	{Lib: libName, Names: []string{"nvrtcGetCUBINSize"}, Fn: &nvrtcGetCUBINSize},
	{Lib: libName, Names: []string{"nvrtcGetCUBIN"}, Fn: &nvrtcGetCUBIN},
	{Lib: libName, Names: []string{"nvrtcGetPTXSize"}, Fn: &nvrtcGetPTXSize},
	{Lib: libName, Names: []string{"nvrtcGetPTX"}, Fn: &nvrtcGetPTX},
}

// Spec is how [Load] searches for NVRTC: CUDA 13 first, then CUDA 12, in
// every place the package load searches.
var Spec = load.Spec{Name: libName, Sonames: []string{"libnvrtc.so.13", "libnvrtc.so.12"}}

// compiler holds the loaded libnvrtc and whether the bindings are ready.
var compiler = load.Loader{Spec: &Spec, Bindings: bindings}

// Load finds libnvrtc (see [Spec]), resolves every binding and returns the
// library it loaded. Once it has succeeded, later calls return the same
// library; after a failure the next call searches again. The error is a
// *load.NotFoundError when no NVRTC could be opened. Load is safe for
// concurrent use.
func Load() (*load.Library, error) { return compiler.Load() }

// call returns [ErrNotLoaded] before [Load] succeeded; else it calls c,
// which calls the C function fn, and turns the nvrtcResult into an error.
func call(fn string, c func() Result) error {
	if !compiler.Ready() {
		return ErrNotLoaded
	}
	return check(fn, c())
}

// Version returns NVRTC's CUDA version. It calls nvrtcVersion.
func Version() (major, minor int, err error) {
	var ma, mi int32
	err = call("nvrtcVersion", func() Result { return nvrtcVersion(&ma, &mi) })
	return int(ma), int(mi), err
}

// GetErrorString returns NVRTC's text for a result. It calls
// nvrtcGetErrorString; it returns "" before [Load].
func GetErrorString(r Result) string {
	if !compiler.Ready() {
		return ""
	}
	return load.GoString(nvrtcGetErrorString(r))
}

// CreateProgram creates a program from CUDA C++ source; name names it in
// messages ("" gives "default_program"); headers are the sources of files
// that #include lines can name, given in includeNames (the two slices have
// the same length). It calls nvrtcCreateProgram. The program must be freed
// with [DestroyProgram].
func CreateProgram(src, name string, headers, includeNames []string) (Program, error) {
	if !compiler.Ready() {
		return 0, ErrNotLoaded
	}
	if len(headers) != len(includeNames) {
		return 0, fmt.Errorf("nvrtc: nvrtcCreateProgram: %d headers but %d include names", len(headers), len(includeNames))
	}
	h, n := load.NewCStrings(headers), load.NewCStrings(includeNames)
	defer h.Unpin()
	defer n.Unpin()
	var p Program
	err := call("nvrtcCreateProgram", func() Result {
		return nvrtcCreateProgram(&p, src, name, int32(h.Len()), h.Ptr(), n.Ptr())
	})
	return p, err
}

// DestroyProgram frees a program. It calls nvrtcDestroyProgram.
func DestroyProgram(p Program) error {
	return call("nvrtcDestroyProgram", func() Result { return nvrtcDestroyProgram(&p) })
}

// CompileProgram compiles the program with the given options (e.g.
// "-arch=sm_90" for a CUBIN, "--std=c++17", "-default-device"). It calls
// nvrtcCompileProgram. A source error returns [ErrCompilation]; the
// diagnostics are in [GetProgramLog].
func CompileProgram(p Program, options []string) error {
	if !compiler.Ready() {
		return ErrNotLoaded
	}
	o := load.NewCStrings(options)
	defer o.Unpin()
	return call("nvrtcCompileProgram", func() Result { return nvrtcCompileProgram(p, int32(o.Len()), o.Ptr()) })
}

// GetProgramLogSize returns the size of the compile log including its NUL.
// It calls nvrtcGetProgramLogSize.
func GetProgramLogSize(p Program) (uint64, error) {
	var n uint64
	err := call("nvrtcGetProgramLogSize", func() Result { return nvrtcGetProgramLogSize(p, &n) })
	return n, err
}

// GetProgramLog returns the compile log (warnings and errors). It calls
// nvrtcGetProgramLogSize and nvrtcGetProgramLog.
func GetProgramLog(p Program) (string, error) {
	n, err := GetProgramLogSize(p)
	if err != nil || n <= 1 {
		return "", err
	}
	buf := make([]byte, n)
	if err := call("nvrtcGetProgramLog", func() Result { return nvrtcGetProgramLog(p, &buf[0]) }); err != nil {
		return "", err
	}
	return string(buf[:n-1]), nil
}

// GetCUBINSize returns the size in bytes of the compiled CUBIN (0 when the
// program was compiled for a virtual architecture). It calls
// nvrtcGetCUBINSize.
func GetCUBINSize(p Program) (uint64, error) {
	var n uint64
	err := call("nvrtcGetCUBINSize", func() Result { return nvrtcGetCUBINSize(p, &n) })
	return n, err
}

// GetCUBIN returns the compiled CUBIN, an ELF image for the architecture
// named by -arch=sm_XY. It calls nvrtcGetCUBINSize and nvrtcGetCUBIN.
func GetCUBIN(p Program) ([]byte, error) {
	n, err := GetCUBINSize(p)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("nvrtc: nvrtcGetCUBINSize: no CUBIN (compile with -arch=sm_XY, not compute_XY)")
	}
	buf := make([]byte, n)
	return buf, call("nvrtcGetCUBIN", func() Result { return nvrtcGetCUBIN(p, &buf[0]) })
}

// GetPTXSize returns the size of the compiled PTX including its NUL. It
// calls nvrtcGetPTXSize.
func GetPTXSize(p Program) (uint64, error) {
	var n uint64
	err := call("nvrtcGetPTXSize", func() Result { return nvrtcGetPTXSize(p, &n) })
	return n, err
}

// GetPTX returns the compiled PTX, NUL byte included (as
// cuda.ModuleLoadData wants it). It calls nvrtcGetPTXSize and nvrtcGetPTX.
// PTX from an NVRTC newer than the driver cannot be loaded: prefer CUBIN.
func GetPTX(p Program) ([]byte, error) {
	n, err := GetPTXSize(p)
	if err != nil || n == 0 {
		return nil, err
	}
	buf := make([]byte, n)
	return buf, call("nvrtcGetPTX", func() Result { return nvrtcGetPTX(p, &buf[0]) })
}
