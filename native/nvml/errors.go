package nvml

import (
	"errors"

	"github.com/vramgo/vram/native/internal/status"
	"github.com/vramgo/vram/native/load"
)

// Return is an nvmlReturn_t, the status every NVML call returns.
type Return int32

// Success is NVML_SUCCESS.
const Success Return = 0

// returnNames maps nvmlReturn_t values to their names in nvml.h (API
// version 13). A code missing here is named "NVML_ERROR_<code>".
var returnNames = map[Return]string{
	0:   "NVML_SUCCESS",
	1:   "NVML_ERROR_UNINITIALIZED",
	2:   "NVML_ERROR_INVALID_ARGUMENT",
	3:   "NVML_ERROR_NOT_SUPPORTED",
	4:   "NVML_ERROR_NO_PERMISSION",
	5:   "NVML_ERROR_ALREADY_INITIALIZED",
	6:   "NVML_ERROR_NOT_FOUND",
	7:   "NVML_ERROR_INSUFFICIENT_SIZE",
	8:   "NVML_ERROR_INSUFFICIENT_POWER",
	9:   "NVML_ERROR_DRIVER_NOT_LOADED",
	10:  "NVML_ERROR_TIMEOUT",
	11:  "NVML_ERROR_IRQ_ISSUE",
	12:  "NVML_ERROR_LIBRARY_NOT_FOUND",
	13:  "NVML_ERROR_FUNCTION_NOT_FOUND",
	14:  "NVML_ERROR_CORRUPTED_INFOROM",
	15:  "NVML_ERROR_GPU_IS_LOST",
	16:  "NVML_ERROR_RESET_REQUIRED",
	17:  "NVML_ERROR_OPERATING_SYSTEM",
	18:  "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
	19:  "NVML_ERROR_IN_USE",
	20:  "NVML_ERROR_MEMORY",
	21:  "NVML_ERROR_NO_DATA",
	22:  "NVML_ERROR_VGPU_ECC_NOT_SUPPORTED",
	23:  "NVML_ERROR_INSUFFICIENT_RESOURCES",
	24:  "NVML_ERROR_FREQ_NOT_SUPPORTED",
	25:  "NVML_ERROR_ARGUMENT_VERSION_MISMATCH",
	26:  "NVML_ERROR_DEPRECATED",
	27:  "NVML_ERROR_NOT_READY",
	28:  "NVML_ERROR_GPU_NOT_FOUND",
	29:  "NVML_ERROR_INVALID_STATE",
	30:  "NVML_ERROR_RESET_TYPE_NOT_SUPPORTED",
	999: "NVML_ERROR_UNKNOWN",
}

// Name returns the status's name in nvml.h, e.g. "NVML_ERROR_NOT_SUPPORTED";
// codes missing from the checked-in table are named "NVML_ERROR_<code>".
func (r Return) Name() string { return status.Name(returnNames, "NVML_ERROR_", r) }

// String returns the status's name.
func (r Return) String() string { return r.Name() }

// Error is a failed NVML call. It keeps the numeric code, its name in
// nvml.h and the C function that returned it. Match it against the
// sentinels with errors.Is (the codes are compared) or take it apart with
// errors.As.
type Error struct {
	Code Return // the nvmlReturn_t
	Name string // e.g. "NVML_ERROR_NOT_SUPPORTED"
	Func string // the C symbol that failed, e.g. "nvmlInit_v2"; empty in sentinels
	Desc string // NVML's description (nvmlErrorString), if the library is loaded
}

// Error returns "nvml: nvmlInit_v2: NVML_ERROR_DRIVER_NOT_LOADED (9): Driver Not Loaded".
func (e *Error) Error() string {
	return status.Message("nvml", e.Func, e.Name, int32(e.Code), e.Desc)
}

// Is reports whether target is an *Error with the same code, so that
// errors.Is(err, nvml.ErrNotSupported) matches any unsupported query.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

func sentinel(code Return) *Error { return &Error{Code: code, Name: code.Name()} }

// Sentinels for the common NVML errors; compare with errors.Is.
var (
	ErrUninitialized           = sentinel(1)   // NVML_ERROR_UNINITIALIZED: Init was not called
	ErrInvalidArgument         = sentinel(2)   // NVML_ERROR_INVALID_ARGUMENT
	ErrNotSupported            = sentinel(3)   // NVML_ERROR_NOT_SUPPORTED: the device does not answer this query
	ErrNoPermission            = sentinel(4)   // NVML_ERROR_NO_PERMISSION
	ErrNotFound                = sentinel(6)   // NVML_ERROR_NOT_FOUND: e.g. a process that has exited
	ErrInsufficientSize        = sentinel(7)   // NVML_ERROR_INSUFFICIENT_SIZE: a buffer is too small
	ErrDriverNotLoaded         = sentinel(9)   // NVML_ERROR_DRIVER_NOT_LOADED: no kernel driver running
	ErrTimeout                 = sentinel(10)  // NVML_ERROR_TIMEOUT
	ErrLibraryNotFound         = sentinel(12)  // NVML_ERROR_LIBRARY_NOT_FOUND
	ErrFunctionNotFound        = sentinel(13)  // NVML_ERROR_FUNCTION_NOT_FOUND: the library lacks the function
	ErrGPUIsLost               = sentinel(15)  // NVML_ERROR_GPU_IS_LOST: fell off the bus
	ErrOperatingSystem         = sentinel(17)  // NVML_ERROR_OPERATING_SYSTEM: blocked by the OS or cgroups
	ErrLibRMVersionMismatch    = sentinel(18)  // NVML_ERROR_LIB_RM_VERSION_MISMATCH: library and kernel driver differ
	ErrNoData                  = sentinel(21)  // NVML_ERROR_NO_DATA
	ErrArgumentVersionMismatch = sentinel(25)  // NVML_ERROR_ARGUMENT_VERSION_MISMATCH: a versioned struct's version is not supported
	ErrGPUNotFound             = sentinel(28)  // NVML_ERROR_GPU_NOT_FOUND: no GPUs were found
	ErrUnknown                 = sentinel(999) // NVML_ERROR_UNKNOWN
)

// ErrNotLoaded is returned by every call made before [Load] succeeded.
var ErrNotLoaded = load.NotLoaded("nvml", Spec.Sonames[0], "nvml.Load")

// IsNoDriver reports whether err says that this machine has no usable
// NVIDIA driver: NVML could not be found (*load.NotFoundError), or NVML
// reports the kernel driver not loaded, the library missing, or no GPU.
func IsNoDriver(err error) bool {
	return load.IsNotFound(err) || errors.Is(err, ErrDriverNotLoaded) ||
		errors.Is(err, ErrLibraryNotFound) || errors.Is(err, ErrGPUNotFound)
}

// check turns an nvmlReturn_t from the C function fn into an error.
func check(fn string, r Return) error {
	if r == Success {
		return nil
	}
	e := &Error{Code: r, Name: r.Name(), Func: fn}
	if nvmlErrorString != nil {
		if p := nvmlErrorString(r); p != nil {
			e.Desc = goString(p)
		}
	}
	return e
}
