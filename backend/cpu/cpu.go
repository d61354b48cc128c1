package cpu

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/internal/units"
	"github.com/vramgo/vram/memory"
)

func init() { backend.Register(&Backend{}) }

var (
	_ backend.Backend    = (*Backend)(nil)
	_ backend.Device     = (*Device)(nil)
	_ backend.HostBuffer = (*Buffer)(nil)
)

// Backend is the "cpu" device kind. It has exactly one device, index 0. The
// zero value is ready to use; the package registers one in init.
type Backend struct{}

// theDevice is the one CPU device; it holds no state, so every Backend
// hands out the same one.
var theDevice = &Device{}

// Name returns "cpu".
func (*Backend) Name() string { return "cpu" }

// DeviceCount returns 1.
func (*Backend) DeviceCount() int { return 1 }

// Device returns the CPU device for index 0 and an error for any other
// index.
func (*Backend) Device(index int) (backend.Device, error) {
	if index != 0 {
		return nil, fmt.Errorf("cpu: no device %d (the cpu backend has only device 0)", index)
	}
	return theDevice, nil
}

// Device is the CPU device. Its buffers live in host memory and its kernels
// run synchronously on the calling goroutine, fanning out to worker
// goroutines for large inputs. It is safe for concurrent use.
type Device struct{}

// Buffer is a block of host memory returned by [Device.Alloc], aligned to
// 8 bytes.
type Buffer struct {
	words []uint64 // the allocation, keeping the memory 8-byte aligned
	bytes []byte   // words seen as bytes, exactly the requested length
	// abandoned is set by [Device.Abandon]: the garbage collector, not
	// Free, gives the bytes back to the limit.
	abandoned bool
}

// Bytes returns the size of the buffer in bytes, as requested from Alloc.
func (b *Buffer) Bytes() int64 { return int64(len(b.bytes)) }

// Host returns the buffer's memory. It is nil after the buffer is freed.
func (b *Buffer) Host() []byte { return b.bytes }

// maxAlloc bounds a single allocation, so that an absurd size is an error
// rather than a runtime crash.
const maxAlloc = 1 << 48

// machineMemory is the machine's RAM and swap, read once: no single buffer
// can be larger, and asking Go for one ends the process with a fatal
// error that no recover catches.
var machineMemory = sync.OnceValue(hostMemory)

// Alloc returns a zeroed host buffer of nbytes bytes. The stream is
// ignored. A buffer larger than the machine's RAM and swap is an error
// wrapping [memory.ErrTooLarge]; one that would take the bytes of live
// buffers past the limit ([Options.MemoryLimit]) is an
// [*OutOfMemoryError]. Freeing a buffer gives its bytes back.
func (*Device) Alloc(nbytes int64, _ backend.Stream, _ string) (backend.Buffer, error) {
	if nbytes < 0 {
		return nil, fmt.Errorf("cpu: alloc of a negative size (%d bytes)", nbytes)
	}
	if nbytes > maxAlloc {
		return nil, fmt.Errorf("cpu: alloc of %d bytes is too large: %w", nbytes, memory.ErrTooLarge)
	}
	if m := machineMemory(); m > 0 && nbytes > m {
		return nil, fmt.Errorf("cpu: alloc of %s is more than this machine's memory (%s of RAM and swap): %w",
			units.Bytes(nbytes), units.Bytes(m), memory.ErrTooLarge)
	}
	if nbytes == 0 {
		return &Buffer{bytes: []byte{}}, nil
	}
	if err := host.take(nbytes); err != nil {
		return nil, err
	}
	words := make([]uint64, (nbytes+7)/8)
	bytes := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), nbytes)
	return &Buffer{words: words, bytes: bytes}, nil
}

// RecordStream does nothing: the CPU's work is done when queued, so no
// stream is ever still using a buffer.
func (*Device) RecordStream(backend.Buffer, backend.Stream) {}

// Free drops the device's hold on b and gives its bytes back to the limit
// ([Options.MemoryLimit]); the garbage collector reclaims the memory once
// nothing else refers to it. Using b afterwards is an error; freeing it
// again does nothing.
func (*Device) Free(b backend.Buffer, _ backend.Stream) {
	if cb, ok := b.(*Buffer); ok && cb != nil {
		if n := len(cb.bytes); n > 0 && !cb.abandoned {
			host.give(int64(n))
		}
		cb.words, cb.bytes = nil, nil
	}
}

// CopyFromHost copies src, the raw little-endian elements of dst's dtype,
// into the contiguous view dst.
func (*Device) CopyFromHost(st backend.Stream, dst backend.View, src []byte) error {
	if err := begin(st, "copy from host", backend.CheckHostCopy(dst, len(src))); err != nil {
		return err
	}
	o, err := resolve("copy from host", dst)
	if err != nil {
		return err
	}
	n := len(src)
	if n == 0 {
		return nil
	}
	start := o.off * dst.DType.Size()
	copy(o.raw[start:start+n], src)
	return nil
}

// CopyToHost copies the contiguous view src into dst, which must hold
// exactly src.NumElements() elements of src's dtype.
func (*Device) CopyToHost(st backend.Stream, dst []byte, src backend.View) error {
	if err := begin(st, "copy to host", backend.CheckHostCopy(src, len(dst))); err != nil {
		return err
	}
	o, err := resolve("copy to host", src)
	if err != nil {
		return err
	}
	n := len(dst)
	if n == 0 {
		return nil
	}
	start := o.off * src.DType.Size()
	copy(dst, o.raw[start:start+n])
	return nil
}

// operand is a view resolved against host memory.
type operand struct {
	dt      backend.DType
	raw     []byte // the whole buffer
	shape   []int
	strides []int
	off     int // element offset of the view's first element
	konst   bool
	value   float64 // the value of a constant operand (konst)
}

// size returns the number of elements of o.
func (o *operand) size() int { return backend.NumElements(o.shape) }

// errFreed is returned for views of freed buffers.
var errFreed = errors.New("buffer was freed")

// resolve checks that v is a well-formed view of a host buffer whose
// elements all lie inside the buffer, and returns it as an operand. Views
// with no elements are not checked against the buffer.
func resolve(what string, v backend.View) (*operand, error) {
	if !v.DType.Valid() {
		return nil, fmt.Errorf("cpu: %s: invalid dtype %v", what, v.DType)
	}
	if len(v.Strides) != len(v.Shape) {
		return nil, fmt.Errorf("cpu: %s: view has %d strides for %d dimensions", what, len(v.Strides), len(v.Shape))
	}
	o := &operand{dt: v.DType, shape: v.Shape, strides: v.Strides, off: v.Offset}
	last := v.Offset // offset of the last element
	for i, d := range v.Shape {
		if d < 0 || v.Strides[i] < 0 {
			return nil, fmt.Errorf("cpu: %s: negative size or stride in shape %v, strides %v", what, v.Shape, v.Strides)
		}
		if d > 0 {
			last += (d - 1) * v.Strides[i]
		}
	}
	if backend.NumElements(v.Shape) == 0 {
		return o, nil
	}
	if v.Buf == nil {
		return nil, fmt.Errorf("cpu: %s: view has no buffer", what)
	}
	hb, ok := v.Buf.(backend.HostBuffer)
	if !ok {
		return nil, fmt.Errorf("cpu: %s: buffer of type %T is not in host memory", what, v.Buf)
	}
	o.raw = hb.Host()
	if o.raw == nil {
		if cb, ok := v.Buf.(*Buffer); ok && cb.words == nil {
			return nil, fmt.Errorf("cpu: %s: %w", what, errFreed)
		}
	}
	size := v.DType.Size()
	if v.Offset < 0 || (last+1)*size > len(o.raw) {
		return nil, fmt.Errorf("cpu: %s: view (offset %d, shape %v, strides %v) reaches element %d of a buffer of %d %s elements",
			what, v.Offset, v.Shape, v.Strides, last, len(o.raw)/size, v.DType)
	}
	if uintptr(unsafe.Pointer(unsafe.SliceData(o.raw)))%uintptr(size) != 0 {
		return nil, fmt.Errorf("cpu: %s: buffer memory is not aligned for %s", what, v.DType)
	}
	return o, nil
}

// resolveAll resolves several views.
func resolveAll(what string, vs ...backend.View) ([]*operand, error) {
	ops := make([]*operand, len(vs))
	for i, v := range vs {
		o, err := resolve(what, v)
		if err != nil {
			return nil, err
		}
		ops[i] = o
	}
	return ops, nil
}

// begin is the start of every kernel what: it checks the stream st and
// returns check, the verdict of package backend's argument check for the
// kernel, with the backend's name and what in front.
func begin(st backend.Stream, what string, check error) error {
	if err := checkStream(st); err != nil {
		return err
	}
	if check != nil {
		return fmt.Errorf("cpu: %s: %w", what, check)
	}
	return nil
}
