package cudnn

import (
	"unsafe"

	"github.com/vramgo/vram/native/cuda"
	"github.com/vramgo/vram/native/load"
)

// The C functions, declared with Go types of the C widths (enums int32,
// int int32, size_t uint64, handles, descriptors and pointers
// pointer-sized, double float64). Every one is exported by libcudnn.so.9,
// the shim that forwards to the sublibraries (libcudnn_ops, libcudnn_cnn).
var (
	cudnnGetVersion     func() uint64
	cudnnGetErrorString func(s Status) string
	cudnnCreate         func(h *Handle) Status
	cudnnDestroy        func(h Handle) Status
	cudnnSetStream      func(h Handle, s cuda.Stream) Status

	cudnnCreateTensorDescriptor  func(d *TensorDesc) Status
	cudnnSetTensor4dDescriptorEx func(d TensorDesc, t DataType, n, c, h, w, ns, cs, hs, ws int32) Status
	cudnnSetTensorNdDescriptor   func(d TensorDesc, t DataType, nbDims int32, dims, strides *int32) Status
	cudnnDestroyTensorDescriptor func(d TensorDesc) Status

	cudnnCreateFilterDescriptor  func(d *FilterDesc) Status
	cudnnSetFilter4dDescriptor   func(d FilterDesc, t DataType, f TensorFormat, k, c, h, w int32) Status
	cudnnDestroyFilterDescriptor func(d FilterDesc) Status

	cudnnCreateConvolutionDescriptor  func(d *ConvDesc) Status
	cudnnSetConvolution2dDescriptor   func(d ConvDesc, padH, padW, u, v, dilH, dilW int32, mode ConvMode, compute DataType) Status
	cudnnSetConvolutionGroupCount     func(d ConvDesc, groups int32) Status
	cudnnSetConvolutionMathType       func(d ConvDesc, m MathType) Status
	cudnnDestroyConvolutionDescriptor func(d ConvDesc) Status

	cudnnGetConvolutionForwardAlgorithm_v7 func(h Handle, x TensorDesc, w FilterDesc, c ConvDesc, y TensorDesc,
		requested int32, returned *int32, perf *AlgoPerf) Status
	cudnnFindConvolutionForwardAlgorithmEx func(h Handle, xd TensorDesc, x cuda.DevicePtr, wd FilterDesc, w cuda.DevicePtr,
		c ConvDesc, yd TensorDesc, y cuda.DevicePtr, requested int32, returned *int32, perf *AlgoPerf,
		ws cuda.DevicePtr, wsBytes uint64) Status
	cudnnGetConvolutionForwardWorkspaceSize func(h Handle, x TensorDesc, w FilterDesc, c ConvDesc, y TensorDesc,
		algo FwdAlgo, size *uint64) Status
	cudnnConvolutionForward func(h Handle, alpha unsafe.Pointer, xd TensorDesc, x cuda.DevicePtr, wd FilterDesc, w cuda.DevicePtr,
		c ConvDesc, algo FwdAlgo, ws cuda.DevicePtr, wsBytes uint64, beta unsafe.Pointer, yd TensorDesc, y cuda.DevicePtr) Status
	cudnnConvolutionBiasActivationForward func(h Handle, alpha1 unsafe.Pointer, xd TensorDesc, x cuda.DevicePtr,
		wd FilterDesc, w cuda.DevicePtr, c ConvDesc, algo FwdAlgo, ws cuda.DevicePtr, wsBytes uint64,
		alpha2 unsafe.Pointer, zd TensorDesc, z cuda.DevicePtr, bd TensorDesc, b cuda.DevicePtr,
		act ActivationDesc, yd TensorDesc, y cuda.DevicePtr) Status

	cudnnGetConvolutionBackwardDataAlgorithm_v7 func(h Handle, w FilterDesc, dy TensorDesc, c ConvDesc, dx TensorDesc,
		requested int32, returned *int32, perf *AlgoPerf) Status
	cudnnFindConvolutionBackwardDataAlgorithmEx func(h Handle, wd FilterDesc, w cuda.DevicePtr, dyd TensorDesc, dy cuda.DevicePtr,
		c ConvDesc, dxd TensorDesc, dx cuda.DevicePtr, requested int32, returned *int32, perf *AlgoPerf,
		ws cuda.DevicePtr, wsBytes uint64) Status
	cudnnGetConvolutionBackwardDataWorkspaceSize func(h Handle, w FilterDesc, dy TensorDesc, c ConvDesc, dx TensorDesc,
		algo BwdDataAlgo, size *uint64) Status
	cudnnConvolutionBackwardData func(h Handle, alpha unsafe.Pointer, wd FilterDesc, w cuda.DevicePtr, dyd TensorDesc, dy cuda.DevicePtr,
		c ConvDesc, algo BwdDataAlgo, ws cuda.DevicePtr, wsBytes uint64, beta unsafe.Pointer, dxd TensorDesc, dx cuda.DevicePtr) Status

	cudnnGetConvolutionBackwardFilterAlgorithm_v7 func(h Handle, x TensorDesc, dy TensorDesc, c ConvDesc, dw FilterDesc,
		requested int32, returned *int32, perf *AlgoPerf) Status
	cudnnFindConvolutionBackwardFilterAlgorithmEx func(h Handle, xd TensorDesc, x cuda.DevicePtr, dyd TensorDesc, dy cuda.DevicePtr,
		c ConvDesc, dwd FilterDesc, dw cuda.DevicePtr, requested int32, returned *int32, perf *AlgoPerf,
		ws cuda.DevicePtr, wsBytes uint64) Status
	cudnnGetConvolutionBackwardFilterWorkspaceSize func(h Handle, x TensorDesc, dy TensorDesc, c ConvDesc, dw FilterDesc,
		algo BwdFilterAlgo, size *uint64) Status
	cudnnConvolutionBackwardFilter func(h Handle, alpha unsafe.Pointer, xd TensorDesc, x cuda.DevicePtr, dyd TensorDesc, dy cuda.DevicePtr,
		c ConvDesc, algo BwdFilterAlgo, ws cuda.DevicePtr, wsBytes uint64, beta unsafe.Pointer, dwd FilterDesc, dw cuda.DevicePtr) Status
	cudnnConvolutionBackwardBias func(h Handle, alpha unsafe.Pointer, dyd TensorDesc, dy cuda.DevicePtr,
		beta unsafe.Pointer, dbd TensorDesc, db cuda.DevicePtr) Status

	cudnnAddTensor func(h Handle, alpha unsafe.Pointer, ad TensorDesc, a cuda.DevicePtr,
		beta unsafe.Pointer, cd TensorDesc, c cuda.DevicePtr) Status

	cudnnCreateActivationDescriptor  func(d *ActivationDesc) Status
	cudnnSetActivationDescriptor     func(d ActivationDesc, mode ActivationMode, nan NanPropagation, coef float64) Status
	cudnnDestroyActivationDescriptor func(d ActivationDesc) Status
	cudnnActivationForward           func(h Handle, d ActivationDesc, alpha unsafe.Pointer, xd TensorDesc, x cuda.DevicePtr,
		beta unsafe.Pointer, yd TensorDesc, y cuda.DevicePtr) Status

	cudnnCreatePoolingDescriptor func(d *PoolingDesc) Status
	cudnnSetPooling2dDescriptor  func(d PoolingDesc, mode PoolingMode, nan NanPropagation,
		winH, winW, padH, padW, strideH, strideW int32) Status
	cudnnDestroyPoolingDescriptor func(d PoolingDesc) Status
	cudnnPoolingForward           func(h Handle, d PoolingDesc, alpha unsafe.Pointer, xd TensorDesc, x cuda.DevicePtr,
		beta unsafe.Pointer, yd TensorDesc, y cuda.DevicePtr) Status
	cudnnPoolingBackward func(h Handle, d PoolingDesc, alpha unsafe.Pointer, yd TensorDesc, y cuda.DevicePtr,
		dyd TensorDesc, dy cuda.DevicePtr, xd TensorDesc, x cuda.DevicePtr, beta unsafe.Pointer,
		dxd TensorDesc, dx cuda.DevicePtr) Status

	cudnnDeriveBNTensorDescriptor          func(d TensorDesc, x TensorDesc, mode BatchNormMode) Status
	cudnnBatchNormalizationForwardTraining func(h Handle, mode BatchNormMode, alpha, beta unsafe.Pointer,
		xd TensorDesc, x cuda.DevicePtr, yd TensorDesc, y cuda.DevicePtr, bnd TensorDesc, scale, bias cuda.DevicePtr,
		factor float64, runMean, runVar cuda.DevicePtr, eps float64, saveMean, saveInvVar cuda.DevicePtr) Status
	cudnnBatchNormalizationForwardInference func(h Handle, mode BatchNormMode, alpha, beta unsafe.Pointer,
		xd TensorDesc, x cuda.DevicePtr, yd TensorDesc, y cuda.DevicePtr, bnd TensorDesc, scale, bias cuda.DevicePtr,
		mean, variance cuda.DevicePtr, eps float64) Status
	cudnnBatchNormalizationBackward func(h Handle, mode BatchNormMode, alphaData, betaData, alphaParam, betaParam unsafe.Pointer,
		xd TensorDesc, x cuda.DevicePtr, dyd TensorDesc, dy cuda.DevicePtr, dxd TensorDesc, dx cuda.DevicePtr,
		bnd TensorDesc, scale, dScale, dBias cuda.DevicePtr, eps float64, saveMean, saveInvVar cuda.DevicePtr) Status

	cudnnBackendGetAttribute func(d BackendDescriptor, name AttrName, t AttrType, requested int64, count *int64,
		elems unsafe.Pointer) Status
)

// The backend API's calls made for every convolution (a variant pack is
// built, executed and destroyed each time) go through purego.SyscallN with
// these addresses, without the reflection of a registered function. The
// sig* variables are never assigned: their types document the C
// signatures for bindings.tsv and its test.
var (
	addrBackendCreateDescriptor, addrBackendDestroyDescriptor, addrBackendFinalize uintptr
	addrBackendSetAttribute, addrBackendExecute                                    uintptr

	sigBackendCreateDescriptor  func(t DescriptorType, d *BackendDescriptor) Status
	sigBackendDestroyDescriptor func(d BackendDescriptor) Status
	sigBackendFinalize          func(d BackendDescriptor) Status
	sigBackendSetAttribute      func(d BackendDescriptor, name AttrName, t AttrType, count int64, elems unsafe.Pointer) Status
	sigBackendExecute           func(h Handle, plan, variantPack BackendDescriptor) Status
)

// sysStatus is the cudnnStatus_t of a call through purego.SyscallN: the low
// 32 bits of its first return value.
func sysStatus(r1, _, _ uintptr) Status { return Status(int32(r1)) }

var bindings = []load.Binding{
	{Lib: libName, Names: []string{"cudnnGetVersion"}, Fn: &cudnnGetVersion},
	{Lib: libName, Names: []string{"cudnnGetErrorString"}, Fn: &cudnnGetErrorString},
	{Lib: libName, Names: []string{"cudnnCreate"}, Fn: &cudnnCreate},
	{Lib: libName, Names: []string{"cudnnDestroy"}, Fn: &cudnnDestroy},
	{Lib: libName, Names: []string{"cudnnSetStream"}, Fn: &cudnnSetStream},
	{Lib: libName, Names: []string{"cudnnCreateTensorDescriptor"}, Fn: &cudnnCreateTensorDescriptor},
	{Lib: libName, Names: []string{"cudnnSetTensor4dDescriptorEx"}, Fn: &cudnnSetTensor4dDescriptorEx},
	{Lib: libName, Names: []string{"cudnnSetTensorNdDescriptor"}, Fn: &cudnnSetTensorNdDescriptor},
	{Lib: libName, Names: []string{"cudnnDestroyTensorDescriptor"}, Fn: &cudnnDestroyTensorDescriptor},
	{Lib: libName, Names: []string{"cudnnCreateFilterDescriptor"}, Fn: &cudnnCreateFilterDescriptor},
	{Lib: libName, Names: []string{"cudnnSetFilter4dDescriptor"}, Fn: &cudnnSetFilter4dDescriptor},
	{Lib: libName, Names: []string{"cudnnDestroyFilterDescriptor"}, Fn: &cudnnDestroyFilterDescriptor},
	{Lib: libName, Names: []string{"cudnnCreateConvolutionDescriptor"}, Fn: &cudnnCreateConvolutionDescriptor},
	{Lib: libName, Names: []string{"cudnnSetConvolution2dDescriptor"}, Fn: &cudnnSetConvolution2dDescriptor},
	{Lib: libName, Names: []string{"cudnnSetConvolutionGroupCount"}, Fn: &cudnnSetConvolutionGroupCount},
	{Lib: libName, Names: []string{"cudnnSetConvolutionMathType"}, Fn: &cudnnSetConvolutionMathType},
	{Lib: libName, Names: []string{"cudnnDestroyConvolutionDescriptor"}, Fn: &cudnnDestroyConvolutionDescriptor},
	{Lib: libName, Names: []string{"cudnnGetConvolutionForwardAlgorithm_v7"}, Fn: &cudnnGetConvolutionForwardAlgorithm_v7},
	{Lib: libName, Names: []string{"cudnnFindConvolutionForwardAlgorithmEx"}, Fn: &cudnnFindConvolutionForwardAlgorithmEx},
	{Lib: libName, Names: []string{"cudnnGetConvolutionForwardWorkspaceSize"}, Fn: &cudnnGetConvolutionForwardWorkspaceSize},
	{Lib: libName, Names: []string{"cudnnConvolutionForward"}, Fn: &cudnnConvolutionForward},
	{Lib: libName, Names: []string{"cudnnConvolutionBiasActivationForward"}, Fn: &cudnnConvolutionBiasActivationForward},
	{Lib: libName, Names: []string{"cudnnGetConvolutionBackwardDataAlgorithm_v7"}, Fn: &cudnnGetConvolutionBackwardDataAlgorithm_v7},
	{Lib: libName, Names: []string{"cudnnFindConvolutionBackwardDataAlgorithmEx"}, Fn: &cudnnFindConvolutionBackwardDataAlgorithmEx},
	{Lib: libName, Names: []string{"cudnnGetConvolutionBackwardDataWorkspaceSize"}, Fn: &cudnnGetConvolutionBackwardDataWorkspaceSize},
	{Lib: libName, Names: []string{"cudnnConvolutionBackwardData"}, Fn: &cudnnConvolutionBackwardData},
	{Lib: libName, Names: []string{"cudnnGetConvolutionBackwardFilterAlgorithm_v7"}, Fn: &cudnnGetConvolutionBackwardFilterAlgorithm_v7},
	{Lib: libName, Names: []string{"cudnnFindConvolutionBackwardFilterAlgorithmEx"}, Fn: &cudnnFindConvolutionBackwardFilterAlgorithmEx},
	{Lib: libName, Names: []string{"cudnnGetConvolutionBackwardFilterWorkspaceSize"}, Fn: &cudnnGetConvolutionBackwardFilterWorkspaceSize},
	{Lib: libName, Names: []string{"cudnnConvolutionBackwardFilter"}, Fn: &cudnnConvolutionBackwardFilter},
	{Lib: libName, Names: []string{"cudnnConvolutionBackwardBias"}, Fn: &cudnnConvolutionBackwardBias},
	{Lib: libName, Names: []string{"cudnnAddTensor"}, Fn: &cudnnAddTensor},
	{Lib: libName, Names: []string{"cudnnCreateActivationDescriptor"}, Fn: &cudnnCreateActivationDescriptor},
	{Lib: libName, Names: []string{"cudnnSetActivationDescriptor"}, Fn: &cudnnSetActivationDescriptor},
	{Lib: libName, Names: []string{"cudnnDestroyActivationDescriptor"}, Fn: &cudnnDestroyActivationDescriptor},
	{Lib: libName, Names: []string{"cudnnActivationForward"}, Fn: &cudnnActivationForward},
	{Lib: libName, Names: []string{"cudnnCreatePoolingDescriptor"}, Fn: &cudnnCreatePoolingDescriptor},
	{Lib: libName, Names: []string{"cudnnSetPooling2dDescriptor"}, Fn: &cudnnSetPooling2dDescriptor},
	{Lib: libName, Names: []string{"cudnnDestroyPoolingDescriptor"}, Fn: &cudnnDestroyPoolingDescriptor},
	{Lib: libName, Names: []string{"cudnnPoolingForward"}, Fn: &cudnnPoolingForward},
	{Lib: libName, Names: []string{"cudnnPoolingBackward"}, Fn: &cudnnPoolingBackward},
	{Lib: libName, Names: []string{"cudnnDeriveBNTensorDescriptor"}, Fn: &cudnnDeriveBNTensorDescriptor},
	{Lib: libName, Names: []string{"cudnnBatchNormalizationForwardTraining"}, Fn: &cudnnBatchNormalizationForwardTraining},
	{Lib: libName, Names: []string{"cudnnBatchNormalizationForwardInference"}, Fn: &cudnnBatchNormalizationForwardInference},
	{Lib: libName, Names: []string{"cudnnBatchNormalizationBackward"}, Fn: &cudnnBatchNormalizationBackward},
	{Lib: libName, Names: []string{"cudnnBackendCreateDescriptor"}, Fn: &sigBackendCreateDescriptor, Addr: &addrBackendCreateDescriptor},
	{Lib: libName, Names: []string{"cudnnBackendDestroyDescriptor"}, Fn: &sigBackendDestroyDescriptor, Addr: &addrBackendDestroyDescriptor},
	{Lib: libName, Names: []string{"cudnnBackendFinalize"}, Fn: &sigBackendFinalize, Addr: &addrBackendFinalize},
	{Lib: libName, Names: []string{"cudnnBackendSetAttribute"}, Fn: &sigBackendSetAttribute, Addr: &addrBackendSetAttribute},
	{Lib: libName, Names: []string{"cudnnBackendGetAttribute"}, Fn: &cudnnBackendGetAttribute},
	{Lib: libName, Names: []string{"cudnnBackendExecute"}, Fn: &sigBackendExecute, Addr: &addrBackendExecute},
}
