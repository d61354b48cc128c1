package cuda

import (
	"fmt"
	"math"
	"runtime"
	"unsafe"

	"github.com/ebitengine/purego"
)

// ModuleLoadData loads a module image (a CUBIN, a fatbin, or PTX ending in
// a NUL byte) into the current context. It calls cuModuleLoadData, which
// reads image only during the call. The module must be unloaded with
// [ModuleUnload]. PTX newer than the driver fails with
// [ErrUnsupportedPTXVersion]; a CUBIN for another architecture with
// [ErrNoBinaryForGPU] or [ErrInvalidImage].
func ModuleLoadData(image []byte) (Module, error) {
	if !driver.Ready() {
		return 0, ErrNotLoaded
	}
	if len(image) == 0 {
		return 0, &Error{Code: ErrInvalidImage.Code, Name: ErrInvalidImage.Name, Func: "cuModuleLoadData", Desc: "empty image"}
	}
	var m Module
	err := call("cuModuleLoadData", func() Result { return cuModuleLoadData(&m, unsafe.Pointer(&image[0])) })
	return m, err
}

// ModuleUnload unloads a module; its functions become invalid. It calls
// cuModuleUnload.
func ModuleUnload(m Module) error {
	return call("cuModuleUnload", func() Result { return cuModuleUnload(m) })
}

// ModuleGetFunction returns the kernel named name (its extern "C" name, or
// its mangled name) in module m. It calls cuModuleGetFunction; a missing
// name fails with [ErrNotFound].
func ModuleGetFunction(m Module, name string) (Function, error) {
	var f Function
	err := call("cuModuleGetFunction", func() Result { return cuModuleGetFunction(&f, m, name) })
	return f, err
}

// FuncGetAttribute returns one attribute of a kernel (registers, shared
// memory, ...). It calls cuFuncGetAttribute.
func FuncGetAttribute(attr FunctionAttribute, f Function) (int, error) {
	var v int32
	err := call("cuFuncGetAttribute", func() Result { return cuFuncGetAttribute(&v, attr, f) })
	return int(v), err
}

// KernelArgs holds the arguments of a kernel launch in the form
// cuLaunchKernel takes (an array of pointers to the values), in pinned Go
// memory that C may read. Each argument occupies one 8-byte slot, so
// arguments are scalars and device pointers of at most 8 bytes; structs
// passed by value are not supported. Values are stored little-endian
// (amd64, arm64), so a 4-byte argument is read from the slot's first bytes.
//
// A KernelArgs may be reused across launches (Reset, then add again); it
// is not safe for concurrent use. Call Free when done with it to drop the
// pins (the garbage collector cannot free it while pinned).
type KernelArgs struct {
	vals   []uint64
	ptrs   []uintptr
	n      int
	over   bool
	pinner runtime.Pinner
}

// NewKernelArgs returns an empty argument list with room for capacity
// arguments.
func NewKernelArgs(capacity int) *KernelArgs {
	a := &KernelArgs{vals: make([]uint64, capacity), ptrs: make([]uintptr, capacity)}
	if capacity > 0 {
		a.pinner.Pin(&a.vals[0])
		a.pinner.Pin(&a.ptrs[0])
		for i := range a.vals {
			a.ptrs[i] = uintptr(unsafe.Pointer(&a.vals[i]))
		}
	}
	return a
}

func (a *KernelArgs) add(v uint64) *KernelArgs {
	if a.n == len(a.vals) {
		a.over = true
		return a
	}
	a.vals[a.n] = v
	a.n++
	return a
}

// Ptr appends a device pointer argument and returns a for chaining.
func (a *KernelArgs) Ptr(p DevicePtr) *KernelArgs { return a.add(uint64(p)) }

// Uint64 appends an unsigned long long (or size_t) argument.
func (a *KernelArgs) Uint64(v uint64) *KernelArgs { return a.add(v) }

// Int64 appends a long long argument.
func (a *KernelArgs) Int64(v int64) *KernelArgs { return a.add(uint64(v)) }

// Uint32 appends an unsigned int argument.
func (a *KernelArgs) Uint32(v uint32) *KernelArgs { return a.add(uint64(v)) }

// Int32 appends an int argument.
func (a *KernelArgs) Int32(v int32) *KernelArgs { return a.add(uint64(uint32(v))) }

// Float32 appends a float argument.
func (a *KernelArgs) Float32(v float32) *KernelArgs { return a.add(uint64(math.Float32bits(v))) }

// Float64 appends a double argument.
func (a *KernelArgs) Float64(v float64) *KernelArgs { return a.add(math.Float64bits(v)) }

// Len returns the number of arguments added since the last Reset.
func (a *KernelArgs) Len() int { return a.n }

// Reset empties the list for reuse.
func (a *KernelArgs) Reset() { a.n, a.over = 0, false }

// Free unpins the memory; the KernelArgs must not be used afterwards.
func (a *KernelArgs) Free() { a.pinner.Unpin(); a.vals, a.ptrs, a.n = nil, nil, 0 }

// LaunchKernel queues kernel f on stream s with the given grid and block
// shapes, sharedMemBytes of dynamic shared memory and the arguments in
// args (nil for none). It calls cuLaunchKernel through purego.SyscallN.
// Launch errors (bad shape, too many resources) are returned here; faults
// while the kernel runs surface at a later synchronisation.
func LaunchKernel(f Function, grid, block Dim3, sharedMemBytes uint32, s Stream, args *KernelArgs) error {
	if !driver.Ready() {
		return ErrNotLoaded
	}
	var params unsafe.Pointer
	if args != nil {
		if args.over {
			return fmt.Errorf("cuda: cuLaunchKernel: more kernel arguments than the KernelArgs capacity %d", len(args.vals))
		}
		if args.n > 0 {
			params = unsafe.Pointer(&args.ptrs[0])
		}
	}
	err := call("cuLaunchKernel", func() Result {
		return result(purego.SyscallN(addrLaunchKernel, uintptr(f),
			uintptr(grid.X), uintptr(grid.Y), uintptr(grid.Z),
			uintptr(block.X), uintptr(block.Y), uintptr(block.Z),
			uintptr(sharedMemBytes), uintptr(s), uintptr(params), 0))
	})
	runtime.KeepAlive(args)
	return err
}
