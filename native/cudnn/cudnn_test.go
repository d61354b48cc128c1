package cudnn

import (
	"errors"
	"fmt"
	"testing"
	"unsafe"

	"github.com/vramgo/vram/native/internal/bindtest"
)

func TestBindingTable(t *testing.T) {
	sz := unsafe.Sizeof(AlgoPerf{})
	bindtest.Table(t, bindings, map[string]uintptr{
		"cudnnConvolutionFwdAlgoPerf_t":       sz,
		"cudnnConvolutionBwdDataAlgoPerf_t":   sz,
		"cudnnConvolutionBwdFilterAlgoPerf_t": sz,
	})
}

// TestSymbolsNamed checks that every wrapper reports the C symbol of the
// binding it calls.
func TestSymbolsNamed(t *testing.T) {
	bindtest.Uses(t, bindings, map[string]string{"call": libName}, "call", "GetVersion", "ErrorString")
}

// TestNotLoaded checks that every wrapper fails with ErrNotLoaded, instead
// of calling through a nil function, before Load.
func TestNotLoaded(t *testing.T) {
	if lib.Ready() {
		t.Skip("cuDNN is loaded")
	}
	bindtest.NotLoaded(t, ErrNotLoaded, []any{
		GetVersion, Create, Destroy, SetStream,
		CreateTensorDescriptor, SetTensor4dDescriptorEx, SetTensorNdDescriptor, DestroyTensorDescriptor,
		CreateFilterDescriptor, SetFilter4dDescriptor, DestroyFilterDescriptor,
		CreateConvolutionDescriptor, SetConvolution2dDescriptor, SetConvolutionGroupCount,
		SetConvolutionMathType, DestroyConvolutionDescriptor,
		GetConvolutionForwardAlgorithm_v7, FindConvolutionForwardAlgorithmEx, GetConvolutionForwardWorkspaceSize,
		ConvolutionForward, ConvolutionBiasActivationForward,
		GetConvolutionBackwardDataAlgorithm_v7, FindConvolutionBackwardDataAlgorithmEx,
		GetConvolutionBackwardDataWorkspaceSize, ConvolutionBackwardData,
		GetConvolutionBackwardFilterAlgorithm_v7, FindConvolutionBackwardFilterAlgorithmEx,
		GetConvolutionBackwardFilterWorkspaceSize, ConvolutionBackwardFilter, ConvolutionBackwardBias,
		AddTensor, CreateActivationDescriptor, SetActivationDescriptor, DestroyActivationDescriptor,
		ActivationForward, CreatePoolingDescriptor, SetPooling2dDescriptor, DestroyPoolingDescriptor,
		PoolingForward, PoolingBackward, DeriveBNTensorDescriptor, BatchNormalizationForwardTraining,
		BatchNormalizationForwardInference, BatchNormalizationBackward,
		BackendCreateDescriptor, BackendDestroyDescriptor, BackendFinalize, BackendSetAttribute, BackendGetAttribute,
		BackendExecute, SetAttrInt64s, SetAttrDescriptors, SetAttrDataType, SetAttrConvMode, SetAttrHeurMode,
		SetAttrHandle, SetAttrFloat, SetAttrBool, SetAttrPointers, GetAttrInt64, GetAttrDescriptors, GetAttrNumericalNotes,
	}, "Load")
	if got := ErrorString(3000); got != "CUDNN_STATUS_NOT_SUPPORTED" {
		t.Errorf("ErrorString before Load = %q, want the status's name", got)
	}
	if Library() != nil {
		t.Error("Library before Load is not nil")
	}
}

// TestAlgoPerfLayout checks the field offsets against cudnn_cnn.h's
// cudnnConvolutionFwdAlgoPerf_t: enum, enum, float, size_t (8-aligned),
// enum, enum, int[3].
func TestAlgoPerfLayout(t *testing.T) {
	var p AlgoPerf
	for _, tc := range []struct {
		name      string
		got, want uintptr
	}{
		{"algo", unsafe.Offsetof(p.Algo), 0},
		{"status", unsafe.Offsetof(p.Status), 4},
		{"time", unsafe.Offsetof(p.Time), 8},
		{"memory", unsafe.Offsetof(p.Memory), 16},
		{"determinism", unsafe.Offsetof(p.Determinism), 24},
		{"mathType", unsafe.Offsetof(p.MathType), 28},
		{"reserved", unsafe.Offsetof(p.Reserved), 32},
		{"size", unsafe.Sizeof(p), 48},
	} {
		if tc.got != tc.want {
			t.Errorf("%s at %d, want %d", tc.name, tc.got, tc.want)
		}
	}
}

func TestErrors(t *testing.T) {
	bindtest.Errors[Status, *Error](t, "cudnn", check, StatusSuccess, ErrNotInitialized, false, []bindtest.ErrorCase[Status]{
		{Code: 3000, Name: "CUDNN_STATUS_NOT_SUPPORTED", Sentinel: ErrNotSupported},
		{Code: 3002, Name: "CUDNN_STATUS_NOT_SUPPORTED_SHAPE", Sentinel: ErrNotSupportedShape},
		{Code: 2000, Name: "CUDNN_STATUS_BAD_PARAM", Sentinel: ErrBadParam},
		{Code: 1008, Name: "CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED", Sentinel: ErrSublibraryLoading},
		{Code: 4000, Name: "CUDNN_STATUS_INTERNAL_ERROR", Sentinel: ErrInternalError},
		{Code: 4004, Name: "CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED", Sentinel: ErrDeviceAllocation},
		{Code: 5000, Name: "CUDNN_STATUS_EXECUTION_FAILED", Sentinel: ErrExecutionFailed},
		{Code: 9999, Name: "CUDNN_STATUS_9999"},
	})
	if got := check("cudnnConvolutionForward", 3002).Error(); got != "cudnn: cudnnConvolutionForward: CUDNN_STATUS_NOT_SUPPORTED_SHAPE (3002)" {
		t.Errorf("message %q", got)
	}
}

// TestCategories checks that the category sentinels match every code of
// their category and nothing else, and that specific sentinels match only
// their code.
func TestCategories(t *testing.T) {
	for _, tc := range []struct {
		code     Status
		sentinel *Error
		want     bool
	}{
		{3000, ErrNotSupported, true},
		{3002, ErrNotSupported, true},
		{3013, ErrNotSupported, true},
		{3999, ErrNotSupported, true},
		{2000, ErrNotSupported, false},
		{4000, ErrNotSupported, false},
		{2001, ErrBadParam, true},
		{2012, ErrBadParam, true},
		{3002, ErrBadParam, false},
		{4004, ErrInternalError, true},
		{5003, ErrExecutionFailed, true},
		{5003, ErrInternalError, false},
		{3003, ErrNotSupportedShape, false},
		{3000, ErrNotSupportedShape, false},
		{1008, ErrNotInitialized, false},
	} {
		err := fmt.Errorf("wrapped: %w", check("f", tc.code))
		if got := errors.Is(err, tc.sentinel); got != tc.want {
			t.Errorf("errors.Is(%v, %v) = %v, want %v", tc.code, tc.sentinel.Name, got, tc.want)
		}
	}
	if got := Status(3011).Category(); got != 3000 {
		t.Errorf("Category(3011) = %d", got)
	}
}

// TestStatusNamesUnique guards the checked-in table against copy slips.
func TestStatusNamesUnique(t *testing.T) {
	bindtest.Names(t, statusNames, "CUDNN_STATUS_")
	for code := range statusNames {
		if code != 0 && (code < 1000 || code > 5999) {
			t.Errorf("code %d is outside cuDNN 9's categories", code)
		}
	}
}

func TestSetTensorNdDescriptorChecksLengths(t *testing.T) {
	if !lib.Ready() {
		t.Skip("needs the library to reach the argument check")
	}
	err := SetTensorNdDescriptor(0, DataFloat, []int32{1, 2, 3}, []int32{6, 3})
	if !errors.Is(err, ErrBadParam) {
		t.Errorf("mismatched lengths: %v, want CUDNN_STATUS_BAD_PARAM", err)
	}
}
