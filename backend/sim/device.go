package sim

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/vramgo/vram/backend"
	"github.com/vramgo/vram/memory"
)

// Device is one simulated GPU: vram's caching allocator over a
// [memory.SimArena] of the device's capacity, and the CPU's kernels over
// host copies of the data (none in shape-only mode).
type Device struct {
	host      backend.Device // the CPU device: kernels and copies
	index     int
	capacity  int64
	arena     *memory.SimArena
	alloc     *memory.Allocator
	info      *deviceInfo
	st        streams
	shapeOnly atomic.Bool
	live      atomic.Int64 // buffers not yet freed
	capturing atomic.Int32 // streams being captured (graph.go); changed under qmu
	graphs    sync.Map     // private pool -> *Graph, while the graph lives
}

func newDevice(host backend.Device, index int, capacity int64, cfg memory.Config, shapeOnly bool) (*Device, error) {
	arena := memory.NewSimArena(capacity)
	if err := cfg.Check(arena); err != nil {
		return nil, err
	}
	info := &deviceInfo{SimArena: arena, index: index}
	d := &Device{host: host, index: index, capacity: capacity, arena: arena, info: info}
	d.initStreams()
	d.alloc = memory.New(arena, cfg, memory.WithDevice(index), memory.WithDeviceInfo(info), memory.WithEvents(eventSource{d}))
	d.shapeOnly.Store(shapeOnly)
	return d, nil
}

// deviceInfo is what a simulated device tells its allocator's
// out-of-memory errors: its arena's free memory and other processes, and
// the other simulated devices with their free memory.
type deviceInfo struct {
	*memory.SimArena
	index int
	peers []*Device // every device of the backend, this one included; set once before use
}

var (
	_ memory.DeviceInfo = (*deviceInfo)(nil)
	_ memory.PeerInfo   = (*deviceInfo)(nil)
)

// Peers returns the backend's other simulated devices and their memory.
func (i *deviceInfo) Peers() ([]memory.DeviceMemory, error) {
	var out []memory.DeviceMemory
	for _, p := range i.peers {
		if p.index == i.index {
			continue
		}
		m, err := p.arena.MemoryInfo()
		if err != nil {
			return nil, err
		}
		m.Device = p.name()
		out = append(out, m)
	}
	return out, nil
}

// MemoryInfo reports the device's arena under the device's name.
func (i *deviceInfo) MemoryInfo() (memory.DeviceMemory, error) {
	m, err := i.SimArena.MemoryInfo()
	m.Device = simName(i.index)
	return m, err
}

// setPeers tells each device of devs about the others, for the
// out-of-memory errors of their allocators.
func setPeers(devs []*Device) {
	for _, d := range devs {
		d.info.peers = devs
	}
}

// Allocator returns the device's caching allocator.
func (d *Device) Allocator() *memory.Allocator { return d.alloc }

// Arena returns the simulated device memory under the allocator.
func (d *Device) Arena() *memory.SimArena { return d.arena }

// Capacity returns the device's memory size in bytes.
func (d *Device) Capacity() int64 { return d.capacity }

// ShapeOnly reports whether the device keeps no data.
func (d *Device) ShapeOnly() bool { return d.shapeOnly.Load() }

// SetShapeOnly switches shape-only mode, in which tensors have shapes and
// take memory from the allocator but hold no data: operations only compute
// shapes, so that a model far larger than the host's memory can be checked
// for fit. Reading data from such a device is an error. The mode can change
// only while the device holds no buffers.
func (d *Device) SetShapeOnly(on bool) error {
	if n := d.live.Load(); n != 0 {
		return fmt.Errorf("sim: cannot switch sim:%d to shape-only=%v while it holds %d buffers", d.index, on, n)
	}
	d.shapeOnly.Store(on)
	return nil
}

// buffer is a block from the allocator and, unless the device is
// shape-only, host memory for its data.
type buffer struct {
	block *memory.Block
	data  backend.Buffer // nil in shape-only mode
	bytes int64
	freed atomic.Bool

	stream *Stream // the stream it was allocated for
	// Guarded by qmu: the position of the last queued kernel of each
	// stream that uses the buffer and has not run yet, and the streams
	// given to RecordStream.
	uses     map[*Stream]int64
	recorded []*Stream
}

func (b *buffer) Bytes() int64 { return b.bytes }

// Host returns the data, or nil on a shape-only device.
func (b *buffer) Host() []byte {
	if b.data == nil {
		return nil
	}
	return b.data.(backend.HostBuffer).Host()
}

// Addr returns the buffer's simulated device address.
func (b *buffer) Addr() uint64 { return b.block.Addr() }

// Alloc allocates nbytes through the caching allocator; out of memory is a
// *memory.OutOfMemoryError.
func (d *Device) Alloc(nbytes int64, s backend.Stream, region string) (backend.Buffer, error) {
	if nbytes < 0 {
		return nil, fmt.Errorf("sim: negative allocation size %d", nbytes)
	}
	st, err := d.stream("alloc", s)
	if err != nil {
		return nil, err
	}
	key := st.id
	if d.capturing.Load() > 0 {
		qmu.Lock()
		if c := st.capture; c != nil {
			key = c.pool // a capture's memory is the graph's (graph.go)
		}
		qmu.Unlock()
	}
	return d.newBuffer(nbytes, st, key, region)
}

// newBuffer allocates a buffer of nbytes for stream st from the
// allocator's pool key, with host memory for its data unless the device is
// shape-only.
func (d *Device) newBuffer(nbytes int64, st *Stream, key memory.Stream, region string) (*buffer, error) {
	blk, err := d.alloc.Alloc(nbytes, key, region)
	if err != nil {
		return nil, err
	}
	b := &buffer{block: blk, bytes: nbytes, stream: st}
	if !d.shapeOnly.Load() {
		data, err := d.host.Alloc(nbytes, d.hostStream(), region)
		if err != nil {
			d.alloc.Free(blk)
			return nil, err
		}
		b.data = data
	}
	d.live.Add(1)
	return b, nil
}

// Free returns a buffer to the allocator's cache. It panics on a buffer
// that this backend did not allocate or that was already freed: a second
// free would hand the allocator a block that may belong to another buffer
// by then.
func (d *Device) Free(bb backend.Buffer, s backend.Stream) {
	b, ok := bb.(*buffer)
	if !ok || b == nil {
		panic(fmt.Sprintf("sim: Free of %T, not a buffer of sim:%d", bb, d.index))
	}
	if b.freed.Swap(true) {
		panic(fmt.Sprintf("sim: buffer of %d bytes on sim:%d freed twice", b.bytes, d.index))
	}
	// Work still queued on a stream keeps the data; freeing it while
	// another stream uses it, unrecorded, is the hazard a GPU would not
	// report. A zero-byte buffer has no memory that could be reused under
	// that work, so it is no hazard.
	qmu.Lock()
	pending := false
	for u, pos := range b.uses {
		if u.doneN >= pos {
			continue
		}
		pending = true
		if b.bytes != 0 && u != b.stream && !slices.Contains(b.recorded, u) && d.st.hazard == nil {
			d.st.hazard = &HazardError{Device: d.index, Bytes: b.bytes, AllocStream: int(b.stream.id), UseStream: int(u.id)}
		}
	}
	qmu.Unlock()
	switch {
	case b.data == nil:
	case pending:
		// The queued work keeps the data: the host's memory limit gets
		// its bytes back when the collector reclaims it.
		if a, ok := d.host.(interface{ Abandon(backend.Buffer) }); ok {
			a.Abandon(b.data)
		}
	case !(memory.IsPrivatePool(b.block.Stream()) && d.keepFreed(b)):
		d.host.Free(b.data, d.host.DefaultStream())
	}
	d.alloc.Free(b.block)
	d.live.Add(-1)
}

// RecordStream marks b as used by work queued on s, so that the allocator
// keeps its memory from reuse until s has run past the free.
func (d *Device) RecordStream(bb backend.Buffer, s backend.Stream) {
	b, ok := bb.(*buffer)
	st, err := d.stream("record stream", s)
	if !ok || err != nil || b.freed.Load() {
		return
	}
	qmu.Lock()
	if !slices.Contains(b.recorded, st) {
		b.recorded = append(b.recorded, st)
	}
	qmu.Unlock()
	d.alloc.RecordStream(b.block, st.id)
}

var _ memory.DeviceInfo = (*Device)(nil)

// MemoryInfo reports the simulated device's memory: this process holds
// what the allocator reserved; other processes are those set with
// Arena().SetOtherProcesses. Reserved is 0 (see [memory.DeviceInfo]).
func (d *Device) MemoryInfo() (memory.DeviceMemory, error) { return d.info.MemoryInfo() }

// name returns the device as vram names it, "sim:N".
func (d *Device) name() string { return simName(d.index) }

// simName returns "sim:N".
func simName(index int) string { return fmt.Sprintf("sim:%d", index) }
