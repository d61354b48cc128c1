package cudnn

import (
	"runtime"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/vramgo/vram/native/cuda"
)

// The backend (graph) API of cuDNN 9 (cudnn_graph.h): opaque descriptors,
// made with [BackendCreateDescriptor], described attribute by attribute
// with [BackendSetAttribute] and sealed with [BackendFinalize]; an
// operation graph of them is ranked by engine heuristics into engine
// configurations, one of which becomes an execution plan that
// [BackendExecute] runs on a variant pack (the device pointers of the
// graph's tensors and the workspace). This is the API that
// cudnn-frontend, and through it PyTorch, calls; its engines include
// kernels that the legacy cudnnConvolution* calls never pick.
//
// The typed setters (SetAttrInt64s, SetAttrDescriptors, ...) pass Go
// values of the C width that the attribute type names; the enums are in
// graph_enums.go.

// BackendDescriptor is a cudnnBackendDescriptor_t.
type BackendDescriptor uintptr

// BackendCreateDescriptor creates a backend descriptor of type t. It
// calls cudnnBackendCreateDescriptor. Destroy it with
// [BackendDestroyDescriptor].
func BackendCreateDescriptor(t DescriptorType) (BackendDescriptor, error) {
	var d BackendDescriptor
	err := call("cudnnBackendCreateDescriptor", func() Status {
		return sysStatus(purego.SyscallN(addrBackendCreateDescriptor, uintptr(t), uintptr(unsafe.Pointer(&d))))
	})
	return d, err
}

// BackendDestroyDescriptor destroys a backend descriptor. It calls
// cudnnBackendDestroyDescriptor.
func BackendDestroyDescriptor(d BackendDescriptor) error {
	return call("cudnnBackendDestroyDescriptor", func() Status { return sysStatus(purego.SyscallN(addrBackendDestroyDescriptor, uintptr(d))) })
}

// BackendFinalize validates a descriptor's attributes and seals it. It
// calls cudnnBackendFinalize.
func BackendFinalize(d BackendDescriptor) error {
	return call("cudnnBackendFinalize", func() Status { return sysStatus(purego.SyscallN(addrBackendFinalize, uintptr(d))) })
}

// BackendSetAttribute sets attribute name of d to count elements of type
// t at elems, which must point to at least count values of t's C type
// (or be nil for a count of 0). It calls cudnnBackendSetAttribute. The
// typed setters below are safer.
func BackendSetAttribute(d BackendDescriptor, name AttrName, t AttrType, count int64, elems unsafe.Pointer) error {
	return call("cudnnBackendSetAttribute", func() Status {
		if count < 0 || (count > 0 && elems == nil) {
			return ErrBadParam.Code
		}
		return sysStatus(purego.SyscallN(addrBackendSetAttribute, uintptr(d), uintptr(name), uintptr(t), uintptr(count), uintptr(elems)))
	})
}

// BackendGetAttribute reads up to requested elements of type t of
// attribute name of d into elems, which must have room for them, and
// returns how many the attribute holds. A requested count of 0 with nil
// elems asks only for the count. It calls cudnnBackendGetAttribute.
func BackendGetAttribute(d BackendDescriptor, name AttrName, t AttrType, requested int64, elems unsafe.Pointer) (int64, error) {
	var n int64
	err := call("cudnnBackendGetAttribute", func() Status {
		if requested < 0 || (requested > 0 && elems == nil) {
			return ErrBadParam.Code
		}
		return cudnnBackendGetAttribute(d, name, t, requested, &n, elems)
	})
	return n, err
}

// BackendExecute runs an execution plan on a variant pack, on the
// handle's stream. It calls cudnnBackendExecute.
func BackendExecute(h Handle, plan, variantPack BackendDescriptor) error {
	return call("cudnnBackendExecute", func() Status {
		return sysStatus(purego.SyscallN(addrBackendExecute, uintptr(h), uintptr(plan), uintptr(variantPack)))
	})
}

// setSlice sets attribute name of d to the elements of vals, of attribute
// type t; an empty vals sets none.
func setSlice[T any](d BackendDescriptor, name AttrName, t AttrType, vals []T) error {
	var p unsafe.Pointer
	if len(vals) > 0 {
		p = unsafe.Pointer(&vals[0])
	}
	err := BackendSetAttribute(d, name, t, int64(len(vals)), p)
	runtime.KeepAlive(vals)
	return err
}

// SetAttrInt64s sets an attribute of type CUDNN_TYPE_INT64 (sizes,
// strides, unique ids, alignments) to vals.
func SetAttrInt64s(d BackendDescriptor, name AttrName, vals ...int64) error {
	return setSlice(d, name, TypeInt64, vals)
}

// SetAttrDescriptors sets an attribute of type
// CUDNN_TYPE_BACKEND_DESCRIPTOR (the tensors of an operation, the
// operations of a graph) to ds.
func SetAttrDescriptors(d BackendDescriptor, name AttrName, ds ...BackendDescriptor) error {
	return setSlice(d, name, TypeBackendDesc, ds)
}

// SetAttrDataType sets an attribute of type CUDNN_TYPE_DATA_TYPE.
func SetAttrDataType(d BackendDescriptor, name AttrName, t DataType) error {
	return setSlice(d, name, TypeDataType, []DataType{t})
}

// SetAttrConvMode sets an attribute of type CUDNN_TYPE_CONVOLUTION_MODE.
func SetAttrConvMode(d BackendDescriptor, name AttrName, m ConvMode) error {
	return setSlice(d, name, TypeConvolutionMode, []ConvMode{m})
}

// SetAttrHeurMode sets an attribute of type CUDNN_TYPE_HEUR_MODE.
func SetAttrHeurMode(d BackendDescriptor, name AttrName, m HeurMode) error {
	return setSlice(d, name, TypeHeurMode, []HeurMode{m})
}

// SetAttrHandle sets an attribute of type CUDNN_TYPE_HANDLE.
func SetAttrHandle(d BackendDescriptor, name AttrName, h Handle) error {
	return setSlice(d, name, TypeHandle, []Handle{h})
}

// SetAttrFloat sets an attribute of type CUDNN_TYPE_FLOAT (the alpha and
// beta of an operation whose compute type is not double).
func SetAttrFloat(d BackendDescriptor, name AttrName, v float32) error {
	return setSlice(d, name, TypeFloat, []float32{v})
}

// SetAttrBool sets an attribute of type CUDNN_TYPE_BOOLEAN (a C bool, one
// byte).
func SetAttrBool(d BackendDescriptor, name AttrName, v bool) error {
	return setSlice(d, name, TypeBoolean, []bool{v})
}

// SetAttrPointers sets an attribute of type CUDNN_TYPE_VOID_PTR (the data
// pointers and the workspace of a variant pack) to ps; a zero pointer is
// C's NULL.
func SetAttrPointers(d BackendDescriptor, name AttrName, ps ...cuda.DevicePtr) error {
	return setSlice(d, name, TypeVoidPtr, ps)
}

// GetAttrInt64 reads an attribute of type CUDNN_TYPE_INT64 that holds one
// value (a workspace size).
func GetAttrInt64(d BackendDescriptor, name AttrName) (int64, error) {
	var v int64
	_, err := BackendGetAttribute(d, name, TypeInt64, 1, unsafe.Pointer(&v))
	return v, err
}

// GetAttrDescriptors fills ds, descriptors already created with the type
// that the attribute holds (engine configurations for the results of
// engine heuristics, an engine for an engine configuration's), from an
// attribute of type CUDNN_TYPE_BACKEND_DESCRIPTOR, and returns how many
// the attribute holds; with an empty ds it returns only the count.
func GetAttrDescriptors(d BackendDescriptor, name AttrName, ds []BackendDescriptor) (int64, error) {
	var p unsafe.Pointer
	if len(ds) > 0 {
		p = unsafe.Pointer(&ds[0])
	}
	n, err := BackendGetAttribute(d, name, TypeBackendDesc, int64(len(ds)), p)
	runtime.KeepAlive(ds)
	return n, err
}

// GetAttrNumericalNotes returns an engine's numerical notes (attribute
// CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, type CUDNN_TYPE_NUMERICAL_NOTE).
func GetAttrNumericalNotes(engine BackendDescriptor) ([]NumericalNote, error) {
	notes := make([]NumericalNote, NumericalNoteCount)
	n, err := BackendGetAttribute(engine, AttrEngineNumericalNote, TypeNumericalNote, int64(len(notes)), unsafe.Pointer(&notes[0]))
	if err != nil {
		return nil, err
	}
	return notes[:min(int(n), len(notes))], nil
}
