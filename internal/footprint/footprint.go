// Package footprint checks, before a constructor of package nn or
// nn/models allocates anything, that the parameters it is about to make
// fit in the memory they would take: a count of layers or copies
// multiplies a layer's size, and a count wrong by orders of magnitude
// would otherwise allocate layer after layer until the memory ran out,
// the host's first, since every tensor holds some host memory wherever
// its data lives.
//
// The counts saturate at math.MaxInt64 rather than wrap, so a product of
// sizes that no int64 holds reads as more than any limit.
package footprint

import (
	"fmt"
	"math"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/backend/cpu"
	"github.com/vramgo/vram/internal/units"
)

// TensorHostBytes is a lower bound on the host memory that one parameter
// holds besides its data: the tensor, its storage and the buffer's
// bookkeeping. A layer of tiny parameters repeated often enough runs the
// host out of memory through this alone.
const TensorHostBytes = 128

// Mul returns a·b for a, b ≥ 0, or math.MaxInt64 when the product does
// not fit in an int64.
func Mul(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

// Add returns a+b for a, b ≥ 0, or math.MaxInt64 when the sum does not
// fit in an int64.
func Add(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// Footprint is what a constructor is about to allocate on one device:
// Tensors tensors of Bytes bytes of data in all.
type Footprint struct {
	Device  vram.Device
	Tensors int64
	Bytes   int64
}

// Of returns an empty Footprint on the device that opts name, and the
// dtype they name, as vram's factory functions read them: the last
// [vram.Device] and [vram.DType] among opts, else [vram.DefaultDevice]
// and [vram.Float32].
func Of(opts []vram.Option) (Footprint, vram.DType) {
	f := Footprint{Device: vram.DefaultDevice()}
	dt := vram.Float32
	for _, o := range opts {
		switch v := o.(type) {
		case vram.Device:
			f.Device = v
		case vram.DType:
			dt = v
		}
	}
	return f, dt
}

// Add counts n more tensors of shape's elements of dt, and returns f.
// Negative sizes count as 0: the constructors refuse them with their own
// errors.
func (f *Footprint) Add(n int64, dt vram.DType, shape ...int) *Footprint {
	bytes := int64(dt.Size())
	for _, d := range shape {
		bytes = Mul(bytes, int64(max(d, 0)))
	}
	f.Tensors = Add(f.Tensors, max(n, 0))
	f.Bytes = Add(f.Bytes, Mul(max(n, 0), bytes))
	return f
}

// Times returns f with n times its tensors and bytes.
func (f Footprint) Times(n int64) Footprint {
	f.Tensors, f.Bytes = Mul(f.Tensors, max(n, 0)), Mul(f.Bytes, max(n, 0))
	return f
}

// Plus returns f with g's tensors and bytes added, g being on f's device.
func (f Footprint) Plus(g Footprint) Footprint {
	f.Tensors, f.Bytes = Add(f.Tensors, g.Tensors), Add(f.Bytes, g.Bytes)
	return f
}

// Check panics with an *vram.Error of kind vram.ErrOutOfMemory naming op
// when f cannot fit, before anything is allocated: when the host memory
// it needs (its data on the CPU, and [TensorHostBytes] a tensor wherever
// the data lives) is more than the CPU device's limit ([cpu.MemoryLimit]),
// when its data is more than the whole memory of the device it goes to
// (a simulated GPU's capacity for one, whose data, when it keeps any,
// meets the host's limit as it is allocated), or when the bytes overflow
// an int64. what names the
// arguments that give f, for the error. A footprint that fits may still
// fail to allocate beside what is live; the allocation says so then.
func (f Footprint) Check(op, what string) {
	host := Mul(f.Tensors, TensorHostBytes)
	if f.Device.Kind == "cpu" {
		host = Add(host, f.Bytes)
	}
	fail := func(need int64, where string, limit int64, whose string) {
		panic(&vram.Error{Op: op, Kind: vram.ErrOutOfMemory, Detail: fmt.Sprintf(
			"%s need at least %s (%d bytes) of %s in %d tensors, more than %s (%s, %d bytes); nothing was allocated",
			what, units.Bytes(need), need, where, f.Tensors, whose, units.Bytes(limit), limit)})
	}
	if f.Bytes == math.MaxInt64 || host == math.MaxInt64 {
		panic(&vram.Error{Op: op, Kind: vram.ErrOutOfMemory, Detail: fmt.Sprintf(
			"%s need more bytes than an int64 counts in %d tensors; nothing was allocated", what, f.Tensors)})
	}
	if limit := cpu.MemoryLimit(); limit > 0 && host > limit {
		fail(host, "host memory", limit, "the CPU device's limit")
	}
	if f.Device.Kind == "cpu" || f.Bytes == 0 {
		return
	}
	if m, err := vram.DeviceMemory(f.Device); err == nil && m.Total > 0 && f.Bytes > m.Total {
		fail(f.Bytes, "memory on "+f.Device.String(), m.Total, "all of "+f.Device.String()+"'s memory")
	}
}
