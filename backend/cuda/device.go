package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/memory"
	"github.com/vramgo/vram/native/cuda"
)

// Device is one GPU: its primary context, its default stream and the
// streams made by NewStream (see stream.go), and vram's caching allocator
// over the GPU's memory. It is safe for concurrent use.
type Device struct {
	index int
	dev   cuda.Device
	ctx   cuda.Context
	def   *Stream // the default stream
	name  string
	arch  int   // compute capability as major*10 + minor (90 on an H200)
	sms   int   // multiprocessors
	total int64 // bytes of device memory

	arena  memory.Arena
	alloc  *memory.Allocator
	events *eventSource

	lost atomic.Pointer[ContextLostError] // set once a sticky error killed the context

	// errWords are four int64 words in device memory where kernels report
	// index and division errors: code, value, bound, unused. armed says a
	// kernel that may write them ran since the last check.
	errWords cuda.DevicePtr
	armed    atomic.Bool

	capturing atomic.Int32 // streams being captured into graphs (graph.go)

	mods sync.Map // modKey -> *loadedModule

	argPool chan *cuda.KernelArgs

	stage stager // pinned staging buffers for large host copies

	blas blasState // cuBLASLt handle, workspace and plans
	dnn  dnnState  // cuDNN handle and descriptor caches (cudnn.go)

	peerMu sync.Mutex
	peers  map[int]bool // peer access enabled towards these devices

	prioLow, prioHigh int // the context's stream priorities (0 and -5 on an H200)

	pinMu      sync.Mutex
	pinPending []pendingPinned // freed pinned buffers waiting for their copies
}

// maxKernelArgs is the capacity of a KernelArgs: the most parameters a
// kernel takes (sgd_multi takes 8 + 4·sgdMax = 264).
const maxKernelArgs = 8 + 4*sgdMax

func openDevice(index int, cfg memory.Config) (*Device, error) {
	cd, err := cuda.DeviceGet(index)
	if err != nil {
		return nil, fmt.Errorf("cuda: cuda:%d: %w", index, err)
	}
	d := &Device{index: index, dev: cd, argPool: make(chan *cuda.KernelArgs, 16), peers: map[int]bool{}}
	if d.name, err = cuda.DeviceGetName(cd); err != nil {
		return nil, err
	}
	major, err1 := cuda.DeviceGetAttribute(cuda.AttrComputeCapabilityMajor, cd)
	minor, err2 := cuda.DeviceGetAttribute(cuda.AttrComputeCapabilityMinor, cd)
	sms, err3 := cuda.DeviceGetAttribute(cuda.AttrMultiprocessorCount, cd)
	vmm, err4 := cuda.DeviceGetAttribute(cuda.AttrVirtualMemoryManagementSupported, cd)
	total, err5 := cuda.DeviceTotalMem(cd)
	if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
		return nil, fmt.Errorf("cuda: cuda:%d: reading device attributes: %w", index, err)
	}
	d.arch, d.sms, d.total = major*10+minor, sms, int64(total)
	if d.ctx, err = cuda.DevicePrimaryCtxRetain(cd); err != nil {
		return nil, fmt.Errorf("cuda: cuda:%d: %w", index, err)
	}
	err = d.ctx.Do(func() error {
		var err error
		if d.prioLow, d.prioHigh, err = cuda.CtxGetStreamPriorityRange(); err != nil {
			return err
		}
		cs, err := cuda.StreamCreate(cuda.StreamNonBlocking)
		if err != nil {
			return err
		}
		d.def = newStream(d, cs, 0, true)
		if d.errWords, err = cuda.MemAlloc(32); err != nil {
			return err
		}
		return cuda.MemsetD8(d.errWords, 0, 32)
	})
	if err != nil {
		cuda.DevicePrimaryCtxRelease(cd)
		return nil, fmt.Errorf("cuda: cuda:%d: %w", index, err)
	}
	if vmm != 0 {
		va, err := newVirtualArena(d)
		if err != nil {
			return nil, fmt.Errorf("cuda: cuda:%d: %w", index, err)
		}
		d.arena = va
	} else {
		d.arena = &plainArena{d: d}
	}
	if err := cfg.Check(d.arena); err != nil {
		return nil, fmt.Errorf("cuda: cuda:%d: the allocator settings: %w", index, err) // a *memory.ConfigError, which names the key
	}
	d.events = &eventSource{d: d}
	d.alloc = memory.New(d.arena, cfg, memory.WithDevice(index), memory.WithEvents(d.events))
	return d, nil
}

// Index returns the device's ordinal.
func (d *Device) Index() int { return d.index }

// Name returns the GPU's product name, e.g. "NVIDIA H200".
func (d *Device) Name() string { return d.name }

// ComputeCapability returns the GPU's compute capability as major*10 +
// minor (90 for an H200): the sm_XY that kernels are compiled for.
func (d *Device) ComputeCapability() int { return d.arch }

// Multiprocessors returns the GPU's number of streaming multiprocessors.
func (d *Device) Multiprocessors() int { return d.sms }

// Allocator returns the device's caching allocator.
func (d *Device) Allocator() *memory.Allocator { return d.alloc }

// Context returns the device's primary context.
func (d *Device) Context() cuda.Context { return d.ctx }

// enter pins the calling goroutine to its OS thread and makes the device's
// context current there, for the driver calls that follow; exit undoes the
// pin. Every driver call of this package runs between the two. It fails
// fast once the context is lost.
//
// The pin is counted by the runtime, so enter may be nested (an op that
// allocates a temporary buffer enters again through the arena).
func (d *Device) enter() error {
	runtime.LockOSThread()
	if e := d.lost.Load(); e != nil {
		runtime.UnlockOSThread()
		return e
	}
	if err := cuda.CtxSetCurrent(d.ctx); err != nil {
		runtime.UnlockOSThread()
		return d.check(err)
	}
	return nil
}

func (d *Device) exit() { runtime.UnlockOSThread() }

// check returns err, and marks the device lost when err is a sticky error
// (the context cannot be used any more); it then returns the
// *ContextLostError.
func (d *Device) check(err error) error {
	if err == nil {
		return nil
	}
	var ce *cuda.Error
	if errors.As(err, &ce) && sticky(ce.Code) {
		lost := &ContextLostError{Device: d.index, Err: err}
		d.lost.CompareAndSwap(nil, lost)
		return d.lost.Load()
	}
	return err
}

// kernelErrorLocked reads the error words if a kernel that may have set
// them ran, clears them, and returns the error they hold. The stream must
// be synchronized and the context current.
func (d *Device) kernelErrorLocked() error {
	if !d.armed.Swap(false) {
		return nil
	}
	var w [4]int64
	if err := cuda.MemcpyDtoH(unsafe.Pointer(&w[0]), d.errWords, 32); err != nil {
		return d.check(err)
	}
	if w[0] == 0 {
		return nil
	}
	if err := cuda.MemsetD8(d.errWords, 0, 32); err != nil {
		return d.check(err)
	}
	return &KernelError{Device: d.index, Code: int(w[0]), Value: w[1], Bound: w[2]}
}

// Buffer is device memory from [Device.Alloc]: a block of the caching
// allocator.
type Buffer struct {
	block *memory.Block
	ptr   cuda.DevicePtr
	bytes int64
	dev   *Device
}

// Bytes returns the size asked for.
func (b *Buffer) Bytes() int64 { return b.bytes }

// Ptr returns the buffer's device address.
func (b *Buffer) Ptr() cuda.DevicePtr { return b.ptr }

// Alloc returns a buffer of nbytes from the caching allocator, for use on
// stream s (nil: the default stream), from that stream's pool. When the
// GPU has no room even after the allocator released its cache, the error
// is a *memory.OutOfMemoryError.
func (d *Device) Alloc(nbytes int64, s backend.Stream, region string) (backend.Buffer, error) {
	if nbytes < 0 {
		return nil, fmt.Errorf("cuda: cuda:%d: negative allocation size %d", d.index, nbytes)
	}
	if e := d.lost.Load(); e != nil {
		return nil, e
	}
	q, err := d.on(s)
	if err != nil {
		return nil, err
	}
	key := memory.Stream(q.stream)
	if c := q.st.capture.Load(); c != nil {
		key = c.pool // a capture's memory is the graph's (graph.go)
	}
	blk, err := d.alloc.Alloc(nbytes, key, region)
	if err != nil {
		return nil, err
	}
	return &Buffer{block: blk, ptr: cuda.DevicePtr(blk.Addr()), bytes: nbytes, dev: d}, nil
}

// Free returns b to the allocator's cache. Work already queued on the
// stream it was allocated for may still use it: the allocator hands it out
// again only for work queued after this call on that stream, or, for
// streams recorded with RecordStream, once their work is done.
func (d *Device) Free(b backend.Buffer, s backend.Stream) {
	cb, ok := b.(*Buffer)
	if !ok || cb.block == nil {
		return
	}
	d.alloc.Free(cb.block)
	cb.block, cb.ptr = nil, 0
}

// getArgs takes a KernelArgs from the device's pool.
func (d *Device) getArgs() *cuda.KernelArgs {
	select {
	case a := <-d.argPool:
		a.Reset()
		return a
	default:
		return cuda.NewKernelArgs(maxKernelArgs)
	}
}

// putArgs returns a KernelArgs to the pool, or unpins it when the pool is
// full (a pinned KernelArgs must never be dropped).
func (d *Device) putArgs(a *cuda.KernelArgs) {
	select {
	case d.argPool <- a:
	default:
		a.Free()
	}
}
