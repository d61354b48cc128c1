package vram

import (
	"errors"
	"fmt"
	"math"
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

// refAdaptiveMax computes adaptive max pooling directly, with the values'
// positions, as PyTorch's CPU kernel does (the last NaN of a window, else
// its first maximum).
func refAdaptiveMax(x []float64, xs []int, oh, ow int) ([]float64, []int64) {
	n, c, h, w := xs[0], xs[1], xs[2], xs[3]
	out, pos := make([]float64, n*c*oh*ow), make([]int64, n*c*oh*ow)
	for nc := range n * c {
		for i := range oh {
			y0, y1 := i*h/oh, ((i+1)*h+oh-1)/oh
			for j := range ow {
				x0, x1 := j*w/ow, ((j+1)*w+ow-1)/ow
				best, at := math.Inf(-1), y0*w+x0
				for yy := y0; yy < y1; yy++ {
					for xx := x0; xx < x1; xx++ {
						if v := x[nc*h*w+yy*w+xx]; v > best || math.IsNaN(v) {
							best, at = v, yy*w+xx
						}
					}
				}
				out[(nc*oh+i)*ow+j], pos[(nc*oh+i)*ow+j] = best, int64(at)
			}
		}
	}
	return out, pos
}

func TestAdaptiveMaxPool2d(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(-1)
	for _, tc := range []struct {
		name   string
		x      []int
		oh, ow int
		values []float64 // the input, when not random
	}{
		{"divides", []int{2, 3, 6, 4}, 3, 2, nil},
		{"uneven", []int{1, 2, 7, 5}, 3, 2, nil},
		{"upsamples", []int{1, 1, 2, 3}, 3, 4, nil},
		{"global", []int{2, 2, 3, 3}, 1, 1, nil},
		{"NaN and -Inf", []int{1, 1, 2, 4}, 1, 2, []float64{nan, 1, inf, inf, 2, nan, inf, inf}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := rnd(40, tc.x...)
			if tc.values != nil {
				x = FromSlice(tc.values, Shape(tc.x))
			}
			want, wantPos := refAdaptiveMax(x.Float64s(), tc.x, tc.oh, tc.ow)
			y, idx := AdaptiveMaxPool2dWithIndices(x, tc.oh, tc.ow)
			if !slices.Equal(y.Shape(), Shape{tc.x[0], tc.x[1], tc.oh, tc.ow}) || !slices.Equal(idx.Shape(), y.Shape()) {
				t.Fatalf("shapes %v and %v", y.Shape(), idx.Shape())
			}
			got := y.Float64s()
			for i := range got {
				if got[i] != want[i] && !(math.IsNaN(got[i]) && math.IsNaN(want[i])) {
					t.Fatalf("output %v, want %v", got, want)
				}
			}
			if !slices.Equal(idx.Int64s(), wantPos) {
				t.Errorf("indices %v, want %v", idx.Int64s(), wantPos)
			}
			if tc.values != nil {
				xg := x.Detach().SetRequiresGrad(true)
				AdaptiveMaxPool2d(xg, tc.oh, tc.ow).Sum().Backward()
				g := make([]float64, len(tc.values))
				for _, p := range wantPos {
					g[p]++
				}
				if !slices.Equal(xg.Grad().Float64s(), g) {
					t.Errorf("gradient %v, want %v", xg.Grad().Float64s(), g)
				}
				return
			}
			closeTo(t, "channels-last", AdaptiveMaxPool2d(x.Contiguous(ChannelsLast), tc.oh, tc.ow).Float64s(), want, 0)
			gradCheck(t, func(xs []*Tensor) *Tensor { return AdaptiveMaxPool2d(xs[0], tc.oh, tc.ow) }, rnd(41, tc.x...))
			compareOn(t, nativeTest, nativeModes[2:], false, tolerance{rel: 1e-4}, func(xs []*Tensor) *Tensor {
				return AdaptiveMaxPool2d(xs[0], tc.oh, tc.ow)
			}, rnd(42, tc.x...))
		})
	}
	t.Run("unbatched", func(t *testing.T) {
		x := rnd(43, 2, 5, 4)
		y, idx := AdaptiveMaxPool2dWithIndices(x, 2, 3)
		_, ib := AdaptiveMaxPool2dWithIndices(x.Unsqueeze(0), 2, 3)
		if !slices.Equal(y.Shape(), Shape{2, 2, 3}) || !slices.Equal(idx.Int64s(), ib.Int64s()) {
			t.Errorf("unbatched %v %v, batched indices %v", y.Shape(), idx.Int64s(), ib.Int64s())
		}
	})
	for _, bad := range []func(){
		func() { AdaptiveMaxPool2d(rnd(44, 1, 1, 3, 3), 0, 1) },
		func() { AdaptiveMaxPool2d(rnd(44, 3, 3), 1, 1) },
		func() { AdaptiveMaxPool2d(FromSlice([]int64{1, 2, 3, 4}, Shape{1, 1, 2, 2}), 1, 1) },
	} {
		if err := Catch(bad); err == nil {
			t.Error("bad input: no error")
		}
	}
}

// TestPoolIndicesInsideTidy checks that the indices of the pooling ops,
// like their values, are released by the caller's Tidy.
func TestPoolIndicesInsideTidy(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func(x *Tensor) (y, idx *Tensor)
	}{
		{"max", func(x *Tensor) (*Tensor, *Tensor) { return MaxPool2dWithIndices(x, Pool2dParams{Kernel: [2]int{2, 2}}) }},
		{"max unbatched", func(x *Tensor) (*Tensor, *Tensor) {
			return MaxPool2dWithIndices(x.Select(0, 0), Pool2dParams{Kernel: [2]int{2, 2}})
		}},
		{"adaptive max", func(x *Tensor) (*Tensor, *Tensor) { return AdaptiveMaxPool2dWithIndices(x, 3, 2) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := rnd(45, 2, 2, 4, 4)
			var y, idx *Tensor
			Tidy(func() { y, idx = tc.f(x) })
			if !y.Released() || !idx.Released() {
				t.Errorf("after the Tidy: values released %v, indices released %v", y.Released(), idx.Released())
			}
		})
	}
}
