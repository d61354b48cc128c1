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
