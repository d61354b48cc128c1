// Package cudnn binds cuDNN 9 (libcudnn.so.9), NVIDIA's library of deep
// neural network primitives, with purego and without cgo: the legacy
// descriptor API for 2-D convolutions (forward, backward data, backward
// filter, bias gradient, fused bias and activation), the algorithm
// heuristics and timed searches, pooling, activations and batch
// normalization. The API is deprecated in cuDNN 9 but still shipped by it.
// It also binds cuDNN 9's backend (graph) API (graph.go, with the enums of
// cudnn_graph.h in graph_enums.go): descriptors made with
// [BackendCreateDescriptor], set attribute by attribute, finalized, and an
// execution plan run by [BackendExecute], which is what PyTorch's
// convolutions call through cudnn-frontend.
//
// Bindings only: each function calls the C function its doc comment names
// and returns an error for a failed cudnnStatus_t. Start with [Load] and
// [Create], describe tensors with [CreateTensorDescriptor] and
// [SetTensor4dDescriptorEx], filters with [SetFilter4dDescriptor] and the
// convolution with [SetConvolution2dDescriptor]; pick an algorithm with
// [GetConvolutionForwardAlgorithm_v7] (heuristics) or
// [FindConvolutionForwardAlgorithmEx] (timed), and run
// [ConvolutionForward].
//
// # Libraries
//
// In cuDNN 9, libcudnn.so.9 is a shim that opens its sublibraries
// (libcudnn_ops, libcudnn_cnn, libcudnn_graph, the engines) by name at
// their first use. [Load] opens those that lie next to the shim first, so
// that a cuDNN found in a Python environment (nvidia/cudnn/lib, as
// PyTorch's wheels install it) works without LD_LIBRARY_PATH.
//
// # Threads and contexts
//
// A handle belongs to the CUDA context that was current when it was
// created, and every call must run with that context current on the
// calling OS thread (see cuda.Context.Do). A handle must not be used by two
// goroutines at once: its stream is state ([SetStream]). Device pointers
// and streams are the types of package cuda.
//
// # Errors
//
// A failed call returns an *[Error] with the numeric status, its name and
// the C function; errors.Is matches the sentinels by code, and the
// category sentinels ([ErrBadParam], [ErrNotSupported], [ErrInternalError],
// [ErrExecutionFailed]) by category. Calls made before the library is
// loaded return [ErrNotLoaded]. bindings.tsv lists every symbol with the
// widths of its C arguments and the size of every struct, and a CPU test
// holds the Go declarations to it.
package cudnn
