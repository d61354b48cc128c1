package cudnn

import (
	"unsafe"

	"github.com/vramgo/vram/native/cuda"
)

// GetVersion returns cuDNN's version as major*10000 + minor*100 + patch
// (90600 for 9.6.0). It calls cudnnGetVersion.
func GetVersion() (int, error) {
	if !lib.Ready() {
		return 0, ErrNotLoaded
	}
	return int(cudnnGetVersion()), nil
}

// ErrorString returns cuDNN's description of s, as cudnnGetErrorString
// gives it; before [Load] it returns s's name.
func ErrorString(s Status) string {
	if !lib.Ready() {
		return s.Name()
	}
	return cudnnGetErrorString(s)
}

// Create creates a cuDNN handle in the current CUDA context. It calls
// cudnnCreate. Destroy it with [Destroy].
func Create() (Handle, error) {
	var h Handle
	err := call("cudnnCreate", func() Status { return cudnnCreate(&h) })
	return h, err
}

// Destroy destroys a handle. It calls cudnnDestroy.
func Destroy(h Handle) error {
	return call("cudnnDestroy", func() Status { return cudnnDestroy(h) })
}

// SetStream makes the handle queue its work on s. It calls cudnnSetStream.
func SetStream(h Handle, s cuda.Stream) error {
	return call("cudnnSetStream", func() Status { return cudnnSetStream(h, s) })
}

// CreateTensorDescriptor creates a tensor descriptor. It calls
// cudnnCreateTensorDescriptor. Destroy it with [DestroyTensorDescriptor].
func CreateTensorDescriptor() (TensorDesc, error) {
	var d TensorDesc
	err := call("cudnnCreateTensorDescriptor", func() Status { return cudnnCreateTensorDescriptor(&d) })
	return d, err
}

// SetTensor4dDescriptorEx describes an [n, c, h, w] tensor of type t with
// the given strides in elements. It calls cudnnSetTensor4dDescriptorEx.
func SetTensor4dDescriptorEx(d TensorDesc, t DataType, n, c, h, w, ns, cs, hs, ws int) error {
	return call("cudnnSetTensor4dDescriptorEx", func() Status {
		return cudnnSetTensor4dDescriptorEx(d, t, int32(n), int32(c), int32(h), int32(w), int32(ns), int32(cs), int32(hs), int32(ws))
	})
}

// SetTensorNdDescriptor describes a tensor of type t with the given sizes
// and strides (3 to 8 dimensions, of equal length). It calls
// cudnnSetTensorNdDescriptor; dims and strides of different lengths, or
// empty, fail with [ErrBadParam] without calling it.
func SetTensorNdDescriptor(d TensorDesc, t DataType, dims, strides []int32) error {
	return call("cudnnSetTensorNdDescriptor", func() Status {
		if len(dims) == 0 || len(dims) != len(strides) {
			return ErrBadParam.Code
		}
		return cudnnSetTensorNdDescriptor(d, t, int32(len(dims)), &dims[0], &strides[0])
	})
}

// DestroyTensorDescriptor destroys a tensor descriptor. It calls
// cudnnDestroyTensorDescriptor.
func DestroyTensorDescriptor(d TensorDesc) error {
	return call("cudnnDestroyTensorDescriptor", func() Status { return cudnnDestroyTensorDescriptor(d) })
}

// CreateFilterDescriptor creates a filter descriptor. It calls
// cudnnCreateFilterDescriptor. Destroy it with [DestroyFilterDescriptor].
func CreateFilterDescriptor() (FilterDesc, error) {
	var d FilterDesc
	err := call("cudnnCreateFilterDescriptor", func() Status { return cudnnCreateFilterDescriptor(&d) })
	return d, err
}

// SetFilter4dDescriptor describes a [k, c, h, w] filter of type t, packed
// in format f (NCHW: contiguous; NHWC: channels last). It calls
// cudnnSetFilter4dDescriptor.
func SetFilter4dDescriptor(d FilterDesc, t DataType, f TensorFormat, k, c, h, w int) error {
	return call("cudnnSetFilter4dDescriptor", func() Status {
		return cudnnSetFilter4dDescriptor(d, t, f, int32(k), int32(c), int32(h), int32(w))
	})
}

// DestroyFilterDescriptor destroys a filter descriptor. It calls
// cudnnDestroyFilterDescriptor.
func DestroyFilterDescriptor(d FilterDesc) error {
	return call("cudnnDestroyFilterDescriptor", func() Status { return cudnnDestroyFilterDescriptor(d) })
}

// CreateConvolutionDescriptor creates a convolution descriptor. It calls
// cudnnCreateConvolutionDescriptor. Destroy it with
// [DestroyConvolutionDescriptor].
func CreateConvolutionDescriptor() (ConvDesc, error) {
	var d ConvDesc
	err := call("cudnnCreateConvolutionDescriptor", func() Status { return cudnnCreateConvolutionDescriptor(&d) })
	return d, err
}

// SetConvolution2dDescriptor sets the padding, strides and dilations
// (height first), the mode and the compute type. It calls
// cudnnSetConvolution2dDescriptor.
func SetConvolution2dDescriptor(d ConvDesc, padH, padW, strideH, strideW, dilH, dilW int, mode ConvMode, compute DataType) error {
	return call("cudnnSetConvolution2dDescriptor", func() Status {
		return cudnnSetConvolution2dDescriptor(d, int32(padH), int32(padW), int32(strideH), int32(strideW),
			int32(dilH), int32(dilW), mode, compute)
	})
}

// SetConvolutionGroupCount sets the number of groups. It calls
// cudnnSetConvolutionGroupCount.
func SetConvolutionGroupCount(d ConvDesc, groups int) error {
	return call("cudnnSetConvolutionGroupCount", func() Status { return cudnnSetConvolutionGroupCount(d, int32(groups)) })
}

// SetConvolutionMathType sets the math type. It calls
// cudnnSetConvolutionMathType.
func SetConvolutionMathType(d ConvDesc, m MathType) error {
	return call("cudnnSetConvolutionMathType", func() Status { return cudnnSetConvolutionMathType(d, m) })
}

// DestroyConvolutionDescriptor destroys a convolution descriptor. It calls
// cudnnDestroyConvolutionDescriptor.
func DestroyConvolutionDescriptor(d ConvDesc) error {
	return call("cudnnDestroyConvolutionDescriptor", func() Status { return cudnnDestroyConvolutionDescriptor(d) })
}

// perfArgs checks a result slice before a search or heuristic query.
func perfArgs(perf []AlgoPerf) (*AlgoPerf, bool) {
	if len(perf) == 0 {
		return nil, false
	}
	return &perf[0], true
}

// GetConvolutionForwardAlgorithm_v7 fills perf with the heuristic's
// forward algorithms, best first, and returns how many it wrote. It calls
// cudnnGetConvolutionForwardAlgorithm_v7; an empty perf fails with
// [ErrBadParam] without calling it.
func GetConvolutionForwardAlgorithm_v7(h Handle, x TensorDesc, w FilterDesc, c ConvDesc, y TensorDesc, perf []AlgoPerf) (int, error) {
	var n int32
	err := call("cudnnGetConvolutionForwardAlgorithm_v7", func() Status {
		p, ok := perfArgs(perf)
		if !ok {
			return ErrBadParam.Code
		}
		return cudnnGetConvolutionForwardAlgorithm_v7(h, x, w, c, y, int32(len(perf)), &n, p)
	})
	return int(n), err
}

// FindConvolutionForwardAlgorithmEx times the forward algorithms on the
// given buffers (y is overwritten) with at most wsBytes of workspace at
// ws, fills perf fastest first and returns how many it wrote. It calls
// cudnnFindConvolutionForwardAlgorithmEx; an empty perf fails with
// [ErrBadParam] without calling it.
func FindConvolutionForwardAlgorithmEx(h Handle, xd TensorDesc, x cuda.DevicePtr, wd FilterDesc, w cuda.DevicePtr,
	c ConvDesc, yd TensorDesc, y cuda.DevicePtr, perf []AlgoPerf, ws cuda.DevicePtr, wsBytes uint64) (int, error) {
	var n int32
	err := call("cudnnFindConvolutionForwardAlgorithmEx", func() Status {
		p, ok := perfArgs(perf)
		if !ok {
			return ErrBadParam.Code
		}
		return cudnnFindConvolutionForwardAlgorithmEx(h, xd, x, wd, w, c, yd, y, int32(len(perf)), &n, p, ws, wsBytes)
	})
	return int(n), err
}

// GetConvolutionForwardWorkspaceSize returns the bytes of workspace that
// algo needs. It calls cudnnGetConvolutionForwardWorkspaceSize.
func GetConvolutionForwardWorkspaceSize(h Handle, x TensorDesc, w FilterDesc, c ConvDesc, y TensorDesc, algo FwdAlgo) (uint64, error) {
	var size uint64
	err := call("cudnnGetConvolutionForwardWorkspaceSize", func() Status {
		return cudnnGetConvolutionForwardWorkspaceSize(h, x, w, c, y, algo, &size)
	})
	return size, err
}

// ConvolutionForward queues y = alpha·conv(x, w) + beta·y. alpha and beta
// point to host floats (doubles for double data). It calls
// cudnnConvolutionForward.
func ConvolutionForward(h Handle, alpha unsafe.Pointer, xd TensorDesc, x cuda.DevicePtr, wd FilterDesc, w cuda.DevicePtr,
	c ConvDesc, algo FwdAlgo, ws cuda.DevicePtr, wsBytes uint64, beta unsafe.Pointer, yd TensorDesc, y cuda.DevicePtr) error {
	return call("cudnnConvolutionForward", func() Status {
		return cudnnConvolutionForward(h, alpha, xd, x, wd, w, c, algo, ws, wsBytes, beta, yd, y)
	})
}

// ConvolutionBiasActivationForward queues y = act(alpha1·conv(x, w) +
// alpha2·z + bias). It calls cudnnConvolutionBiasActivationForward.
func ConvolutionBiasActivationForward(h Handle, alpha1 unsafe.Pointer, xd TensorDesc, x cuda.DevicePtr,
	wd FilterDesc, w cuda.DevicePtr, c ConvDesc, algo FwdAlgo, ws cuda.DevicePtr, wsBytes uint64,
	alpha2 unsafe.Pointer, zd TensorDesc, z cuda.DevicePtr, bd TensorDesc, b cuda.DevicePtr,
	act ActivationDesc, yd TensorDesc, y cuda.DevicePtr) error {
	return call("cudnnConvolutionBiasActivationForward", func() Status {
		return cudnnConvolutionBiasActivationForward(h, alpha1, xd, x, wd, w, c, algo, ws, wsBytes, alpha2, zd, z, bd, b, act, yd, y)
	})
}

// GetConvolutionBackwardDataAlgorithm_v7 is
// [GetConvolutionForwardAlgorithm_v7] for the data gradient. It calls
// cudnnGetConvolutionBackwardDataAlgorithm_v7.
func GetConvolutionBackwardDataAlgorithm_v7(h Handle, w FilterDesc, dy TensorDesc, c ConvDesc, dx TensorDesc, perf []AlgoPerf) (int, error) {
	var n int32
	err := call("cudnnGetConvolutionBackwardDataAlgorithm_v7", func() Status {
		p, ok := perfArgs(perf)
		if !ok {
			return ErrBadParam.Code
		}
		return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, w, dy, c, dx, int32(len(perf)), &n, p)
	})
	return int(n), err
}

// FindConvolutionBackwardDataAlgorithmEx is
// [FindConvolutionForwardAlgorithmEx] for the data gradient (dx is
// overwritten). It calls cudnnFindConvolutionBackwardDataAlgorithmEx.
func FindConvolutionBackwardDataAlgorithmEx(h Handle, wd FilterDesc, w cuda.DevicePtr, dyd TensorDesc, dy cuda.DevicePtr,
	c ConvDesc, dxd TensorDesc, dx cuda.DevicePtr, perf []AlgoPerf, ws cuda.DevicePtr, wsBytes uint64) (int, error) {
	var n int32
	err := call("cudnnFindConvolutionBackwardDataAlgorithmEx", func() Status {
		p, ok := perfArgs(perf)
		if !ok {
			return ErrBadParam.Code
		}
		return cudnnFindConvolutionBackwardDataAlgorithmEx(h, wd, w, dyd, dy, c, dxd, dx, int32(len(perf)), &n, p, ws, wsBytes)
	})
	return int(n), err
}

// GetConvolutionBackwardDataWorkspaceSize returns the bytes of workspace
// that algo needs. It calls cudnnGetConvolutionBackwardDataWorkspaceSize.
func GetConvolutionBackwardDataWorkspaceSize(h Handle, w FilterDesc, dy TensorDesc, c ConvDesc, dx TensorDesc, algo BwdDataAlgo) (uint64, error) {
	var size uint64
	err := call("cudnnGetConvolutionBackwardDataWorkspaceSize", func() Status {
		return cudnnGetConvolutionBackwardDataWorkspaceSize(h, w, dy, c, dx, algo, &size)
	})
	return size, err
}

// ConvolutionBackwardData queues dx = alpha·conv_backward_data(w, dy) +
// beta·dx. It calls cudnnConvolutionBackwardData.
func ConvolutionBackwardData(h Handle, alpha unsafe.Pointer, wd FilterDesc, w cuda.DevicePtr, dyd TensorDesc, dy cuda.DevicePtr,
	c ConvDesc, algo BwdDataAlgo, ws cuda.DevicePtr, wsBytes uint64, beta unsafe.Pointer, dxd TensorDesc, dx cuda.DevicePtr) error {
	return call("cudnnConvolutionBackwardData", func() Status {
		return cudnnConvolutionBackwardData(h, alpha, wd, w, dyd, dy, c, algo, ws, wsBytes, beta, dxd, dx)
	})
}

// GetConvolutionBackwardFilterAlgorithm_v7 is
// [GetConvolutionForwardAlgorithm_v7] for the filter gradient. It calls
// cudnnGetConvolutionBackwardFilterAlgorithm_v7.
func GetConvolutionBackwardFilterAlgorithm_v7(h Handle, x TensorDesc, dy TensorDesc, c ConvDesc, dw FilterDesc, perf []AlgoPerf) (int, error) {
	var n int32
	err := call("cudnnGetConvolutionBackwardFilterAlgorithm_v7", func() Status {
		p, ok := perfArgs(perf)
		if !ok {
			return ErrBadParam.Code
		}
		return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, x, dy, c, dw, int32(len(perf)), &n, p)
	})
	return int(n), err
}

// FindConvolutionBackwardFilterAlgorithmEx is
// [FindConvolutionForwardAlgorithmEx] for the filter gradient (dw is
// overwritten). It calls cudnnFindConvolutionBackwardFilterAlgorithmEx.
func FindConvolutionBackwardFilterAlgorithmEx(h Handle, xd TensorDesc, x cuda.DevicePtr, dyd TensorDesc, dy cuda.DevicePtr,
	c ConvDesc, dwd FilterDesc, dw cuda.DevicePtr, perf []AlgoPerf, ws cuda.DevicePtr, wsBytes uint64) (int, error) {
	var n int32
	err := call("cudnnFindConvolutionBackwardFilterAlgorithmEx", func() Status {
		p, ok := perfArgs(perf)
		if !ok {
			return ErrBadParam.Code
		}
		return cudnnFindConvolutionBackwardFilterAlgorithmEx(h, xd, x, dyd, dy, c, dwd, dw, int32(len(perf)), &n, p, ws, wsBytes)
	})
	return int(n), err
}

// GetConvolutionBackwardFilterWorkspaceSize returns the bytes of workspace
// that algo needs. It calls cudnnGetConvolutionBackwardFilterWorkspaceSize.
func GetConvolutionBackwardFilterWorkspaceSize(h Handle, x TensorDesc, dy TensorDesc, c ConvDesc, dw FilterDesc, algo BwdFilterAlgo) (uint64, error) {
	var size uint64
	err := call("cudnnGetConvolutionBackwardFilterWorkspaceSize", func() Status {
		return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, x, dy, c, dw, algo, &size)
	})
	return size, err
}

// ConvolutionBackwardFilter queues dw = alpha·conv_backward_filter(x, dy)
// + beta·dw. It calls cudnnConvolutionBackwardFilter.
func ConvolutionBackwardFilter(h Handle, alpha unsafe.Pointer, xd TensorDesc, x cuda.DevicePtr, dyd TensorDesc, dy cuda.DevicePtr,
	c ConvDesc, algo BwdFilterAlgo, ws cuda.DevicePtr, wsBytes uint64, beta unsafe.Pointer, dwd FilterDesc, dw cuda.DevicePtr) error {
	return call("cudnnConvolutionBackwardFilter", func() Status {
		return cudnnConvolutionBackwardFilter(h, alpha, xd, x, dyd, dy, c, algo, ws, wsBytes, beta, dwd, dw)
	})
}

// ConvolutionBackwardBias queues db = alpha·Σ dy (over N, H and W) +
// beta·db, db being a [1, C, 1, 1] tensor. It calls
// cudnnConvolutionBackwardBias.
func ConvolutionBackwardBias(h Handle, alpha unsafe.Pointer, dyd TensorDesc, dy cuda.DevicePtr,
	beta unsafe.Pointer, dbd TensorDesc, db cuda.DevicePtr) error {
	return call("cudnnConvolutionBackwardBias", func() Status {
		return cudnnConvolutionBackwardBias(h, alpha, dyd, dy, beta, dbd, db)
	})
}

// AddTensor queues c = alpha·a + beta·c, broadcasting a along its
// dimensions of size 1. It calls cudnnAddTensor.
func AddTensor(h Handle, alpha unsafe.Pointer, ad TensorDesc, a cuda.DevicePtr, beta unsafe.Pointer, cd TensorDesc, c cuda.DevicePtr) error {
	return call("cudnnAddTensor", func() Status { return cudnnAddTensor(h, alpha, ad, a, beta, cd, c) })
}

// CreateActivationDescriptor creates an activation descriptor. It calls
// cudnnCreateActivationDescriptor. Destroy it with
// [DestroyActivationDescriptor].
func CreateActivationDescriptor() (ActivationDesc, error) {
	var d ActivationDesc
	err := call("cudnnCreateActivationDescriptor", func() Status { return cudnnCreateActivationDescriptor(&d) })
	return d, err
}

// SetActivationDescriptor sets the activation's mode, NaN propagation and
// coefficient (the ceiling of a clipped ReLU, the alpha of an ELU). It
// calls cudnnSetActivationDescriptor.
func SetActivationDescriptor(d ActivationDesc, mode ActivationMode, nan NanPropagation, coef float64) error {
	return call("cudnnSetActivationDescriptor", func() Status { return cudnnSetActivationDescriptor(d, mode, nan, coef) })
}

// DestroyActivationDescriptor destroys an activation descriptor. It calls
// cudnnDestroyActivationDescriptor.
func DestroyActivationDescriptor(d ActivationDesc) error {
	return call("cudnnDestroyActivationDescriptor", func() Status { return cudnnDestroyActivationDescriptor(d) })
}

// ActivationForward queues y = alpha·act(x) + beta·y. It calls
// cudnnActivationForward.
func ActivationForward(h Handle, d ActivationDesc, alpha unsafe.Pointer, xd TensorDesc, x cuda.DevicePtr,
	beta unsafe.Pointer, yd TensorDesc, y cuda.DevicePtr) error {
	return call("cudnnActivationForward", func() Status { return cudnnActivationForward(h, d, alpha, xd, x, beta, yd, y) })
}

// CreatePoolingDescriptor creates a pooling descriptor. It calls
// cudnnCreatePoolingDescriptor. Destroy it with [DestroyPoolingDescriptor].
func CreatePoolingDescriptor() (PoolingDesc, error) {
	var d PoolingDesc
	err := call("cudnnCreatePoolingDescriptor", func() Status { return cudnnCreatePoolingDescriptor(&d) })
	return d, err
}

// SetPooling2dDescriptor sets the mode, NaN propagation, window, padding
// and strides (height first). It calls cudnnSetPooling2dDescriptor.
func SetPooling2dDescriptor(d PoolingDesc, mode PoolingMode, nan NanPropagation, winH, winW, padH, padW, strideH, strideW int) error {
	return call("cudnnSetPooling2dDescriptor", func() Status {
		return cudnnSetPooling2dDescriptor(d, mode, nan, int32(winH), int32(winW), int32(padH), int32(padW), int32(strideH), int32(strideW))
	})
}

// DestroyPoolingDescriptor destroys a pooling descriptor. It calls
// cudnnDestroyPoolingDescriptor.
func DestroyPoolingDescriptor(d PoolingDesc) error {
	return call("cudnnDestroyPoolingDescriptor", func() Status { return cudnnDestroyPoolingDescriptor(d) })
}

// PoolingForward queues y = alpha·pool(x) + beta·y. It calls
// cudnnPoolingForward.
func PoolingForward(h Handle, d PoolingDesc, alpha unsafe.Pointer, xd TensorDesc, x cuda.DevicePtr,
	beta unsafe.Pointer, yd TensorDesc, y cuda.DevicePtr) error {
	return call("cudnnPoolingForward", func() Status { return cudnnPoolingForward(h, d, alpha, xd, x, beta, yd, y) })
}

// PoolingBackward queues dx = alpha·pool_backward(y, dy, x) + beta·dx. It
// calls cudnnPoolingBackward.
func PoolingBackward(h Handle, d PoolingDesc, alpha unsafe.Pointer, yd TensorDesc, y cuda.DevicePtr,
	dyd TensorDesc, dy cuda.DevicePtr, xd TensorDesc, x cuda.DevicePtr, beta unsafe.Pointer,
	dxd TensorDesc, dx cuda.DevicePtr) error {
	return call("cudnnPoolingBackward", func() Status {
		return cudnnPoolingBackward(h, d, alpha, yd, y, dyd, dy, xd, x, beta, dxd, dx)
	})
}

// DeriveBNTensorDescriptor sets d to the descriptor of the per-channel
// tensors (scale, bias, statistics) of batch normalization over x in mode:
// [1, C, 1, 1] float for float, half and bfloat16 x. It calls
// cudnnDeriveBNTensorDescriptor.
func DeriveBNTensorDescriptor(d TensorDesc, x TensorDesc, mode BatchNormMode) error {
	return call("cudnnDeriveBNTensorDescriptor", func() Status { return cudnnDeriveBNTensorDescriptor(d, x, mode) })
}

// BatchNormalizationForwardTraining queues y = alpha·bn(x) + beta·y with
// the batch's statistics, updates the running mean and variance with
// factor (running = (1-factor)·running + factor·batch) and saves the mean
// and inverse standard deviation when saveMean and saveInvVar are not 0.
// It calls cudnnBatchNormalizationForwardTraining.
func BatchNormalizationForwardTraining(h Handle, mode BatchNormMode, alpha, beta unsafe.Pointer,
	xd TensorDesc, x cuda.DevicePtr, yd TensorDesc, y cuda.DevicePtr, bnd TensorDesc, scale, bias cuda.DevicePtr,
	factor float64, runMean, runVar cuda.DevicePtr, eps float64, saveMean, saveInvVar cuda.DevicePtr) error {
	return call("cudnnBatchNormalizationForwardTraining", func() Status {
		return cudnnBatchNormalizationForwardTraining(h, mode, alpha, beta, xd, x, yd, y, bnd, scale, bias,
			factor, runMean, runVar, eps, saveMean, saveInvVar)
	})
}

// BatchNormalizationForwardInference queues y = alpha·bn(x) + beta·y with
// the given mean and variance. It calls
// cudnnBatchNormalizationForwardInference.
func BatchNormalizationForwardInference(h Handle, mode BatchNormMode, alpha, beta unsafe.Pointer,
	xd TensorDesc, x cuda.DevicePtr, yd TensorDesc, y cuda.DevicePtr, bnd TensorDesc, scale, bias cuda.DevicePtr,
	mean, variance cuda.DevicePtr, eps float64) error {
	return call("cudnnBatchNormalizationForwardInference", func() Status {
		return cudnnBatchNormalizationForwardInference(h, mode, alpha, beta, xd, x, yd, y, bnd, scale, bias, mean, variance, eps)
	})
}

// BatchNormalizationBackward queues the gradients of batch normalization:
// dx (blended with alphaData and betaData) and dScale and dBias (with
// alphaParam and betaParam), from x, dy, scale and the statistics saved by
// the training forward pass. It calls cudnnBatchNormalizationBackward.
func BatchNormalizationBackward(h Handle, mode BatchNormMode, alphaData, betaData, alphaParam, betaParam unsafe.Pointer,
	xd TensorDesc, x cuda.DevicePtr, dyd TensorDesc, dy cuda.DevicePtr, dxd TensorDesc, dx cuda.DevicePtr,
	bnd TensorDesc, scale, dScale, dBias cuda.DevicePtr, eps float64, saveMean, saveInvVar cuda.DevicePtr) error {
	return call("cudnnBatchNormalizationBackward", func() Status {
		return cudnnBatchNormalizationBackward(h, mode, alphaData, betaData, alphaParam, betaParam, xd, x, dyd, dy, dxd, dx,
			bnd, scale, dScale, dBias, eps, saveMean, saveInvVar)
	})
}
