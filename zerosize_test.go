package vram

import (
	"errors"
	"slices"
	"testing"
)

// TestZeroElementTensorsTakeNoMemory checks PyTorch's rule that a tensor
// with no elements allocates nothing: on a device with a caching allocator
// none of its statistics move, whatever the shape, dtype or the operation
// that made the tensor, and the tensor still works.
func TestZeroElementTensorsTakeNoMemory(t *testing.T) {
	d := quiet
	dtypes := []DType{Float32, Float64, Float16, BFloat16, Int32, Int64, Bool, Int8}
	shapes := []Shape{{0}, {3, 0}, {0, 5}, {2, 0, 4}, {1, 1, 0}}
	// Narrow makes empty views of these, allocated before the count.
	bases := map[DType]*Tensor{}
	for _, dt := range dtypes {
		bases[dt] = Zeros(Shape{4}, dt, d)
		defer bases[dt].Release()
	}
	makers := []struct {
		name string
		make func(s Shape, dt DType) *Tensor
	}{
		{"Empty", func(s Shape, dt DType) *Tensor { return Empty(s, dt, d) }},
		{"Zeros", func(s Shape, dt DType) *Tensor { return Zeros(s, dt, d) }},
		{"Full", func(s Shape, dt DType) *Tensor { return Full(s, 1, dt, d) }},
		{"ToFromCPU", func(s Shape, dt DType) *Tensor {
			c := Zeros(s, dt)
			defer c.Release()
			return c.To(d)
		}},
		{"ToFromSim", func(s Shape, dt DType) *Tensor {
			c := Zeros(s, dt, Sim(0))
			defer c.Release()
			return c.To(d)
		}},
		{"Clone", func(s Shape, dt DType) *Tensor {
			c := Zeros(s, dt, d)
			defer c.Release()
			return c.Clone()
		}},
		{"CastClone", func(s Shape, dt DType) *Tensor {
			c := Zeros(s, dt, d)
			defer c.Release()
			return c.Cast(Float32).Cast(dt).Clone()
		}},
		{"ContiguousOfTranspose", func(s Shape, dt DType) *Tensor {
			c := Zeros(s, dt, d)
			defer c.Release()
			v := c.Transpose(0, -1)
			defer v.Release()
			w := v.Contiguous()
			defer w.Release()
			return w.Transpose(0, -1).Contiguous()
		}},
		{"Cat", func(s Shape, dt DType) *Tensor {
			c := Zeros(s, dt, d)
			defer c.Release()
			e := Empty(Shape{0}, dt, d) // skipped, as PyTorch skips 1-D empties
			defer e.Release()
			return Cat([]*Tensor{e, c, c.Narrow(0, 0, 0)}, 0)
		}},
		{"Stack", func(s Shape, dt DType) *Tensor {
			c := Zeros(s, dt, d)
			defer c.Release()
			st := Stack([]*Tensor{c, c}, 0)
			defer st.Release()
			return st.Select(0, 1).Contiguous()
		}},
		{"Narrow", func(s Shape, dt DType) *Tensor {
			v := bases[dt].Narrow(0, 4, 0)
			defer v.Release()
			r := v.Reshape(s...)
			defer r.Release()
			return r.Clone()
		}},
	}
	EmptyCache(d)
	before := MemoryStats(d)
	live := Storage(d).LiveBytes
	for _, m := range makers {
		for _, dt := range dtypes {
			for _, s := range shapes {
				var x *Tensor
				if err := Catch(func() { x = m.make(s, dt) }); err != nil {
					t.Fatalf("%s(%v, %s): %v", m.name, s, dt, err)
				}
				if got := MemoryStats(d); got != before {
					t.Fatalf("%s(%v, %s) changed the allocator's stats:\nbefore %+v\nafter  %+v", m.name, s, dt, before, got)
				}
				if got := MemoryAllocated(d); got != before.AllocatedBytes[0].Current {
					t.Fatalf("%s(%v, %s): MemoryAllocated %d, want %d", m.name, s, dt, got, before.AllocatedBytes[0].Current)
				}
				if x.NumElements() != 0 || !slices.Equal(x.Shape(), s) || x.DType() != dt || x.Device() != d {
					t.Fatalf("%s(%v, %s) = %v %s on %s", m.name, s, dt, x.Shape(), x.DType(), x.Device())
				}
				x.Release()
			}
		}
	}
	if got := MemoryStats(d); got != before {
		t.Fatalf("releasing zero-element tensors changed the stats:\nbefore %+v\nafter  %+v", before, got)
	}
	if got := Storage(d).LiveBytes; got != live {
		t.Fatalf("live storage %d bytes, was %d", got, live)
	}
}

// TestPerProcessMemoryFractionZero checks PyTorch's fraction 0: nothing more
// may be reserved, so a new tensor fails with ErrOutOfMemory, while one
// served from the cache and one with no elements are still made.
func TestPerProcessMemoryFractionZero(t *testing.T) {
	d := tight
	defer func() {
		if err := SetPerProcessMemoryFraction(1, d); err != nil {
			t.Fatal(err)
		}
		EmptyCache(d)
	}()
	EmptyCache(d)
	Zeros(Shape{1024}, d).Release() // cached: 4 KiB in a 2 MiB segment
	if err := SetPerProcessMemoryFraction(0, d); err != nil {
		t.Fatalf("SetPerProcessMemoryFraction(0): %v", err)
	}
	reserved := MemoryReserved(d)
	for _, tt := range []struct {
		name  string
		shape Shape
		err   error
	}{
		{"from the cache", Shape{1024}, nil},
		{"no elements", Shape{0, 1024}, nil},
		{"new memory", Shape{4 << 20}, ErrOutOfMemory},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var x *Tensor
			err := Catch(func() { x = Ones(tt.shape, d) })
			if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Fatalf("Ones(%v) under fraction 0: %v, want %v", tt.shape, err, tt.err)
			}
			if x != nil {
				x.Release()
			}
			// A failure may release the cache (as PyTorch's does before
			// giving up), but nothing is ever added to the reserve.
			if got := MemoryReserved(d); got > reserved {
				t.Fatalf("reserved %d bytes, was %d", got, reserved)
			}
		})
	}
}
