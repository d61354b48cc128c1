package cuda

import (
	"fmt"

	"github.com/vramgo/vram/native/cuda"
)

// sticky reports whether a driver error leaves the context unusable: a
// kernel fault, after which every later call in the context fails too.
func sticky(r cuda.Result) bool {
	switch r {
	case 700, // CUDA_ERROR_ILLEGAL_ADDRESS
		702, // CUDA_ERROR_LAUNCH_TIMEOUT
		710, // CUDA_ERROR_ASSERT
		714, // CUDA_ERROR_HARDWARE_STACK_ERROR
		715, // CUDA_ERROR_ILLEGAL_INSTRUCTION
		716, // CUDA_ERROR_MISALIGNED_ADDRESS
		717, // CUDA_ERROR_INVALID_ADDRESS_SPACE
		718, // CUDA_ERROR_INVALID_PC
		719: // CUDA_ERROR_LAUNCH_FAILED
		return true
	}
	return false
}

// ContextLostError says that a kernel failed asynchronously with a sticky
// error (an illegal address, say): the driver has given up the device's
// context, and every later operation on the device fails with this error.
// Only a new process can use the GPU again. The failing kernel is not known:
// the fault surfaced at a later synchronisation or launch.
type ContextLostError struct {
	Device int   // the device's index
	Err    error // the driver error that revealed the fault (a *cuda.Error)
}

// Error explains the loss and what to do.
func (e *ContextLostError) Error() string {
	return fmt.Sprintf("cuda: cuda:%d: an earlier kernel failed asynchronously (%v); the CUDA context is lost, "+
		"so every later operation on this device fails: restart the process (run with CUDA_LAUNCH_BLOCKING=1 "+
		"or synchronize after each op to find the kernel)", e.Device, e.Err)
}

// Unwrap returns the driver error.
func (e *ContextLostError) Unwrap() error { return e.Err }

// Kernel error codes, as kernels/common.cuh writes them.
const (
	codeGatherIndex  = 1
	codeScatterIndex = 2
	codeIntDivZero   = 3
)

// KernelError is an error that a kernel found in its inputs and reported
// through the device's error words: an index out of range in Gather or
// ScatterAdd, or an integer division by zero. Kernels run asynchronously,
// so it is returned by the next Synchronize (or by a copy to the host),
// not by the op that launched the kernel. The context stays usable. A
// Gather or a division that failed left its output partly written; a
// ScatterAdd that failed left its destination untouched.
type KernelError struct {
	Device int   // the device's index
	Code   int   // what went wrong (1 gather index, 2 scatter-add index, 3 integer division by zero)
	Value  int64 // the first bad index, or the dividend
	Bound  int64 // the size of the indexed axis
}

// Error describes the error.
func (e *KernelError) Error() string {
	switch e.Code {
	case codeGatherIndex:
		return fmt.Sprintf("cuda: cuda:%d: gather: index %d is out of range for an axis of size %d (reported at synchronisation)", e.Device, e.Value, e.Bound)
	case codeScatterIndex:
		return fmt.Sprintf("cuda: cuda:%d: scatter-add: index %d is out of range for an axis of size %d (reported at synchronisation; the destination is unchanged)", e.Device, e.Value, e.Bound)
	case codeIntDivZero:
		return fmt.Sprintf("cuda: cuda:%d: integer division by zero (reported at synchronisation)", e.Device)
	}
	return fmt.Sprintf("cuda: cuda:%d: kernel error code %d (value %d, bound %d)", e.Device, e.Code, e.Value, e.Bound)
}
