package vram

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

// poolOptionCases exercise the pooling options beyond the window: ceil
// mode, the divisor override and non-square windows. max and avg say
// which poolings take the case (average pooling has no dilation, max
// pooling no divisor).
var poolOptionCases = []struct {
	name     string
	x        []int
	p        Pool2dParams
	max, avg bool
}{
	{"ceil adds a window", []int{2, 2, 6, 6}, Pool2dParams{Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, CeilMode: true}, true, true},
	{"ceil padded", []int{1, 2, 5, 6}, Pool2dParams{Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}, CeilMode: true}, true, true},
	{"ceil padded exclude pad", []int{1, 2, 5, 6}, Pool2dParams{Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}, CeilMode: true, ExcludePad: true}, false, true},
	{"ceil as floor", []int{1, 2, 4, 4}, Pool2dParams{Kernel: [2]int{2, 2}, CeilMode: true}, true, true},
	{"ceil window past a small input", []int{1, 2, 2, 3}, Pool2dParams{Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, CeilMode: true}, true, true},
	{"ceil drops a window starting in the padding", []int{1, 1, 5, 5}, Pool2dParams{Kernel: [2]int{2, 2}, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}, CeilMode: true}, true, true},
	{"ceil non-square", []int{2, 1, 5, 7}, Pool2dParams{Kernel: [2]int{2, 3}, Stride: [2]int{2, 1}, Padding: [2]int{1, 1}, CeilMode: true}, true, true},
	{"ceil dilated", []int{1, 2, 6, 7}, Pool2dParams{Kernel: [2]int{2, 2}, Stride: [2]int{2, 2}, Dilation: [2]int{2, 2}, CeilMode: true}, true, false},
	{"divisor override", []int{2, 2, 4, 5}, Pool2dParams{Kernel: [2]int{2, 2}, Stride: [2]int{1, 1}, DivisorOverride: 3}, false, true},
	{"divisor override padded ceil", []int{1, 2, 5, 5}, Pool2dParams{Kernel: [2]int{3, 2}, Stride: [2]int{2, 2}, Padding: [2]int{1, 1}, CeilMode: true, ExcludePad: true, DivisorOverride: 4}, false, true},
}

// TestPoolOptionsMatchReference checks ceil mode and the divisor override
// against the direct computation, in both memory formats, their gradients
// against finite differences, and a device with native pooling (which
// runs what it can and leaves the rest to the composed path) against the
// CPU.
func TestPoolOptionsMatchReference(t *testing.T) {
	for _, tc := range poolOptionCases {
		for _, avg := range []bool{false, true} {
			if avg && !tc.avg || !avg && !tc.max {
				continue
			}
			pool, name := MaxPool2d, "max "
			if avg {
				pool, name = AvgPool2d, "avg "
			}
			t.Run(name+tc.name, func(t *testing.T) {
				x := rnd(31, tc.x...)
				want, ws := refPool(x.Float64s(), tc.x, tc.p, avg)
				for _, cl := range []bool{false, true} {
					in := x
					if cl {
						in = x.Contiguous(ChannelsLast)
					}
					y := pool(in, tc.p)
					if !slices.Equal(y.Shape(), Shape(ws)) {
						t.Fatalf("shape %v, want %v", y.Shape(), ws)
					}
					closeTo(t, fmt.Sprintf("channels-last=%v", cl), y.Float64s(), want, 1e-12)
				}
				gradCheck(t, func(xs []*Tensor) *Tensor { return pool(xs[0], tc.p) }, rnd(32, tc.x...))
				// Native pooling runs when ceil mode adds no window and
				// there is no dilation or divisor override.
				floor := tc.p
				floor.CeilMode = false
				_, fs := refPool(x.Float64s(), tc.x, floor, avg)
				modes := nativeModes
				if !slices.Equal(fs, ws) || tc.p.Dilation != [2]int{} || tc.p.DivisorOverride != 0 {
					modes = nativeModes[2:]
				}
				compareOn(t, nativeTest, modes, false, tolerance{rel: 1e-4}, func(xs []*Tensor) *Tensor { return pool(xs[0], tc.p) }, rnd(33, tc.x...))
			})
		}
	}
}

// TestMaxPool2dWithIndices checks the positions MaxPool2dWithIndices
// returns: each names the input element whose value the output holds,
// within the element's window, for batched and unbatched inputs; and the
// values and their gradient are MaxPool2d's.
func TestMaxPool2dWithIndices(t *testing.T) {
	for _, tc := range append(slices.Clone(poolCases[:0]), poolCases...) {
		t.Run(tc.name, func(t *testing.T) {
			x := rnd(34, tc.x...)
			y, idx := MaxPool2dWithIndices(x, tc.p)
			closeTo(t, "values", y.Float64s(), MaxPool2d(x, tc.p).Float64s(), 0)
			if idx.DType() != Int64 || !slices.Equal(idx.Shape(), y.Shape()) {
				t.Fatalf("indices %s %v, want int64 %v", idx.DType(), idx.Shape(), y.Shape())
			}
			h, w := tc.x[2], tc.x[3]
			xs, ys, is := x.Float64s(), y.Float64s(), idx.Int64s()
			plane := y.Size(2) * y.Size(3)
			for i, k := range is {
				if k < 0 || k >= int64(h*w) || xs[i/plane*h*w+int(k)] != ys[i] {
					t.Fatalf("output %d: index %d does not name its value %v", i, k, ys[i])
				}
			}
			gradCheck(t, func(xs []*Tensor) *Tensor {
				y, idx := MaxPool2dWithIndices(xs[0], tc.p)
				idx.Release()
				return y
			}, rnd(35, tc.x...))
		})
	}
	t.Run("unbatched", func(t *testing.T) {
		x := rnd(36, 2, 5, 4)
		p := Pool2dParams{Kernel: [2]int{2, 2}, CeilMode: true}
		y, idx := MaxPool2dWithIndices(x, p)
		yb, ib := MaxPool2dWithIndices(x.Unsqueeze(0), p)
		if !slices.Equal(idx.Shape(), Shape{2, 3, 2}) || !slices.Equal(idx.Int64s(), ib.Int64s()) || !slices.Equal(y.Float64s(), yb.Float64s()) {
			t.Errorf("unbatched indices %v %v, batched %v", idx.Shape(), idx.Int64s(), ib.Int64s())
		}
	})
}

func TestPoolOptionErrors(t *testing.T) {
	x := rnd(37, 1, 1, 4, 4)
	for _, tc := range []struct {
		name string
		f    func()
		kind error
	}{
		{"negative divisor", func() { AvgPool2d(x, Pool2dParams{Kernel: [2]int{2, 2}, DivisorOverride: -1}) }, ErrArgument},
		{"divisor for max pooling", func() { MaxPool2d(x, Pool2dParams{Kernel: [2]int{2, 2}, DivisorOverride: 2}) }, ErrArgument},
		{"divisor for max pooling with indices", func() { MaxPool2dWithIndices(x, Pool2dParams{Kernel: [2]int{2, 2}, DivisorOverride: 2}) }, ErrArgument},
		{"ceil window too large", func() {
			MaxPool2d(rnd(38, 1, 1, 1, 1), Pool2dParams{Kernel: [2]int{3, 3}, Stride: [2]int{2, 2}, CeilMode: true})
		}, ErrShape},
		{"indices of a 2-D input", func() { MaxPool2dWithIndices(rnd(39, 4, 4), Pool2dParams{Kernel: [2]int{2, 2}}) }, ErrShape},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Catch(tc.f)
			if !errors.Is(err, tc.kind) {
				t.Errorf("error %v, want %v", err, tc.kind)
			}
		})
	}
}
