package cudnn

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/vramgo/vram/native/internal/status"
	"github.com/vramgo/vram/native/load"
)

// Status is a cudnnStatus_t. cuDNN 9 groups its codes by thousands: 1xxx
// uncategorized, 2xxx bad parameters, 3xxx not supported, 4xxx internal
// errors, 5xxx execution failures.
type Status int32

// StatusSuccess is CUDNN_STATUS_SUCCESS.
const StatusSuccess Status = 0

// statusNames maps cudnnStatus_t values to their names in cudnn_graph.h
// (cuDNN 9).
var statusNames = map[Status]string{
	0:    "CUDNN_STATUS_SUCCESS",
	1001: "CUDNN_STATUS_NOT_INITIALIZED",
	1002: "CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH",
	1003: "CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH",
	1004: "CUDNN_STATUS_DEPRECATED",
	1005: "CUDNN_STATUS_LICENSE_ERROR",
	1006: "CUDNN_STATUS_RUNTIME_IN_PROGRESS",
	1007: "CUDNN_STATUS_RUNTIME_FP_OVERFLOW",
	1008: "CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED",
	2000: "CUDNN_STATUS_BAD_PARAM",
	2001: "CUDNN_STATUS_INVALID_VALUE",
	2002: "CUDNN_STATUS_BAD_PARAM_NULL_POINTER",
	2003: "CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER",
	2004: "CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED",
	2005: "CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND",
	2006: "CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT",
	2007: "CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH",
	2008: "CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH",
	2009: "CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES",
	2010: "CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE",
	2011: "CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH",
	2012: "CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE",
	3000: "CUDNN_STATUS_NOT_SUPPORTED",
	3001: "CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN",
	3002: "CUDNN_STATUS_NOT_SUPPORTED_SHAPE",
	3003: "CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE",
	3004: "CUDNN_STATUS_NOT_SUPPORTED_LAYOUT",
	3005: "CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER",
	3006: "CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART",
	3007: "CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH",
	3008: "CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING",
	3009: "CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE",
	3010: "CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT",
	3011: "CUDNN_STATUS_NOT_SUPPORTED_PADDING",
	3012: "CUDNN_STATUS_NOT_SUPPORTED_BAD_LAUNCH_PARAM",
	3013: "CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API",
	4000: "CUDNN_STATUS_INTERNAL_ERROR",
	4001: "CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED",
	4002: "CUDNN_STATUS_INTERNAL_ERROR_UNEXPECTED_VALUE",
	4003: "CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED",
	4004: "CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED",
	4005: "CUDNN_STATUS_INTERNAL_ERROR_BAD_LAUNCH_PARAM",
	4006: "CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED",
	5000: "CUDNN_STATUS_EXECUTION_FAILED",
	5001: "CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER",
	5002: "CUDNN_STATUS_EXECUTION_FAILED_CUBLAS",
	5003: "CUDNN_STATUS_EXECUTION_FAILED_CUDART",
	5004: "CUDNN_STATUS_EXECUTION_FAILED_CURAND",
}

// Name returns the status's name, e.g. "CUDNN_STATUS_NOT_SUPPORTED";
// codes missing from the checked-in table are named "CUDNN_STATUS_<code>".
func (s Status) Name() string { return status.Name(statusNames, "CUDNN_STATUS_", s) }

// String returns the status's name.
func (s Status) String() string { return s.Name() }

// Category returns the status's category, the code rounded down to a
// thousand (CUDNN_STATUS_CATEGORY): 3002 (NOT_SUPPORTED_SHAPE) is in 3000
// (NOT_SUPPORTED).
func (s Status) Category() Status { return s / 1000 * 1000 }

// Error is a failed cuDNN call: the numeric status, its name and the C
// function. errors.Is compares codes; a category sentinel
// ([ErrBadParam], [ErrNotSupported], [ErrInternalError],
// [ErrExecutionFailed]) matches every code of its category.
type Error struct {
	Code Status // the cudnnStatus_t
	Name string // e.g. "CUDNN_STATUS_NOT_SUPPORTED_SHAPE"
	Func string // the C symbol that failed; empty in sentinels
}

// Error returns "cudnn: cudnnConvolutionForward: CUDNN_STATUS_BAD_PARAM (2000)".
func (e *Error) Error() string {
	return status.Message("cudnn", e.Func, e.Name, int32(e.Code), "")
}

// Is reports whether target is an *Error with the same code, or a
// category sentinel (a code that is a multiple of 1000) of e's category.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok {
		return false
	}
	if t.Code == e.Code {
		return true
	}
	return t.Code != 0 && t.Code%1000 == 0 && e.Code.Category() == t.Code
}

func sentinel(code Status) *Error { return &Error{Code: code, Name: code.Name()} }

// Sentinels for the cuDNN statuses; compare with errors.Is. The four
// category sentinels match every code of their category.
var (
	ErrNotInitialized        = sentinel(1001) // CUDNN_STATUS_NOT_INITIALIZED
	ErrVersionMismatch       = sentinel(1002) // CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH
	ErrSublibraryLoading     = sentinel(1008) // CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED
	ErrBadParam              = sentinel(2000) // CUDNN_STATUS_BAD_PARAM and every 2xxx code
	ErrNotSupported          = sentinel(3000) // CUDNN_STATUS_NOT_SUPPORTED and every 3xxx code
	ErrInternalError         = sentinel(4000) // CUDNN_STATUS_INTERNAL_ERROR and every 4xxx code
	ErrDeviceAllocation      = sentinel(4004) // CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED
	ErrExecutionFailed       = sentinel(5000) // CUDNN_STATUS_EXECUTION_FAILED and every 5xxx code
	ErrNotSupportedShape     = sentinel(3002) // CUDNN_STATUS_NOT_SUPPORTED_SHAPE
	ErrNotSupportedDataType  = sentinel(3003) // CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE
	ErrNotSupportedLayout    = sentinel(3004) // CUDNN_STATUS_NOT_SUPPORTED_LAYOUT
	ErrNotSupportedArch      = sentinel(3007) // CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH
	ErrSublibraryUnavailable = sentinel(3009) // CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE
)

// ErrNotLoaded is returned by calls made before the library is loaded.
var ErrNotLoaded = load.NotLoaded("cudnn", "libcudnn.so.9", "cudnn.Load")

// check turns a cudnnStatus_t from the C function fn into an error.
func check(fn string, s Status) error {
	if s == StatusSuccess {
		return nil
	}
	return &Error{Code: s, Name: s.Name(), Func: fn}
}

const libName = "libcudnn"

// Spec is how [Load] searches: libcudnn.so.9, in the places of package
// native/load (VRAM_CUDA_LIBS directories, the system loader,
// /usr/local/cuda, then the nvidia/cudnn/lib folder of Python
// environments, where PyTorch's wheels install it).
var Spec = load.Spec{Name: libName, Sonames: []string{"libcudnn.so.9"}}

// Sublibraries are the libraries that cuDNN 9's libcudnn.so.9 opens by name
// when it first needs them. [Load] opens each one that lies next to the
// libcudnn.so.9 it loaded, so that the shim finds them (the system loader
// matches a library already open by its soname) even where that folder is
// not on the loader's path, and never mixes in another cuDNN's copy.
var Sublibraries = []string{
	"libcudnn_graph.so.9", "libcudnn_ops.so.9", "libcudnn_cnn.so.9",
	"libcudnn_heuristic.so.9", "libcudnn_engines_precompiled.so.9", "libcudnn_engines_runtime_compiled.so.9",
}

var lib = load.Loader{Spec: &Spec, Bindings: bindings}

// Load finds libcudnn.so.9 (see [Spec]), opens its sublibraries from the
// same folder (see [Sublibraries]), resolves the bindings and returns the
// library. Once it has succeeded, later calls return the same library;
// after a failure the next call searches again. The error is a
// *load.NotFoundError when no cuDNN 9 could be opened. It is safe for
// concurrent use.
func Load() (*load.Library, error) {
	l, err := lib.Load()
	if err == nil {
		preloadSublibraries(l)
	}
	return l, err
}

// preloadSublibraries opens the sublibraries found next to l's file; one
// that is missing or fails is left to the shim, which reports it at the
// first call that needs it (CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED).
func preloadSublibraries(l *load.Library) {
	if !strings.Contains(l.Path, "/") {
		return
	}
	dir := filepath.Dir(l.Path)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for _, so := range Sublibraries {
		p := filepath.Join(dir, so)
		if _, err := os.Stat(p); err != nil {
			continue
		}
		_, _ = purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	}
}

// Library returns the loaded library, or nil before [Load] succeeded.
func Library() *load.Library { return lib.Library() }

// call returns [ErrNotLoaded] before [Load] succeeded; else it calls c,
// which calls the C function fn, and turns the status into an error.
func call(fn string, c func() Status) error {
	if !lib.Ready() {
		return ErrNotLoaded
	}
	return check(fn, c())
}

// DataType is a cudnnDataType_t.
type DataType int32

// Data types (cudnnDataType_t).
const (
	DataFloat    DataType = 0 // CUDNN_DATA_FLOAT
	DataDouble   DataType = 1 // CUDNN_DATA_DOUBLE
	DataHalf     DataType = 2 // CUDNN_DATA_HALF
	DataInt8     DataType = 3 // CUDNN_DATA_INT8
	DataInt32    DataType = 4 // CUDNN_DATA_INT32
	DataBFloat16 DataType = 9 // CUDNN_DATA_BFLOAT16
)

// TensorFormat is a cudnnTensorFormat_t.
type TensorFormat int32

// Tensor formats (cudnnTensorFormat_t).
const (
	FormatNCHW TensorFormat = 0 // CUDNN_TENSOR_NCHW
	FormatNHWC TensorFormat = 1 // CUDNN_TENSOR_NHWC: channels last
)

// MathType is a cudnnMathType_t.
type MathType int32

// Math types (cudnnMathType_t).
const (
	DefaultMath                 MathType = 0 // CUDNN_DEFAULT_MATH: tensor cores allowed, TF32 for float32
	TensorOpMath                MathType = 1 // CUDNN_TENSOR_OP_MATH
	TensorOpMathAllowConversion MathType = 2 // CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION
	FMAMath                     MathType = 3 // CUDNN_FMA_MATH: no tensor cores, no TF32
)

// NanPropagation is a cudnnNanPropagation_t.
type NanPropagation int32

// NaN propagation (cudnnNanPropagation_t).
const (
	NotPropagateNaN NanPropagation = 0 // CUDNN_NOT_PROPAGATE_NAN
	PropagateNaN    NanPropagation = 1 // CUDNN_PROPAGATE_NAN
)

// ConvMode is a cudnnConvolutionMode_t.
type ConvMode int32

// Convolution modes (cudnnConvolutionMode_t).
const (
	Convolution      ConvMode = 0 // CUDNN_CONVOLUTION: the filter flipped
	CrossCorrelation ConvMode = 1 // CUDNN_CROSS_CORRELATION: what deep-learning libraries call convolution
)

// Determinism is a cudnnDeterminism_t.
type Determinism int32

// Determinism (cudnnDeterminism_t).
const (
	NonDeterministic Determinism = 0 // CUDNN_NON_DETERMINISTIC
	Deterministic    Determinism = 1 // CUDNN_DETERMINISTIC
)

// FwdAlgo is a cudnnConvolutionFwdAlgo_t.
type FwdAlgo int32

// FwdAlgoCount is CUDNN_CONVOLUTION_FWD_ALGO_COUNT, the number of forward
// algorithms (0 IMPLICIT_GEMM ... 7 WINOGRAD_NONFUSED).
const FwdAlgoCount = 8

// Forward algorithms that the backend names.
const (
	FwdAlgoImplicitGemm        FwdAlgo = 0 // CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM
	FwdAlgoImplicitPrecompGemm FwdAlgo = 1 // CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM
)

// BwdDataAlgo is a cudnnConvolutionBwdDataAlgo_t.
type BwdDataAlgo int32

// BwdDataAlgoCount is CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT.
const BwdDataAlgoCount = 6

// BwdFilterAlgo is a cudnnConvolutionBwdFilterAlgo_t.
type BwdFilterAlgo int32

// BwdFilterAlgoCount is CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT.
const BwdFilterAlgoCount = 7

// ActivationMode is a cudnnActivationMode_t.
type ActivationMode int32

// Activation modes (cudnnActivationMode_t) that the backend uses.
const (
	ActivationReLU     ActivationMode = 1 // CUDNN_ACTIVATION_RELU
	ActivationIdentity ActivationMode = 5 // CUDNN_ACTIVATION_IDENTITY
)

// PoolingMode is a cudnnPoolingMode_t.
type PoolingMode int32

// Pooling modes (cudnnPoolingMode_t).
const (
	PoolingMax               PoolingMode = 0 // CUDNN_POOLING_MAX
	PoolingAvgIncludePadding PoolingMode = 1 // CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
	PoolingAvgExcludePadding PoolingMode = 2 // CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING
	PoolingMaxDeterministic  PoolingMode = 3 // CUDNN_POOLING_MAX_DETERMINISTIC
)

// BatchNormMode is a cudnnBatchNormMode_t.
type BatchNormMode int32

// Batch normalization modes (cudnnBatchNormMode_t).
const (
	BatchNormPerActivation     BatchNormMode = 0 // CUDNN_BATCHNORM_PER_ACTIVATION
	BatchNormSpatial           BatchNormMode = 1 // CUDNN_BATCHNORM_SPATIAL: per channel, over N, H and W
	BatchNormSpatialPersistent BatchNormMode = 2 // CUDNN_BATCHNORM_SPATIAL_PERSISTENT: faster, for NHWC
)

// Handle is a cudnnHandle_t.
type Handle uintptr

// TensorDesc is a cudnnTensorDescriptor_t.
type TensorDesc uintptr

// FilterDesc is a cudnnFilterDescriptor_t.
type FilterDesc uintptr

// ConvDesc is a cudnnConvolutionDescriptor_t.
type ConvDesc uintptr

// ActivationDesc is a cudnnActivationDescriptor_t.
type ActivationDesc uintptr

// PoolingDesc is a cudnnPoolingDescriptor_t.
type PoolingDesc uintptr

// sizeofAlgoPerf is the size of cudnnConvolutionFwdAlgoPerf_t,
// cudnnConvolutionBwdDataAlgoPerf_t and cudnnConvolutionBwdFilterAlgoPerf_t
// (cudnn_cnn.h), which share one layout.
const sizeofAlgoPerf = 48

// AlgoPerf is one result of an algorithm search or heuristic query: the
// layout of cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionBwdDataAlgoPerf_t
// and cudnnConvolutionBwdFilterAlgoPerf_t alike. Algo holds a [FwdAlgo],
// [BwdDataAlgo] or [BwdFilterAlgo] by the call that filled it.
type AlgoPerf struct {
	Algo        int32       // offset 0: the algorithm
	Status      Status      // offset 4: CUDNN_STATUS_SUCCESS for a usable result
	Time        float32     // offset 8: milliseconds measured (searches only; -1 from heuristics)
	_           [4]byte     // offset 12: padding
	Memory      uint64      // offset 16: bytes of workspace it needs
	Determinism Determinism // offset 24
	MathType    MathType    // offset 28: the math type to set on the descriptor for it
	Reserved    [3]int32    // offset 32
	_           [4]byte     // offset 44: padding to 8 bytes
}

var (
	_ [unsafe.Sizeof(AlgoPerf{}) - sizeofAlgoPerf]struct{}
	_ [sizeofAlgoPerf - unsafe.Sizeof(AlgoPerf{})]struct{}
)
