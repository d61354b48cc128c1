package nn_test

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/vramgo/vram"
	"github.com/vramgo/vram/nn"
)

// refPool1d pools every row of x (rows of length l) over the windows
// [start, end) that win gives for output i, padding outside [0, l)
// counted by padValue (NaN: not counted).
func refPool1d(x []float64, l, out int, win func(i int) (int, int), avg bool, divisor func(s, e int) float64) []float64 {
	var res []float64
	for r := 0; r < len(x)/l; r++ {
		row := x[r*l : r*l+l]
		for i := range out {
			s, e := win(i)
			acc := math.Inf(-1)
			if avg {
				acc = 0
			}
			for j := s; j < e; j++ {
				if j < 0 || j >= l {
					continue // padding: −Inf for max, 0 for the sum
				}
				if avg {
					acc += row[j]
				} else {
					acc = math.Max(acc, row[j])
				}
			}
			if avg {
				acc /= divisor(s, e)
			}
			res = append(res, acc)
		}
	}
	return res
}

// The 1-D pools match PyTorch's windows on [N, C, L] and [C, L] inputs,
// on the CPU and a simulated device, and their gradients match finite
// differences.
func TestPool1d(t *testing.T) {
	const l = 7
	x := vram.Randn(vram.Shape{2, 3, l}, vram.Float64, vram.WithGenerator(vram.NewGenerator(4)))
	xs := x.Float64s()
	whole := func(s, e int) float64 { return float64(e - s) }
	adaptive := func(out int) func(i int) (int, int) {
		return func(i int) (int, int) { return i * l / out, ((i+1)*l + out - 1) / out }
	}
	tests := []struct {
		name string
		m    nn.Module
		out  int
		want []float64
	}{
		{"max k3 s2 p1", nn.NewMaxPool1d(3, 2, 1), 4,
			refPool1d(xs, l, 4, func(i int) (int, int) { return 2*i - 1, 2*i + 2 }, false, nil)},
		{"max k2", nn.NewMaxPool1d(2, 0, 0), 3,
			refPool1d(xs, l, 3, func(i int) (int, int) { return 2 * i, 2*i + 2 }, false, nil)},
		{"avg k3 s2 p1", nn.NewAvgPool1d(3, 2, 1), 4,
			refPool1d(xs, l, 4, func(i int) (int, int) { return 2*i - 1, 2*i + 2 }, true, whole)},
		{"avg k3 s1 exclude pad", func() nn.Module {
			m := nn.NewAvgPool1d(3, 1, 1)
			m.Params.ExcludePad = true
			return m
		}(), 7, refPool1d(xs, l, 7, func(i int) (int, int) { return i - 1, i + 2 }, true,
			func(s, e int) float64 { return float64(min(e, l) - max(s, 0)) })},
		{"adaptive avg 3", nn.NewAdaptiveAvgPool1d(3), 3, refPool1d(xs, l, 3, adaptive(3), true, whole)},
		{"adaptive max 4", nn.NewAdaptiveMaxPool1d(4), 4, refPool1d(xs, l, 4, adaptive(4), false, nil)},
	}
	for _, dev := range []vram.Device{vram.CPU, vram.Sim(0)} {
		for _, tc := range tests {
			t.Run(dev.String()+" "+tc.name, func(t *testing.T) {
				vram.Tidy(func() {
					xd := x.To(dev)
					y := tc.m.Forward(xd)
					if !slices.Equal(y.Shape(), vram.Shape{2, 3, tc.out}) || y.Device() != dev {
						t.Fatalf("got %v on %v", y.Shape(), y.Device())
					}
					checkValues(t, "batched", y.Float64s(), tc.want, 1e-12)
					u := tc.m.Forward(xd.Select(0, 1))
					if !slices.Equal(u.Shape(), vram.Shape{3, tc.out}) {
						t.Fatalf("unbatched shape %v", u.Shape())
					}
					checkValues(t, "unbatched", u.Float64s(), tc.want[3*tc.out:], 1e-12)
					if dev == vram.CPU {
						xg := x.Clone()
						finiteDifferences(t, func() *vram.Tensor { return tc.m.Forward(xg) }, xg)
					}
				})
			})
		}
	}
}

// MaxPool1d's indices are positions in the sequence.
func TestMaxPool1dIndices(t *testing.T) {
	x := vram.FromSlice([]float64{1, 5, 2, 8, 3, 0, 9}, vram.Shape{1, 1, 7})
	y, idx := nn.NewMaxPool1d(3, 2, 1).ForwardWithIndices(x)
	checkValues(t, "values", y.Float64s(), []float64{5, 8, 8, 9}, 0)
	if got := idx.Int64s(); !slices.Equal(got, []int64{1, 3, 3, 6}) || !slices.Equal(idx.Shape(), vram.Shape{1, 1, 4}) {
		t.Fatalf("indices %v %v", got, idx.Shape())
	}
}

// AdaptiveMaxPool1d's indices are the positions in the sequence of the
// first maximum of each window, rows floor(i·L/out) to ceil((i+1)·L/out),
// batched and not.
func TestAdaptiveMaxPool1dIndices(t *testing.T) {
	const l = 7
	x := vram.FromSlice([]float64{1, 5, 2, 8, 3, 8, 9, 4, 4, 0, 6, 6, 1, 2}, vram.Shape{1, 2, l})
	xs := x.Float64s()
	for _, out := range []int{1, 3, 4, 7, 9} {
		var want []int64
		for r := range 2 {
			row := xs[r*l : r*l+l]
			for i := range out {
				best := i * l / out
				for j := best; j < ((i+1)*l+out-1)/out; j++ {
					if row[j] > row[best] {
						best = j
					}
				}
				want = append(want, int64(best))
			}
		}
		m := nn.NewAdaptiveMaxPool1d(out)
		y, idx := m.ForwardWithIndices(x)
		if !slices.Equal(y.Float64s(), m.Forward(x).Float64s()) || !slices.Equal(idx.Shape(), vram.Shape{1, 2, out}) {
			t.Fatalf("out %d: values %v, indices of shape %v", out, y.Float64s(), idx.Shape())
		}
		if got := idx.Int64s(); !slices.Equal(got, want) {
			t.Errorf("out %d: indices %v, want %v", out, got, want)
		}
		u, ui := m.ForwardWithIndices(x.Select(0, 0))
		if !slices.Equal(ui.Shape(), vram.Shape{2, out}) || !slices.Equal(ui.Int64s(), want) || !slices.Equal(u.Float64s(), y.Float64s()) {
			t.Errorf("out %d: unbatched indices %v of shape %v", out, ui.Int64s(), ui.Shape())
		}
		for _, v := range []*vram.Tensor{y, idx, u, ui} {
			v.Release()
		}
	}
}

// Unflatten splits a dimension, inferring a −1, and undoes Flatten.
func TestUnflatten(t *testing.T) {
	x := vram.Arange(0, 24, 1, vram.Float64).Reshape(2, 12)
	for _, tc := range []struct {
		dim   int
		sizes []int
		want  vram.Shape
	}{
		{1, []int{3, 4}, vram.Shape{2, 3, 4}},
		{-1, []int{2, -1, 3}, vram.Shape{2, 2, 2, 3}},
		{0, []int{1, 2}, vram.Shape{1, 2, 12}},
	} {
		y := nn.NewUnflatten(tc.dim, tc.sizes...).Forward(x)
		if !slices.Equal(y.Shape(), tc.want) || !slices.Equal(y.Float64s(), x.Float64s()) {
			t.Errorf("unflatten(%d, %v): %v", tc.dim, tc.sizes, y.Shape())
		}
		if back := nn.NewFlatten().Forward(y.Reshape(2, -1)); !slices.Equal(back.Shape(), vram.Shape{2, 12}) {
			t.Errorf("flatten back: %v", back.Shape())
		}
	}
	if err := vram.Catch(func() { nn.NewUnflatten(1, 5, 2).Forward(x) }); !errors.Is(err, vram.ErrShape) {
		t.Errorf("bad sizes: %v", err)
	}
}

// Bad arguments and shapes give errors of vram's kinds naming the 1-D
// layer.
func TestPool1dErrors(t *testing.T) {
	x := vram.Randn(vram.Shape{1, 2, 4})
	tests := []struct {
		name, op string
		fn       func()
		kind     error
	}{
		{"kernel 0", "max_pool1d", func() { nn.NewMaxPool1d(0, 1, 0) }, vram.ErrArgument},
		{"negative stride", "avg_pool1d", func() { nn.NewAvgPool1d(2, -1, 0) }, vram.ErrArgument},
		{"4-d input", "max_pool1d", func() { nn.NewMaxPool1d(2, 0, 0).Forward(vram.Randn(vram.Shape{1, 1, 2, 4})) }, vram.ErrShape},
		{"1-d input", "avg_pool1d", func() { nn.NewAvgPool1d(2, 0, 0).Forward(vram.Randn(vram.Shape{4})) }, vram.ErrShape},
		{"window past the input", "max_pool1d", func() { nn.NewMaxPool1d(9, 1, 0).Forward(x) }, vram.ErrShape},
		{"padding over half the kernel", "avg_pool1d", func() { nn.NewAvgPool1d(2, 1, 2).Forward(x) }, vram.ErrArgument},
		{"adaptive 0", "adaptive_avg_pool1d", func() { nn.NewAdaptiveAvgPool1d(0) }, vram.ErrArgument},
		{"adaptive max 0", "adaptive_max_pool1d", func() { nn.NewAdaptiveMaxPool1d(0) }, vram.ErrArgument},
		{"adaptive empty", "adaptive_max_pool1d", func() { nn.NewAdaptiveMaxPool1d(2).Forward(vram.Randn(vram.Shape{1, 2, 0})) }, vram.ErrShape},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := vram.Catch(tc.fn)
			if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.op) {
				t.Fatalf("got %v, want %v naming %s", err, tc.kind, tc.op)
			}
		})
	}
}
