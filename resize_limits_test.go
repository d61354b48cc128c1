package vram

import (
	"errors"
	"runtime"
	"slices"
	"testing"
)

// TestResizeRefusesUncountableOutputs checks that Pad and Interpolate
// refuse, with ErrShape and before any work, an output whose entries an
// int cannot count although each of its sides is within the bound of the
// host index: they resized one dimension after another and so allocated
// the first before finding the whole too large, failing for memory (or
// after seconds of building position tables) rather than for the shape.
func TestResizeRefusesUncountableOutputs(t *testing.T) {
	const p = 1<<28 - 1 // a padded side of 2^29-1 entries, three of them overflow an int
	for _, d := range []Device{CPU, Sim(0)} {
		tests := []struct {
			name string
			f    func() *Tensor
		}{
			{"constant pad of three sides", func() *Tensor {
				return Pad(Zeros(Shape{1, 1, 1, 1}, d), []int{p, p, p, p, p, p}, PadConstant, 0)
			}},
			{"replicate pad of three sides", func() *Tensor {
				return Pad(Zeros(Shape{1, 1, 1, 1, 1}, d), []int{p, p, p, p, p, p}, PadReplicate, 0)
			}},
			{"constant pad of an empty batch", func() *Tensor {
				return Pad(Zeros(Shape{0, 1, 1, 1}, d), []int{p, p, p, p, p, p}, PadConstant, 0)
			}},
			{"nearest to 2^22 cubed", func() *Tensor {
				return Interpolate(Zeros(Shape{1, 1, 1, 1, 1}, d), InterpolateOptions{Size: []int{1 << 22}})
			}},
			{"trilinear by 2^22", func() *Tensor {
				return Interpolate(Zeros(Shape{1, 1, 1, 1, 1}, d), InterpolateOptions{ScaleFactor: []float64{1 << 22}, Mode: InterpTrilinear})
			}},
			{"bilinear of 2^30 planes to 2^17 squared", func() *Tensor {
				return Interpolate(Zeros(Shape{0, 1 << 30, 1, 1}, d), InterpolateOptions{Size: []int{1 << 17}, Mode: InterpBilinear})
			}},
			{"area of an empty batch to 2^22 cubed", func() *Tensor {
				return Interpolate(Zeros(Shape{0, 1, 1, 1, 1}, d), InterpolateOptions{Size: []int{1 << 22}, Mode: InterpArea})
			}},
		}
		for _, tc := range tests {
			t.Run(d.String()+"/"+tc.name, func(t *testing.T) {
				settle(d)
				before := MemoryAllocated(d)
				err := Catch(func() { Tidy(func() { tc.f() }) })
				var e *Error
				if !errors.Is(err, ErrShape) || !errors.As(err, &e) || (e.Op != "pad" && e.Op != "interpolate") {
					t.Fatalf("got %v, want an ErrShape of pad or interpolate", err)
				}
				if after := MemoryAllocated(d); after != before {
					t.Errorf("%d bytes allocated before, %d after", before, after)
				}
			})
		}
	}
}

// TestResizeEmptyInputsWithLargeSides checks that Pad and Interpolate of
// a tensor with no elements give their empty result without a position
// table on the host as long as the sides they make: they built one of
// 2^26 entries (512 MiB) for each side, gigabytes for nothing. The result
// stays in the input's graph, whose gradient is empty too.
func TestResizeEmptyInputsWithLargeSides(t *testing.T) {
	const p = 1 << 25 // sides of 2^26+1 entries
	const side = 1 << 26
	tests := []struct {
		name  string
		in    Shape
		f     func(x *Tensor) *Tensor
		shape Shape
	}{
		{"constant pad", Shape{0, 1, 1}, func(x *Tensor) *Tensor { return Pad(x, []int{p, p, p, p}, PadConstant, 1) },
			Shape{0, 2*p + 1, 2*p + 1}},
		{"reflect pad", Shape{1, 0, 2, 2}, func(x *Tensor) *Tensor { return Pad(x, []int{1, 1, 1, 0}, PadReflect, 0) },
			Shape{1, 0, 3, 4}},
		{"circular pad of an empty batch", Shape{0, 1, 3, 3}, func(x *Tensor) *Tensor { return Pad(x, []int{3, 3, 3, 3}, PadCircular, 0) },
			Shape{0, 1, 9, 9}},
		{"replicate pad", Shape{0, 2, 1, 1}, func(x *Tensor) *Tensor { return Pad(x, []int{p, p, p, p}, PadReplicate, 0) },
			Shape{0, 2, 2*p + 1, 2*p + 1}},
		{"constant crop to nothing", Shape{2, 3, 4}, func(x *Tensor) *Tensor { return Pad(x, []int{-4, 0, p, p}, PadConstant, 0) },
			Shape{2, 2*p + 3, 0}},
		{"nearest", Shape{0, 1, 2, 2}, func(x *Tensor) *Tensor { return Interpolate(x, InterpolateOptions{Size: []int{side}}) },
			Shape{0, 1, side, side}},
		{"bicubic", Shape{0, 1, 2, 2}, func(x *Tensor) *Tensor {
			return Interpolate(x, InterpolateOptions{ScaleFactor: []float64{side / 2}, Mode: InterpBicubic})
		}, Shape{0, 1, side, side}},
		{"linear with no channels", Shape{3, 0, 2}, func(x *Tensor) *Tensor {
			return Interpolate(x, InterpolateOptions{Size: []int{side}, Mode: InterpLinear})
		},
			Shape{3, 0, side}},
		{"area", Shape{0, 1, 2, 2, 2}, func(x *Tensor) *Tensor {
			return Interpolate(x, InterpolateOptions{Size: []int{side, 1, side}, Mode: InterpArea})
		}, Shape{0, 1, side, 1, side}},
	}
	for _, d := range []Device{CPU, Sim(0)} {
		for _, tc := range tests {
			t.Run(d.String()+"/"+tc.name, func(t *testing.T) {
				settle(d)
				before := MemoryAllocated(d)
				var ms0, ms1 runtime.MemStats
				runtime.ReadMemStats(&ms0)
				Tidy(func() {
					x := Zeros(tc.in, d, WithGrad())
					y := tc.f(x)
					if !slices.Equal(y.Shape(), tc.shape) {
						t.Fatalf("shape %v, want %v", y.Shape(), tc.shape)
					}
					y.Sum().Backward()
					if g := x.Grad(); g == nil || !slices.Equal(g.Shape(), tc.in) || slices.ContainsFunc(g.Float64s(), func(v float64) bool { return v != 0 }) {
						t.Errorf("gradient %v, want zeros of shape %v", g, tc.in)
					}
				})
				runtime.ReadMemStats(&ms1)
				if host := ms1.TotalAlloc - ms0.TotalAlloc; host > 64<<20 {
					t.Errorf("allocated %d bytes on the host for an empty result", host)
				}
				if after := MemoryAllocated(d); after != before {
					t.Errorf("%d bytes allocated before, %d after", before, after)
				}
			})
		}
	}
}

// TestPoolEmptyBatchWithLargeImages checks that the 2-D pools of an empty
// batch give their empty result, of the size bigPoolOutputSize or the
// adaptive size gives, as PyTorch pools an empty batch: they refused an
// image whose gather index would pass 2^29 entries and told the caller to
// split an input that holds nothing. The result stays in the input's
// graph and the indices are int64 of its shape.
func TestPoolEmptyBatchWithLargeImages(t *testing.T) {
	const side = 1 << 20
	win := func(in int, p Pool2dParams) int {
		k, s, pad, d := p.Kernel[1], p.Stride[1], p.Padding[1], max(p.Dilation[1], 1)
		if s == 0 {
			s = k
		}
		return int(bigPoolOutputSize(in, k, s, pad, d, p.CeilMode))
	}
	maxP := Pool2dParams{Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}, Dilation: [2]int{2, 2}, CeilMode: true}
	avgP := Pool2dParams{Kernel: [2]int{2, 3}, Stride: [2]int{1, 2}, CeilMode: true, DivisorOverride: 5}
	tests := []struct {
		name    string
		in      Shape
		f       func(x *Tensor) (y, idx *Tensor)
		outH    int
		outW    int
		indices bool
	}{
		{"max pool", Shape{0, 2, side, side}, func(x *Tensor) (*Tensor, *Tensor) { return MaxPool2d(x, maxP), nil },
			win(side, maxP), win(side, maxP), false},
		{"max pool with indices", Shape{0, 2, side, side}, func(x *Tensor) (*Tensor, *Tensor) { return MaxPool2dWithIndices(x, maxP) },
			win(side, maxP), win(side, maxP), true},
		{"max pool of sequences", Shape{0, 3, 1, 1 << 40}, func(x *Tensor) (*Tensor, *Tensor) {
			return MaxPool2d(x, Pool2dParams{Kernel: [2]int{1, 2}}), nil
		}, 1, 1 << 39, false},
		{"avg pool", Shape{0, 2, side, side}, func(x *Tensor) (*Tensor, *Tensor) { return AvgPool2d(x, avgP), nil },
			side - 1, win(side, avgP), false},
		{"adaptive avg pool, divisible", Shape{0, 2, side, side}, func(x *Tensor) (*Tensor, *Tensor) {
			return AdaptiveAvgPool2d(x, 1<<10, 1<<10), nil
		}, 1 << 10, 1 << 10, false},
		{"adaptive avg pool", Shape{0, 2, side, side}, func(x *Tensor) (*Tensor, *Tensor) { return AdaptiveAvgPool2d(x, 3, 7), nil },
			3, 7, false},
		{"adaptive max pool with indices", Shape{0, 2, 5, 5}, func(x *Tensor) (*Tensor, *Tensor) {
			return AdaptiveMaxPool2dWithIndices(x, side, side)
		}, side, side, true},
	}
	for _, d := range []Device{CPU, Sim(0)} {
		for _, tc := range tests {
			t.Run(d.String()+"/"+tc.name, func(t *testing.T) {
				settle(d)
				before := MemoryAllocated(d)
				err := Catch(func() {
					Tidy(func() {
						x := Zeros(tc.in, d, WithGrad())
						y, idx := tc.f(x)
						want := Shape{0, tc.in[1], tc.outH, tc.outW}
						if !slices.Equal(y.Shape(), want) {
							t.Fatalf("shape %v, want %v", y.Shape(), want)
						}
						if tc.indices && (idx.DType() != Int64 || !slices.Equal(idx.Shape(), want)) {
							t.Errorf("indices %v of shape %v, want int64 of shape %v", idx.DType(), idx.Shape(), want)
						}
						y.Sum().Backward()
						if g := x.Grad(); g == nil || !slices.Equal(g.Shape(), tc.in) {
							t.Errorf("gradient %v, want an empty one of shape %v", g, tc.in)
						}
					})
				})
				if err != nil {
					t.Fatal(err)
				}
				if after := MemoryAllocated(d); after != before {
					t.Errorf("%d bytes allocated before, %d after", before, after)
				}
			})
		}
	}
}

// TestTensorUnfoldLargeWindows checks Tensor.Unfold where its windows,
// a view that takes no memory, hold very many entries: windows of an
// empty tensor that an int cannot count are refused when made, as no
// tensor can have their shape (they were made, and the next op failed,
// naming itself); their gradient is empty, where it built a host table as
// large as the windows (a runtime panic past 2^45 entries); and the
// gradient of windows of more than 2^29 entries is refused before any
// table is built.
func TestTensorUnfoldLargeWindows(t *testing.T) {
	tests := []struct {
		name      string
		in        Shape
		dim, size int
		kind      error // nil: the gradient is zeros of shape in
		op        string
	}{
		{"uncountable windows of an empty tensor", Shape{0, 1 << 40}, 1, 1 << 39, ErrShape, "unfold"},
		{"gradient of 2^46 windows' entries of an empty tensor", Shape{0, 1 << 24}, 1, 1 << 23, nil, ""},
		{"gradient of empty windows", Shape{3, 5}, 1, 0, nil, ""},
		{"gradient past the host table's bound", Shape{3 << 14}, 0, 3 << 13, ErrShape, "unfold"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			settle(CPU)
			before := MemoryAllocated(CPU)
			err := Catch(func() {
				Tidy(func() {
					x := Zeros(tc.in, WithGrad())
					w := x.Unfold(tc.dim, tc.size, 1)
					// Seeded with a view of one zero: a sum would read every
					// entry of the windows.
					w.Backward(Gradient(Zeros(Shape{}).Expand(w.Shape()...)))
					if g := x.Grad(); g == nil || !slices.Equal(g.Shape(), tc.in) || slices.ContainsFunc(g.Float64s(), func(v float64) bool { return v != 0 }) {
						t.Errorf("gradient %v, want zeros of shape %v", g, tc.in)
					}
				})
			})
			var e *Error
			switch {
			case tc.kind == nil && err != nil:
				t.Fatal(err)
			case tc.kind != nil && (!errors.Is(err, tc.kind) || !errors.As(err, &e) || e.Op != tc.op):
				t.Fatalf("got %v, want an error of kind %v from %s", err, tc.kind, tc.op)
			}
			if after := MemoryAllocated(CPU); after != before {
				t.Errorf("%d bytes allocated before, %d after", before, after)
			}
		})
	}
}

// TestFoldEmptyBatchWithLargeImages checks that Unfold and Fold of an
// empty batch give their empty result, with the block count of the
// formula, as PyTorch's im2col and col2im take an empty batch: they
// refused an image whose gather index would pass 2^29 entries. Kernels
// whose taps, or channels whose rows, an int cannot count stay refused.
func TestFoldEmptyBatchWithLargeImages(t *testing.T) {
	const side = 1 << 20
	// blocks is the number of sliding blocks along a side.
	blocks := func(in, k, s, pad, d int) int { return (in+2*pad-d*(k-1)-1)/s + 1 }
	p := FoldParams{Dilation: [2]int{2, 1}, Padding: [2]int{1, 0}, Stride: [2]int{1, 3}}
	l := blocks(side, 3, 1, 1, 2) * blocks(side, 2, 3, 0, 1)
	tests := []struct {
		name  string
		in    Shape
		f     func(x *Tensor) *Tensor
		shape Shape // nil: refused with ErrShape
	}{
		{"unfold", Shape{0, 2, side, side}, func(x *Tensor) *Tensor { return Unfold(x, [2]int{3, 2}, p) }, Shape{0, 12, l}},
		{"fold", Shape{0, 12, l}, func(x *Tensor) *Tensor { return Fold(x, [2]int{side, side}, [2]int{3, 2}, p) }, Shape{0, 2, side, side}},
		{"unfold of uncountable rows", Shape{0, 1 << 40, 1 << 12, 1 << 12}, func(x *Tensor) *Tensor {
			return Unfold(x, [2]int{1 << 12, 1 << 12}, FoldParams{})
		}, nil},
		{"fold with a kernel of 2^64 taps", Shape{0, 1, 1}, func(x *Tensor) *Tensor {
			return Fold(x, [2]int{1 << 31, 1 << 33}, [2]int{1 << 31, 1 << 33}, FoldParams{})
		}, nil},
	}
	for _, d := range []Device{CPU, Sim(0)} {
		for _, tc := range tests {
			t.Run(d.String()+"/"+tc.name, func(t *testing.T) {
				settle(d)
				before := MemoryAllocated(d)
				err := Catch(func() {
					Tidy(func() {
						x := Zeros(tc.in, d, WithGrad())
						y := tc.f(x)
						if !slices.Equal(y.Shape(), tc.shape) {
							t.Fatalf("shape %v, want %v", y.Shape(), tc.shape)
						}
						y.Sum().Backward()
						if g := x.Grad(); g == nil || !slices.Equal(g.Shape(), tc.in) {
							t.Errorf("gradient %v, want an empty one of shape %v", g, tc.in)
						}
					})
				})
				switch {
				case tc.shape != nil && err != nil:
					t.Fatal(err)
				case tc.shape == nil && !errors.Is(err, ErrShape):
					t.Fatalf("got %v, want an ErrShape", err)
				}
				if after := MemoryAllocated(d); after != before {
					t.Errorf("%d bytes allocated before, %d after", before, after)
				}
			})
		}
	}
}
