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

// TestEmptyInputsWithLargeResults checks operations on tensors with no
// elements whose results have many, or whose sides are huge: the result is
// allocated on the device first, so one the device cannot hold fails there
// with ErrOutOfMemory and leaves nothing allocated, rather than a host
// buffer of its size (a process killed for memory) or a loop over every
// matrix; an empty result is made without any n×n identity.
func TestEmptyInputsWithLargeResults(t *testing.T) {
	for _, d := range []Device{CPU, Sim(0)} {
		tests := []struct {
			name  string
			f     func() *Tensor
			kind  error // nil: succeeds with shape want
			shape Shape
		}{
			{"det of 2^40 0x0 matrices", func() *Tensor { return Det(Zeros(Shape{1 << 40, 0, 0}, d)) }, ErrOutOfMemory, nil},
			{"slogdet of 2^40 0x0 matrices", func() *Tensor { _, l := Slogdet(Zeros(Shape{1 << 40, 0, 0}, d)); return l }, ErrOutOfMemory, nil},
			{"matrix rank of 2^40 0x3 matrices", func() *Tensor { return MatrixRank(Zeros(Shape{1 << 40, 0, 3}, d)) }, ErrOutOfMemory, nil},
			{"nuclear norm of 2^40 0x3 matrices", func() *Tensor { return MatrixNorm(Zeros(Shape{1 << 40, 0, 3}, d), "nuc", false) }, ErrOutOfMemory, nil},
			{"pinv of 2^40 0x3 matrices", func() *Tensor { return Pinv(Zeros(Shape{1 << 40, 0, 3}, d)) }, nil, Shape{1 << 40, 3, 0}},
			{"lstsq of 2^40 0x3 systems", func() *Tensor { return Lstsq(Zeros(Shape{1 << 40, 0, 3}, d), Zeros(Shape{1 << 40, 0, 3}, d)) }, ErrOutOfMemory, nil},
			{"thin SVD of 2^40 0x3 matrices", func() *Tensor { _, _, vh := SVD(Zeros(Shape{1 << 40, 0, 3}, d), false); return vh }, nil, Shape{1 << 40, 0, 3}},
			{"complete QR of 2^40 0x3 matrices", func() *Tensor { _, r := QR(Zeros(Shape{1 << 40, 0, 3}, d), "complete"); return r }, nil, Shape{1 << 40, 0, 3}},
			{"inv of 2^40 0x0 matrices", func() *Tensor { return Inv(Zeros(Shape{1 << 40, 0, 0}, d)) }, nil, Shape{1 << 40, 0, 0}},
			{"matrix_power -1 of 2^40 0x0 matrices", func() *Tensor { return MatrixPower(Zeros(Shape{1 << 40, 0, 0}, d), -1) }, nil, Shape{1 << 40, 0, 0}},
			{"cholesky of 2^40 0x0 matrices", func() *Tensor { return Cholesky(Zeros(Shape{1 << 40, 0, 0}, d), false) }, nil, Shape{1 << 40, 0, 0}},
			{"solve of 2^40 0x0 systems", func() *Tensor { return Solve(Zeros(Shape{1 << 40, 0, 0}, d), Zeros(Shape{1 << 40, 0, 0}, d), true) }, nil, Shape{1 << 40, 0, 0}},
			{"eigh of 2^40 0x0 matrices", func() *Tensor { _, v := Eigh(Zeros(Shape{1 << 40, 0, 0}, d), "L"); return v }, nil, Shape{1 << 40, 0, 0}},
			{"full SVD of 2^40 0x0 matrices", func() *Tensor { u, _, _ := SVD(Zeros(Shape{1 << 40, 0, 0}, d), true); return u }, nil, Shape{1 << 40, 0, 0}},
			{"complete QR of a 2^20x0 matrix", func() *Tensor { q, _ := QR(Zeros(Shape{1, 1 << 20, 0}, d), "complete"); return q }, ErrOutOfMemory, nil},
			{"full SVD of a 2^20x0 matrix", func() *Tensor { u, _, _ := SVD(Zeros(Shape{1, 1 << 20, 0}, d), true); return u }, ErrOutOfMemory, nil},
			{"diag_embed of sides 2^20", func() *Tensor { return DiagEmbed(Zeros(Shape{1 << 20, 0, 1 << 20}, d), -1) },
				nil, Shape{1 << 20, 0, 1<<20 + 1, 1<<20 + 1}},
			{"matrix_power 0 of no 2^20x2^20 matrices", func() *Tensor { return MatrixPower(Zeros(Shape{0, 1 << 20, 1 << 20}, d), 0) },
				nil, Shape{0, 1 << 20, 1 << 20}},
			{"flip of [0, 2^40]", func() *Tensor { return Zeros(Shape{0, 1 << 40}, d).Flip(1, 0) }, nil, Shape{0, 1 << 40}},
			{"roll of [0, 2^40]", func() *Tensor { return Zeros(Shape{0, 1 << 40}, d).Roll([]int{3}, []int{1}) }, nil, Shape{0, 1 << 40}},
			{"tril of no 2^20x2^20 matrices", func() *Tensor { return Zeros(Shape{0, 1 << 20, 1 << 20}, d).Tril(0) }, nil, Shape{0, 1 << 20, 1 << 20}},
			{"triu of no 2^20x2^20 matrices", func() *Tensor { return Zeros(Shape{0, 1 << 20, 1 << 20}, d).Triu(1) }, nil, Shape{0, 1 << 20, 1 << 20}},
			{"cummax along the empty side of [2^40, 0]", func() *Tensor { v, _ := Zeros(Shape{1 << 40, 0}, d).Cummax(1); return v }, nil, Shape{1 << 40, 0}},
			{"cummin indices along the empty side of [2^40, 0]", func() *Tensor { _, i := Zeros(Shape{1 << 40, 0}, d).Cummin(-1); return i }, nil, Shape{1 << 40, 0}},
			{"feature dropout of [1, 2^40, 0, 3]", func() *Tensor { return FeatureDropout(Zeros(Shape{1, 1 << 40, 0, 3}, d), 0.5, 2) }, nil, Shape{1, 1 << 40, 0, 3}},
			{"dropout of [2^40, 0]", func() *Tensor { return Dropout(Zeros(Shape{1 << 40, 0}, d), 0.5) }, nil, Shape{1 << 40, 0}},
			{"diag_embed gradient of sides 2^30", func() *Tensor {
				a := Zeros(Shape{0, 1 << 30}, d, WithGrad())
				DiagEmbed(a, 2).Sum().Backward()
				return a.Grad()
			}, nil, Shape{0, 1 << 30}},
		}
		for _, tc := range tests {
			t.Run(d.String()+"/"+tc.name, func(t *testing.T) {
				settle(d)
				before := MemoryAllocated(d)
				var y *Tensor
				err := Catch(func() {
					Tidy(func() {
						if y = tc.f(); y != nil {
							Keep(y)
						}
					})
				})
				if tc.kind != nil {
					if !errors.Is(err, tc.kind) {
						t.Fatalf("got %v, want an error of kind %v", err, tc.kind)
					}
				} else {
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(y.Shape(), tc.shape) {
						t.Fatalf("shape %v, want %v", y.Shape(), tc.shape)
					}
					y.Release()
				}
				if after := MemoryAllocated(d); after > before {
					t.Errorf("%d bytes allocated before, %d after", before, after)
				}
			})
		}
	}
}
